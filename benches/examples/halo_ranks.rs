//! Rank files of a halo exchange at any number of ranks, without MPI: what `benches/c/halo.c`
//! records under `libwaffle_mpi.so`, written by one process per rank with the spans, fields and
//! correlation keys of `docs/mpi.md`. `benches/scaling.sh` uses it beyond the rank counts this
//! machine can run under `mpirun`, and beside them, to compare.
//!
//! ```text
//! cargo run --release -p waffle-benches --example halo_ranks -- DIR RANKS STEPS [SEED]
//! ```
//!
//! writes `DIR/rank0.bin` ... `DIR/rank{RANKS-1}.bin`. Each step, as in `halo.c`: two
//! `MPI_Irecv` (from the left neighbour with tag 0, from the right with tag 1), two `MPI_Isend`
//! (to the right with tag 0, to the left with tag 1, each with its `mpi.message>`), and an
//! `MPI_Waitall` over the four in which both receives complete (`MPI message received` events
//! with `mpi.message<`); every 100th step an `MPI_Allreduce` (`mpi.collective`). Message and
//! collective values follow the rules of `docs/mpi.md` (the k-th message of a sender, receiver
//! and tag; the k-th collective), with a hash of this file's own: the decoder only groups equal
//! values. `SEED` varies the time each step's work takes, so that two runs can be compared with
//! `waffle-decode diff`.
//!
//! Ranks record one after another, a few at a time, so their clocks do not overlap as an MPI
//! run's would; the records, their links and their sizes are those of one.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

/// The communicator key every rank records for `MPI_COMM_WORLD` (a 32-bit value, as the wrapper's).
const WORLD: u64 = 0x1020_3040;

/// A fixed 64-bit mix of `words` (never 0).
fn hash(words: &[u64]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ words.len() as u64;
    for &w in words {
        h = (h ^ w).wrapping_mul(0xbf58_476d_1ce4_e5b9).rotate_left(31);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h.max(1)
}

fn usage() -> ! {
    eprintln!("usage: halo_ranks DIR RANKS STEPS [SEED]");
    std::process::exit(2)
}

fn number(arg: Option<&String>, what: &str) -> u64 {
    match arg.map(|a| a.parse::<u64>()) {
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("halo_ranks: {what} is not a number");
            usage()
        }
        None => usage(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A child records one rank: --rank R DIR RANKS STEPS SEED.
    if args.first().map(String::as_str) == Some("--rank") {
        let rank = number(args.get(1), "the rank");
        let dir = PathBuf::from(args.get(2).unwrap_or_else(|| usage()));
        let (ranks, steps, seed) =
            (number(args.get(3), "RANKS"), number(args.get(4), "STEPS"), number(args.get(5), "SEED"));
        return record(&dir, rank, ranks, steps, seed);
    }
    let dir = PathBuf::from(args.first().unwrap_or_else(|| usage()));
    let ranks = number(args.get(1), "RANKS");
    let steps = number(args.get(2), "STEPS");
    let seed = if args.len() > 3 { number(args.get(3), "SEED") } else { 1 };
    if ranks < 2 {
        eprintln!("halo_ranks: RANKS must be at least 2");
        usage()
    }
    std::fs::create_dir_all(&dir)?;
    let me = std::env::current_exe()?;
    let started = Instant::now();
    let at_once = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let mut next = 0;
    while next < ranks {
        let batch: Vec<_> = (next..(next + at_once).min(ranks))
            .map(|rank| {
                Command::new(&me)
                    .arg("--rank")
                    .arg(rank.to_string())
                    .arg(&dir)
                    .args([ranks, steps, seed].map(|n| n.to_string()))
                    .spawn()
            })
            .collect::<Result<_, _>>()?;
        for mut child in batch {
            let status = child.wait()?;
            if !status.success() {
                return Err(format!("a rank's recording failed: {status}").into());
            }
        }
        next += at_once;
    }
    eprintln!("halo_ranks: {ranks} ranks of {steps} steps in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Records rank `rank` of `ranks` into `dir/rank{rank}.bin`.
fn record(
    dir: &Path,
    rank: u64,
    ranks: u64,
    steps: u64,
    seed: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let path = dir.join(format!("rank{rank}.bin"));
    let session = waffle_std::Config::new(&path)
        .process_name("halo")
        .label("host", "generated")
        .label("rank", rank.to_string())
        .start()?;
    let (me, left, right) = (rank, (rank + ranks - 1) % ranks, (rank + 1) % ranks);
    let (world, bytes) = (WORLD, 8u64);
    // The k-th message of (sender, receiver, tag) has the same value on both sides. With two
    // ranks both neighbours are one rank, and each direction's tag keeps the messages apart.
    let message = |from: u64, to: u64, tag: u64, k: u64| hash(&[world, from, to, tag, k]);
    let mut request = 0u64;
    let mut work = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    {
        let _init = waffle::span!("MPI_Init");
    }
    for step in 0..steps {
        let first = request + 1;
        for (peer, tag) in [(left, 0i64), (right, 1)] {
            request += 1;
            let _recv = waffle::span!("MPI_Irecv", comm = world, peer = peer as i64, tag, bytes, request);
        }
        for (peer, tag) in [(right, 0i64), (left, 1)] {
            request += 1;
            let value = message(me, peer, tag as u64, step);
            let _send = waffle::span!(
                "MPI_Isend",
                comm = world,
                peer = peer as i64,
                tag,
                bytes,
                request,
                correlate = ("mpi.message>", value)
            );
        }
        {
            let requests = format!("{first},{},{},{}", first + 1, first + 2, first + 3);
            let _wait = waffle::span!("MPI_Waitall", count = 4u64, requests = requests.as_str());
            for (peer, tag, req) in [(left, 0i64, first), (right, 1, first + 1)] {
                let value = message(peer, me, tag as u64, step);
                waffle::event!(
                    "MPI message received",
                    comm = world,
                    peer = peer as i64,
                    tag,
                    bytes,
                    request = req,
                    correlate = ("mpi.message<", value)
                );
            }
        }
        // The step's work: a few hundred cycles, more or fewer by the seed.
        work ^= work << 13;
        work ^= work >> 7;
        work ^= work << 17;
        for _ in 0..(work % 64) {
            std::hint::black_box(work);
        }
        if step % 100 == 99 {
            let _all = waffle::span!(
                "MPI_Allreduce",
                comm = world,
                op = "MPI_SUM",
                bytes,
                correlate = ("mpi.collective", hash(&[world, step / 100]))
            );
        }
    }
    {
        let _fin = waffle::span!("MPI_Finalize");
    }
    session.stop()?;
    Ok(())
}
