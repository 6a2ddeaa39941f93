"""The package docstring's example runs as written (doctest), and the stubs cover the module."""

from __future__ import annotations

import ast
import doctest
from pathlib import Path

import waffle
from waffle import _native


def test_module_docstring_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    waffle.shutdown()
    result = doctest.testmod(waffle, verbose=False, raise_on_error=False)
    waffle.set_exporter()
    assert result.attempted >= 5 and result.failed == 0
    assert (tmp_path / "demo.pftrace").stat().st_size > 0


def test_native_stub_names_every_public_native_item():
    stub = Path(waffle.__file__).with_name("_native.pyi")
    tree = ast.parse(stub.read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {t.id for n in tree.body if isinstance(n, (ast.AnnAssign,)) for t in [n.target]}
    public = {n for n in dir(_native) if not n.startswith("__")}
    assert public - declared == set()
