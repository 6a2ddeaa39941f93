"""Real MPI programs that no one here wrote, run as their users run them: `mpirun -np N PROGRAM`
with nothing of waffle in their code, traced (`libwaffle_mpi.so` preloaded, one `WAFFLE_OUTPUT`
file per rank) and counted (`mpi_counter.c`, a PMPI counter: preloaded in the library's place
in a second run, or chained in front of it in the traced run for a program whose calls depend
on timing). Any check that needs a real program's trace files gets them here:

    from real_programs import PROGRAMS, run_traced, run_lammps
    files = run_lammps(workdir, 4)              # [workdir/rank0.bin, ..., rank3.bin]
    files = run_traced(PROGRAMS["netpipe"], workdir)

or, in a test, through the session fixture `real_runs` (conftest.py), which runs each program
at most once per session: `real_runs.traced("lammps-2")` and `real_runs.counted("lammps-2")`
for every name in `PROGRAMS` (`lammps-2`, `lammps-4`, `netpipe`, `hpcc`, `mpi4py`). A program is a
`Program`: its argv after `mpirun -np N` (a path, or a name on the PATH), where that comes
from, the input files written into its directory first (a script, an input deck), whether it
polls, a time limit. Adding one to `PROGRAMS` puts it through every test of
`test_real_programs.py`.

The programs come from Debian: `lammps` (`lmp`), `netpipe-openmpi` (`NPopenmpi`) and `hpcc`,
run with Debian's Open MPI; and from PyPI: `mpi4py` built against that Open MPI
(`requirements-mpi.txt`), running a script in this interpreter. Without one (or without `mpicc`/`mpirun`) a test is skipped, and
fails instead when `WAFFLE_REQUIRE_MPI` is set or `CI=true` (scripts/test.sh installs them).

Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`) holds `libwaffle_mpi.so`
(`cargo build -p waffle-mpi`) and `waffle-decode`.

Over 400 lines because it is the one place that knows how each real program is installed, run,
traced and counted (inputs, mpirun, the PMPI counter built from the library's own wrappers);
every consumer test takes its runs from here.
"""

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from waffle_bins import BIN_DIR

HERE = Path(__file__).resolve().parent

# `mpirun` flags that work in a container as root and on a machine with fewer cores than ranks
# (the Rust MPI tests use the same, ffi/tests/common/mpi.rs): no binding, shared memory only.
# A rank waiting for a message yields its core (`mpi_yield_when_idle`, Open MPI's advice for an
# oversubscribed node): spinning, two ranks on two busy cores took from 1 s to 20 s to run
# LAMMPS, and 1 s yielding. It changes how MPI waits, not which calls a program makes.
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
                "--mca", "plm_rsh_agent", "", "--mca", "mpi_yield_when_idle", "1"]

# Variables that would change what a rank records or under which trace, or leak a launcher of
# ours into the program's (waffle_std::launcher::variables(), by prefix).
CLEARED_PREFIXES = ("WAFFLE_", "OMPI_", "PMIX_", "PMI_", "SLURM_")

# A Lennard-Jones liquid (LAMMPS's `melt` benchmark, smaller): 2,048 atoms on an fcc lattice,
# 200 steps of NVE, then its state written to a restart file, read back and run 50 more steps.
# Ranks own cuboids of space cut by recursive coordinate bisection (`comm_style tiled`,
# `balance ... rcb`, again every 50 steps by `fix balance`): communicators split recursively,
# reductions with LAMMPS's own MPI_Op, and atoms handed between ranks by irregular
# communication (message counts agreed by MPI_Reduce_scatter, receives from MPI_ANY_SOURCE
# completed by MPI_Waitany, sends by MPI_Isend whose requests are freed). A radial
# distribution function every 100 steps (its reductions), thermo output every 50; `write_data`
# and `write_restart` gather every atom to rank 0 (rank 0 posts an MPI_Irecv and sends an empty
# MPI_Send; the other ranks wait for it with MPI_Recv, then answer with MPI_Rsend).
# Every MPI call it makes follows from the input and the rank count alone: bisection cuts by
# atom counts, and neighbour lists are rebuilt every 20 steps without a displacement check
# (`check no`), so no rebuild depends on how far atoms moved.
LAMMPS_INPUT = """\
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 8 0 8 0 8
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 3.0 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
comm_style      tiled
balance         1.0 rcb
fix             2 all balance 50 1.0 rcb
compute         rdf all rdf 50
fix             3 all ave/time 100 1 100 c_rdf[*] file melt.rdf mode vector
thermo          50
run             200
write_data      melt.data
write_restart   melt.restart
clear
read_restart    melt.restart
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
run             50
"""


# HPC Challenge at two ranks on its smallest useful input: HPL on a 200 x 200 system in 40 x 40
# blocks over a 1 x 2 grid; the other tests (PTRANS, RandomAccess, FFT, STREAM, DGEMM, the
# latency and bandwidth rings) size themselves from it. It polls: HPL's panel broadcast probes
# with MPI_Iprobe, RandomAccess tests its requests with MPI_Test/MPI_Testany and cancels the
# receives left at the end, and the latency and bandwidth tests repeat their loops until enough
# time has passed, so most of its counts change from run to run.
HPCC_INPUT = """\
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
200          Ns
1            # of NBs
40           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
1            Ps
2            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
"""


@dataclass(frozen=True)
class Program:
    """A real program and how it is run: `mpirun -np ranks argv...` in a directory holding
    `inputs` (file name → text), within `limit_s` seconds. A program that `polls` calls MPI a
    number of times that depends on timing: it is counted in the traced run itself, by the
    counter chained in front of libwaffle_mpi.so, rather than in a second run."""

    name: str
    ranks: int
    argv: tuple
    install: str  # where argv[0] comes from, for the message when it is missing
    inputs: dict = field(default_factory=dict, hash=False)
    polls: bool = False
    limit_s: float = 60.0
    module: str = ""  # a Python module argv[0] must be able to import ("" for none)


def lammps(ranks):
    """LAMMPS on `LAMMPS_INPUT` at `ranks` ranks (its own domain decomposition)."""
    return Program(f"lammps-{ranks}", ranks, ("lmp", "-in", "in.melt", "-log", "none", "-screen", "none"),
                   "the Debian package `lammps`", {"in.melt": LAMMPS_INPUT})


# NetPIPE's ping-pong between two ranks: block sizes 1 B to 4 KiB with perturbations (57
# sizes), a fixed 20 round trips per size (`-n`; without it, NetPIPE picks the repeat count from
# timings), each receive pre-posted with MPI_Irecv and completed by MPI_Wait (`-a`), barriers
# between trials, and its control messages (MPI_Send, MPI_Recv).
NETPIPE = Program("netpipe", 2, ("NPopenmpi", "-u", "4096", "-n", "20", "-a", "-o", "np.out"),
                  "the Debian package `netpipe-openmpi`")

HPCC = Program("hpcc", 2, ("hpcc",), "the Debian package `hpcc`", {"hpccinf.txt": HPCC_INPUT}, polls=True)

# An mpi4py program as its users write one, at three ranks in a ring: a halo exchange of
# buffers (Sendrecv), the same with nonblocking calls completed together (Isend, Irecv,
# Waitall), a reduction of buffers (Allreduce) and of Python objects (allreduce, which mpi4py
# runs over a duplicated communicator with point-to-point calls), an object broadcast (bcast),
# a barrier, and a gather to rank 0. Nothing of it depends on timing.
MPI4PY_SCRIPT = """\
from array import array
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
halo, ghost = array("d", [float(rank)] * 256), array("d", [0.0] * 256)
for step in range(10):
    comm.Sendrecv(halo, dest=right, sendtag=step, recvbuf=ghost, source=left, recvtag=step)
    requests = [comm.Irecv(ghost, source=left, tag=100 + step), comm.Isend(halo, dest=right, tag=100 + step)]
    MPI.Request.Waitall(requests)
    local, total = array("d", [ghost[0] + step]), array("d", [0.0])
    comm.Allreduce(local, total, op=MPI.SUM)
    assert comm.allreduce(rank) == size * (size - 1) // 2
    config = comm.bcast({"step": step} if rank == 0 else None, root=0)
    assert config == {"step": step}
comm.Barrier()
ranks = comm.gather(rank, root=0)
assert rank != 0 or ranks == list(range(size))
"""

MPI4PY = Program("mpi4py", 3, (sys.executable, "halo.py"), "mpi4py from PyPI built against Open MPI "
                 "(pip install --no-binary mpi4py -r tests/consumers/requirements-mpi.txt)",
                 {"halo.py": MPI4PY_SCRIPT}, module="mpi4py")

PROGRAMS = {p.name: p for p in (lammps(2), lammps(4), NETPIPE, HPCC, MPI4PY)}


def mpi_required():
    """Whether a missing MPI program fails the tests rather than skipping them."""
    return bool(os.environ.get("WAFFLE_REQUIRE_MPI")) or os.environ.get("CI") == "true"


def tool(name, install):
    """The path of `name` on the PATH (or `name` itself, a path to a program); skips the test
    without it, fails when MPI is required. `install` says where it comes from."""
    path = shutil.which(name)
    if path is None:
        why = f"{name} not found: install {install} (scripts/test.sh does)"
        if mpi_required():
            pytest.fail(why)
        pytest.skip(why)
    return path


def waffle_mpi():
    """`libwaffle_mpi.so` in `WAFFLE_BIN_DIR`; the test fails if it was not built."""
    path = BIN_DIR / "libwaffle_mpi.so"
    if not path.is_file():
        pytest.fail(f"{path} not found: build it with `cargo build -p waffle-mpi` (needs mpicc) or set WAFFLE_BIN_DIR")
    return path


def clean_env():
    """This process's environment less anything of waffle's or a launcher's (and any
    LD_PRELOAD), allowed to run MPI as root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED_PREFIXES) and k != "LD_PRELOAD"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def mpirun(program, workdir, preload, **env):
    """Runs `program` in `workdir` (made, with its inputs) with `preload` in each rank's
    LD_PRELOAD and `env` exported to the ranks; returns the seconds it took. The test fails if
    it exits non-zero or runs past its limit."""
    exe = tool(program.argv[0], program.install)
    if program.module and importlib.util.find_spec(program.module) is None:
        why = f"{program.module} cannot be imported: install {program.install}"
        if mpi_required():
            pytest.fail(why)
        pytest.skip(why)
    run = tool("mpirun", "the Debian package `openmpi-bin`")
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in program.inputs.items():
        (workdir / name).write_text(text)
    # Given as `-x NAME=VALUE`, the variables reach the ranks only: preloaded into `mpirun`
    # itself, the library would record it too.
    exports = []
    for key, value in [*env.items(), ("LD_PRELOAD", str(preload))]:
        exports += ["-x", f"{key}={value}"]
    args = [run, "-np", str(program.ranks), *MPIRUN_FLAGS, *exports, exe, *program.argv[1:]]
    start = time.monotonic()
    # In a session of its own, so that a run past its limit is stopped with all its ranks.
    proc = subprocess.Popen(args, cwd=workdir, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=program.limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{program.name} ran past {program.limit_s} s:\n{stdout[-4000:]}\n{stderr[-4000:]}")
    took = time.monotonic() - start
    assert proc.returncode == 0, f"{program.name} exited {proc.returncode}:\n{stdout[-4000:]}\n{stderr[-4000:]}"
    assert "waffle:" not in stderr, stderr
    return took


def rank_files(workdir, suffix, ranks):
    """`workdir/rank{0..ranks-1}{suffix}`, asserting they are the only such files there."""
    found = sorted(p.name for p in workdir.glob(f"rank*{suffix}"))
    want = [f"rank{r}{suffix}" for r in range(ranks)]
    assert sorted(found) == sorted(want), f"{workdir}: {found}, expected one file per rank"
    return [workdir / name for name in want]


def run_traced(program, workdir):
    """`program` run with `libwaffle_mpi.so` preloaded and `WAFFLE_OUTPUT=workdir/rank%r.bin`;
    its trace files in rank order. A program that polls runs with the chained counter in front
    of the library, whose counts `read_counts(workdir, ranks)` reads."""
    workdir = Path(workdir)
    preload, env = str(waffle_mpi()), {"WAFFLE_OUTPUT": str(workdir / "rank%r.bin")}
    if program.polls:
        preload = f"{counter_library(workdir / 'counter', chained=True)}:{preload}"
        env["WAFFLE_MPI_COUNTS"] = str(workdir / "rank%r.counts")
    took = mpirun(program, workdir, preload, **env)
    print(f"{program.name}: traced run {took:.1f} s")
    return rank_files(workdir, ".bin", program.ranks)


def run_counted(program, workdir):
    """`program` run with the plain PMPI counter preloaded instead of libwaffle_mpi.so; per
    rank, a `Counter` of how many times it called each MPI function the library wraps."""
    workdir = Path(workdir)
    library = counter_library(workdir / "counter")
    took = mpirun(program, workdir, library, WAFFLE_MPI_COUNTS=str(workdir / "rank%r.counts"))
    print(f"{program.name}: counted run {took:.1f} s")
    return read_counts(workdir, program.ranks)


def read_counts(workdir, ranks):
    """The counter's files in `workdir`, one `Counter` per rank."""
    counts = []
    for path in rank_files(Path(workdir), ".counts", ranks):
        lines = [line.split() for line in path.read_text().splitlines()]
        counts.append(Counter({name: int(n) for name, n in lines}))
    return counts


def run_lammps(workdir, ranks):
    """LAMMPS's trace files at `ranks` ranks (2 or 4 are in PROGRAMS; any count runs)."""
    return run_traced(lammps(ranks), workdir)


def run_netpipe(workdir):
    """NetPIPE's two trace files."""
    return run_traced(NETPIPE, workdir)


# ---- the counter ---------------------------------------------------------------------------

def wrapped_functions(library):
    """The MPI functions `library` defines and exports (`nm -D`): what libwaffle_mpi.so wraps."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    names = sorted({line.split()[-1] for line in out.stdout.splitlines()
                    if line.split() and re.fullmatch(r"MPI_\w+", line.split()[-1])})
    assert "MPI_Send" in names and "MPI_Finalize" in names, f"{library} exports no MPI wrappers: {names}"
    return names


def prototypes(mpicc, workdir):
    """Every `PMPI_X` that mpi.h declares, as X → its parameter list (text inside the
    parentheses), read from the preprocessed header."""
    source = workdir / "mpi_h.c"
    source.write_text("#include <mpi.h>\n")
    out = subprocess.run([mpicc, "-E", "-P", str(source)], capture_output=True, text=True, check=True).stdout
    found = {}
    for m in re.finditer(r"\bint\s+PMPI_(\w+)\s*\(", out):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(out[i], 0)
            i += 1
        found["MPI_" + m.group(1)] = " ".join(out[m.end():i - 1].split())
    return found


def split_parameters(params):
    """A parameter list's parameters, split at the commas outside parentheses and brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(params):
        depth += 1 if c in "([" else -1 if c in ")]" else 0
        if c == "," and depth == 0:
            parts.append(params[start:i].strip())
            start = i + 1
    parts.append(params[start:].strip())
    return parts


def argument_names(name, params):
    """The names of a prototype's parameters, to pass them on: the last identifier of each,
    before any `[]`. mpi.h names every parameter (Open MPI's and MPICH's do)."""
    if params.strip() in ("", "void"):
        return []
    names = []
    for p in split_parameters(params):
        ids = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]", "", p))
        assert len(ids) >= 2, f"mpi.h's {name} has a parameter without a name: {p!r}"
        names.append(ids[-1])
    return names


def counter_library(workdir, chained=False):
    """`mpi_counter.c` built with `mpicc` (warnings are errors) for exactly the functions the
    `libwaffle_mpi.so` under test exports: `workdir/libmpi_counter.so`, which calls PMPI, or
    with `chained`, `workdir/libmpi_counter_next.so`, which calls the next library's functions."""
    workdir = Path(workdir)
    library = workdir / ("libmpi_counter_next.so" if chained else "libmpi_counter.so")
    if library.is_file():
        return library
    workdir.mkdir(parents=True, exist_ok=True)
    mpicc = tool("mpicc", "the Debian package `libopenmpi-dev`")
    calls = workdir / "mpi_counter_calls.h"
    if not calls.is_file():
        protos = prototypes(mpicc, workdir)
        lines = []
        for name in wrapped_functions(waffle_mpi()):
            assert name in protos, f"libwaffle_mpi.so exports {name}, which mpi.h does not declare as PMPI_{name[4:]}"
            params = protos[name]
            macro = "MPI_COUNTED_LAST" if name == "MPI_Finalize" else "MPI_COUNTED"
            lines.append(f"{macro}({name}, ({params}), ({', '.join(argument_names(name, params))}))")
        calls.write_text("\n".join(lines) + "\n")
    flags = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared"]
    if chained:
        flags.append("-DMPI_COUNTER_NEXT")
    proc = subprocess.run([mpicc, *flags, "-I", str(workdir), str(HERE / "mpi_counter.c"), "-o", str(library), "-ldl"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"mpicc mpi_counter.c:\n{proc.stderr[-6000:]}"
    return library


class Runs:
    """Each program's traced and counted runs, each made at most once, under `root`."""

    def __init__(self, root):
        self.root = Path(root)
        self._traced, self._counted = {}, {}

    def traced(self, name):
        """The trace files of `PROGRAMS[name]`, in rank order."""
        if name not in self._traced:
            self._traced[name] = run_traced(PROGRAMS[name], self.root / name / "traced")
        return self._traced[name]

    def counted(self, name):
        """Per rank, the counter's counts for `PROGRAMS[name]`: of a second run, or of the traced
        run itself for a program that polls."""
        if name not in self._counted:
            program = PROGRAMS[name]
            if program.polls:
                self._counted[name] = read_counts(self.traced(name)[0].parent, program.ranks)
            else:
                self._counted[name] = run_counted(program, self.root / name / "counted")
        return self._counted[name]


__all__ = ["PROGRAMS", "Program", "Runs", "counter_library", "lammps", "read_counts", "run_counted",
           "run_lammps", "run_netpipe", "run_traced"]
