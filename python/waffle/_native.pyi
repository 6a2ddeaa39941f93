"""Type stubs for the native module ``waffle._native`` (built from ``python/src/``)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar, Union, final

_F = TypeVar("_F", bound=Callable[..., Any])

#: What a field value may be: scalars as they are; arrays (``.shape``/``.dtype``) summarised.
FieldValue = Union[int, float, bool, str, Any]
#: What ``caused_by=`` takes.
Cause = Union["SpanId", "EventId", "Context", "Span", int]
Causes = Union[Cause, Iterable[Cause], None]

__version__: str

@final
class SpanId:
    """Identifies one span, unique within a trace."""

    def __new__(cls, value: int) -> SpanId: ...
    @property
    def is_null(self) -> bool: ...
    def __int__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __hash__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

@final
class Track:
    """A device track: a named timeline in a clock of its own (a GPU queue)."""

    def __new__(cls, name: str, ticks_per_second: int) -> Track: ...
    @property
    def id(self) -> int: ...
    @property
    def is_recording(self) -> bool: ...
    def sync(self, ticks: int) -> EventId: ...
    def slice(
        self,
        name: str,
        begin: int,
        end: int,
        /,
        *,
        launched_by: Cause | None = None,
        caused_by: Causes = None,
        **fields: FieldValue,
    ) -> EventId: ...

@final
class EventId:
    """Identifies one event, unique within a trace."""

    def __new__(cls, value: int) -> EventId: ...
    @property
    def is_null(self) -> bool: ...
    def __int__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __hash__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

@final
class Context:
    """A trace id and the span that work carried elsewhere belongs to."""

    def __new__(cls, trace_id: Union[int, str], span_id: Union[SpanId, EventId, int]) -> Context: ...
    @staticmethod
    def from_traceparent(header: str) -> Context:
        """Reads a W3C ``traceparent`` header; ``ValueError`` if it is malformed."""
    @staticmethod
    def from_bytes(data: bytes) -> Context: ...
    @property
    def traceparent(self) -> str:
        """``00-<trace id>-<span id>-01``."""
    def to_bytes(self) -> bytes: ...
    @property
    def trace_id(self) -> str: ...
    @property
    def span_id(self) -> SpanId: ...
    @property
    def is_null(self) -> bool: ...
    def __hash__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

@final
class Span:
    """A span; ``waffle.span(name, caused_by=None, **fields)``. Enter it with ``with``; its
    ``id`` is then its :class:`SpanId`. Also a decorator: ``@waffle.span("name")``."""

    def __new__(cls, name: str, /, *, caused_by: Causes = None, **fields: FieldValue) -> Span: ...
    @property
    def id(self) -> SpanId: ...
    def __enter__(self) -> Span: ...
    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Any) -> bool: ...
    def __call__(self, func: _F) -> _F: ...

@final
class FunctionSite:
    """The callsite of one ``@waffle.instrument``ed function."""

    def __new__(
        cls,
        name: str,
        module: str,
        file: str,
        line: int,
        params: Sequence[tuple[str, int]],
        skip: Sequence[str],
    ) -> FunctionSite: ...
    @property
    def name(self) -> str: ...
    def span(self, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None) -> Span: ...
    def call(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None
    ) -> Any: ...

@final
class Resync:
    """Awaitable wrapper of a coroutine that re-synchronises the thread's span stack with the
    running task's current span before each step."""

    def __new__(cls, coro: Any) -> Resync: ...
    def __await__(self) -> Resync: ...
    def __iter__(self) -> Resync: ...
    def __next__(self) -> Any: ...
    def send(self, value: Any) -> Any: ...
    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any: ...
    def close(self) -> None: ...

def call_in_span(
    name: str,
    caused_by: Causes,
    fields: Optional[dict[str, Any]],
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Optional[dict[str, Any]] = None,
) -> Any: ...
def span(name: str, /, *, caused_by: Causes = None, **fields: FieldValue) -> Span:
    """A span, not entered yet: a context manager (``with``) and a decorator. A field value of
    another type than int, float, bool, str or an array is a ``TypeError`` naming the field."""

def event(name: str, /, *, caused_by: Causes = None, **fields: FieldValue) -> EventId:
    """Records an instant event; returns its id."""

def tensor(name: str, array: Any, /, *, caused_by: Causes = None, **fields: FieldValue) -> EventId:
    """Records a tensor's fingerprint (count, XXH3-64 of its little-endian bytes, RMS/min/max of
    the finite elements, NaN/+Inf/-Inf counts) as one event; returns its id (null while
    recording or fingerprints are off). Takes buffers (in place), anything with ``__dlpack__``
    (PyTorch, JAX, CuPy; in place on the host, copied to the host by the framework from a
    device) and anything with ``__array__``. An element type other than float16, bfloat16,
    float32, float64 or an integer is a ``TypeError`` naming it (and the device, for DLPack); a
    tensor whose memory cannot be reached from the host a ``BufferError`` naming both."""

def set_tensors(on: bool) -> None:
    """Turns tensor fingerprints on or off for the session recording now."""

def tensors_enabled() -> bool:
    """Whether tensor fingerprints are on."""

def extract_context() -> Context:
    """The context of the running thread or asyncio task."""

def enter_context(span_id: int) -> tuple[Any, int]: ...
def leave_context(token: Any, epoch: int, span_id: int) -> None: ...
def start(
    path: Union[str, os.PathLike[str]],
    *,
    process_name: Optional[str] = None,
    labels: Optional[Sequence[tuple[str, str]]] = None,
    parent: Optional[str] = None,
) -> None: ...
def stop() -> Optional[tuple[str, dict[str, int]]]: ...
def recording_path() -> Optional[str]: ...
def recording_elsewhere() -> bool: ...
def flush() -> None: ...
def set_enabled(on: bool) -> None: ...
def is_enabled() -> bool: ...
def _after_fork_in_child() -> None: ...
def formats() -> list[str]: ...
def format_for_path(path: Union[str, os.PathLike[str]]) -> Optional[str]: ...
def export(
    inputs: Sequence[Union[str, os.PathLike[str]]],
    output: Union[str, os.PathLike[str]],
    format: Optional[str] = None,
    *,
    service_name: Optional[str] = None,
) -> list[str]: ...
def send(
    inputs: Sequence[Union[str, os.PathLike[str]]],
    target: str,
    *,
    service_name: Optional[str] = None,
    timeout_s: Optional[float] = None,
) -> dict[str, Any]:
    """Sends the decoded spans to ``zipkin=URL`` or ``otlp=URL``; ``OSError`` if it fails."""

def decode(inputs: Sequence[Union[str, os.PathLike[str]]]) -> dict[str, Any]:
    """trace.bin files as plain dicts: ``{"processes": [...], "warnings": [...]}``."""

def _test_rust_work(n: int) -> int: ...
def _test_rust_callback(f: Callable[[], Any]) -> Any: ...
def _cache_sizes() -> tuple[int, int]: ...
