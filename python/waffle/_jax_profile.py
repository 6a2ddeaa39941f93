"""A ``jax.profiler`` profile merged into the waffle trace: ``waffle.jax.merge_profile``.

``jax.profiler.trace(logdir)`` (or ``start_trace``/``stop_trace``) writes an XSpace,
``LOGDIR/plugins/profile/RUN/HOST.xplane.pb``: planes (``/host:CPU``, ``/device:GPU:0``...)
of lines (threads, streams) of timed events. The XLA ops the runtime executed are among them:

- on a device plane (``/device:*``), every line (``XLA Ops``, ``XLA Modules``, a stream's
  kernels...) is device work;
- on the host plane, the lines ``XLA Ops`` and ``XLA Modules`` when there are any, and the
  CPU runtime's executor threads, which record each op they ran as an event with an
  ``hlo_op`` stat (``hlo_module``, ``program_id``, ``run_id``, ``device_ordinal`` beside it);
  Python's own frames (the ``python`` line) and the runtime's bookkeeping are left out, since
  waffle records the host side itself.

Each such line becomes a ``waffle.Track`` named ``DEVICE / LINE`` and each event a slice on
it: ``gpu:0 / XLA Ops`` for the plane ``/device:GPU:0``, ``cpu:0 / tf_XLAPjRtCpuClient/...``
for the ops an executor thread ran for CPU device 0 (their ``device_ordinal``), so that they
sit by the tracks of ``timed`` and waffle's XSpace export puts them on that device's plane;
``/host:CPU / LINE`` when no device is known. The events' stats become the slices' fields
(but those whose names start with ``_``, the profiler's internals). The file is read with
jaxlib's own reader, ``jax.profiler.ProfileData``.

Time base: the profiler stores times relative to the profile's start, which the plane ``Task
Environment`` holds as Unix ns (``profile_start_time``), so an event's Unix time is that plus
its ``start_ns``. A line whose times are Unix ns already (beyond 1973) is taken as it is;
jaxlib gives times as doubles, so such a line's times are 256 ns apart. The tracks' ticks are
Unix ns, synced with ``time.time_ns()`` when the merge runs; the decoder then places every
slice on waffle's own time base (also Unix ns, anchored when the session started). What
separates the two is the time between those two readings and how far the wall clock and
waffle's clock drift apart between the profiled work and the merge: microseconds on CPU JAX
(``docs/jax.md``, ``python/tests/test_jax_profile.py``).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import waffle

from . import _session

PathLike = Union[str, "os.PathLike[str]"]

#: Times below this are relative to the profile's start; above it, already Unix ns (a
#: profile that was not normalised). 1e17 ns is 1973.
_ABSOLUTE_NS = 10**17

#: Lines of XLA's own, taken whole wherever they are (a host plane has them on some backends).
_XLA_LINES = ("XLA Ops", "XLA Modules")

_tracks: dict[tuple[int, str], Any] = {}


def profile_files(path: PathLike) -> list[Path]:
    """The ``.xplane.pb`` files ``path`` names: the file itself, or in a directory (a
    ``jax.profiler`` log directory or one run's), those of its most recent run."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: no such profile file or directory")
    found = sorted(p.rglob("*.xplane.pb"))
    if not found:
        raise FileNotFoundError(f"{p}: holds no .xplane.pb file")
    newest = max(found, key=lambda f: (f.stat().st_mtime_ns, str(f))).parent
    return [f for f in found if f.parent == newest]


def merge_profile(path: PathLike) -> dict[str, int]:
    """Records the XLA op events of a ``jax.profiler`` profile (an ``.xplane.pb``, or a log
    directory: its newest run) as slices on waffle device tracks, on the trace's time base.
    Returns how many slices each track got (``{"cpu:0 / tf_XLAPjRtCpuClient/...": 18}``).

    Raises ``RuntimeError`` when no session is recording, ``FileNotFoundError`` when there is
    no profile, and ``ValueError`` naming the file when it is not an XSpace."""
    if not waffle.is_recording():
        raise RuntimeError("waffle.jax.merge_profile: no waffle session is recording")
    counts: dict[str, int] = {}
    for f in profile_files(path):
        for track_name, events in _op_lines(_read(f)):
            track = _track(track_name)
            for name, begin, end, fields in events:
                track.slice(name, begin, end, **fields)
            counts[track_name] = counts.get(track_name, 0) + len(events)
    return counts


@contextlib.contextmanager
def profile(logdir: PathLike) -> Iterator[dict[str, int]]:
    """``jax.profiler.trace(logdir)`` merged into the trace when the block ends: on leaving it,
    waits for ``timed`` calls' pending slices (the watcher then runs while this thread waits,
    see ``waffle.jax.timed``), stops the profiler and merges the profile it wrote. The dict it
    yields is filled with ``merge_profile``'s counts then (a block left by an exception merges
    nothing). Wait for the outputs whose ops the profile should hold before the block ends."""
    import jax

    from ._jax_devices import wait

    counts: dict[str, int] = {}
    with jax.profiler.trace(os.fspath(logdir)):
        yield counts
        wait()
    counts.update(merge_profile(logdir))


def _track(name: str) -> Any:
    """The session's track ``name`` (one a name, however many profiles are merged), synced now."""
    key = (_session.generation(), name)
    track = _tracks.get(key)
    if track is None or not track.is_recording:
        track = _tracks[key] = waffle.Track(name, 1_000_000_000)
    track.sync(time.time_ns())
    return track


def _read(f: Path) -> Any:
    try:
        from jax.profiler import ProfileData
    except ImportError as err:
        raise ImportError(
            f"{f}: reading a profile needs jax.profiler.ProfileData, which this jaxlib lacks"
        ) from err
    data = f.read_bytes()
    try:
        return ProfileData.from_serialized_xspace(data)
    except Exception as err:
        raise ValueError(f"{f}: not an XSpace profile ({len(data)} bytes): {err}") from None


def _start_time(profile: Any) -> int:
    for plane in profile.planes:
        for name, value in plane.stats:
            if name == "profile_start_time" and isinstance(value, int):
                return value
    return 0


def _device(plane: str) -> Optional[str]:
    """``gpu:0`` for the plane ``/device:GPU:0``, as JAX and ``timed`` name devices."""
    m = re.fullmatch(r"/device:([A-Za-z]+):(\d+)", plane)
    return f"{m[1].lower()}:{int(m[2])}" if m else None


def _op_lines(profile: Any) -> Iterator[tuple[str, list[tuple[str, int, int, dict[str, Any]]]]]:
    """(track name, [(op name, begin, end, fields)]) for each line holding XLA ops, a host line
    split by the ops' ``device_ordinal``; begin and end in Unix ns."""
    base = _start_time(profile)
    for plane in profile.planes:
        device = plane.name.startswith("/device:")
        if not device and not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            every = device or line.name in _XLA_LINES
            tracks: dict[str, list[tuple[str, int, int, dict[str, Any]]]] = {}
            for ev in line.events:
                stats = {k: v for k, v in ev.stats if not k.startswith("_")}
                if not every and "hlo_op" not in stats:
                    continue
                start = round(ev.start_ns)  # float ns: XSpace counts picoseconds
                offset = 0 if start >= _ABSOLUTE_NS else base
                begin = offset + start
                end = offset + round(ev.end_ns)
                fields = {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
                owner = _device(plane.name)
                if owner is None and isinstance(stats.get("device_ordinal"), int):
                    owner = f"cpu:{stats['device_ordinal']}"  # the CPU client's executor threads
                name = f"{owner or plane.name} / {line.name}"
                tracks.setdefault(name, []).append((ev.name, begin, max(begin, end), fields))
            yield from tracks.items()


__all__ = ["merge_profile", "profile", "profile_files"]
