"""The numba engine's disk cache: reuse across processes, corruption, permissions, races.

Each scenario runs in fresh subprocesses (clean counters, a cold numba) against a temporary
``FUSEGRAD_CACHE_DIR``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from fusegrad.lazy.engines import numba_engine as ne

pytestmark = pytest.mark.skipif(not ne.available(), reason="numba not importable")

SCRIPT = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    from fusegrad.lazy.engines import numba_engine as ne
    from fusegrad.lazy.kernel import Instr, Kernel, Output
    f8 = np.dtype("f8")
    x, y = np.linspace(-1, 1, 40), np.linspace(0, 2, 30)
    k = Kernel((40, 30), (x[:, None], y[None, :]), (0.5,),
               (Instr("subtract", (0, 1), f8), Instr("multiply", (3, 2), f8)),
               (Output(4, "sum", (1,), f8), Output(4, "sum", (0,), f8)))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rows, cols = ne.run(k)
    d = (x[:, None] - y[None, :]) * 0.5
    ok = bool(np.allclose(rows[:, 0], d.sum(1)) and np.allclose(cols[0], d.sum(0)))
    print(json.dumps({"stats": ne.STATS, "ok": ok, "warnings": [str(m.message) for m in w]}))
    """
)


def run_child(cache: str) -> dict:
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=cache)
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def kernel_files(cache: str) -> list[str]:
    return sorted(glob.glob(os.path.join(cache, "k_*.py")))


def test_second_process_loads_from_disk_without_compiling(tmp_path):
    cache = str(tmp_path / "c")
    first = run_child(cache)
    assert first["ok"]
    assert first["stats"]["generated"] == 1
    assert first["stats"]["compiled"] == 1
    second = run_child(cache)
    assert second["ok"]
    assert second["stats"]["generated"] == 0
    assert second["stats"]["loaded_from_disk"] == 1
    assert second["stats"]["compiled"] == 0, second
    assert second["stats"]["cache_hits"] == 1
    assert not second["warnings"]


def test_cache_folder_is_private(tmp_path):
    cache = str(tmp_path / "deep" / "kernels")
    run_child(cache)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    (f,) = kernel_files(cache)
    assert stat.S_IMODE(os.stat(f).st_mode) & 0o077 == 0


def _corrupt_truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _corrupt_body(path):
    with open(path, "a") as f:
        f.write("\nimport os; os._exit(3)\n")  # must never run: the checksum catches it


def _corrupt_header_key(path):
    text = open(path).read()
    head, _, body = text.partition("\n")
    head = head.replace("key=", "key=0", 1)
    open(path, "w").write(head + "\n" + body)


def _corrupt_valid_checksum_bad_code(path):
    # a file with a correct header for its key whose code does not import: rebuilt, not trusted
    head = open(path).readline()
    key = head.split("key=")[1].split()[0]
    body = "raise RuntimeError('broken kernel module')\n"
    digest = hashlib.sha256(body.encode()).hexdigest()
    open(path, "w").write(f"# fusegrad-kernel v1 key={key} body-sha256={digest}\n" + body)


def test_corrupt_file_is_rebuilt_with_a_warning(tmp_path):
    cache = str(tmp_path / "c")
    run_child(cache)
    (path,) = kernel_files(cache)
    good = open(path).read()
    for corrupt in (
        _corrupt_truncate,
        _corrupt_body,
        _corrupt_header_key,
        _corrupt_valid_checksum_bad_code,
    ):
        corrupt(path)
        res = run_child(cache)
        assert res["ok"], corrupt.__name__
        assert res["stats"]["rebuilt"] == 1, corrupt.__name__
        assert res["stats"]["generated"] == 1
        assert len(res["warnings"]) == 1 and "rebuilding" in res["warnings"][0]
        assert open(path).read() == good
    again = run_child(cache)  # the rebuilt file is trusted again
    assert again["stats"]["loaded_from_disk"] == 1 and not again["warnings"]


def test_foreign_file_under_our_name_is_not_loaded(tmp_path):
    cache = str(tmp_path / "c")
    run_child(cache)
    (path,) = kernel_files(cache)
    other = textwrap.dedent(
        """
        import numpy as np
        from fusegrad.lazy.engines import numba_engine as ne
        from fusegrad.lazy.kernel import Instr, Kernel, Output
        f8 = np.dtype("f8")
        ne.run(Kernel((3,), (np.ones(3),), (), (Instr("exp", (0,), f8),),
                      (Output(1, None, (), f8),)))
        """
    )
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=cache)
    subprocess.run([sys.executable, "-c", other], env=env, check=True, timeout=300)
    foreign = [f for f in kernel_files(cache) if f != path][0]
    os.replace(foreign, path)  # a valid module, but for another key
    res = run_child(cache)
    assert res["ok"] and res["stats"]["rebuilt"] == 1 and len(res["warnings"]) == 1


def test_two_processes_fill_the_cache_at_once(tmp_path):
    cache = str(tmp_path / "c")
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=cache)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        res = json.loads(out.strip().splitlines()[-1])
        assert res["ok"] and not res["warnings"], res
    assert len(kernel_files(cache)) == 1
    assert not glob.glob(os.path.join(cache, ".tmp-*"))
    assert run_child(cache)["stats"]["generated"] == 0
