"""waffle: causal tracing for Python, JAX, and the native code underneath.

Spans (units of work) and events (instants) are recorded into per-thread buffers in a few
hundred nanoseconds each and written to a ``trace.bin`` file by a background thread. At exit
(or :func:`shutdown`) the file is exported for Perfetto, Jaeger, Zipkin or OpenTelemetry, or
sent to a running Zipkin, Jaeger or OpenTelemetry collector (``endpoint=``).
Any span or event can name its causes (``caused_by=``), across threads and processes, and the
viewers draw arrows from causes to effects.

Example (writes ``demo.pftrace``; open it in ui.perfetto.dev)::

    >>> import waffle
    >>> waffle.set_exporter(waffle.PerfettoExporter("demo.pftrace"))
    >>> @waffle.instrument                       # span "scale", fields n and factor
    ... def scale(n: int, factor: float) -> float:
    ...     with waffle.span("inner", step=1):
    ...         return n * factor
    >>> with waffle.span("experiment", run="a") as root:
    ...     bad = waffle.event("input has NaN", rank=1)
    ...     with waffle.span("allreduce", caused_by=bad):
    ...         scale(3, 0.5)
    1.5
    >>> waffle.shutdown()                        # also runs at interpreter exit
    ['demo.pftrace']

- :func:`instrument` names the span after the function (``__qualname__``) and records its
  arguments: ``int``, ``float``, ``bool`` and ``str`` as they are, arrays (anything with
  ``.shape`` and ``.dtype``: NumPy, JAX, PyTorch) as ``name.shape``/``name.dtype`` strings, and
  leaves out other values, ``self``/``cls`` and the names in ``skip=``. It works on plain
  functions, methods and ``async def``.
- ``span(name, caused_by=None, **fields)`` is a context manager (``.id`` is its
  :class:`SpanId`) and a decorator. A field of another type is a ``TypeError`` naming it.
- ``event(name, caused_by=None, **fields)`` returns an :class:`EventId`.
- ``caused_by`` takes a :class:`SpanId`, :class:`EventId`, :class:`Context`, a span, or a list.
- The current span follows threads' and asyncio tasks' ``contextvars``: coroutines interleaved
  on one thread each nest under their own spans. To continue work in another thread or process,
  pass :func:`extract_context` (or its ``.traceparent`` text) and run the work inside
  :func:`inject_context`.
- ``Track(name, ticks_per_second)`` is a device track (a GPU queue) in a clock of its own:
  ``.sync(ticks)`` pairs a reading of that clock with the host's now, and
  ``.slice(name, begin, end, launched_by=None, **fields)`` records work by its device times,
  drawn on a track of its own with an arrow from the span or event that launched it.
- Native code (Rust ``waffle::span!`` in an extension module of this process) nests under the
  Python span that is current when it runs, in the same trace.

- ``set_enabled(False)`` pauses recording (a span or event then costs about what a bare ``with``
  statement does) and ``set_enabled(True)`` resumes it; :func:`is_enabled` says which.

- ``tensor(name, array, caused_by=None, **fields)`` records a tensor's fingerprint (element
  count, XXH3-64 hash of its bytes, RMS/min/max of the finite elements, NaN/Inf counts) as one
  event, reading NumPy arrays and other buffers in place, PyTorch, JAX and CuPy tensors
  through DLPack (in place on the host; a tensor on a GPU is copied to the host by its
  framework first); off unless ``WAFFLE_TENSORS=1`` at start or :func:`set_tensors`.
  ``with step(n):`` marks a training or simulation step.

Names are interned once: each distinct span name and set of field names becomes one run-time
callsite the first time it is seen, and later calls record only its id and the values.
"""

from __future__ import annotations

from . import _native
from ._exporters import (
    ChromeExporter,
    Exporter,
    JaegerExporter,
    OtlpExporter,
    PerfettoExporter,
    ZipkinExporter,
    exporter_for_path,
)
from ._instrument import inject_context, instrument
from ._native import (
    Context,
    EventId,
    Span,
    SpanId,
    Track,
    event,
    extract_context,
    is_enabled,
    set_enabled,
    set_tensors,
    span,
    tensor,
)
from ._session import _from_environment, flush, is_recording, set_exporter, shutdown, start

__version__: str = _native.__version__

__all__ = [
    "ChromeExporter",
    "Context",
    "EventId",
    "Exporter",
    "JaegerExporter",
    "OtlpExporter",
    "PerfettoExporter",
    "Span",
    "SpanId",
    "Track",
    "ZipkinExporter",
    "event",
    "exporter_for_path",
    "extract_context",
    "flush",
    "inject_context",
    "instrument",
    "is_enabled",
    "is_recording",
    "set_enabled",
    "set_exporter",
    "set_tensors",
    "shutdown",
    "span",
    "start",
    "step",
    "tensor",
]

_from_environment()


def step(n: int, /, **fields: object) -> Span:
    """A step span: ``with waffle.step(n):`` marks one training or simulation step, named
    ``step`` with the number as its first field ``step`` (then ``fields``)."""
    return span("step", step=int(n), **fields)  # type: ignore[arg-type]
