"""The worker threads both engines share: a pool whose idle threads poll for work, without the
GIL, for a short while before they sleep.

A large kernel, a row-blocked replay or a split product hands part of its work to the pool and
waits for it. With ``concurrent.futures.ThreadPoolExecutor`` every hand-off woke a sleeping
thread and the result woke the caller: ~45 µs for a round trip on the 2-core virtual machines
this project is measured on (a futex wake each way, each waking an idle virtual CPU), as long
as a replayed kernel over 10^6 points takes on two cores. Here a thread that has just finished
a task polls a counter (``engines/numba_atomics.py``, compiled, the GIL released) for up to
``IDLE_POLL_US`` before it sleeps, and a caller waiting for a result polls for up to
``WAIT_POLL_US``: a round trip costs a few µs while the pool is busy. A caller that asks for the
result of a task no thread has started yet (its thread still waking up, or every thread busy)
runs it itself. Without numba the threads only sleep and wake.

    >>> pool = Pool(2)
    >>> task = pool.submit(sum, [1, 2])
    >>> task.result(), list(pool.map(abs, [-1, -2]))
    (3, [1, 2])
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

# An idle worker polls this long after its last task before it sleeps: long enough to catch the
# next kernel of a replay (Python between two steps takes 5-30 µs), short enough that a thread
# with nothing to do soon leaves the core to others (OpenBLAS's threads, another process).
IDLE_POLL_US = 100.0
# A caller polls this long for a task's result before it sleeps: the tasks it waits for are
# shares of work it started alongside its own, so they end about when it ends its own. (Both
# are turned into numbers of checks when the process makes its first pool.)
WAIT_POLL_US = 1000.0

# Counters, each on its own cache line (_LINE int64s): per thread, the tasks handed to it; then
# a ring of _SLOTS slots, each task's end incrementing its slot's (a caller polls its task's).
_LINE = 8
_SLOTS = 64


class Task:
    """A submitted call. ``result()`` returns its value or raises its exception, waiting for
    the thread running it, or running it on the calling thread if none has started it;
    ``done()`` tells whether it has finished.

    >>> Pool(1).submit(divmod, 7, 2).result()
    (3, 1)
    """

    __slots__ = ("_pool", "_call", "_done", "_value", "_error", "_slot", "_seen", "_holder")

    def __init__(self, pool: Pool, call: tuple, slot: int, seen: int) -> None:
        self._pool = pool
        self._call: tuple | None = call
        self._slot, self._seen = slot, seen  # its end: counters[slot] moves on from seen
        self._holder: int | None = None  # queued (None), handed to thread i (i), running (-1)
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        """Whether the call has returned or raised."""
        return self._done

    def result(self) -> Any:
        """The call's value, once it has finished (its exception raised here if it raised)."""
        if not self._done:
            self._pool._wait(self)
        if self._error is not None:
            raise self._error
        return self._value

    def _run(self) -> None:
        assert self._call is not None
        fn, args, kwargs = self._call
        self._call = None  # the task no longer holds its arguments
        value, error = None, None
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller by result()
            error = e
        self._pool._finish(self, value, error)


class Pool:
    """``workers`` threads running submitted calls (``submit``, ``map``). A call goes to an idle
    thread (the one idle most recently, the likeliest to be polling still) or, when none is,
    to a queue the threads take from in order. They are daemon threads and live as long as the
    process (or until ``shutdown``).

    >>> Pool(2).workers
    2
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a pool needs at least one worker thread, got {workers}")
        self.workers = workers
        self._queue: deque[Task] = deque()
        self._lock = threading.Lock()
        self._idle: list[int] = []  # threads waiting for a task of their own, last idle last
        self._given: list[Task | None] = [None] * workers  # the task handed to each
        self._asleep = [False] * workers
        self._wake = [threading.Condition(self._lock) for _ in range(workers)]
        self._finished = threading.Condition(self._lock)  # a caller sleeps on it
        self._waiting = 0
        self._closed = False
        self._submitted = 0
        # counters[(1 + i) * _LINE]: tasks handed to thread i; then the tasks' end slots
        self._counters = np.zeros((1 + workers + _SLOTS) * _LINE, np.int64)
        self._poll, self._idle_checks, self._wait_checks = _poller()
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"fusegrad-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Task:
        """Run ``fn(*args, **kwargs)`` on a worker thread; its ``Task``.

        >>> Pool(1).submit(max, 3, 4).result()
        4
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("this worker pool is shut down: submit to a new one")
            slot = (1 + self.workers + self._submitted % _SLOTS) * _LINE
            self._submitted += 1
            task = Task(self, (fn, args, kwargs), slot, int(self._counters[slot]))
            if self._idle:
                i = self._idle.pop()
                self._given[i], task._holder = task, i
                self._counters[(1 + i) * _LINE] += 1
                if self._asleep[i]:
                    self._wake[i].notify()
            else:
                self._queue.append(task)
        return task

    def map(self, fn: Callable, items: Iterable) -> Iterator:
        """``fn`` of each item, run on the workers; the results in order.

        >>> list(Pool(2).map(len, ["a", "bc"]))
        [1, 2]
        """
        tasks = [self.submit(fn, item) for item in items]
        return (t.result() for t in tasks)

    def shutdown(self) -> None:
        """Stop the threads once the tasks already submitted have run.

        >>> p = Pool(1); p.shutdown(); p.submit(abs, 1)
        Traceback (most recent call last):
        RuntimeError: this worker pool is shut down: submit to a new one
        """
        with self._lock:
            self._closed = True
            for i in range(self.workers):
                self._counters[(1 + i) * _LINE] += 1
                self._wake[i].notify()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()

    def _work(self, i: int) -> None:
        lock, counters, poll, mine = self._lock, self._counters, self._poll, (1 + i) * _LINE
        signal = -1  # once a task has run, its slot: its end is published by the next poll
        while True:
            with lock:
                task = self._queue.popleft() if self._queue else None
                if task is not None:
                    task._holder = -1
                else:
                    if self._closed:
                        return
                    if i not in self._idle:  # (it is after a caller took its task back)
                        self._idle.append(i)
                    seen = int(counters[mine])
            handed = False
            if poll is not None and (task is None or signal >= 0):
                # the GIL let go first, then the last task's end published: the caller polling
                # for it takes the GIL back without waiting for this thread
                checks = self._idle_checks if task is None else 0
                handed = poll(counters, mine, seen if task is None else 0, checks, signal)
                signal = -1
            if task is None:
                with lock:
                    if handed and self._given[i] is None and not self._closed:
                        continue  # its caller ran the task itself (``_wait``): poll again
                    while self._given[i] is None and not self._closed:
                        self._asleep[i] = True
                        self._wake[i].wait()
                        self._asleep[i] = False
                    task, self._given[i] = self._given[i], None
                    if task is None:  # shut down
                        return
                    task._holder = -1
            task._run()
            signal = task._slot

    def _finish(self, task: Task, value: Any, error: BaseException | None) -> None:
        with self._lock:
            task._value, task._error, task._done = value, error, True
            if self._waiting:
                self._finished.notify_all()

    def _wait(self, task: Task) -> None:
        lock, counters, poll = self._lock, self._counters, self._poll
        with lock:
            # a task no thread has started yet runs here: its caller would only wait for a
            # thread to wake up (~50 µs from sleep) and then for the work itself
            holder = task._holder
            if holder is not None and holder >= 0:
                self._given[holder] = None
                self._idle.insert(0, holder)  # still idle, chosen last (it may be asleep)
            elif holder is None:
                self._queue.remove(task)
            task._holder = -1
        if holder is None or holder >= 0:
            task._run()
            return
        if poll is not None:
            # the task's slot moves on once it has ended and its thread has let the GIL go;
            # another task sharing the slot (64 in flight) only makes this look again
            while not task._done:
                if not poll(counters, task._slot, task._seen, self._wait_checks, -1):
                    break
                with lock:
                    task._seen = int(counters[task._slot])
        with lock:
            while not task._done:
                self._waiting += 1
                self._finished.wait()
                self._waiting -= 1


_POLLER: list = []


def _poller() -> tuple[Callable | None, int, int]:
    """The compiled ``poll`` and how many of its checks make ``IDLE_POLL_US`` and
    ``WAIT_POLL_US`` on this machine (timed once: a check is a load and a ``pause``, whose cost
    varies from ~1 to ~40 ns between processors); ``(None, 0, 0)`` without numba, or if it
    cannot compile the poll (a warning says so; the threads then only sleep and wake)."""
    if not _POLLER:
        try:
            from .engines.numba_atomics import poll

            counters = np.zeros(1, np.int64)
            poll(counters, 0, 0, 1, -1)  # compiled (or loaded from numba's cache) here
        except ImportError:  # numba missing: the threads only sleep and wake
            _POLLER.append((None, 0, 0))
            return _POLLER[0]
        except Exception as e:  # a numba that cannot build it: slower hand-offs, same results
            warnings.warn(
                f"fusegrad's worker threads could not compile their poll ({type(e).__name__}: "
                f"{e}); they sleep between tasks instead, which makes handing work to them "
                "slower (results are the same)",
                RuntimeWarning,
                stacklevel=2,
            )
            _POLLER.append((None, 0, 0))
            return _POLLER[0]
        checks = 1 << 14
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            poll(counters, 0, 0, checks, -1)
            best = min(best, time.perf_counter() - t0)
        per_us = checks / max(best * 1e6, 1.0)
        _POLLER.append(
            (poll, max(1, int(IDLE_POLL_US * per_us)), max(1, int(WAIT_POLL_US * per_us)))
        )
    return _POLLER[0]


_pools: dict[int, Pool] = {}
_pools_lock = threading.Lock()


def shared(workers: int) -> Pool:
    """The process's pool of ``workers`` threads, made at first use. One is kept per number
    of threads asked for (``FUSEGRAD_THREADS`` may change while another thread still uses the
    pool it had); an unused pool's threads sleep. A child process made by ``fork``, which has
    none of its parent's threads, makes pools of its own.

    >>> shared(2) is shared(2)
    True
    """
    pool = _pools.get(workers)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(workers)
            if pool is None:
                pool = _pools[workers] = Pool(workers)
    return pool


def _after_fork_in_child() -> None:
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()  # a parent's thread may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
