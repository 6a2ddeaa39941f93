//! Arbitrary operations recorded through a real session, then decoded: the decoded spans and
//! events must be exactly the ones made — names, field values of every type (typed and
//! dynamic), ids, parents, depths, links and correlation values.
#![no_main]
// `as` casts are how a field's type is spelled for the macros: typed, not dynamic, fields.
#![allow(clippy::unnecessary_cast)]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use waffle::{EventId, SpanId};
use waffle_read::model::Value;

#[derive(Arbitrary, Debug)]
struct Vals {
    u: u64,
    i: i64,
    f: f64,
    b: bool,
    s: String,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A span with no fields, typed fields, or dynamically typed fields; `causes` name earlier
    /// items (counted back from the latest).
    Begin { which: u8, vals: Vals, causes: Vec<u16> },
    /// Ends the innermost open span (nothing if none is open).
    End,
    /// An event with typed or dynamically typed fields.
    Event { dynamic: bool, vals: Vals, causes: Vec<u16> },
    /// Links the latest item to an earlier one (`waffle::link_raw`).
    Link { back: u16 },
    /// Links the latest item to any id, as if from another thread or process.
    LinkAny { id: u64 },
    /// Gives the latest item a correlation value.
    Correlate { value: u64 },
}

/// What the decoder must report for one span or event.
#[derive(Debug)]
struct Want {
    span: bool,
    id: u64,
    name: &'static str,
    fields: Vec<Value>,
    parent: Option<u64>,
    depth: u32,
    links: Vec<u64>,
    correlation: Option<u64>,
    ended: bool,
}

/// A string as the encoder writes it: cut to `MAX_STR_LEN` bytes at a char boundary.
fn cut(s: &str) -> String {
    let mut n = s.len().min(waffle::wire::MAX_STR_LEN);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    s[..n].to_owned()
}

fn all(v: &Vals) -> Vec<Value> {
    vec![Value::U64(v.u), Value::I64(v.i), Value::F64(v.f), Value::Bool(v.b), Value::Str(cut(&v.s))]
}

/// Field values equal, floats by their bits (NaN and -0.0 included).
fn same(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
            _ => x == y,
        })
}

struct Run {
    want: Vec<Want>,
    open: Vec<(waffle::Span, usize)>,
    /// Index in `want` of the latest span or event: what links attach to.
    latest: Option<usize>,
}

impl Run {
    fn target(&self, back: u16) -> Option<u64> {
        let n = self.want.len();
        (n > 0).then(|| self.want[n - 1 - usize::from(back) % n].id)
    }

    /// Expects a link from the latest item to `target`, as the writer keeps it.
    fn expect_link(&mut self, target: u64) {
        // An id whose counter is zero stands for a sampled-out item: a link to it is not kept.
        if EventId::from_u64(target).is_sampled_out() {
            return;
        }
        if let Some(i) = self.latest {
            if target != 0 && target != self.want[i].id {
                self.want[i].links.push(target);
            }
        }
    }

    fn added(&mut self, span: bool, id: u64, name: &'static str, fields: Vec<Value>, causes: &[u64]) {
        assert_ne!(id, 0, "recording is on");
        let parent = self.open.last().map(|(s, _)| s.id().to_u64());
        let depth = self.open.len() as u32;
        self.want.push(Want {
            span,
            id,
            name,
            fields,
            parent,
            depth,
            links: Vec::new(),
            correlation: None,
            ended: false,
        });
        self.latest = Some(self.want.len() - 1);
        for &c in causes {
            self.expect_link(c);
        }
    }

    fn op(&mut self, op: &Op) {
        match op {
            Op::Begin { which, vals: v, causes } => {
                let causes: Vec<SpanId> =
                    causes.iter().take(4).filter_map(|&b| self.target(b)).map(SpanId::from_u64).collect();
                let (span, name, fields) = match which % 3 {
                    0 => (waffle::span!("plain", caused_by = causes), "plain", vec![]),
                    1 => (
                        waffle::span!(
                            "typed",
                            caused_by = causes,
                            u = v.u as u64,
                            i = v.i as i64,
                            f = v.f as f64,
                            b = v.b as bool,
                            s = v.s.as_str() as &str
                        ),
                        "typed",
                        all(v),
                    ),
                    _ => (
                        waffle::span!(
                            "dynamic",
                            caused_by = causes,
                            u = v.u,
                            i = v.i,
                            f = v.f,
                            b = v.b,
                            s = v.s.as_str()
                        ),
                        "dynamic",
                        all(v),
                    ),
                };
                let ids: Vec<u64> = causes.iter().map(|c| c.to_u64()).collect();
                self.added(true, span.id().to_u64(), name, fields, &ids);
                self.open.push((span, self.want.len() - 1));
            }
            Op::End => {
                if let Some((span, i)) = self.open.pop() {
                    drop(span);
                    self.want[i].ended = true;
                }
            }
            Op::Event { dynamic, vals: v, causes } => {
                let causes: Vec<EventId> =
                    causes.iter().take(4).filter_map(|&b| self.target(b)).map(EventId::from_u64).collect();
                let (id, name) = if *dynamic {
                    let id = waffle::event!(
                        "mark_dynamic",
                        caused_by = causes,
                        u = v.u,
                        i = v.i,
                        f = v.f,
                        b = v.b,
                        s = v.s.as_str()
                    );
                    (id, "mark_dynamic")
                } else {
                    let id = waffle::event!(
                        "mark",
                        caused_by = causes,
                        u = v.u as u64,
                        i = v.i as i64,
                        f = v.f as f64,
                        b = v.b as bool,
                        s = v.s.as_str() as &str
                    );
                    (id, "mark")
                };
                let ids: Vec<u64> = causes.iter().map(|c| c.to_u64()).collect();
                self.added(false, id.to_u64(), name, all(v), &ids);
            }
            Op::Link { back } => {
                if let Some(t) = self.target(*back) {
                    waffle::link_raw(&SpanId::from_u64(t), None);
                    self.expect_link(t);
                }
            }
            Op::LinkAny { id } => {
                waffle::link_raw(&EventId::from_u64(*id), None);
                self.expect_link(*id);
            }
            Op::Correlate { value } => {
                waffle::link_raw(&None::<SpanId>, Some(*value));
                if let Some(i) = self.latest {
                    self.want[i].correlation = Some(*value);
                }
            }
        }
    }
}

/// The one file every input records to: in `WAFFLE_FUZZ_SCRATCH` (scripts/fuzz.sh makes one and
/// removes it), else on a memory file system where there is one, since every session syncs its
/// file at stop. Each start truncates it; it is not removed between inputs, since making and
/// removing a file cost a sixth of an input's time.
fn trace_path() -> &'static std::path::Path {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let shm = std::path::Path::new("/dev/shm");
        let dir = match std::env::var_os("WAFFLE_FUZZ_SCRATCH") {
            Some(dir) => dir.into(),
            None if shm.is_dir() => shm.to_owned(),
            None => std::env::temp_dir(),
        };
        dir.join(format!("waffle-fuzz-roundtrip-{}.bin", std::process::id()))
    })
}

waffle_fuzz::limit_allocations!();

fuzz_target!(|ops: Vec<Op>| {
    if ops.len() > 2000 {
        return;
    }
    let path = trace_path();
    let session = waffle_std::Config::new(path).start().expect("start");
    let mut run = Run { want: Vec::new(), open: Vec::new(), latest: None };
    for op in &ops {
        run.op(op);
    }
    while let Some((span, i)) = run.open.pop() {
        drop(span);
        run.want[i].ended = true;
    }
    let stats = session.stop().expect("stop");
    assert_eq!(stats.dropped, 0);

    let (p, warnings) = waffle_read::decode::decode_file(path).expect("decode");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(p.complete);
    let spans: Vec<_> = p.threads.iter().flat_map(|t| &t.spans).collect();
    let events: Vec<_> = p.threads.iter().flat_map(|t| &t.events).collect();
    let want_spans: Vec<&Want> = run.want.iter().filter(|w| w.span).collect();
    let want_events: Vec<&Want> = run.want.iter().filter(|w| !w.span).collect();
    assert_eq!(spans.len(), want_spans.len());
    assert_eq!(events.len(), want_events.len());
    for (s, w) in spans.iter().zip(&want_spans) {
        assert_eq!((s.id, s.name(), s.parent, s.depth), (w.id, w.name, w.parent, w.depth), "{w:?}");
        assert!(same(&s.fields, &w.fields), "{:?} != {w:?}", s.fields);
        assert_eq!((&s.links, s.correlation, s.ended), (&w.links, w.correlation, w.ended), "{w:?}");
    }
    for (e, w) in events.iter().zip(&want_events) {
        assert_eq!((e.id, e.name(), e.parent), (w.id, w.name, w.parent), "{w:?}");
        assert!(same(&e.fields, &w.fields), "{:?} != {w:?}", e.fields);
        assert_eq!((&e.links, e.correlation), (&w.links, w.correlation), "{w:?}");
    }
});
