"""Running waffle's binaries from the consumer tests: where cargo put them (`WAFFLE_BIN_DIR`,
else `target/debug` of this checkout) and one way to run a command that must succeed."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))


def run(*args):
    """Runs `args` to completion and returns the `CompletedProcess`; the test fails, showing the
    output, when the command exits non-zero or panicked."""
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    assert "panicked" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def binary(*parts):
    """A binary under `BIN_DIR` (`binary("examples", "heat")`); the test fails if it was not built."""
    path = BIN_DIR.joinpath(*parts)
    if not path.is_file():
        pytest.fail(f"{path} not found: build with `cargo build -p waffle-std -p waffle-decode --examples --bins` "
                    "or set WAFFLE_BIN_DIR")
    return path
