//! Each wait charged to what the rank it waited for was doing meanwhile, through the waits of
//! that rank in turn (see the parent module), and the report made of the charges.

use std::{collections::HashMap, sync::Arc};

use super::{classify::Found, Charged, RankTotal, RootCause, SiteTotal, Wait, Waits};
use crate::timeline::{activity, is_mpi, Doing, Labels, Lane, Run, Span};

/// How many waits a charge is followed through before it stays where it is (clocks that
/// disagree could make two waits each other's cause).
const MAX_DEPTH: u32 = 64;

/// A piece of a wait charged to what a lane was doing over `[a, b)`: its piece of activity,
/// the wait it comes from, and whether it came through another wait.
struct Charge {
    lane: u32,
    piece: u32,
    a: u64,
    b: u64,
    origin: u32,
    propagated: bool,
}

struct Blame<'r> {
    run: &'r Run,
    found: &'r [Found],
    pieces: Vec<Vec<(u64, Doing)>>,
    /// Each lane's waits: `(begin, end, index in found)`, by begin, none overlapping.
    waits: Vec<Vec<(u64, u64, u32)>>,
}

impl Blame<'_> {
    /// Charges `[s, e)` of wait `origin` to lane `lane`.
    fn charge(&self, lane: u32, (s, e): (u64, u64), origin: u32, depth: u32, out: &mut Vec<Charge>) {
        let waits = &self.waits[lane as usize];
        let mut t = s;
        while t < e {
            let k = waits.partition_point(|w| w.0 <= t);
            match k.checked_sub(1).map(|k| waits[k]).filter(|w| w.1 > t) {
                Some((_, we, f)) => {
                    let b = we.min(e);
                    let cause = self.found[f as usize].cause;
                    if depth < MAX_DEPTH && cause.lane != lane {
                        self.charge(cause.lane, (t, b), origin, depth + 1, out);
                    } else {
                        self.work(lane, (t, b), origin, depth > 0, out);
                    }
                    t = b;
                }
                None => {
                    let b = waits.get(k).map_or(e, |w| w.0.min(e));
                    self.work(lane, (t, b), origin, depth > 0, out);
                    t = b;
                }
            }
        }
    }

    /// Charges `[a, b)`, where `lane` was not waiting, to what it was doing.
    fn work(&self, lane: u32, (a, b): (u64, u64), origin: u32, propagated: bool, out: &mut Vec<Charge>) {
        let pieces = &self.pieces[lane as usize];
        let mut p = pieces.partition_point(|x| x.0 <= a) - 1;
        let mut t = a;
        while t < b {
            let end = pieces.get(p + 1).map_or(u64::MAX, |x| x.0).min(b);
            if end > t {
                out.push(Charge { lane, piece: p as u32, a: t, b: end, origin, propagated });
            }
            t = end;
            p += 1;
        }
    }
}

/// The program's innermost span around span `k` of `lane`, if any.
fn enclosing(lane: &Lane, k: u32) -> Option<&Span> {
    let mut up = lane.parent[k as usize];
    while let Some(p) = up {
        let s = &lane.spans[p as usize];
        if !is_mpi(s) {
            return Some(s);
        }
        up = lane.parent[p as usize];
    }
    None
}

/// The call, and the program's innermost span around it.
fn site(run: &Run, lane: &Lane, k: u32) -> String {
    let call = run.name(&lane.spans[k as usize]);
    match enclosing(lane, k) {
        Some(s) => format!("{call} in {}", run.name(s)),
        None => call.to_owned(),
    }
}

/// The report of the waits `found` of `run`.
pub(super) fn report(run: &Run, found: Vec<Found>) -> Waits {
    let mut waits = vec![Vec::new(); run.lanes.len()];
    for (k, f) in found.iter().enumerate() {
        waits[f.at.lane as usize].push((f.start_ns, f.end_ns, k as u32));
    }
    let blame = Blame { run, found: &found, pieces: run.lanes.iter().map(activity).collect(), waits };
    let mut charges = Vec::new();
    for (k, f) in found.iter().enumerate() {
        blame.charge(f.cause.lane, (f.start_ns, f.end_ns), k as u32, 0, &mut charges);
    }
    let (root_causes, main, charged) = root_causes(&blame, &mut charges, found.len());
    let mut out = Waits::default();
    // Calls and sites, one text each however many waits name them.
    let mut texts: HashMap<String, Arc<str>> = HashMap::new();
    let mut text = |t: String| texts.entry(t).or_insert_with_key(|t| Arc::from(t.as_str())).clone();
    let mut sites: HashMap<(u32, Option<u32>), Arc<str>> = HashMap::new();
    for (k, f) in found.iter().enumerate() {
        let lane = &run.lanes[f.at.lane as usize];
        let span = run.span(f.at);
        let around = enclosing(lane, f.at.span).map(|s| s.name);
        let site =
            sites.entry((span.name, around)).or_insert_with(|| text(site(run, lane, f.at.span))).clone();
        let waited_for =
            f.cause.call.map_or_else(|| "an event".to_owned(), |c| run.name(run.span(c)).to_owned());
        out.waits.push(Wait {
            process: lane.process,
            rank: run.rank(f.at.lane),
            thread: lane.thread,
            call: text(run.name(span).to_owned()),
            site,
            span_id: span.id,
            kind: f.kind,
            start_ns: f.start_ns,
            wait_ns: f.end_ns - f.start_ns,
            waited_for_rank: run.rank(f.cause.lane),
            waited_for: text(waited_for),
            root_cause: main[k],
        });
    }
    out.total_wait_ns = out.waits.iter().map(|w| w.wait_ns).sum();
    let mut ranks: Vec<i64> = run.ranks.clone();
    ranks.sort_unstable();
    for rank in ranks {
        let mine = out.waits.iter().filter(|w| w.rank == rank);
        let (waits, wait_ns) = mine.fold((0, 0), |(n, t), w| (n + 1, t + w.wait_ns));
        out.per_rank.push(RankTotal { rank, waits, wait_ns });
    }
    let mut sites: HashMap<(i64, Arc<str>, super::WaitKind), (usize, u64)> = HashMap::new();
    for w in &out.waits {
        let e = sites.entry((w.rank, w.site.clone(), w.kind)).or_default();
        (e.0, e.1) = (e.0 + 1, e.1 + w.wait_ns);
    }
    out.per_site = sites
        .into_iter()
        .map(|((rank, site, kind), (waits, wait_ns))| SiteTotal {
            rank,
            site: site.to_string(),
            kind,
            waits,
            wait_ns,
        })
        .collect();
    out.per_site
        .sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.rank.cmp(&b.rank)).then(a.site.cmp(&b.site)));
    out.root_causes = root_causes;
    out.charged = charged;
    out
}

/// The root causes, the most waiting caused first, and each wait's main one.
fn root_causes(
    blame: &Blame<'_>,
    charges: &mut [Charge],
    waits: usize,
) -> (Vec<RootCause>, Vec<Option<usize>>, Vec<Charged>) {
    // A root cause is what a lane was doing, by name: each of its pieces adds to it.
    let mut keys: HashMap<(u32, u32), usize> = HashMap::new();
    let mut labels = Labels::default();
    let mut causes: Vec<RootCause> = Vec::new();
    charges.sort_unstable_by_key(|c| (c.lane, c.piece, c.a));
    let mut best_piece: Vec<(u64, u32, u32)> = Vec::new();
    // Per wait and root cause, what it was charged: summed once sorted.
    let mut by_origin: Vec<(u32, u32, u64)> = Vec::with_capacity(charges.len());
    let mut charged: Vec<Charged> = Vec::new();
    let mut k = 0;
    while k < charges.len() {
        let (lane, piece) = (charges[k].lane, charges[k].piece);
        // Charges come by piece: a piece's root cause is looked up once.
        let key = {
            let doing = blame.pieces[lane as usize][piece as usize].1;
            let label = labels.of(blame.run, lane, doing);
            *keys.entry((lane, label)).or_insert_with(|| {
                let name = labels.name(blame.run, label).to_owned();
                let l = &blame.run.lanes[lane as usize];
                causes.push(RootCause {
                    rank: blame.run.rank(lane),
                    thread: l.thread,
                    span: name,
                    delay_ns: 0,
                    caused_wait_ns: 0,
                    direct_ns: 0,
                    propagated_ns: 0,
                    span_id: 0,
                    start_ns: 0,
                });
                best_piece.push((0, lane, piece));
                causes.len() - 1
            })
        };
        // The charges of one piece: their union is its delay.
        let (mut union, mut reach, mut total) = (0, 0, 0);
        let mut piece_charged = Charged {
            root_cause: key,
            process: blame.run.lanes[lane as usize].process,
            rank: blame.run.rank(lane),
            thread: blame.run.lanes[lane as usize].thread,
            start_ns: charges[k].a,
            end_ns: charges[k].b,
            waits: Vec::new(),
        };
        while k < charges.len() && (charges[k].lane, charges[k].piece) == (lane, piece) {
            let c = &charges[k];
            let len = c.b - c.a;
            total += len;
            if c.propagated {
                causes[key].propagated_ns += len;
            } else {
                causes[key].direct_ns += len;
            }
            by_origin.push((c.origin, key as u32, len));
            piece_charged.end_ns = piece_charged.end_ns.max(c.b);
            piece_charged.waits.push(c.origin as usize);
            union += c.b.saturating_sub(c.a.max(reach));
            reach = reach.max(c.b);
            k += 1;
        }
        piece_charged.waits.sort_unstable();
        piece_charged.waits.dedup();
        charged.push(piece_charged);
        causes[key].delay_ns += union;
        causes[key].caused_wait_ns += total;
        if total > best_piece[key].0 {
            best_piece[key] = (total, lane, piece);
        }
    }
    for (key, &(_, lane, piece)) in best_piece.iter().enumerate() {
        let (start, doing) = blame.pieces[lane as usize][piece as usize];
        causes[key].start_ns = start;
        if let Doing::Span(s) = doing {
            causes[key].span_id = blame.run.lanes[lane as usize].spans[s as usize].id;
        }
    }
    let mut order: Vec<usize> = (0..causes.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&causes[a], &causes[b]);
        y.caused_wait_ns.cmp(&x.caused_wait_ns).then(x.rank.cmp(&y.rank)).then(x.span.cmp(&y.span))
    });
    let mut place = vec![0; causes.len()];
    for (new, &old) in order.iter().enumerate() {
        place[old] = new;
    }
    let mut main: Vec<Option<(u64, usize)>> = vec![None; waits];
    by_origin.sort_unstable_by_key(|&(origin, key, _)| (origin, key));
    for run in by_origin.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        let (origin, key) = (run[0].0 as usize, place[run[0].1 as usize]);
        let len: u64 = run.iter().map(|c| c.2).sum();
        let m = &mut main[origin];
        if m.is_none_or(|(l, k)| len > l || (len == l && key < k)) {
            *m = Some((len, key));
        }
    }
    let sorted = order.iter().map(|&k| causes[k].clone()).collect();
    for c in &mut charged {
        c.root_cause = place[c.root_cause];
    }
    (sorted, main.into_iter().map(|m| m.map(|(_, k)| k)).collect(), charged)
}
