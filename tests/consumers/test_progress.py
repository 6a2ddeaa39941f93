"""`waffle-decode`'s progress bar: drawn on stderr when stderr is a terminal, over the bytes of
both passes over the files, and cleared when the export is done; never drawn into a pipe or
with `-q`.

The terminal is a pseudo-terminal (`os.openpty`) that stands for stderr, as a shell would give
it; stdout is a pipe. Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`), where
`waffle-decode` and `examples/skeleton` are.
"""

import os
import re
import select
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))
# What indicatif's `{binary_bytes}/{binary_total_bytes}` writes: `152.95 KiB/305.89 KiB`.
BYTES = re.compile(r"(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)/(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
# The bar's own characters (filled and empty cells); the summary lines use none of them.
BAR_CELLS = ("\u2588", "\u2591")


def binary(*parts):
    path = BIN_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not built (cargo build -p waffle-std -p waffle-decode --examples --bins)")
    return path


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("progress")
    path = tmp / "skeleton.bin"
    subprocess.run([binary("examples", "skeleton"), path], check=True, capture_output=True, timeout=120)
    return path


def on_terminal(args):
    """Runs waffle-decode with stderr on a pseudo-terminal: (exit code, what the terminal got)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [binary("waffle-decode"), *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, f"waffle-decode wrote nothing for 60 s; so far: {got!r}"
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the terminal is closed once the process is gone (EIO)
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    return proc.wait(timeout=60), got.decode("utf-8", "replace")


def amount(number, unit):
    return float(number) * UNITS[unit]


def test_the_bar_counts_both_passes_and_is_cleared(trace, tmp_path):
    code, term = on_terminal([trace, "-o", tmp_path / "out.pftrace"])
    assert code == 0, term
    assert (tmp_path / "out.pftrace").stat().st_size > 0
    draws = BYTES.findall(term)
    assert draws, f"no progress bar drawn: {term!r}"
    size = trace.stat().st_size
    # Every draw is out of both reads of the file (indicatif rounds to two decimals), and the
    # bar only moves forward. (Draws are limited to a few a second, so the last one need not
    # show the end.)
    done = [amount(d, u) for d, u, _, _ in draws]
    for d, (_, _, total, total_unit) in zip(done, draws):
        assert amount(total, total_unit) == pytest.approx(2 * size, rel=0.01), draws
        assert d <= amount(total, total_unit) * 1.001, draws
    assert done == sorted(done), draws
    # The lines the exporter prints stand on their own above the bar, which is erased at the
    # end: the terminal's last line is the `wrote` line, with no bar after it.
    lines = [line.rsplit("\x1b[2K", 1)[-1] for line in term.split("\r\n")]
    assert any(line.startswith(f"{trace}: ") for line in lines), lines
    assert lines[-2] == f"wrote {tmp_path / 'out.pftrace'} (perfetto)", lines
    assert lines[-1] == "", lines
    assert "\x1b[2K" in term.split("\r\n")[-2], "the bar is cleared before the last line"


def test_no_bar_with_quiet_or_into_a_pipe(trace, tmp_path):
    code, term = on_terminal([trace, "-q", "-o", tmp_path / "quiet.pftrace"])
    assert (code, term) == (0, "")
    proc = subprocess.run(
        [binary("waffle-decode"), trace, "-o", tmp_path / "piped.pftrace"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert not BYTES.search(proc.stderr) and not any(c in proc.stderr for c in BAR_CELLS), proc.stderr
    assert proc.stderr.splitlines()[-1] == f"wrote {tmp_path / 'piped.pftrace'} (perfetto)", proc.stderr
