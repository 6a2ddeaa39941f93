"""JAX in the trace: compile phases, steps, compiled calls' device time, and profiles.

- ``install()``: JAX's compile phases as spans, through ``jax.monitoring`` (below);
- ``step(n)``: a step marker (the span ``step``, field ``step``) around one training step;
- ``timed(jitted_fn)``: each call's dispatch as a host span and its device time, dispatch to
  outputs ready, as a slice on a ``waffle.Track`` per JAX device (``cpu:0``), measured by a
  watcher thread so the caller never waits (precision: ``waffle._jax_devices``);
- ``merge_profile(path)``: the XLA ops of a ``jax.profiler`` profile (``.xplane.pb``) as slices
  on device tracks, on the trace's time base (``waffle._jax_profile``); ``with profile(logdir):``
  profiles a block and merges the profile when it ends.

``docs/jax.md`` shows a trace with all of them.

``waffle.jax.install()`` registers listeners with JAX's monitoring hooks:

- the compile phases JAX times (tracing to a jaxpr, lowering to MLIR, the backend compile)
  become spans ``jax.jaxpr_trace``, ``jax.jaxpr_to_mlir_module`` and ``jax.backend_compile``
  with a field ``fun_name``. JAX reports a phase's start (``record_scalar``) and its duration
  when it ends (``record_event_duration_secs``); the span opens at the first and closes at the
  second, so it nests inside whatever span called the jitted function;
- other durations JAX reports (compilation-cache timings, for instance) become events with a
  ``duration_s`` field, and plain ``record_event`` calls (cache hits and misses, ...) become
  events; their keyword metadata become fields.

Nothing here imports ``jax`` until ``install()`` is called or a timed call or a merge needs it,
and a listener never raises into JAX.
"""

from __future__ import annotations

import threading
from typing import Any

import waffle

from ._jax_devices import device_track, step, timed, wait
from ._jax_profile import merge_profile, profile, profile_files

_PHASES = {
    "/jax/core/compile/jaxpr_trace_duration": "jax.jaxpr_trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "jax.jaxpr_to_mlir_module",
    "/jax/core/compile/backend_compile_duration": "jax.backend_compile",
}

_installed = False
_record_events = True
_local = threading.local()


def _fields(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str))}


def _open() -> list[tuple[str, Any]]:
    stack = getattr(_local, "open", None)
    if stack is None:
        stack = _local.open = []
    return stack


def _on_scalar(event: str, value: Any, **kwargs: Any) -> None:
    name = _PHASES.get(event)
    if name is None:
        return
    try:
        span = waffle.span(name, **_fields(kwargs))
        span.__enter__()
        _open().append((event, span))
    except Exception:
        pass


def _on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
    try:
        stack = _open()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] == event:
                _, span = stack.pop(i)
                span.__exit__(None, None, None)
                return
        if _record_events:
            waffle.event(event, duration_s=float(duration_secs), **_fields(kwargs))
    except Exception:
        pass


def _on_event(event: str, **kwargs: Any) -> None:
    try:
        waffle.event(event, **_fields(kwargs))
    except Exception:
        pass


def install(*, events: bool = True) -> None:
    """Records JAX's compile phases as spans and, with ``events``, JAX's other monitoring
    events as waffle events. Calling it again changes ``events`` only."""
    global _installed, _record_events
    _record_events = events
    if _installed:
        return
    import jax.monitoring as monitoring

    monitoring.register_scalar_listener(_on_scalar)
    monitoring.register_event_duration_secs_listener(_on_duration)
    monitoring.register_event_listener(_on_event_if_enabled)
    _installed = True


def _on_event_if_enabled(event: str, **kwargs: Any) -> None:
    if _record_events:
        _on_event(event, **kwargs)


def installed() -> bool:
    """Whether :func:`install` has run."""
    return _installed


__all__ = [
    "device_track",
    "install",
    "installed",
    "merge_profile",
    "profile",
    "profile_files",
    "step",
    "timed",
    "wait",
]
