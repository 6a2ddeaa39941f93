"""Steps and compiled calls' device time: ``waffle.jax.step`` and ``waffle.jax.timed``.

JAX dispatches a compiled call asynchronously: the call returns once the work is queued, and
the device (for CPU JAX, XLA's CPU runtime on its own threads) finishes it later. ``timed``
records both sides without blocking the caller:

- a host span (named after the function, fields ``fun_name`` and, inside ``step(n)``,
  ``in_step``: not ``step``, the field that makes a span a step marker) around the dispatch,
  on the calling thread;
- a slice on the device's track, from the dispatch (or, for a call queued behind an earlier
  one, from the moment that one was ready) to the moment the outputs are ready, with the
  dispatch span as its launcher (``launched_by``) and the time spent queued as ``queued_ns``.
  A daemon thread, the watcher, waits for the outputs (``block_until_ready``) and records the
  slice, so the caller goes on at once. A device runs its queue in order, so a track's slices
  follow each other and never overlap.

A device track is one ``waffle.Track`` per JAX device, named ``platform:id`` (``cpu:0``), defined
the first time the session sees the device. Its clock is ``time.monotonic_ns`` (1e9 ticks per
second), synced with the host's clock when the track is defined and again at most once a
second as slices are recorded, so the decoder's mapping follows any drift between the two.

Precision: the dispatch time is exact to a microsecond. The end is late by the time the watcher
takes to run once the outputs are ready, since it needs the GIL to read the clock: under a
hundred microseconds (median, CPU JAX) when the calling thread waits (in I/O, in
``block_until_ready``, in ``wait()``), milliseconds when it keeps running Python code, which
gives the GIL up only every ``sys.getswitchinterval()`` (5 ms). A late end also delays the
begin of a call queued behind it. ``docs/jax.md`` has the measurements. For the kernels' own
times, merge a ``jax.profiler`` profile (``waffle.jax.merge_profile``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional, TypeVar

import waffle

from . import _session

_F = TypeVar("_F", bound=Callable[..., Any])

#: Ticks per second of the device tracks' clock (``time.monotonic_ns``).
_RATE = 1_000_000_000
#: Resync a device track when its last sync is older than this (ns).
_RESYNC_NS = 1_000_000_000

_lock = threading.Lock()
_tracks: dict[tuple[int, str], list[Any]] = {}  # (session, name) -> [Track, last sync ns]
_last_end: dict[tuple[int, int], int] = {}  # the watcher's: (session, track id) -> last end
_step: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar("waffle.jax.step", default=None)


def step(n: int) -> contextlib.AbstractContextManager[Any]:
    """A step marker: the span ``step`` with field ``step=n`` (``waffle.step`` when this build
    has it). ``timed`` calls inside it record the step number as ``in_step``."""
    native_step = getattr(waffle, "step", None)
    marker = native_step(n) if native_step is not None else waffle.span("step", step=n)
    return _current_step(n, marker)


@contextlib.contextmanager
def _current_step(n: int, marker: Any) -> Iterator[Any]:
    token = _step.set(n)
    try:
        with marker as span:
            yield span
    finally:
        _step.reset(token)


def device_track(device: Any) -> Any:
    """The ``waffle.Track`` of a JAX device (``platform:id``) in the running session, defined
    (and synced) on first use. Its ticks are ``time.monotonic_ns()``."""
    return _track(f"{device.platform}:{device.id}")


def _track(name: str) -> Any:
    key = (_session.generation(), name)
    with _lock:
        entry = _tracks.get(key)
        if entry is None or not entry[0].is_recording:
            track = waffle.Track(name, _RATE)
            now = time.monotonic_ns()
            track.sync(now)
            entry = _tracks[key] = [track, now]
        elif time.monotonic_ns() - entry[1] > _RESYNC_NS:
            now = time.monotonic_ns()
            entry[0].sync(now)
            entry[1] = now
        return entry[0]


def timed(fn: _F, *, name: Optional[str] = None) -> _F:
    """Wraps a compiled (jitted) function so that each call records its dispatch as a host span
    and its device time, dispatch (or the previous call's end) to outputs ready, as a slice on
    each output device's track (see the module's docs for the precision). ``name`` defaults to
    the function's name. Usable as a decorator: ``@waffle.jax.timed`` over ``@jax.jit``.
    Records nothing when no session is recording; never waits for the device on the calling
    thread."""
    label = name or getattr(fn, "__name__", None) or type(fn).__name__

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not waffle.is_recording():
            return fn(*args, **kwargs)
        fields: dict[str, Any] = {"fun_name": label}
        n = _step.get()
        if n is not None:
            fields["in_step"] = n
        with waffle.span(label, **fields) as launch:
            begin = time.monotonic_ns()
            out = fn(*args, **kwargs)
        _watcher().put((label, fields, begin, launch.id, out))
        return out

    return call  # type: ignore[return-value]


def wait(timeout: Optional[float] = None) -> bool:
    """Waits until every ``timed`` call so far has its device slices recorded and pushed to
    the collector, at most ``timeout`` seconds; returns whether they all were.
    ``waffle.shutdown`` waits this way (up to ``SHUTDOWN_WAIT_S``) before the session stops."""
    w = _watcher_thread
    if w is None:
        return True
    q = w.queue
    with q.all_tasks_done:
        return q.all_tasks_done.wait_for(lambda: q.unfinished_tasks == 0, timeout)


#: How long ``waffle.shutdown`` waits for outputs not ready yet (a device that never finishes
#: must not hang the exit); their slices are left out after that.
SHUTDOWN_WAIT_S = 10.0


def _before_stop() -> None:
    if not wait(SHUTDOWN_WAIT_S):
        pending = _watcher_thread.queue.unfinished_tasks if _watcher_thread else 0
        print(
            f"waffle.jax: {pending} timed calls' outputs were not ready after {SHUTDOWN_WAIT_S} s;"
            " their device slices are left out",
            file=sys.stderr,
        )


class _Watcher(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="waffle.jax watcher", daemon=True)
        self.queue: queue.Queue[Any] = queue.Queue()

    def put(self, item: Any) -> None:
        self.queue.put(item)

    def run(self) -> None:
        while True:
            item = self.queue.get()
            try:
                _record(*item)
            except Exception:
                pass  # a failed call or a stopped session: nothing to record
            try:
                # An idle thread keeps what it staged until it pushes: push before anyone
                # waiting in wait() (shutdown) goes on.
                if self.queue.empty():
                    waffle.flush()
            except Exception:
                pass
            finally:
                self.queue.task_done()


_watcher_thread: Optional[_Watcher] = None


def _watcher() -> _Watcher:
    global _watcher_thread
    with _lock:
        if _watcher_thread is None:
            _watcher_thread = _Watcher()
            _watcher_thread.start()
            _session.before_stop(_before_stop)
        return _watcher_thread


def _forget_watcher() -> None:
    """A forked child has no watcher thread; it starts its own when it needs one."""
    global _watcher_thread
    _watcher_thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_watcher)


def _record(label: str, fields: dict[str, Any], dispatched: int, launch: Any, out: Any) -> None:
    """Waits for the outputs device by device (in id order) and records one slice a device."""
    import jax

    shards: dict[Any, list[Any]] = {}
    for leaf in jax.tree_util.tree_leaves(out):
        for shard in getattr(leaf, "addressable_shards", ()):
            shards.setdefault(shard.device, []).append(shard.data)
    for device in sorted(shards, key=lambda d: d.id):
        jax.block_until_ready(shards[device])
        end = time.monotonic_ns()
        track = device_track(device)
        # A device runs its queue in order: a call dispatched while the one before still ran
        # starts when that one is ready, so the track's slices follow each other and never
        # overlap (the time spent queued is the field queued_ns).
        key = (_session.generation(), track.id)
        begin = min(max(dispatched, _last_end.get(key, 0)), end)
        _last_end[key] = end
        track.slice(label, begin, end, launched_by=launch, queued_ns=begin - dispatched, **fields)


__all__ = ["device_track", "step", "timed", "wait"]
