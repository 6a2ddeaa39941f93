//! The overhead rows whose bars are ratios, measured in paired rounds: each round times every
//! case once, back to back, in short batches, and each ratio is taken within its round. A
//! shared machine's speed drifts over seconds; criterion measures one bench for seconds before
//! the next, so its ratios carry that drift, and runs of the same code minutes apart moved a
//! span's ratio to raw from 1.06× to 1.70× (README.md, "A slow hour"). Within a round of a few
//! tens of milliseconds the drift is small, and the median over rounds leaves out the rounds
//! that an interruption hit.
//!
//! Not a criterion benchmark: it runs after the criterion group and prints a table of its own.
//! `WAFFLE_PAIRED_ROUNDS` (default 41) and `WAFFLE_PAIRED_BATCH` (iterations per case and
//! round, default 100,000) change its size.

use super::{raw, NoopLayer};
use criterion::Criterion;
use std::{
    hint::black_box,
    time::{Duration, Instant},
};
use tracing_subscriber::layer::SubscriberExt;

/// One case: runs `n` iterations and returns the time they took.
type Case = (&'static str, Box<dyn Fn(u64) -> Duration>);

/// A ratio of two cases' times, with the bar it is held to.
struct Row {
    name: &'static str,
    case: &'static str,
    base: &'static str,
    bar: Option<f64>,
}

const ROWS: [Row; 5] = [
    Row { name: "two clock reads ÷ raw span", case: "clock_pair", base: "raw", bar: None },
    Row { name: "waffle span ÷ raw span", case: "waffle_span", base: "raw", bar: Some(1.10) },
    Row {
        name: "waffle span, 2 fields ÷ raw span",
        case: "waffle_span_2_fields",
        base: "raw",
        bar: Some(1.20),
    },
    Row {
        name: "tracing: waffle layer ÷ no-op layer",
        case: "tracing_waffle",
        base: "tracing_noop",
        bar: Some(2.0),
    },
    Row {
        name: "tracing, 2 fields: waffle layer ÷ no-op layer",
        case: "tracing_waffle_2_fields",
        base: "tracing_noop_2_fields",
        bar: Some(2.0),
    },
];

fn timed(n: u64, mut f: impl FnMut(u64)) -> Duration {
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    start.elapsed()
}

/// A `tracing` case: a fresh dispatcher with `layer` is the default for the batch alone, so
/// that only one subscriber exists at a time (as in the criterion group) and the callsites'
/// interest is that subscriber's.
fn with_layer<L>(layer: impl Fn() -> L, n: u64, f: impl FnMut(u64)) -> Duration
where
    L: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer()));
    tracing::dispatcher::with_default(&dispatch, || timed(n, f))
}

fn cases() -> Vec<Case> {
    vec![
        (
            "clock_pair",
            Box::new(|n| {
                timed(n, |_| {
                    black_box(raw::now());
                    black_box(raw::now());
                })
            }),
        ),
        (
            "raw",
            Box::new(|n| {
                timed(n, |_| {
                    let s = raw::Span::begin(black_box(1));
                    black_box(&s);
                })
            }),
        ),
        (
            "waffle_span",
            Box::new(|n| {
                timed(n, |_| {
                    let s = waffle::span!("paired");
                    black_box(&s);
                })
            }),
        ),
        (
            "waffle_span_2_fields",
            Box::new(|n| {
                timed(n, |i| {
                    let s = waffle::span!("paired2", n = i, x = 1.5f64);
                    black_box(&s);
                })
            }),
        ),
        (
            "tracing_noop",
            Box::new(|n| {
                with_layer(
                    || NoopLayer,
                    n,
                    |_| {
                        let s = tracing::info_span!("paired").entered();
                        black_box(&s);
                    },
                )
            }),
        ),
        (
            "tracing_noop_2_fields",
            Box::new(|n| {
                with_layer(
                    || NoopLayer,
                    n,
                    |i| {
                        let s = tracing::info_span!("paired2", n = i, x = 1.5f64).entered();
                        black_box(&s);
                    },
                )
            }),
        ),
        (
            "tracing_waffle",
            Box::new(|n| {
                with_layer(waffle_tracing::layer, n, |_| {
                    let s = tracing::info_span!("paired").entered();
                    black_box(&s);
                })
            }),
        ),
        (
            "tracing_waffle_2_fields",
            Box::new(|n| {
                with_layer(waffle_tracing::layer, n, |i| {
                    let s = tracing::info_span!("paired2", n = i, x = 1.5f64).entered();
                    black_box(&s);
                })
            }),
        ),
    ]
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `q`-quantile of sorted `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

pub(crate) fn ratios(_: &mut Criterion) {
    let rounds = env_or("WAFFLE_PAIRED_ROUNDS", 41).max(3) as usize;
    let batch = env_or("WAFFLE_PAIRED_BATCH", 100_000).max(1000);
    let cases = cases();
    // Every waffle case records into one session to /dev/null, with room for a whole batch.
    let session =
        waffle_std::Config::new("/dev/null").queue_bytes(64 << 20).start().expect("start a session");
    // times[c][r]: case c's nanoseconds per iteration in round r. Round 0 warms up, unkept.
    let mut times = vec![Vec::with_capacity(rounds); cases.len()];
    for round in 0..=rounds {
        // Forward in even rounds, backward in odd ones: no case always follows the same one.
        let order: Vec<usize> =
            if round % 2 == 0 { (0..cases.len()).collect() } else { (0..cases.len()).rev().collect() };
        for c in order {
            let ns = cases[c].1(batch).as_nanos() as f64 / batch as f64;
            if round > 0 {
                times[c].push(ns);
            }
        }
    }
    let stats = session.stop().expect("stop the session");
    let index = |name: &str| cases.iter().position(|(n, _)| *n == name).expect("a case of that name");

    if std::env::var_os("WAFFLE_PAIRED_SERIES").is_some() {
        for (c, (name, _)) in cases.iter().enumerate() {
            let t: Vec<String> = times[c].iter().map(|x| format!("{x:.0}")).collect();
            println!("series/{name}: {}", t.join(" "));
        }
    }
    println!("\npaired rounds: {rounds} rounds of {batch} iterations per case, every case once a round");
    for (c, (name, _)) in cases.iter().enumerate() {
        let mut t = times[c].clone();
        t.sort_by(f64::total_cmp);
        println!(
            "paired/{name:<24} median {:7.2} ns  (quartiles {:.2}–{:.2})",
            quantile(&t, 0.5),
            quantile(&t, 0.25),
            quantile(&t, 0.75)
        );
    }
    println!("\n| ratio, within each round | median | quartiles | bar | met? |\n|---|---:|---:|---:|---|");
    for row in &ROWS {
        let (a, b) = (index(row.case), index(row.base));
        let mut r: Vec<f64> = times[a].iter().zip(&times[b]).map(|(x, y)| x / y).collect();
        r.sort_by(f64::total_cmp);
        let median = quantile(&r, 0.5);
        let (bar, met) = match row.bar {
            Some(bar) => (format!("{bar:.2}×"), if median <= bar { "yes" } else { "no" }),
            None => (String::new(), ""),
        };
        println!(
            "| {} | {median:.2}× | {:.2}–{:.2}× | {bar} | {met} |",
            row.name,
            quantile(&r, 0.25),
            quantile(&r, 0.75)
        );
    }
    println!(
        "waffle session of the paired rounds: {} data bytes, {} records dropped{}",
        stats.data_bytes,
        stats.dropped,
        if stats.dropped == 0 {
            ""
        } else {
            " -- INVALID: a full queue makes spans look cheaper than they are"
        },
    );
}
