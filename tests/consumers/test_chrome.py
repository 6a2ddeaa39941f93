"""The Chrome trace-event exporter, checked against the format's rules as viewers apply them.

There is no official Python reader of the format, so the rules (from the Trace Event Format
document and trace_processor's JSON importer, summed up in the project's format notes) are
applied here:
- the file is `{"traceEvents": [...]}` (or a bare list); every event has `ph`, and `ts` in µs;
- `B`/`E` nest per thread; `X` has a `dur` >= 0, and complete events on one thread nest (a
  slice lies inside another or after it, never across its end);
- `i` has a scope `s` of `t`, `p` or `g`;
- flows `s`/`t`/`f` are matched on `(id, cat, name)`: one `s`, then `t`s, one `f`; `s` and `t`
  bind to the enclosing slice on their thread, `f` to the next slice unless `"bp": "e"`, then to
  the enclosing one. A flow that binds to no slice draws nothing, which is an error here;
- `M` events name every process (`process_name`) and every thread (`thread_name`) in use.

Binding, precisely: a flow event at `ts` on `(pid, tid)` binds to the innermost slice there with
`start <= ts < end`, or if there is none, to a zero-length slice at `ts`. Times are compared in
integer nanoseconds (`round(ts * 1000)`).

Checked on the golden file of the Rust tests, the real two-process `nan_allreduce` run and the
`causal_pair` example. Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`).
"""

import json
from dataclasses import dataclass, field

import pytest
from waffle_bins import REPO, BIN_DIR, binary, run

ROUNDS, BAD_ROUND = 4, 2


@dataclass(eq=False)  # compared and hashed by identity
class Slice:
    name: str
    row: tuple
    start: int
    end: int
    args: dict
    depth: int = 0
    parent: object = None
    instants: list = field(default_factory=list)


def ns(ts, where):
    assert isinstance(ts, (int, float)) and not isinstance(ts, bool), f"{where}: ts {ts!r}"
    return round(ts * 1000)


class Chrome:
    """A parsed trace: slices per row, instants, flow arrows, process and thread names."""

    def __init__(self, doc):
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        assert isinstance(events, list) and events, "no trace events"
        if isinstance(doc, dict) and "displayTimeUnit" in doc:
            assert doc["displayTimeUnit"] in ("ms", "ns")
        self.process_names, self.thread_names = {}, {}
        self.slices, self.instants, self.rows_used = [], [], set()
        flows, open_b = {}, {}
        for n, e in enumerate(events):
            where = f"event {n} ({e.get('ph')} {e.get('name')!r})"
            ph = e.get("ph")
            assert isinstance(ph, str), f"{where}: no ph"
            if ph == "M":
                assert isinstance(e["args"], dict), where
                if e["name"] == "process_name":
                    assert e["pid"] not in self.process_names, f"{where}: process named twice"
                    self.process_names[e["pid"]] = e["args"]["name"]
                elif e["name"] == "thread_name":
                    row = (e["pid"], e["tid"])
                    assert row not in self.thread_names, f"{where}: thread named twice"
                    self.thread_names[row] = e["args"]["name"]
                continue
            row = (e["pid"], e["tid"])
            self.rows_used.add(row)
            ts = ns(e["ts"], where)
            if ph == "X":
                assert e.get("name"), f"{where}: no name"
                assert "dur" in e, f"{where}: X without dur"
                dur = ns(e["dur"], where)
                assert dur >= 0, f"{where}: negative dur"
                self.slices.append(Slice(e["name"], row, ts, ts + dur, e.get("args", {})))
            elif ph == "B":
                open_b.setdefault(row, []).append(Slice(e["name"], row, ts, None, e.get("args", {})))
            elif ph == "E":
                assert open_b.get(row), f"{where}: E with no open B on its thread"
                s = open_b[row].pop()
                assert ts >= s.start, f"{where}: {s.name} ends before it begins"
                s.end = ts
                self.slices.append(s)
            elif ph in ("i", "I"):
                assert e.get("s", "t") in ("t", "p", "g"), f"{where}: scope {e.get('s')!r}"
                self.instants.append((e["name"], row, ts, e.get("args", {})))
            elif ph in ("s", "t", "f"):
                key = (e["id"], e["cat"], e["name"])
                flows.setdefault(key, []).append((ph, row, ts, e.get("bp"), where))
            else:
                raise AssertionError(f"{where}: unexpected phase")
        assert not any(open_b.values()), "B events never ended"
        self.nest()
        self.arrows = [self.flow(key, steps) for key, steps in flows.items()]
        for pid, _ in self.rows_used:
            assert pid in self.process_names, f"pid {pid} has no process_name"
        for row in self.rows_used:
            assert row in self.thread_names, f"thread {row} has no thread_name"

    def nest(self):
        """Slices on one row nest: each lies inside the slice open before it, or after it."""
        by_row = {}
        for s in self.slices:
            by_row.setdefault(s.row, []).append(s)
        for row, slices in by_row.items():
            stack = []
            # Outer before inner at one start: the longer first (file order otherwise).
            for s in sorted(slices, key=lambda s: (s.start, -(s.end - s.start))):
                while stack and stack[-1].end <= s.start:
                    stack.pop()
                if stack:
                    assert s.end <= stack[-1].end, f"{row}: {s.name} crosses the end of {stack[-1].name}"
                    s.parent, s.depth = stack[-1], stack[-1].depth + 1
                stack.append(s)
        for name, row, ts, args in self.instants:
            holder = self.binding(row, ts)
            if holder is not None:
                holder.instants.append((name, ts, args))

    def binding(self, row, ts):
        inside = [s for s in self.slices if s.row == row and s.start <= ts < s.end]
        if inside:
            return max(inside, key=lambda s: s.depth)
        zero = [s for s in self.slices if s.row == row and s.start == s.end == ts]
        return zero[-1] if zero else None

    def flow(self, key, steps):
        phases = [ph for ph, *_ in steps]
        assert phases[0] == "s" and phases[-1] == "f" and set(phases[1:-1]) <= {"t"}, f"flow {key}: {phases}"
        bound = []
        for ph, row, ts, bp, where in steps:
            assert ph != "f" or bp == "e", f"{where}: f without bp=e binds to the next slice"
            s = self.binding(row, ts)
            assert s is not None, f"{where}: flow {key} binds to no slice"
            bound.append(s)
        return key[2], bound[0], bound[-1]

    def named(self, name):
        return [s for s in self.slices if s.name == name]

    def process_of(self, s):
        return self.process_names[s.row[0]]


@pytest.fixture(scope="module")
def golden():
    return Chrome(json.loads((REPO / "std-runtime" / "decoder" / "tests" / "golden" / "chrome.json").read_text()))


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chrome-nan")
    run(binary("examples", "nan_allreduce"), tmp)
    out = tmp / "run.chrome.json"
    run(binary("waffle-decode"), tmp / "rank0.bin", tmp / "rank1.bin", "-o", out)
    return Chrome(json.loads(out.read_text()))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chrome-pair")
    run(binary("examples", "causal_pair"), tmp)
    out = tmp / "pair.json"
    run(binary("waffle-decode"), tmp / "a.bin", tmp / "b.bin", "--format", "chrome", "-o", out)
    return Chrome(json.loads(out.read_text()))


def arrows_named(trace, name):
    return [(a, b) for kind, a, b in trace.arrows if kind == name]


def test_golden(golden):
    assert len(golden.process_names) == 2, "two files, two pids, although both recorded pid 100"
    [prefetch] = golden.named("prefetch")
    assert golden.thread_names[prefetch.row] == "prefetch", "a detached span has its own row"
    [step0, step1] = sorted(golden.named("train_step"), key=lambda s: s.start)
    [report] = golden.named("report")
    caused = {(a.name, a.row, b.name) for a, b in arrows_named(golden, "caused_by")}
    assert (step0.name, step0.row, "report") in caused
    assert ("orphan", golden.named("orphan")[0].row, "report") in caused, "a zero-length slice"
    assert ("allreduce", step0.row, "report") in caused, "the symptom's enclosing slice"
    assert ("train_step", step1.row, "allreduce") in caused, "the cause event's enclosing slice"
    assert len(arrows_named(golden, "correlated")) == 1
    # Parents that do not hold the child on its row: the detached prefetch's, and the
    # allreduce whose acknowledgement came after it ended (an instant in train_step's slice).
    assert {(a.name, b.name) for a, b in arrows_named(golden, "parent")} == {
        ("train_step", "prefetch"), ("prefetch", "decode"), ("allreduce", "train_step")}
    [sample] = [i for i in step0.instants if i[0] == "sample"]
    assert sample[2]["big"] == "18446744073709551615" and sample[2]["nan"] == "NaN"


def test_nan_allreduce(nan_run):
    t = nan_run
    assert sorted(t.process_names.values()) == ["nan_allreduce (rank 0)", "nan_allreduce (rank 1)"]
    steps = {}
    for s in t.named("train_step"):
        steps[(t.process_of(s), s.args["round"])] = s
    allreduce = {}
    for s in t.named("allreduce"):
        assert s.parent is not None and s.parent.name == "train_step", "allreduce nests in its step"
        allreduce[(t.process_of(s), s.parent.args["round"])] = s
    ranks = sorted(t.process_names.values())
    assert sorted(allreduce) == sorted((r, n) for r in ranks for n in range(ROUNDS))

    # The cause: an instant in rank 1's bad step; an arrow from that step to its allreduce.
    r0, r1 = ranks
    bad_step, bad = steps[(r1, BAD_ROUND)], allreduce[(r1, BAD_ROUND)]
    [cause] = [i for i in bad_step.instants if i[0] == "Input buffer contains NaN"]
    assert cause[2]["waffle.id"] in bad.args["waffle.caused_by"]
    assert arrows_named(t, "caused_by") == [(bad_step, bad)]
    # The symptom: an instant inside rank 0's allreduce of that round.
    [symptom] = [i for i in allreduce[(r0, BAD_ROUND)].instants]
    assert symptom[0] == "Output buffer is NaN after AllReduce"
    # The correlations: one arrow per round, between the two ranks' allreduces.
    correlated = arrows_named(t, "correlated")
    assert len(correlated) == ROUNDS
    for a, b in correlated:
        assert a.name == b.name == "allreduce" and a.row[0] != b.row[0]
        assert a.args["waffle.correlate"] == b.args["waffle.correlate"]
    assert not arrows_named(t, "parent")


def test_causal_pair(pair):
    t = pair
    assert sorted(t.process_names.values()) == ["causal_pair (rank 0)", "causal_pair (rank 1)"]

    def only(name):
        [s] = t.named(name)
        return s

    step, effect = only("step"), only("effect")
    assert step.row[0] != effect.row[0], "two processes"
    assert [i[0] for i in step.instants] == ["cause"]
    assert set(arrows_named(t, "caused_by")) == {(step, effect)}, "from the slice enclosing the cause"
    assert set(arrows_named(t, "correlated")) == {(step, effect)}
    request, handle, setup, task = only("request"), only("handle"), only("setup"), only("task")
    assert t.thread_names[handle.row] == "worker" and handle.depth == 0
    assert t.thread_names[task.row] == "task" and task.row[0] == setup.row[0]
    assert setup.start <= task.start <= setup.end < task.end, "on main's row it would not nest"
    fetches = t.named("fetch")
    assert len(fetches) == 2 and all(t.thread_names[f.row] == "executor" for f in fetches)
    assert all(f.parent is not None and f.parent.name == "drive" for f in fetches)
    parents = sorted((a.name, b.name) for a, b in arrows_named(t, "parent"))
    assert parents == [("request", "handle"), ("setup", "task"), ("task", "fetch"), ("task", "fetch")]
    assert len(t.arrows) == 6, "link, correlation, handle, task and two fetches; nothing else"
