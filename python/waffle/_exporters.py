"""Where a recorded trace goes: one exporter per output format.

An exporter names a file, a running backend, or both; at :func:`waffle.shutdown` (and so at
interpreter exit) the session's ``trace.bin`` is written with ``waffle_decode::export`` or sent
with ``waffle_decode::send``, streamed in two passes over the file as ``waffle-decode`` does, so
memory stays bounded however large the trace. A file's format follows its suffix:
``.pftrace`` (Perfetto), ``.jaeger.json``, ``.zipkin.json``, ``.otlp.json``/``.otlp.pb``
(OpenTelemetry), ``.chrome.json`` (Chrome trace events). Backends: Zipkin's v2 API
(``ZipkinExporter``), and OTLP/HTTP (``OtlpExporter``, and ``JaegerExporter``: Jaeger takes
OTLP on port 4318).
"""

from __future__ import annotations

import os
from typing import ClassVar, Optional, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]


class Exporter:
    """Writes the trace to ``path`` in the format its suffix names, and/or sends it to
    ``endpoint`` (a base URL such as ``http://127.0.0.1:9411``) where the format has a live
    protocol. A request is retried with backoff for up to ``timeout`` seconds (30 by
    default)."""

    #: Suffix of the default file name, which also selects the format.
    suffix: ClassVar[str] = ""
    #: What the format is called in messages.
    kind: ClassVar[str] = "trace"
    #: The protocol ``endpoint=`` speaks (``waffle-decode --send`` names), if any.
    protocol: ClassVar[Optional[str]] = None

    def __init__(
        self,
        path: Optional[PathLike] = None,
        *,
        service_name: Optional[str] = None,
        endpoint: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> None:
        if endpoint is not None and self.protocol is None:
            raise NotImplementedError(
                f"{type(self).__name__}(endpoint=...): {self.kind} has no live protocol; write a "
                "file with path=..., or send with ZipkinExporter, OtlpExporter or JaegerExporter"
            )
        self.service_name = service_name
        self.endpoint = endpoint
        self.timeout = timeout
        default = f"{service_name or 'waffle'}{self.suffix}"
        self.path: Optional[str] = (
            os.fspath(path) if path is not None else (None if endpoint is not None else default)
        )
        self.format: Optional[str] = _native.format_for_path(self.path) if self.path is not None else None

    def check(self) -> None:
        """Raises if this build of waffle cannot write the format."""
        if self.path is not None and self.format is None:
            known = ", ".join(_native.formats())
            raise NotImplementedError(
                f"{type(self).__name__}: this build of waffle cannot write {self.kind} files "
                f"({self.path!r}); it writes: {known}"
            )

    def export(self, inputs: list[str]) -> list[str]:
        """Reads ``inputs`` (trace.bin files), writes :attr:`path` and sends to
        :attr:`endpoint`, every process named :attr:`service_name` when one is set; returns
        what it wrote to (the path, the endpoint)."""
        self.check()
        done = []
        if self.path is not None:
            for warning in _native.export(inputs, self.path, self.format, service_name=self.service_name):
                print(f"waffle: warning: {warning}")
            done.append(self.path)
        if self.endpoint is not None:
            target = f"{self.protocol}={self.endpoint}"
            report = _native.send(inputs, target, service_name=self.service_name, timeout_s=self.timeout)
            for warning in report["warnings"]:
                print(f"waffle: {self.endpoint}: {warning}")
            done.append(self.endpoint)
        return done

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={self.path!r}, service_name={self.service_name!r}, "
            f"endpoint={self.endpoint!r})"
        )


class PerfettoExporter(Exporter):
    """A Perfetto trace (``.pftrace``) for ui.perfetto.dev: tracks per thread, arrows for causes."""

    suffix = ".pftrace"
    kind = "Perfetto"


class JaegerExporter(Exporter):
    """Jaeger JSON (``.jaeger.json``), for the Jaeger UI's *Upload JSON*; ``service_name``
    names the process. ``endpoint=`` sends OTLP/HTTP to a running Jaeger
    (``http://host:4318``) instead of writing a file (give ``path`` too for both)."""

    suffix = ".jaeger.json"
    kind = "Jaeger"
    protocol = "otlp"

    def __init__(
        self,
        service_name: Optional[str] = None,
        path: Optional[PathLike] = None,
        *,
        endpoint: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> None:
        super().__init__(path, service_name=service_name, endpoint=endpoint, timeout=timeout)


class ZipkinExporter(JaegerExporter):
    """Zipkin v2 JSON (``.zipkin.json``): what Zipkin's ``POST /api/v2/spans`` takes;
    ``endpoint=`` posts it there (``http://host:9411``)."""

    suffix = ".zipkin.json"
    kind = "Zipkin"
    protocol = "zipkin"


class OtlpExporter(JaegerExporter):
    """An OpenTelemetry ``ExportTraceServiceRequest``: OTLP/JSON (``.otlp.json``) or, with a
    ``.otlp.pb`` path, protobuf; ``endpoint=`` posts it to a collector's OTLP/HTTP receiver
    (``http://host:4318``)."""

    suffix = ".otlp.json"
    kind = "OTLP"
    protocol = "otlp"


class ChromeExporter(Exporter):
    """Chrome trace-event JSON (``.chrome.json``) for chrome://tracing and similar viewers."""

    suffix = ".chrome.json"
    kind = "Chrome trace"


def exporter_for_path(path: PathLike, *, service_name: Optional[str] = None) -> Exporter:
    """The exporter whose format ``path``'s suffix names (``run.pftrace``, ``run.jaeger.json``)."""
    p = os.fspath(path).lower()
    classes: list[type[Exporter]] = [JaegerExporter, ZipkinExporter, ChromeExporter, PerfettoExporter]
    for cls in classes:
        if p.endswith(cls.suffix):
            return cls(path=path, service_name=service_name)
    if p.endswith(".otlp.json") or p.endswith(".otlp.pb"):
        return OtlpExporter(path=path, service_name=service_name)
    exporter = Exporter(path=path, service_name=service_name)
    exporter.check()
    return exporter
