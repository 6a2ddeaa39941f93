"""Fixtures: a recording session per test, decoded back into plain dicts by the native decoder
(`waffle._native.decode`, i.e. `waffle_decode::decode`), with helpers to walk the span tree.

The consumer checks of the exporters' outputs live in `tests/consumers/` at the repository root
(Perfetto's protobuf classes, Jaeger UI rules, OTLP protos); `checkers()` imports them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

import waffle
from waffle import _native

REPO = Path(__file__).resolve().parents[2]
CONSUMER_TESTS = REPO / "tests" / "consumers"


def consumer_module(name: str):
    """A module of the repository's consumer tests (`tests/consumers/<name>.py`), or a skip."""
    if str(CONSUMER_TESTS) not in sys.path:
        sys.path.insert(0, str(CONSUMER_TESTS))
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.skip(f"tests/consumers/{name}.py cannot be imported: {e}")


class Decoded:
    """A decoded trace: every span and event with its thread, and lookups by name and id."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.warnings = doc["warnings"]
        self.spans: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        for p in doc["processes"]:
            for t in p["threads"]:
                for s in t["spans"]:
                    s["thread"] = t["tid"]
                    self.spans.append(s)
                for e in t["events"]:
                    e["thread"] = t["tid"]
                    self.events.append(e)
        self.by_id = {x["id"]: x for x in self.spans + self.events}

    def named(self, name: str) -> list[dict[str, Any]]:
        return [x for x in self.spans + self.events if x["name"] == name]

    def one(self, name: str) -> dict[str, Any]:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} items named {name!r}: {found}"
        return found[0]

    def parent(self, item: dict[str, Any]) -> Optional[dict[str, Any]]:
        return self.by_id.get(item["parent"]) if item["parent"] else None

    def parent_name(self, item: dict[str, Any]) -> Optional[str]:
        p = self.parent(item)
        return p["name"] if p else None

    def children(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        return [x for x in self.spans + self.events if x["parent"] == item["id"]]


class Recording:
    def __init__(self, path: Path) -> None:
        self.path = path

    def stop(self) -> Decoded:
        waffle.shutdown()
        decoded = Decoded(_native.decode([str(self.path)]))
        assert decoded.warnings == [], decoded.warnings
        for s in decoded.spans:
            assert s["ended"], f"span {s['name']} never ended"
        assert all(p["complete"] and p["dropped"] == 0 for p in decoded.doc["processes"])
        return decoded


@pytest.fixture
def rec(tmp_path: Path):
    """Starts recording to `tmp_path/trace.bin`; `rec.stop()` stops and decodes."""
    waffle.shutdown()
    waffle.set_exporter()
    path = tmp_path / "trace.bin"
    waffle.start(path, process_name="pytest")
    yield Recording(path)
    waffle.shutdown()
    waffle.set_exporter()
