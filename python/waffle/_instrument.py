"""``@waffle.instrument``, the decorator form of ``waffle.span``, and ``inject_context``."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterable, Optional, TypeVar, Union, overload

from . import _native
from ._native import Context, SpanId

F = TypeVar("F", bound=Callable[..., Any])


def _wrap(
    fn: Callable[..., Any], make_span: Callable[..., Any], call: Callable[..., Any]
) -> Callable[..., Any]:
    """``fn`` run inside a span per call. A plain function's wrapper makes one native call,
    ``call(fn, args, kwargs)``, which begins the span, calls ``fn``, records an exception and
    ends the span (no span object and no ``with`` statement: about half of what a wrapper
    around ``with make_span(args, kwargs):`` cost). A coroutine function stays one: its span,
    ``make_span(args, kwargs)``, covers the whole coroutine, across awaits, and the coroutine is
    driven through ``_native.Resync``, which puts the task's current span back on the thread's
    stack each time it resumes, so native code called right after an ``await`` nests correctly
    too."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with make_span(args, kwargs):
                return await _native.Resync(fn(*args, **kwargs))

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return call(fn, args, kwargs)

    return wrapper


def _site(fn: Callable[..., Any], name: Optional[str], skip: Iterable[str]) -> _native.FunctionSite:
    """The function's callsite: its name, where it is defined, and its parameters."""
    try:
        params = [(p.name, int(p.kind)) for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):  # some builtins have no signature
        params = []
    skipped = set(skip)
    if params and params[0][0] in ("self", "cls"):
        skipped.add(params[0][0])
    code = getattr(fn, "__code__", None)
    return _native.FunctionSite(
        name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn),
        getattr(fn, "__module__", None) or "",
        code.co_filename if code is not None else "",
        code.co_firstlineno if code is not None else 0,
        params,
        sorted(skipped),
    )


@overload
def instrument(func: F, /) -> F: ...
@overload
def instrument(*, name: Optional[str] = None, skip: Iterable[str] = ()) -> Callable[[F], F]: ...


def instrument(
    func: Optional[F] = None, /, *, name: Optional[str] = None, skip: Union[str, Iterable[str]] = ()
) -> Union[F, Callable[[F], F]]:
    """Runs every call of the function inside a span named after it (``__qualname__``, or
    ``name=``), with its arguments as fields.

    Recorded: ``int``, ``float``, ``bool``, ``str`` arguments as they are, and arrays (any
    object with ``.shape`` and ``.dtype``: NumPy, JAX arrays and tracers, PyTorch tensors) as
    two fields, ``A.shape = "(8192, 4096)"`` and ``A.dtype = "float32"`` (the data is never
    read). Left out: arguments of other types or ``None``, a first parameter named ``self`` or
    ``cls``, ``*args``/``**kwargs``, the names in ``skip``, and parameters after the 32nd.
    Decorating never changes what the function returns or raises; an exception is recorded
    as an ``exception`` event in the span and propagates.

    Works on plain functions, methods (also above ``@staticmethod``/``@classmethod``) and
    ``async def`` functions, whose span covers the whole coroutine. For a generator function
    the span covers only the call that creates the generator.
    """
    skip_names = (skip,) if isinstance(skip, str) else tuple(skip)

    def decorate(fn: F) -> F:
        if isinstance(fn, (staticmethod, classmethod)):
            return type(fn)(decorate(fn.__func__))  # type: ignore[arg-type]
        site = _site(fn, name, skip_names)
        wrapped = _wrap(fn, site.span, site.call)
        wrapped.__waffle_site__ = site  # type: ignore[attr-defined]
        return wrapped  # type: ignore[return-value]

    if func is not None:
        return decorate(func)
    return decorate


def span_decorator(fn: F, name: str, caused_by: Any, fields: Optional[dict[str, Any]]) -> F:
    """What ``@waffle.span(name, **fields)`` does to ``fn``: a new span around every call."""
    fields = dict(fields or {})

    def make_span(_args: tuple[Any, ...], _kwargs: dict[str, Any]) -> _native.Span:
        return _native.span(name, caused_by=caused_by, **fields)

    # A partial, not a function: the wrapper's call reaches the native one without a frame.
    call = functools.partial(_native.call_in_span, name, caused_by, fields)
    return _wrap(fn, make_span, call)  # type: ignore[return-value]


class inject_context:
    """Makes ``ctx`` (from :func:`waffle.extract_context`, or its ``traceparent`` text) the
    parent of what this thread or task records inside the ``with`` block, so work handed to
    another thread, task or process continues the trace of the span that handed it over::

        ctx = waffle.extract_context()            # where the work is dispatched
        ...
        with waffle.inject_context(ctx):          # in the worker
            with waffle.span("process_task"):     # a child of the dispatching span
                ...

    ``None`` or a null context changes nothing. Native code called inside the block nests
    under the context too.
    """

    __slots__ = ("context", "_token", "_epoch")

    def __init__(self, ctx: Union[Context, SpanId, str, None]) -> None:
        if isinstance(ctx, str):
            ctx = Context.from_traceparent(ctx)
        elif isinstance(ctx, SpanId):
            ctx = Context(_native.extract_context().trace_id, ctx)
        elif ctx is not None and not isinstance(ctx, Context):
            raise TypeError(f"inject_context takes a Context, a SpanId or a traceparent string, not {type(ctx).__name__}")
        self.context: Optional[Context] = ctx
        self._token: Any = None
        self._epoch = 0

    def __enter__(self) -> Optional[Context]:
        if self._token is not None:
            raise RuntimeError("this inject_context is already entered")
        span_id = int(self.context.span_id) if self.context is not None else 0
        if span_id:
            self._token, self._epoch = _native.enter_context(span_id)
        return self.context

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self.context is not None:
            token, self._token = self._token, None
            _native.leave_context(token, self._epoch, int(self.context.span_id))
