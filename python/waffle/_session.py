"""Starting and stopping recording; exporting at exit.

One session records per process, into a ``trace.bin`` file. :func:`start` names the file;
:func:`set_exporter` starts a session with a temporary file if none is running. At
:func:`shutdown`, registered with ``atexit``, the session stops (every thread's buffer is
drained) and each exporter writes its file; a temporary ``trace.bin`` is then removed.

``WAFFLE_EXPORT=run.pftrace,run.jaeger.json python app.py`` does ``set_exporter`` with those
files when ``waffle`` is imported, for tracing a program without changing it.

``WAFFLE_OUTPUT=run/t-%p.bin python app.py`` records into that ``trace.bin`` (``%r`` rank,
``%p`` pid, ``%h`` host, ``%%``) from ``import waffle`` on: the native module starts the session
when it is loaded, as every program linking waffle's runtime does. It is this process's
session: :func:`is_recording` is true, :func:`set_exporter` exports its file at exit (and keeps
it), :func:`shutdown` stops it, and :func:`start` replaces it (its file is kept if it holds
records).

A process holds one session however many copies of waffle it loads: with
``LD_PRELOAD=libwaffle_mpi.so`` (whose session ``WAFFLE_OUTPUT`` starts first), or a C extension
recording through ``libwaffle.so``, this module's spans record into that session and file, and
the calls those libraries record nest under the Python spans they ran in.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import threading
from typing import Callable, Mapping, Optional, Union

from . import _native
from ._exporters import Exporter, PathLike, exporter_for_path
from ._native import Context

_lock = threading.RLock()
_exporters: list[Exporter] = []
_temporary: Optional[str] = None
# Sessions started so far by this process (for what is defined once a session, such as
# waffle.jax's device tracks), and what must run before a session stops.
_generation = 0
_before_stop: list[Callable[[], None]] = []


def generation() -> int:
    """A number that changes whenever a session starts."""
    return _generation


def before_stop(hook: Callable[[], None]) -> None:
    """Runs ``hook`` at every :func:`shutdown` before the session stops (once per hook)."""
    if hook not in _before_stop:
        _before_stop.append(hook)


def _default_process_name() -> str:
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    return os.path.basename(argv0) or "python"


def start(
    path: Optional[PathLike] = None,
    *,
    process_name: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
    parent: Union[Context, str, None] = None,
) -> str:
    """Starts recording to ``path`` (a ``trace.bin``; default: a temporary file removed after
    export). Returns the path. Raises ``RuntimeError`` if already recording.

    ``process_name`` names the process (default: the script's file name); ``labels`` go into
    the file's header (``{"rank": "1"}``); ``parent`` (a :class:`Context` or ``traceparent``
    text from another process) makes this process's top-level spans its children. By default
    ``WAFFLE_TRACEPARENT`` and ``WAFFLE_TRACE_ID`` are read as the Rust runtime does.

    A session that ``WAFFLE_OUTPUT`` started is stopped first, its file kept if it holds any
    record; this one starts as asked.
    """
    global _temporary, _generation
    with _lock:
        temporary = None
        if path is None:
            fd, temporary = tempfile.mkstemp(prefix=f"waffle-{os.getpid()}-", suffix=".bin")
            os.close(fd)
            path = temporary
        if isinstance(parent, Context):
            parent = parent.traceparent
        try:
            _native.start(
                os.fspath(path),
                process_name=process_name or _default_process_name(),
                labels=[(str(k), str(v)) for k, v in (labels or {}).items()],
                parent=parent,
            )
        except BaseException:
            if temporary is not None:
                os.unlink(temporary)
            raise
        _temporary = temporary
        _generation += 1
        return os.fspath(path)


def set_exporter(*exporters: Union[Exporter, PathLike]) -> None:
    """Writes the trace with these exporters at :func:`shutdown` (and so at exit); a path
    stands for the exporter its suffix names. Replaces exporters set before. Starts recording
    (to a temporary file) if no session is running, naming the process after the first
    exporter's ``service_name``.

    Raises ``NotImplementedError`` for a format this build cannot write.
    """
    chosen = [e if isinstance(e, Exporter) else exporter_for_path(e) for e in exporters]
    for e in chosen:
        e.check()
    with _lock:
        _exporters[:] = chosen
        if _native.recording_path() is None and chosen:
            service = next((e.service_name for e in chosen if e.service_name), None)
            start(process_name=service)


def is_recording() -> bool:
    """Whether a session is recording."""
    return _native.recording_path() is not None


def shutdown() -> list[str]:
    """Stops recording and runs every exporter; returns the files written and endpoints sent
    to. Does nothing (and returns ``[]``) when no session is recording. Runs at interpreter
    exit. A failed export is reported on stderr and does not stop the others."""
    global _temporary
    for hook in list(_before_stop):
        try:
            hook()
        except Exception as err:
            print(f"waffle: {hook!r} failed before stopping: {err}", file=sys.stderr)
    with _lock:
        stopped = _native.stop()
        if stopped is None:
            return []
        path, stats = stopped
        if stats.get("dropped"):
            print(f"waffle: {stats['dropped']} records were dropped (buffers full)", file=sys.stderr)
        written = []
        try:
            for e in _exporters:
                try:
                    written.extend(e.export([os.fspath(path)]))
                except Exception as err:  # one failed export must not stop the others
                    print(f"waffle: {e!r} failed: {err}", file=sys.stderr)
        finally:
            if _temporary is not None and os.fspath(path) == _temporary:
                try:
                    os.unlink(_temporary)
                except OSError:
                    pass
                _temporary = None
        return written


def _from_environment() -> None:
    paths = [p.strip() for p in os.environ.get("WAFFLE_EXPORT", "").split(",") if p.strip()]
    if paths:
        try:
            set_exporter(*paths)
        except Exception as err:  # a bad setting must not make `import waffle` fail
            print(f"waffle: WAFFLE_EXPORT={os.environ['WAFFLE_EXPORT']!r} ignored: {err}", file=sys.stderr)


def flush() -> None:
    """Pushes this thread's staged records to the collector now. Threads push their records
    as they go (at least every millisecond while recording) and when they exit; a thread that
    stays alive but idle while :func:`shutdown` runs in another keeps what it staged since its
    last push unless it calls this first."""
    _native.flush()


def _after_fork_in_child() -> None:
    """A forked child does not record into its parent's session (whose collector thread it
    lacks); it may start its own."""
    global _temporary
    _native._after_fork_in_child()
    _exporters.clear()
    _temporary = None


def _at_exit() -> None:
    """``shutdown`` at interpreter exit, unless another copy of waffle in the process (a
    preloaded ``libwaffle_mpi.so``, say) runs the session and no exporter waits for its file:
    that copy stops it at its own exit, after what still records during Python's exit (an
    ``MPI_Finalize`` that mpi4py calls then)."""
    if not _exporters and _native.recording_elsewhere():
        return
    shutdown()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
