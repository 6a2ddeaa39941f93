"""The Python API recorded and decoded back: spans, events, fields, decorators, links, errors."""

from __future__ import annotations

import asyncio
import gc

import pytest

import waffle
from waffle import _native


class FakeArray:
    """Anything with .shape and .dtype is summarised; the data is never touched."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype

    def __array__(self):  # pragma: no cover - must never be called
        raise AssertionError("waffle read the array's data")


def test_nested_spans_and_fields(rec):
    with waffle.span("outer", rank=3, lr=0.5, ok=True, tag="warm", neg=-7, big=2**63 + 1) as outer:
        with waffle.span("inner") as inner:
            pass
        assert isinstance(outer.id, waffle.SpanId) and outer.id
    t = rec.stop()
    o, i = t.one("outer"), t.one("inner")
    assert o["fields"] == {"rank": 3, "lr": 0.5, "ok": True, "tag": "warm", "neg": -7, "big": 2**63 + 1}
    assert i["parent"] == o["id"] == int(outer.id) and int(inner.id) == i["id"]
    assert o["parent"] is None and o["module"] == "python"
    assert o["start_ns"] <= i["start_ns"] <= i["end_ns"] <= o["end_ns"]


def test_huge_ints_and_arrays_as_fields(rec):
    with waffle.span("arrays", A=FakeArray((8192, 4096), "float32"), n=10**30):
        pass
    t = rec.stop()
    assert t.one("arrays")["fields"] == {
        "A.shape": "(8192, 4096)",
        "A.dtype": "float32",
        "n": str(10**30),
    }


def test_numpy_arrays_and_scalars():
    np = pytest.importorskip("numpy")
    from waffle._native import Span

    # Conversion happens when the span is made; nothing needs to be recorded to check it.
    Span("np", a=np.zeros((2, 3), np.float32), s=np.float32(1.5), i=np.int64(4), b=np.bool_(True))


def test_instrument_functions_methods_and_arguments(rec):
    @waffle.instrument
    def step(i: int, dt: float, name: str = "x", *rest, A=None, flag=False, **kw):
        return i

    class Model:
        @waffle.instrument
        def forward(self, x, weights):
            return x

        @waffle.instrument(name="Model.load", skip=["secret"])
        @classmethod
        def load(cls, path, secret):
            return path

        @waffle.instrument
        @staticmethod
        def helper(k):
            return k

    assert step(1, 0.5, "n", 9, 9, A=FakeArray((2,), "int8"), flag=True, extra=1) == 1
    assert step(2, 0.25) == 2
    assert Model().forward(4, object()) == 4
    assert Model.load("ckpt", "pw") == "ckpt"
    assert Model.helper(7) == 7
    assert step.__name__ == "step" and step.__wrapped__  # functools.wraps
    t = rec.stop()
    qual = "test_instrument_functions_methods_and_arguments.<locals>."
    first, second = t.named(qual + "step")
    assert first["fields"] == {"i": 1, "dt": 0.5, "name": "n", "A.shape": "(2,)", "A.dtype": "int8", "flag": True}
    assert second["fields"] == {"i": 2, "dt": 0.25}  # defaults not passed are not recorded
    assert first["file"].endswith("test_api.py") and first["line"] > 0
    assert first["module"] == __name__
    assert t.one(qual + "Model.forward")["fields"] == {"x": 4}  # self and the object left out
    assert t.one("Model.load")["fields"] == {"path": "ckpt"}
    assert t.one(qual + "Model.helper")["fields"] == {"k": 7}


def test_async_instrumented_coroutine_spans_its_awaits(rec):
    @waffle.instrument
    async def fetch(shard: int):
        await asyncio.sleep(0.001)
        with waffle.span("parse"):
            await asyncio.sleep(0)
        return shard

    assert asyncio.run(fetch(5)) == 5
    t = rec.stop()
    f = t.one(fetch.__qualname__)
    assert f["fields"] == {"shard": 5}
    assert t.parent_name(t.one("parse")) == fetch.__qualname__
    assert f["end_ns"] - f["start_ns"] >= 1_000_000


def test_span_as_decorator(rec):
    @waffle.span("decorated", kind="sync")
    def work(x):
        return x * 2

    @waffle.span("decorated_async")
    async def awork():
        return 1

    assert work(2) == 4 and work(3) == 6
    assert asyncio.run(awork()) == 1
    t = rec.stop()
    assert [s["fields"] for s in t.named("decorated")] == [{"kind": "sync"}] * 2
    assert len(t.named("decorated_async")) == 1


def test_events_and_links(rec):
    bad = waffle.event("Input buffer contains NaN", rank=1, suggestion="check the loader")
    assert isinstance(bad, waffle.EventId) and bad
    with waffle.span("prepare") as prep:
        pass
    with waffle.span("allreduce", caused_by=bad, count=4) as ar:
        waffle.event("symptom", caused_by=[prep.id, ar, waffle.extract_context()])
    with waffle.span("later", caused_by=[prep, None, waffle.SpanId(0)]):
        pass
    t = rec.stop()
    e = t.one("Input buffer contains NaN")
    assert e["id"] == int(bad) and e["fields"] == {"rank": 1, "suggestion": "check the loader"}
    allreduce = t.one("allreduce")
    assert allreduce["links"] == [int(bad)]
    symptom = t.one("symptom")
    assert symptom["parent"] == allreduce["id"]
    assert symptom["links"] == [int(prep.id), allreduce["id"], allreduce["id"]]
    assert t.one("later")["links"] == [int(prep.id)]  # null ids are left out


def test_exception_ends_span_records_it_and_propagates(rec):
    @waffle.instrument
    def fails(n):
        raise ValueError(f"bad {n}")

    with pytest.raises(ValueError, match="bad 3"):
        with waffle.span("outer"):
            fails(3)
    with waffle.span("after"):
        pass
    t = rec.stop()
    f = t.one(fails.__qualname__)
    assert t.parent_name(f) == "outer" and t.one("after")["parent"] is None
    exc = [e for e in t.events if e["name"] == "exception"]
    assert [t.parent_name(e) for e in exc] == [fails.__qualname__, "outer"]
    assert exc[0]["fields"] == {"exception.type": "ValueError", "exception.message": "bad 3"}


def test_bad_field_is_a_type_error_naming_it(rec):
    with pytest.raises(TypeError, match="`weights`"):
        waffle.span("s", n=1, weights=object())
    with pytest.raises(TypeError, match="`missing`"):
        waffle.event("e", missing=None)
    with pytest.raises(TypeError, match="caused_by"):
        waffle.span("s", caused_by="not an id")
    with pytest.raises(TypeError, match="caused_by"):
        waffle.event("e", caused_by=[1.5])
    s = waffle.span("twice")
    with s:
        pass
    with pytest.raises(RuntimeError, match="already entered"):
        with s:
            pass
    with waffle.span("still works"):
        pass
    t = rec.stop()
    assert [x["name"] for x in t.spans] == ["twice", "still works"]


def test_span_left_open_ends_when_collected(rec):
    s = waffle.span("abandoned")
    s.__enter__()
    del s
    gc.collect()
    with waffle.span("next"):
        pass
    t = rec.stop()
    assert t.one("abandoned")["ended"] and t.one("next")["parent"] is None


def test_names_are_interned_once_per_name_and_keys(rec):
    before = _native._cache_sizes()
    for i in range(1000):
        with waffle.span("hot", i=i, x=0.5):
            waffle.event("tick", i=i)
    mid = _native._cache_sizes()
    with waffle.span("hot", x=1.0, i=1):  # other keys (order) are another callsite
        pass
    after = _native._cache_sizes()
    assert (mid[0] - before[0], mid[1] - before[1]) == (1, 1)
    assert after[0] - mid[0] == 1
    t = rec.stop()
    assert len(t.named("hot")) == 1001 and len(t.named("tick")) == 1000


def test_recording_off_costs_nothing_and_records_nothing(tmp_path):
    waffle.shutdown()
    assert not waffle.is_recording()
    with waffle.span("off", n=1) as s:
        assert not s.id and s.id.is_null
    assert not waffle.event("off")

    @waffle.instrument
    def f(x):
        return x

    assert f(1) == 1


def test_set_enabled_pauses_and_resumes_recording(rec):
    assert waffle.is_enabled()
    with waffle.span("before"):
        pass
    waffle.set_enabled(False)
    assert not waffle.is_enabled() and waffle.is_recording()
    with waffle.span("paused", n=1) as s:
        assert not s.id
        assert not waffle.event("paused event", n=2)
    # Made while paused, entered after resuming: recorded, with its fields.
    later = waffle.span("made paused", n=3)
    # Not converted while paused: a bad field is reported when the span is entered.
    bad = waffle.span("bad while paused", weights=object())
    waffle.set_enabled(True)
    assert waffle.is_enabled()
    with later as s:
        assert s.id
    with pytest.raises(TypeError, match="`weights`"):
        with bad:
            pass
    with waffle.span("after"):
        waffle.event("after event")
    t = rec.stop()
    assert not t.named("paused") and not t.named("paused event") and not t.named("bad while paused")
    assert t.one("made paused")["fields"] == {"n": 3}
    assert len(t.named("before")) == len(t.named("after")) == len(t.named("after event")) == 1


def test_ids_and_contexts_are_values():
    a, b = waffle.SpanId(0xAB), waffle.SpanId(0xAB)
    assert a == b and hash(a) == hash(b) and str(a) == "00000000000000ab" and int(a) == 0xAB
    assert repr(waffle.EventId(1)) == "EventId(0000000000000001)" and not waffle.EventId(0)
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    c = waffle.Context.from_traceparent(tp)
    assert c.traceparent == tp and c.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert c.span_id == waffle.SpanId(0x00F067AA0BA902B7)
    assert waffle.Context.from_bytes(c.to_bytes()) == c
    assert waffle.Context(c.trace_id, c.span_id) == c
    with pytest.raises(ValueError, match="traceparent"):
        waffle.Context.from_traceparent("00-nonsense")
