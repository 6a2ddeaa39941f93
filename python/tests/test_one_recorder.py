"""One recorder per process: this module, a C extension recording through ``libwaffle.so``, and
``libwaffle_mpi.so`` preloaded under ``mpirun`` each carry a copy of waffle, and whichever
session starts first records for all of them, into one file per process, with parents across
them (a C span inside a Python span is its child, an MPI call made by mpi4py inside a
``with waffle.span`` is that span's child).

Each case runs fresh interpreters, since sessions start when the libraries load. The C
extension (``programs/waffle_cext.c``) is compiled here against ``libwaffle.so``; the MPI cases
need Open MPI and mpi4py (built against it), and are skipped without them unless
``WAFFLE_REQUIRE_MPI`` is set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Optional

import pytest

from conftest import REPO, Decoded
from waffle import _native

# Variables that would change what a child records.
CLEARED = (
    "WAFFLE_OUTPUT", "WAFFLE_EXPORT", "WAFFLE_RANK", "WAFFLE_TRACE_ID", "WAFFLE_TRACEPARENT",
    "WAFFLE_HUB", "LD_PRELOAD", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
    "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_JOB_ID",
)
REQUIRE_MPI = bool(os.environ.get("WAFFLE_REQUIRE_MPI"))


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "debug"


def cargo_lib(package: str, file: str) -> Path:
    """``file`` of ``package``'s library, built now if needed (a no-op when it is current)."""
    res = subprocess.run(
        ["cargo", "build", "--quiet", "-p", package, "--lib"], cwd=REPO, capture_output=True, text=True
    )
    assert res.returncode == 0, f"cargo build -p {package}:\n{res.stderr}"
    lib = target_dir() / file
    assert lib.is_file(), lib
    return lib


@pytest.fixture(scope="module")
def cext(tmp_path_factory) -> Path:
    """The directory holding the built ``waffle_cext`` module."""
    libwaffle = cargo_lib("waffle-ffi", "libwaffle.so")
    out = tmp_path_factory.mktemp("cext")
    module = out / ("waffle_cext" + sysconfig.get_config_var("EXT_SUFFIX"))
    cc = os.environ.get("CC", "cc")
    cmd = [
        cc, "-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
        "-I", sysconfig.get_paths()["include"], "-I", str(REPO / "ffi" / "include"),
        str(Path(__file__).parent / "programs" / "waffle_cext.c"),
        "-L", str(libwaffle.parent), "-lwaffle", f"-Wl,-rpath,{libwaffle.parent}", "-o", str(module),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    return out


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(extra)
    return env


def run_python(code: str, env: dict[str, str], path: Optional[Path] = None) -> subprocess.CompletedProcess:
    if path is not None:
        env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def decode(*paths: Path) -> Decoded:
    d = Decoded(_native.decode([str(p) for p in paths]))
    assert d.warnings == []
    assert all(p["complete"] and p["dropped"] == 0 for p in d.doc["processes"])
    return d


def tree(d: Decoded) -> list[str]:
    """Each span and event as ``depth * '  ' + name``, children after their parent, in record
    order (ids grow in record order on one thread)."""
    items = sorted(d.spans + d.events, key=lambda x: x["id"])
    kids: dict[Optional[int], list[dict]] = {}
    for x in items:
        kids.setdefault(x["parent"], []).append(x)
    lines: list[str] = []

    def walk(parent: Optional[int], depth: int) -> None:
        for x in kids.get(parent, []):
            lines.append("  " * depth + x["name"])
            walk(x["id"], depth + 1)

    walk(None, 0)
    return lines


WORK = """
def callback():
    with waffle.span("py_callback"):
        pass

with waffle.span("py_outer"):
    waffle_cext.work(3)
    waffle_cext.call(callback)
"""

EXPECTED = ["py_outer", "  c_work", "    c_done", "  c_call", "    py_callback"]


@pytest.mark.parametrize("first", ["waffle", "waffle_cext"])
def test_a_c_extension_and_python_record_into_one_file(cext, tmp_path, first):
    """``WAFFLE_OUTPUT`` set: whichever copy loads first starts the session (this module, or
    ``libwaffle.so`` under the extension), the other joins it; one file, one tree."""
    second = "waffle_cext" if first == "waffle" else "waffle"
    code = f"import {first}\nimport {second}\n" + WORK + "print(waffle._native.recording_path())\n"
    out = tmp_path / "t-%p.bin"
    res = run_python(code, child_env(WAFFLE_OUTPUT=str(out)), cext)
    files = list(tmp_path.iterdir())
    assert len(files) == 1, files
    assert res.stdout.strip() == str(files[0]), "Python reports the file the session writes"
    assert "waffle:" not in res.stderr, res.stderr
    assert tree(decode(files[0])) == EXPECTED


def test_an_explicit_start_takes_in_an_extension_loaded_before(cext, tmp_path):
    """No ``WAFFLE_OUTPUT``: the extension's copy was loaded before ``waffle.start`` and joins
    the session when it starts; after ``shutdown`` nothing records anywhere."""
    path = tmp_path / "explicit.bin"
    code = (
        "import waffle_cext, waffle\n"
        f"waffle.start({str(path)!r})\n" + WORK + "waffle.shutdown()\n"
        "waffle_cext.work(9)\n"  # after the session: recorded nowhere
        "print(waffle.is_recording())\n"
    )
    res = run_python(code, child_env(), cext)
    assert res.stdout.strip() == "False"
    assert sorted(tmp_path.iterdir()) == [path]
    assert tree(decode(path)) == EXPECTED


def test_an_explicit_start_replaces_the_extensions_automatic_session(cext, tmp_path):
    """The extension's copy started a session from ``WAFFLE_OUTPUT`` (it loaded first); an
    explicit ``waffle.start`` replaces it, as it replaces this module's own automatic session:
    the first file is removed (it holds no record) and the second holds everything."""
    auto, path = tmp_path / "auto.bin", tmp_path / "explicit.bin"
    code = "import waffle_cext, waffle\n" f"waffle.start({str(path)!r})\n" + WORK
    run_python(code, child_env(WAFFLE_OUTPUT=str(auto)), cext)
    assert sorted(tmp_path.iterdir()) == [path]
    assert tree(decode(path)) == EXPECTED


# --- mpi4py under mpirun with libwaffle_mpi.so preloaded ---------------------------------------

MPI_PROGRAM = """
import sys
if sys.argv[1] == "waffle":
    import waffle
    if sys.argv[2] != "-":
        waffle.start(sys.argv[2] % MPI_RANK)
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
for step in range(3):
    if sys.argv[1] == "waffle":
        with waffle.span("exchange", step=step):
            comm.sendrecv(rank, dest=(rank + 1) % size, source=(rank - 1) % size)
        with waffle.span("reduce", step=step):
            comm.allreduce(rank)
    else:
        comm.sendrecv(rank, dest=(rank + 1) % size, source=(rank - 1) % size)
        comm.allreduce(rank)
"""


@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    """``(mpirun, libwaffle_mpi.so, program)``, or a skip when MPI or mpi4py is missing (a
    failure when ``WAFFLE_REQUIRE_MPI`` is set)."""
    mpirun = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401
    except ImportError as e:
        missing: Optional[str] = f"mpi4py: {e}"
    else:
        missing = None if mpirun else "mpirun is not on PATH"
    if missing:
        if REQUIRE_MPI:
            pytest.fail(f"WAFFLE_REQUIRE_MPI is set but {missing}")
        pytest.skip(missing)
    lib = cargo_lib("waffle-mpi", "libwaffle_mpi.so")
    program = tmp_path_factory.mktemp("mpi4py") / "program.py"
    # The rank from the launcher, for the explicit start's file name.
    program.write_text("import os\nMPI_RANK = int(os.environ['OMPI_COMM_WORLD_RANK'])\n" + MPI_PROGRAM)
    return mpirun, lib, program


def mpirun_python(mpi, out: Path, *args: str, output: Optional[str] = None) -> None:
    mpirun, lib, program = mpi
    env = child_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpirun, "-np", "2", "--oversubscribe", "-x", f"LD_PRELOAD={lib}"]
    if output is not None:
        env["WAFFLE_OUTPUT"] = output
        cmd += ["-x", "WAFFLE_OUTPUT"]
    cmd += [sys.executable, str(program), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "waffle:" not in res.stderr, res.stderr


def mpi_calls(d: Decoded) -> list[str]:
    return sorted(s["name"] for s in d.spans if s["name"].startswith("MPI_"))


def check_nested(d: Decoded, finalized: bool) -> None:
    """Python's six spans are there, and every MPI call between ``MPI_Init_thread`` and the
    communicator's release at ``MPI_Finalize`` ran inside one of them; with ``finalized``,
    ``MPI_Finalize`` (called as the interpreter exits) was recorded too."""
    py = [s for s in d.spans if not s["name"].startswith("MPI_")]
    assert [s["name"] for s in sorted(py, key=lambda s: s["id"])] == ["exchange", "reduce"] * 3
    outside = {"MPI_Init_thread", "MPI_Init", "MPI_Finalize", "MPI_Comm_free"}
    for s in d.spans:
        if s["name"].startswith("MPI_") and s["name"] not in outside:
            top = s
            while d.parent(top) is not None:
                top = d.parent(top)
            assert top["name"] in ("exchange", "reduce"), f"{s['name']} is not inside a Python span"
    for name in ("exchange", "reduce"):
        assert all(d.children(s) for s in d.named(name)), f"a {name} span holds no MPI call"
    if finalized:
        assert any(s["name"] == "MPI_Finalize" for s in d.spans), "MPI_Finalize after Python's exit"


def test_mpi4py_with_import_waffle_records_every_mpi_call_in_one_file_per_rank(mpi, tmp_path):
    """``WAFFLE_OUTPUT`` with ``libwaffle_mpi.so`` preloaded (whose session starts first) and
    ``import waffle``: one file per rank holding Python's spans and every MPI call, the same
    MPI calls as the same run without ``import waffle``."""
    plain, both = tmp_path / "plain", tmp_path / "both"
    plain.mkdir(), both.mkdir()
    mpirun_python(mpi, plain, "plain", "-", output=str(plain / "rank%r.bin"))
    mpirun_python(mpi, both, "waffle", "-", output=str(both / "rank%r.bin"))
    for rank in (0, 1):
        assert sorted(p.name for p in both.iterdir()) == ["rank0.bin", "rank1.bin"]
        without, with_python = decode(plain / f"rank{rank}.bin"), decode(both / f"rank{rank}.bin")
        assert mpi_calls(with_python) == mpi_calls(without), f"rank {rank}"
        assert len(mpi_calls(without)) > 10
        # The library's session outlives Python's exit, which calls MPI_Finalize.
        check_nested(with_python, finalized=True)


def test_mpi4py_with_an_explicit_start_takes_in_the_preloaded_library(mpi, tmp_path):
    """No ``WAFFLE_OUTPUT``: ``waffle.start`` in Python starts the session, and the preloaded
    library, loaded before it, records its MPI calls into that file."""
    mpirun_python(mpi, tmp_path, "waffle", str(tmp_path / "py%d.bin"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["py0.bin", "py1.bin"]
    for rank in (0, 1):
        # Python's own session stops at its exit, before mpi4py finalizes MPI.
        check_nested(decode(tmp_path / f"py{rank}.bin"), finalized=False)
