//! `why` on files through the index gives the answer `why` gives on the decoded model: for
//! every name the files hold (several occurrences each, and one past the last), for ids
//! across them, with matching by order on and off, with checkpoints before almost every
//! frame, every few KiB and once per file; on recorded runs that hold what the walk crosses
//! (links within and across threads and files, contexts entered on other threads, directed
//! and undirected correlation groups across files, spans matched by order across files and
//! by a `rank` field across threads, names not matched, late links, detached spans, device
//! tracks' slices), and on a copy cut short.

use crate::{
    decode::decode_files,
    model::Trace,
    why::{why_files_every, why_with, Options, Relation, Selector, WhyFilesError},
};
use std::{
    collections::BTreeMap,
    future::Future,
    path::{Path, PathBuf},
    pin::pin,
    task::{Context, Waker},
};
use waffle::Instrument;

/// One session records at a time in a process.
static SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A message's value, the same on both sides.
fn message(from: u64, i: u64) -> u64 {
    from.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i
}

/// Rank `rank` of a three-rank run (see the module docs); a small queue makes many frames.
fn record(path: &Path, rank: u64, steps: u64) {
    let session = waffle_std::Config::new(path)
        .label("rank", rank.to_string())
        .queue_bytes(16 << 10)
        .start()
        .expect("start");
    let origin = waffle::event!("origin", rank);
    let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
    gpu.sync(1_000);
    let mut previous = waffle::EventId::NULL;
    let mut reduced = waffle::SpanId::NULL;
    for i in 0..steps {
        let step = waffle::span!("step", i);
        if i % 5 == 0 {
            let ar = waffle::span!("allreduce", correlate = ("allreduce", i / 5), caused_by = [origin]);
            reduced = ar.id();
        }
        {
            let to = (rank + 1) % 3;
            let _send = waffle::span!("send", peer = to, correlate = ("msg>", message(rank, i)));
        }
        {
            let _recv = waffle::span!("recv", peer = (rank + 2) % 3, caused_by = [reduced]);
            let from = (rank + 2) % 3;
            previous =
                waffle::event!("received", correlate = ("msg<", message(from, i)), caused_by = [previous]);
        }
        if i % 11 == 0 {
            let ctx = waffle::Context::current();
            let cause = step.id();
            std::thread::spawn(move || {
                let _in = ctx.enter();
                let _task = waffle::span!("task", i);
                waffle::event!("done", caused_by = [cause]);
            })
            .join()
            .unwrap();
        }
        if i % 13 == 0 {
            {
                let _late = waffle::span!("late", i);
            }
            // A link recorded after the span ended: a late link of the latest item.
            waffle::link_raw(&[origin], None);
        }
        if i % 17 == 0 {
            let job = async { waffle::event!("in job") }.instrument(waffle::span!("job", i));
            let mut job = pin!(job);
            let _ = job.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        }
        if i % 19 == 0 {
            waffle::track_slice!(gpu, "kernel", 2_000 + i * 10, 2_005 + i * 10, launched_by = step.id(), i);
        }
        // Not matched: the ranks have different numbers of it.
        if i < 3 + rank {
            let _f = waffle::span!("flaky");
        }
        waffle::event!("tick", i, x = 0.5);
        // A chunk ends here every few steps, in a DATA frame of its own (the collector drains
        // every millisecond): its last item is then held for late links across a frame
        // boundary, which the checkpoint tests need. Left to time-bounded flushes and drains,
        // how many chunks end there depends on the machine's load.
        if i % 4 == 1 {
            waffle::flush();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    // Ranks as threads: matched by their `rank` field within the file and across files.
    std::thread::scope(|s| {
        for r in 0..2u64 {
            s.spawn(move || {
                for k in 0..4u64 {
                    let _c = waffle::span!("collective", rank = 10 * rank + r, k);
                }
            });
        }
    });
    if rank == 1 {
        waffle::event!("bad input", caused_by = [previous]);
    }
    gpu.sync(5_000_000);
    session.stop().expect("stop");
}

/// The recorded run's files (recorded once), and a copy of the first cut short.
fn files() -> &'static [PathBuf] {
    static FILES: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let _serial = SESSION.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("waffle-why-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut paths: Vec<PathBuf> = (0..3).map(|r| dir.join(format!("rank{r}.bin"))).collect();
        for (rank, p) in paths.iter().enumerate() {
            record(p, rank as u64, 60);
        }
        let whole = std::fs::read(&paths[0]).unwrap();
        let cut = dir.join("cut.bin");
        std::fs::write(&cut, &whole[..whole.len() * 3 / 5]).unwrap();
        paths.push(cut);
        paths
    })
}

fn model(paths: &[PathBuf]) -> Trace {
    decode_files(paths).expect("decode").trace
}

/// Both answers to one question.
fn compare(trace: &Trace, paths: &[PathBuf], selector: &Selector, options: &Options, every: u64) {
    let from_model = why_with(trace, selector, options);
    let from_files = match why_files_every(paths, selector, options, every) {
        Ok((explanation, _)) => Ok(explanation),
        Err(WhyFilesError::Why(e)) => Err(e),
        Err(WhyFilesError::Read(e)) => panic!("{selector:?}: {e}"),
    };
    assert_eq!(from_files, from_model, "{selector:?}, {options:?}, a checkpoint every {every} bytes");
}

/// Each name's items, and how many.
fn names(trace: &Trace) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for r in trace.index().into_values() {
        *names.entry(trace.describe(r).callsite.name.to_string()).or_default() += 1;
    }
    names
}

/// Every name at a few occurrences; with `ids`, a sample of ids too.
fn every_question(paths: &[PathBuf], every: u64, ids: bool) {
    let trace = model(paths);
    let names = names(&trace);
    assert!(names.len() > 12, "{names:?}");
    let sample = ids;
    let mut ids: Vec<u64> = trace.index().into_keys().collect();
    ids.sort_unstable();
    for options in [Options::default(), Options { match_by_order: false }] {
        for (name, &count) in &names {
            for nth in [0, count / 2, count] {
                compare(&trace, paths, &Selector::name(name.clone(), nth), &options, every);
            }
        }
        for &id in ids.iter().step_by(41).filter(|_| sample) {
            compare(&trace, paths, &Selector::id(id), &options, every);
        }
    }
    compare(&trace, paths, &Selector::name("no such name", 0), &Options::default(), every);
    compare(&trace, paths, &Selector::FirstNan, &Options::default(), every);
}

#[test]
fn the_index_answers_as_the_model_does() {
    let all = files();
    let run = &all[..3];
    // The walk crosses files through each kind of group, a depth per received message.
    let trace = model(run);
    let (explanation, _) =
        why_files_every(run, &Selector::name("bad input", 0), &Options::default(), 4096).expect("why");
    for relation in
        [Relation::Message, Relation::CorrelatedWith, Relation::MatchedByOrder, Relation::CausedBy]
    {
        assert!(explanation.steps.iter().any(|s| s.relation == relation), "no {relation} in {explanation:?}");
    }
    assert!(explanation.steps.iter().any(|s| s.item().is_some_and(|i| i.at.process != 1)), "{explanation:?}");
    assert_eq!(
        Ok(&explanation),
        why_with(&trace, &Selector::name("bad input", 0), &Options::default()).as_ref()
    );
    for (every, ids) in [(64, true), (4096, false), (1 << 30, false)] {
        every_question(run, every, ids);
    }
    // Items read before a checkpoint and handed over after it (held back for their links):
    // their field values are read from before the checkpoint.
    let built = super::build(run, &Selector::id(0), true, 64).expect("build");
    let checkpoints = built.index.files.iter().flat_map(|f| &f.checkpoints);
    let pending: Vec<u64> = checkpoints.flat_map(|c| (0..c.threads()).filter_map(|t| c.pending(t))).collect();
    assert!(pending.len() > 10, "{pending:?}");
    for &id in pending.iter().step_by(pending.len() / 40 + 1) {
        compare(&trace, run, &Selector::id(id), &Options::default(), 64);
    }
}

#[test]
fn a_file_cut_short_is_answered_alike() {
    let all = files();
    let paths = [all[3].clone(), all[1].clone()];
    every_question(&paths, 64, true);
}

#[test]
fn a_file_changed_after_indexing_is_an_error_not_a_wrong_answer() {
    let all = files();
    let dir = all[0].parent().unwrap().join("changed");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("rank0.bin");
    std::fs::copy(&all[0], &copy).unwrap();
    let built = super::build(&[&copy], &Selector::name("step", 3), true, 64).expect("build");
    let symptom = built.symptom.clone().expect("found");
    let mut source = super::Indexed::new(built);
    std::fs::write(&copy, b"not the same file any more").unwrap();
    let walked = crate::why::walk::walk(&mut source, symptom);
    let err = walked.expect_err("the file changed").to_string();
    assert!(err.contains("changed since it was first read"), "{err}");
    assert!(matches!(
        why_files_every(&[&copy], &Selector::name("step", 0), &Options::default(), 64),
        Err(WhyFilesError::Read(_))
    ));
}
