"""The numba engine's disk cache: reuse across processes, corruption, permissions, races.

Each scenario runs in fresh subprocesses (clean counters, a cold numba) against a temporary
``FUSEGRAD_CACHE_DIR``; each child pays numba's import and one compile (seconds), so the default run
keeps reuse, privacy and the refusals of a writable folder or module, and ``-m slow`` has the rest.
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


def run_child(cache: str, **env_extra: str) -> dict:
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=cache, **env_extra)
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def numba_files(cache: str, kind: str) -> list[str]:
    return sorted(glob.glob(os.path.join(cache, "__pycache__", f"k_*.kernel-*{kind}")))


def _empty(path):
    open(path, "wb").close()


@pytest.mark.slow
def test_broken_numba_cache_file_is_rebuilt_with_one_warning(tmp_path):
    cache = str(tmp_path / "c")
    run_child(cache)
    for kind in (".nbi", ".nbc"):
        for damage in (_corrupt_truncate, _empty):
            files = numba_files(cache, kind)
            assert files
            for f in files:
                damage(f)
            res = run_child(cache)
            case = (kind, damage.__name__)
            assert res["ok"], case
            assert res["stats"]["compiled"] == 1 and res["stats"]["rebuilt"] == 1, (case, res)
            (msg,) = res["warnings"]
            assert "numba cache file" in msg and os.path.basename(files[0]) in msg, msg
            assert "Error" in msg  # the cause: EOFError or UnpicklingError
    again = run_child(cache)  # saved afresh: loaded, no warning
    assert again["stats"]["cache_hits"] == 1 and again["stats"]["compiled"] == 0
    assert not again["warnings"]


def test_cache_folder_that_cannot_be_created_compiles_in_memory(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cache = str(blocker / "kernels")  # under a regular file: cannot exist, even for root
    res = run_child(cache)
    assert res["ok"]
    assert res["stats"]["generated"] == 1 and res["stats"]["compiled"] == 1
    (msg,) = res["warnings"]
    assert cache in msg and "Not a directory" in msg and "in memory" in msg


@pytest.mark.skipif(os.getuid() == 0, reason="root may write to a read-only folder")
def test_read_only_cache_folder_compiles_in_memory(tmp_path):
    cache = tmp_path / "ro"
    cache.mkdir(mode=0o500)
    try:
        res = run_child(str(cache))
    finally:
        cache.chmod(0o700)
    assert res["ok"] and res["stats"]["compiled"] == 1
    (msg,) = res["warnings"]
    assert str(cache) in msg and "in memory" in msg
    assert not os.listdir(cache)


@pytest.mark.slow
def test_grad_runs_from_1e5_elements_without_a_cache_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = textwrap.dedent(
        """
        import json, warnings
        import numpy as np
        import fusegrad as fg
        x = np.linspace(0.0, 1.0, 200_000)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            g = fg.grad(lambda v: np.sum(v * v + 3.0 * v))(x)
        print(json.dumps({"ok": bool(np.allclose(g, 2 * x + 3)),
                          "warnings": [str(m.message) for m in w]}))
        """
    )
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(blocker / "k"), FUSEGRAD_ENGINE="numba")
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["ok"]
    assert len([m for m in res["warnings"] if "kernel cache folder" in m]) == 1, res


def _plant(path: str, code: str) -> None:
    """Replace the module at ``path`` by ``code`` under a header that matches its key (what an
    attacker who can write the folder could do)."""
    head = open(path).readline()
    key = head.split("key=")[1].split()[0]
    digest = hashlib.sha256(code.encode()).hexdigest()
    with open(path, "w") as f:
        f.write(f"# fusegrad-kernel v1 key={key} body-sha256={digest}\n" + code)


PLANTED = "import os\nos._exit(7)  # must never run\n"


@pytest.mark.parametrize("mode", [0o777, pytest.param(0o770, marks=pytest.mark.slow)])
def test_cache_folder_writable_by_others_is_refused(tmp_path, mode):
    good = str(tmp_path / "good")
    run_child(good)
    (module,) = kernel_files(good)
    shared = tmp_path / "shared"
    shared.mkdir()
    planted = shared / os.path.basename(module)
    planted.write_text(open(module).read())
    _plant(str(planted), PLANTED)
    shared.chmod(mode)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = run_child(str(shared), TMPDIR=str(tmp))  # exit code 7 if the planted module ran
    assert res["ok"]
    private = tmp / f"fusegrad-kernels-{os.getuid()}"
    (msg,) = res["warnings"]
    assert "refusing" in msg and str(shared) in msg and str(private) in msg
    assert ("group" in msg) and (("others" in msg) == bool(mode & 0o002))
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
    assert len(kernel_files(str(private))) == 1
    assert run_child(str(shared), TMPDIR=str(tmp))["stats"]["loaded_from_disk"] == 1


@pytest.mark.slow
def test_unsafe_private_fallback_means_no_disk_cache(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    squatted = tmp / f"fusegrad-kernels-{os.getuid()}"
    squatted.mkdir()
    squatted.chmod(0o777)  # someone made our fallback folder first
    res = run_child(str(shared), TMPDIR=str(tmp))
    assert res["ok"] and res["stats"]["generated"] == 1
    (msg,) = res["warnings"]
    assert "no disk cache" in msg and str(squatted) in msg
    assert not kernel_files(str(squatted)) and not kernel_files(str(shared))


def test_module_writable_by_others_is_never_imported(tmp_path):
    cache = str(tmp_path / "c")
    run_child(cache)
    (path,) = kernel_files(cache)
    good = open(path).read()
    _plant(path, PLANTED)
    os.chmod(path, 0o666)
    res = run_child(cache)  # exit code 7 if the planted module ran
    assert res["ok"] and res["stats"]["rebuilt"] == 1
    (msg,) = res["warnings"]
    assert path in msg and "writable by group and others" in msg
    assert open(path).read() == good
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0


@pytest.mark.slow
@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_module_owned_by_another_user_is_never_imported(tmp_path):
    cache = str(tmp_path / "c")
    run_child(cache)
    (path,) = kernel_files(cache)
    _plant(path, PLANTED)
    os.chmod(path, 0o600)
    os.chown(path, 12345, 12345)
    res = run_child(cache)
    assert res["ok"] and res["stats"]["rebuilt"] == 1
    (msg,) = res["warnings"]
    assert "owned by uid 12345" in msg
    assert os.stat(path).st_uid == os.getuid()


@pytest.mark.slow
@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a folder to another user")
def test_cache_folder_owned_by_another_user_is_refused(tmp_path):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 12345, 12345)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = run_child(str(other), TMPDIR=str(tmp))
    assert res["ok"]
    (msg,) = res["warnings"]
    assert "refusing" in msg and "owned by uid 12345" in msg
    assert not kernel_files(str(other))


@pytest.mark.slow
def test_numba_cache_file_writable_by_others_is_not_loaded(tmp_path):
    # numba's .nbi/.nbc files are pickles: loading one runs code, so they are checked too
    cache = str(tmp_path / "c")
    run_child(cache)
    nbc = numba_files(cache, ".nbc")
    for f in nbc:
        os.chmod(f, 0o666)
    res = run_child(cache)
    assert res["ok"]
    assert res["stats"]["compiled"] == 1 and res["stats"]["cache_hits"] == 0, res
    assert any("deleted numba cache file" in m and nbc[0] in m for m in res["warnings"])
    again = run_child(cache)
    assert again["stats"]["cache_hits"] == 1 and not again["warnings"]
