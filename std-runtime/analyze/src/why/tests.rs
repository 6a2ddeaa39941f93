//! Unit tests of `why` on hand-built traces: the allreduce story, cycles, unknown ids, causes
//! hidden in ancestors, selection and its errors, and both renderings.

use super::*;
use crate::model::{Callsite, Event, Process, Span, Thread};
use std::sync::Arc;
use waffle_wire::{FieldDesc, FieldType, Header, Kind};

pub(super) fn callsite(name: &str, kind: Kind, fields: &[&str], correlate: &str) -> Arc<Callsite> {
    let fields = fields.iter().map(|n| FieldDesc::new(*n, FieldType::Dynamic)).collect();
    let (module, file, correlate) = ("m".into(), "m.rs".into(), correlate.to_owned().into());
    Arc::new(Callsite { name: name.to_owned().into(), module, file, line: 1, kind, fields, correlate })
}

/// A span or event to put in a thread: id, parent, links, correlation, fields, time (µs).
pub(super) struct It {
    cs: Arc<Callsite>,
    id: u64,
    parent: Option<u64>,
    pub(super) links: Vec<u64>,
    corr: Option<u64>,
    fields: Vec<Value>,
    us: u64,
}

pub(super) fn it(cs: &Arc<Callsite>, id: u64, parent: Option<u64>, us: u64) -> It {
    It { cs: cs.clone(), id, parent, links: vec![], corr: None, fields: vec![], us }
}

impl It {
    fn links(mut self, l: &[u64]) -> It {
        self.links = l.to_vec();
        self
    }
    fn corr(mut self, v: u64) -> It {
        self.corr = Some(v);
        self
    }
    pub(super) fn fields(mut self, f: Vec<Value>) -> It {
        self.fields = f;
        self
    }
}

pub(super) fn process(rank: &str, pid: u32, items: Vec<It>) -> Process {
    let mut th = Thread {
        stream: 0,
        tid: u64::from(pid),
        name: "main".into(),
        spans: vec![],
        events: vec![],
        dropped: 0,
    };
    for i in items {
        let ts = 1_000_000 + i.us * 1000;
        if i.cs.kind == Kind::Span {
            th.spans.push(Span {
                id: i.id,
                parent: i.parent,
                links: i.links,
                correlation: i.corr,
                detached: false,
                depth: u32::from(i.parent.is_some()),
                callsite: i.cs,
                fields: i.fields,
                start_ns: ts,
                end_ns: ts + 500,
                ended: true,
            });
        } else {
            th.events.push(Event {
                id: i.id,
                parent: i.parent,
                links: i.links,
                correlation: i.corr,
                callsite: i.cs,
                fields: i.fields,
                ts_ns: ts,
            });
        }
    }
    Process {
        source: format!("rank{rank}.bin"),
        header: Header {
            pid,
            name: "sim".into(),
            host: "node".into(),
            labels: vec![("rank".into(), rank.into())],
            trace_id: 7,
            ..Header::default()
        },
        threads: vec![th],
        dropped: 0,
        complete: true,
        last_ns: 0,
        tracks: Vec::new(),
    }
}

/// Two ranks, two allreduce rounds; rank 1's second input has a NaN that rank 0 sees in its
/// output.
pub(super) fn allreduce() -> Trace {
    let step = callsite("train_step", Kind::Span, &["round"], "");
    let ar = callsite("allreduce", Kind::Span, &["rank"], "allreduce");
    let nan_in = callsite("Input buffer contains NaN", Kind::Event, &["rank", "suggestion"], "");
    let nan_out = callsite("Output buffer is NaN after AllReduce", Kind::Event, &["rank"], "");
    let r0 = process(
        "0",
        100,
        vec![
            it(&step, 0x101, None, 0).fields(vec![Value::U64(1)]),
            it(&ar, 0x102, Some(0x101), 1).corr(1).fields(vec![Value::U64(0)]),
            it(&step, 0x103, None, 10).fields(vec![Value::U64(2)]),
            it(&ar, 0x104, Some(0x103), 11).corr(2).fields(vec![Value::U64(0)]),
            it(&nan_out, 0x105, Some(0x104), 12).fields(vec![Value::U64(0)]),
        ],
    );
    let suggestion = Value::Str("Check data loading pipeline for this rank.".into());
    let r1 = process(
        "1",
        200,
        vec![
            it(&step, 0x201, None, 0).fields(vec![Value::U64(1)]),
            it(&ar, 0x202, Some(0x201), 1).corr(1).fields(vec![Value::U64(1)]),
            it(&step, 0x203, None, 9).fields(vec![Value::U64(2)]),
            it(&nan_in, 0x204, Some(0x203), 9).fields(vec![Value::U64(1), suggestion]),
            it(&ar, 0x205, Some(0x203), 10).corr(2).links(&[0x204]).fields(vec![Value::U64(1)]),
        ],
    );
    Trace { processes: vec![r0, r1] }
}

pub(super) fn names(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|s| {
            let what = s.item().map_or(format!("{:x}", s.id()), |i| {
                format!("{}@{}", i.name, i.rank.as_deref().unwrap_or(""))
            });
            let again = if matches!(s.reached, Reached::Again(_)) { " (again)" } else { "" };
            format!("{}{} {what}{again}", "  ".repeat(s.depth - 1), s.relation)
        })
        .collect()
}

#[test]
fn the_nan_comes_from_the_other_rank() {
    let trace = allreduce();
    let e = why(&trace, &Selector::name("Output buffer is NaN after AllReduce", 0)).unwrap();
    assert_eq!(e.symptom.id, 0x105);
    assert_eq!(
        names(&e.steps),
        [
            "inside allreduce@0",
            "  correlated with allreduce@1",
            "    caused by Input buffer contains NaN@1",
            "    inside train_step@1",
            "  inside train_step@0",
        ]
    );
    assert_eq!(e.root_causes.len(), 1);
    assert_eq!(e.root_causes[0].id, 0x204);
    assert_eq!(e.root_causes[0].rank.as_deref(), Some("1"));
    assert_eq!(e.links_followed, 1);
    assert!(e.unknown_ids.is_empty());

    let text = e.to_text();
    let expected = r#"Symptom
  event "Output buffer is NaN after AllReduce" 0000000000000105
      rank 0 (rank0.bin, pid 100), thread main (tid 100), at +12.000 µs
      rank=0

Causal chain (from the symptom back)
  ← inside span "allreduce" 0000000000000104
        rank 0 (rank0.bin, pid 100), thread main (tid 100), at +11.000 µs
        rank=0 [correlated: allreduce=2]
    ← correlated with span "allreduce" 0000000000000205
          rank 1 (rank1.bin, pid 200), thread main (tid 200), at +10.000 µs
          rank=1 [correlated: allreduce=2]
      ← caused by event "Input buffer contains NaN" 0000000000000204
            rank 1 (rank1.bin, pid 200), thread main (tid 200), at +9.000 µs
            rank=1 suggestion="Check data loading pipeline for this rank."
      ← inside span "train_step" 0000000000000203
            rank 1 (rank1.bin, pid 200), thread main (tid 200), at +9.000 µs
            round=2
    ← inside span "train_step" 0000000000000103
          rank 0 (rank0.bin, pid 100), thread main (tid 100), at +10.000 µs
          round=2

Root cause
  event "Input buffer contains NaN" 0000000000000204
      rank 1 (rank1.bin, pid 200), thread main (tid 200), at +9.000 µs
      rank=1 suggestion="Check data loading pipeline for this rank."
"#;
    assert_eq!(text, expected, "\n{text}");

    let j = e.to_json();
    assert_eq!(j["version"], 3);
    assert_eq!(j["symptom"]["id"], "0000000000000105");
    assert_eq!(j["root_causes"][0]["name"], "Input buffer contains NaN");
    assert_eq!(j["root_causes"][0]["process"]["rank"], "1");
    assert_eq!(j["root_causes"][0]["process"]["source"], "rank1.bin");
    assert_eq!(j["root_causes"][0]["fields"]["suggestion"], "Check data loading pipeline for this rank.");
    assert_eq!(j["root_causes"][0]["offset_us"], 9.0);
    assert_eq!(j["steps"][1]["relation"], "correlated with");
    assert_eq!(j["steps"][1]["from"], "0000000000000104");
    assert_eq!(j["steps"][1]["item"]["correlation"], serde_json::json!({ "key": "allreduce", "value": 2 }));
    assert_eq!(j["steps"][2]["item"]["parent"], "0000000000000203");
    assert_eq!(j["steps"][1]["item"]["links"], serde_json::json!(["0000000000000204"]));
    assert_eq!(j["conclusion"], "the root cause is event \"Input buffer contains NaN\".");
}

#[test]
fn cycles_end_the_walk_and_have_no_root() {
    let ev = callsite("e", Kind::Event, &[], "");
    let corr = callsite("c", Kind::Span, &[], "k");
    // s -> a -> b -> a (a cycle of causes); c1, c2, c3 correlated with each other.
    let p = process(
        "0",
        1,
        vec![
            it(&corr, 0x10, None, 0).corr(5),
            it(&corr, 0x11, None, 1).corr(5),
            it(&corr, 0x12, None, 2).corr(5),
            it(&ev, 0x1, None, 3).links(&[0x3]),
            it(&ev, 0x2, Some(0x10), 4).links(&[0x1]),
            it(&ev, 0x3, None, 5).links(&[0x2]),
        ],
    );
    let trace = Trace { processes: vec![p] };
    let e = why(&trace, &Selector::id(0x3)).unwrap();
    assert_eq!(
        names(&e.steps),
        [
            "caused by e@0",
            "  caused by e@0",
            "    caused by e@0 (again)",
            "  inside c@0",
            "    correlated with c@0",
            "    correlated with c@0",
        ]
    );
    assert!(e.root_causes.is_empty());
    assert_eq!(e.links_followed, 3);
    assert!(e.to_text().contains("(shown above)"), "{}", e.to_text());
    assert!(e.conclusion().contains("cycle"));
}

#[test]
fn unknown_ids_are_reported_not_followed() {
    let ev = callsite("e", Kind::Event, &[], "");
    let sp = callsite("s", Kind::Span, &[], "");
    let p = process(
        "0",
        1,
        vec![
            it(&sp, 0x10, Some(0xdead), 0),
            it(&ev, 0x1, Some(0x10), 1).links(&[0xbeef, 0x2]),
            it(&ev, 0x2, None, 2).links(&[0xbeef, 0xf00d]),
        ],
    );
    let trace = Trace { processes: vec![p] };
    let e = why(&trace, &Selector::id(0x1)).unwrap();
    assert_eq!(
        names(&e.steps),
        ["caused by beef", "caused by e@0", "  caused by f00d", "inside s@0", "  inside dead"]
    );
    assert_eq!(e.unknown_ids, [0xbeef, 0xf00d, 0xdead]);
    // 0x2's only causes are outside these files: it is the root cause as far as they tell.
    assert_eq!(e.root_causes.iter().map(|r| r.id).collect::<Vec<_>>(), [0x2]);
    let text = e.to_text();
    assert!(text.contains("← caused by unknown id 000000000000beef (not in these files)"), "{text}");
    assert!(text.contains("its recorded causes (000000000000beef, 000000000000f00d) are not in these files"));
    let j = e.to_json();
    assert_eq!(j["steps"][0]["status"], "unknown");
    assert_eq!(j["steps"][0]["item"], serde_json::Value::Null);
    assert_eq!(j["unknown_ids"][2], "000000000000dead");

    // Only unknown causes and parents: no root, said plainly.
    let lone = Trace { processes: vec![process("0", 1, vec![it(&ev, 0x1, Some(0x99), 0).links(&[0x98])])] };
    let e = why(&lone, &Selector::id(0x1)).unwrap();
    assert!(e.root_causes.is_empty());
    assert!(e.conclusion().contains("unknown ids"), "{}", e.conclusion());
}

#[test]
fn a_cause_whose_ancestors_or_peers_have_causes_is_not_a_root() {
    let ev = callsite("e", Kind::Event, &[], "");
    let sp = callsite("s", Kind::Span, &[], "");
    let corr = callsite("c", Kind::Span, &[], "k");
    // symptom -> x (inside p, which is caused by q); symptom -> y (correlated with z, caused by w).
    let p = process(
        "0",
        1,
        vec![
            it(&ev, 0x5, None, 0),
            it(&ev, 0x6, None, 0),
            it(&sp, 0x10, None, 1).links(&[0x5]),
            it(&ev, 0x11, Some(0x10), 2),
            it(&corr, 0x20, None, 3).corr(1),
            it(&corr, 0x21, None, 3).corr(1).links(&[0x6]),
            it(&ev, 0x1, None, 4).links(&[0x11, 0x20]),
        ],
    );
    let trace = Trace { processes: vec![p] };
    let e = why(&trace, &Selector::id(0x1)).unwrap();
    assert_eq!(e.root_causes.iter().map(|r| r.id).collect::<Vec<_>>(), [0x5, 0x6]);
    assert!(e.to_text().contains("\nRoot causes\n"));
}

#[test]
fn without_links_there_is_no_root_cause_but_the_chain_is_shown() {
    let ev = callsite("boom", Kind::Event, &[], "");
    let sp = callsite("s", Kind::Span, &[], "");
    let p = process("0", 1, vec![it(&sp, 0x10, None, 0), it(&ev, 0x1, Some(0x10), 1)]);
    let trace = Trace { processes: vec![p] };
    let e = why(&trace, &Selector::name("boom", 0)).unwrap();
    assert_eq!(names(&e.steps), ["inside s@0"]);
    assert!(e.root_causes.is_empty());
    let text = e.to_text();
    assert!(text.contains("Root cause: none found\n  no causal link (caused_by) can be reached"), "{text}");
    assert_eq!(e.to_json()["root_causes"], serde_json::json!([]));

    let lone = Trace { processes: vec![process("0", 1, vec![it(&ev, 0x1, None, 1)])] };
    let e = why(&lone, &Selector::name("boom", 0)).unwrap();
    assert!(e.steps.is_empty());
    assert!(e.to_text().contains("(nothing: the symptom has no causes, parent or correlated items)"));
}

#[test]
fn selection_by_name_nth_and_id() {
    let trace = allreduce();
    // No event is named "allreduce", so spans are taken; nth counts in time order across files
    // (1 µs on both ranks, then rank 1 at 10 µs, rank 0 at 11 µs).
    let e = why(&trace, &Selector::name("allreduce", 3)).unwrap();
    assert_eq!(e.symptom.id, 0x104);
    let e = why(&trace, &Selector::name("allreduce", 0)).unwrap();
    assert_eq!(e.symptom.id, 0x102, "ties broken by file order");
    assert_eq!(why(&trace, &Selector::id(0x204)).unwrap().symptom.name, "Input buffer contains NaN");

    assert_eq!(
        why(&trace, &Selector::name("allreduce", 4)),
        Err(WhyError::NthOutOfRange { name: "allreduce".into(), nth: 4, count: 4 })
    );
    let err = why(&trace, &Selector::name("Output buffer is NaN after AllReduce", 1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "occurrence 1 of \"Output buffer is NaN after AllReduce\" asked for (counting from 0), but there is only 1"
    );
    let err = why(&trace, &Selector::name("Output bufer is NaN after AllReduce", 0)).unwrap_err();
    let WhyError::NoSuchName { closest, .. } = &err else { panic!("{err:?}") };
    assert_eq!(closest[0], "Output buffer is NaN after AllReduce");
    assert!(closest.len() <= 5);
    let WhyError::NoSuchName { closest, .. } =
        why(&trace, &Selector::name("output buffer NaN", 0)).unwrap_err()
    else {
        panic!()
    };
    assert_eq!(closest[..2], ["Output buffer is NaN after AllReduce", "Input buffer contains NaN"]);
    assert!(err.to_string().starts_with(
        "no event named \"Output bufer is NaN after AllReduce\" in these files; closest names present: \"Output buffer"
    ));
    assert_eq!(why(&trace, &Selector::id(0x999)), Err(WhyError::NoSuchId { id: 0x999 }));
    let empty = Trace::default();
    let err = why(&empty, &Selector::name("x", 0)).unwrap_err();
    assert!(err.to_string().ends_with("these files hold no events or spans"));
}

#[test]
fn ids_parse_as_printed_in_hex_or_decimal() {
    assert_eq!(Selector::parse_id("0000000000000105"), Ok(0x105));
    assert_eq!(Selector::parse_id("0x105"), Ok(0x105));
    assert_eq!(Selector::parse_id("261"), Ok(261));
    assert_eq!(Selector::parse_id("1a"), Ok(0x1a));
    assert!(Selector::parse_id("0").is_err());
    assert!(Selector::parse_id("xyz").is_err());
    assert!(Selector::parse_id("").is_err());
}

#[test]
fn non_finite_fields_stay_valid_json() {
    let ev = callsite("e", Kind::Event, &["x"], "");
    let p = process("0", 1, vec![it(&ev, 0x1, None, 0).fields(vec![Value::F64(f64::NAN)])]);
    let e = why(&Trace { processes: vec![p] }, &Selector::id(1)).unwrap();
    assert_eq!(e.to_json()["symptom"]["fields"]["x"], "NaN");
}
