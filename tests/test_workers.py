"""The worker pool (``fusegrad.lazy.workers``): results, errors, order, more tasks than threads,
sleeping and polling threads, callers on several threads, fork, and the same gradients through
kernels split over it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.lazy import workers
from fusegrad.lazy.engines import numba_engine, numpy_blocked


@pytest.fixture(params=["polling", "sleeping only"])
def pool(request, monkeypatch):
    """A pool of 2 threads, with numba's poll and without it (as when numba is missing)."""
    if request.param == "sleeping only":
        monkeypatch.setattr(workers, "_POLLER", [(None, 0, 0)])
    p = workers.Pool(2)
    yield p
    p.shutdown()


def test_results_in_order_and_more_tasks_than_threads(pool):
    tasks = [pool.submit(pow, k, 2) for k in range(50)]
    assert [t.result() for t in tasks] == [k * k for k in range(50)]
    assert list(pool.map(abs, range(-20, 0))) == list(range(20, 0, -1))
    assert all(t.done() for t in tasks)


def test_keyword_arguments_reach_the_call(pool):
    out = np.zeros(3)
    pool.submit(np.add, np.ones(3), 2.0, out=out).result()
    assert np.array_equal(out, [3.0, 3.0, 3.0])


def test_an_error_is_raised_by_result_and_the_pool_goes_on(pool):
    task = pool.submit(int, "not a number")
    with pytest.raises(ValueError, match="not a number"):
        task.result()
    assert pool.submit(int, "7").result() == 7


def test_slow_tasks_and_idle_threads_that_fell_asleep(pool):
    # a result waited for longer than WAIT_POLL_US, then threads idle past IDLE_POLL_US
    assert pool.submit(lambda: time.sleep(0.01) or "slept").result() == "slept"
    time.sleep(0.01)
    assert [t.result() for t in [pool.submit(abs, -k) for k in range(4)]] == [0, 1, 2, 3]


def test_callers_on_several_threads(pool):
    """Tasks from 8 threads at once, each waiting for its own: every result reaches its caller,
    including tasks sharing a slot counter (more than 64 in flight)."""
    errors: list[BaseException] = []

    def caller(k: int) -> None:
        try:
            for j in range(40):
                tasks = [pool.submit(lambda a, b: a * 1000 + b, k, j + i) for i in range(3)]
                assert [t.result() for t in tasks] == [k * 1000 + j + i for i in range(3)]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)


def test_shutdown_refuses_new_tasks_and_stops_the_threads():
    p = workers.Pool(2)
    assert p.submit(abs, -3).result() == 3
    p.shutdown()
    assert not any(t.is_alive() for t in p._threads)
    with pytest.raises(RuntimeError, match="shut down"):
        p.submit(abs, 1)


def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError, match="at least one worker thread"):
        workers.Pool(0)


def test_the_shared_pool_follows_fusegrad_threads(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_THREADS", "3")
    assert numpy_blocked.pool().workers == 3
    assert numpy_blocked.pool() is numpy_blocked.pool()
    monkeypatch.setenv("FUSEGRAD_THREADS", "2")
    assert numpy_blocked.pool().workers == 2


FORK_CHILD = """
import os, signal, sys
from fusegrad.lazy.engines import numpy_blocked
assert numpy_blocked.pool().submit(abs, -1).result() == 1  # the parent's threads exist
pid = os.fork()
if pid == 0:
    signal.alarm(30)  # a child waiting on its parent's threads is killed, not left hanging
    ok = numpy_blocked.pool().submit(sum, [1, 2, 3]).result() == 6
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="fork: Linux only")
def test_a_forked_child_gets_its_own_threads():
    """In a fresh interpreter (no JAX threads around the fork)."""
    done = subprocess.run([sys.executable, "-c", FORK_CHILD], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_split_kernels_give_the_serial_gradient(monkeypatch):
    """A replayed kernel split over the pool (2 threads), its partial sums combined, against
    the same program with every kernel on one thread, and against the hand-derived gradient."""
    x = np.random.default_rng(0).normal(size=(600, 400))

    def f(a):
        return np.sum(np.tanh(a) * a)

    expected = np.tanh(x) + x * (1 - np.tanh(x) ** 2)
    monkeypatch.setenv("FUSEGRAD_THREADS", "2")
    monkeypatch.setattr(numba_engine, "REPLAY_PARALLEL_MIN_POINTS", 1)
    handed: list[int] = []
    submit = workers.Pool.submit
    monkeypatch.setattr(
        workers.Pool, "submit", lambda self, *a, **k: handed.append(1) or submit(self, *a, **k)
    )
    with fg.use_engine("numba"):
        jitted = fg.jit(fg.grad(f))
        split = [jitted(x) for _ in range(4)][-1]
    assert handed, "no kernel was split over the pool"
    monkeypatch.setenv("FUSEGRAD_THREADS", "1")
    with fg.use_engine("numba"):
        serial = fg.jit(fg.grad(f))(x)
    np.testing.assert_allclose(split, expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(serial, expected, rtol=1e-13, atol=1e-13)


def test_no_thread_is_left_polling_after_a_burst():
    """Idle threads poll for IDLE_POLL_US and then sleep: a process that stops calling
    fusegrad does not keep burning a core."""
    p = workers.Pool(2)
    try:
        for _ in range(20):
            p.submit(abs, -1).result()
        deadline = time.monotonic() + 10  # generous: a loaded machine may not run them at once
        while time.monotonic() < deadline:
            with p._lock:
                if all(p._asleep):
                    break
            time.sleep(0.01)
        with p._lock:
            assert all(p._asleep), "a worker thread is still polling long after its last task"
    finally:
        p.shutdown()


def test_a_poll_that_cannot_compile_leaves_sleeping_threads(monkeypatch):
    from fusegrad.lazy.engines import numba_atomics

    def broken(*args):
        raise RuntimeError("LLVM has no such intrinsic")

    monkeypatch.setattr(numba_atomics, "poll", broken)
    monkeypatch.setattr(workers, "_POLLER", [])
    with pytest.warns(RuntimeWarning, match="could not compile their poll.*LLVM has no such"):
        p = workers.Pool(2)
    try:
        assert p._poll is None
        assert [t.result() for t in [p.submit(abs, -k) for k in range(5)]] == [0, 1, 2, 3, 4]
    finally:
        p.shutdown()


def test_a_task_no_thread_has_started_runs_on_its_caller(pool):
    """With both threads held, the third task is still queued when its result is asked for:
    it runs on the calling thread, and the held threads' tasks still finish on theirs."""
    release, started = threading.Event(), threading.Semaphore(0)

    def hold():
        started.release()
        return release.wait(30) and threading.get_ident()

    held = [pool.submit(hold) for _ in range(2)]
    for _ in held:  # both threads have taken a held task
        assert started.acquire(timeout=30)
    queued = pool.submit(threading.get_ident)
    assert queued.result() == threading.get_ident()
    release.set()
    assert all(t.result() not in (None, threading.get_ident()) for t in held)
    assert [t.result() for t in [pool.submit(abs, -k) for k in range(6)]] == list(range(6))


def test_split_kernels_give_the_same_bits_whichever_thread_runs_the_slots(monkeypatch):
    """A replayed kernel with column sums (per-slot partials), split over 2 threads: with the
    pool's thread starting 5 ms late (this thread claims every slot) and on time, the same
    bits; against one thread, the same numbers to rounding."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(3000, 200)), rng.normal(size=(3000, 200))

    def f(a, b):
        return np.sum(np.sum(np.tanh(a) * b, axis=0) ** 2)

    monkeypatch.setenv("FUSEGRAD_THREADS", "2")
    monkeypatch.setattr(numba_engine, "REPLAY_PARALLEL_MIN_POINTS", 1)
    with fg.use_engine("numba"):
        jitted = fg.jit(fg.grad(f, argnums=(0, 1)))
        on_time = [jitted(x, y) for _ in range(3)][-1]
        submit = workers.Pool.submit

        def late(self, fn, *args, **kwargs):
            return submit(self, lambda: time.sleep(0.005) or fn(*args, **kwargs))

        monkeypatch.setattr(workers.Pool, "submit", late)
        late_thread = jitted(x, y)
    monkeypatch.setattr(workers.Pool, "submit", submit)
    monkeypatch.setenv("FUSEGRAD_THREADS", "1")
    with fg.use_engine("numba"):
        one = fg.jit(fg.grad(f, argnums=(0, 1)))(x, y)
    for a, b, c in zip(on_time, late_thread, one):
        assert np.array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)
