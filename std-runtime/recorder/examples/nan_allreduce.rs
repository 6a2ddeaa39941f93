//! Two ranks allreduce a vector over TCP; rank 1 feeds a NaN in, rank 0 finds its output NaN,
//! and `waffle-decode why` traces the symptom back across processes to rank 1's input.
//!
//! ```text
//! cargo run --example nan_allreduce            # writes nan-run/rank0.bin and nan-run/rank1.bin
//! waffle-decode why nan-run/rank0.bin nan-run/rank1.bin --event "Output buffer is NaN after AllReduce"
//! ```
//!
//! Run with no arguments (or just an output directory) it is the driver: it picks a trace id
//! and starts itself twice as `--rank 0|1 --out DIR --peer ADDR`, with `WAFFLE_TRACE_ID` and
//! `WAFFLE_RANK` set, so both files share one trace and carry their rank. Rank 0 listens on an
//! ephemeral port of 127.0.0.1 and prints it; the driver hands it to rank 1. Each round, both
//! ranks send their buffer, receive the peer's and add them inside a span correlated by round,
//! so the decoder ties the two halves of one allreduce together.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    time::Duration,
};

const ROUNDS: u64 = 4;
const BAD_ROUND: u64 = 2;
const LEN: usize = 8;
const SYMPTOM: &str = "Output buffer is NaN after AllReduce";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if args.first().map(String::as_str) == Some("--rank") {
        rank_main(&args)
    } else {
        driver(Path::new(args.first().map_or("nan-run", String::as_str)))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nan_allreduce: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Starts both ranks and waits for them.
fn driver(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let exe = std::env::current_exe()?;
    let trace_id = format!("{:032x}", random_u128().max(1));
    let spawn = |rank: u32, peer: &str, stdout: Stdio| {
        Command::new(&exe)
            .args(["--rank", &rank.to_string(), "--out"])
            .arg(dir)
            .args(["--peer", peer])
            .env("WAFFLE_TRACE_ID", &trace_id)
            .env("WAFFLE_RANK", rank.to_string())
            .env_remove("WAFFLE_TRACEPARENT")
            .stdout(stdout)
            .spawn()
    };
    let mut rank0 = spawn(0, "127.0.0.1:0", Stdio::piped())?;
    let mut line = String::new();
    let read = rank0.stdout.take().map(|out| BufReader::new(out).read_line(&mut line));
    let port = match (read, line.trim().parse::<u16>()) {
        (Some(Ok(_)), Ok(port)) => port,
        _ => {
            let _ = rank0.kill();
            let _ = rank0.wait();
            return Err(format!("rank 0 did not report its port (got {line:?})").into());
        }
    };
    let rank1 = spawn(1, &format!("127.0.0.1:{port}"), Stdio::inherit()).and_then(|mut c| c.wait());
    // If rank 1 failed, rank 0 may wait for it forever (until its socket timeouts): stop it.
    if !matches!(rank1, Ok(s) if s.success()) {
        let _ = rank0.kill();
    }
    let status0 = rank0.wait()?;
    let status1 = rank1?;
    if !status0.success() || !status1.success() {
        return Err(format!("rank 0 {status0}, rank 1 {status1}").into());
    }
    let (r0, r1) = (dir.join("rank0.bin"), dir.join("rank1.bin"));
    println!("trace {trace_id}: wrote {} and {}", r0.display(), r1.display());
    println!("  waffle-decode why {} {} --event {SYMPTOM:?}", r0.display(), r1.display());
    println!("  waffle-decode {} {} -o {}", r0.display(), r1.display(), dir.join("run.pftrace").display());
    Ok(())
}

/// One rank: `--rank R --out DIR --peer ADDR`.
fn rank_main(args: &[String]) -> Result<()> {
    let value = |flag: &str| {
        let at = args.iter().position(|a| a == flag).ok_or_else(|| format!("{flag} is missing"))?;
        args.get(at + 1).cloned().ok_or_else(|| format!("{flag} needs a value"))
    };
    let rank: u64 = value("--rank")?.parse()?;
    let out = PathBuf::from(value("--out")?);
    let peer = value("--peer")?;

    let session = waffle_std::start(out.join(format!("rank{rank}.bin")))?;
    let mut stream = if rank == 0 {
        let listener = TcpListener::bind(&peer)?;
        println!("{}", listener.local_addr()?.port());
        std::io::stdout().flush()?;
        listener.accept()?.0
    } else {
        TcpStream::connect(&peer)?
    };
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_nodelay(true)?;

    for round in 0..ROUNDS {
        let _step = waffle::span!("train_step", round);
        let mut input: Vec<f64> = (0..LEN).map(|i| (rank * 100 + round * 10 + i as u64) as f64).collect();
        let mut cause: Option<waffle::EventId> = None;
        if rank == 1 && round == BAD_ROUND {
            input[3] = f64::NAN; // the bug: a corrupt sample from this rank's data loader
        }
        if input.iter().any(|x| x.is_nan()) {
            cause = Some(waffle::event!(
                "Input buffer contains NaN",
                rank = 1u64,
                suggestion = "Check data loading pipeline for this rank."
            ));
        }
        let _sum = allreduce(&mut stream, &input, rank, round, cause)?;
    }
    session.stop()?;
    Ok(())
}

/// Sums `input` with the peer's buffer; rank 0 checks the result inside the span.
fn allreduce(
    stream: &mut TcpStream,
    input: &[f64],
    rank: u64,
    round: u64,
    cause: Option<waffle::EventId>,
) -> Result<Vec<f64>> {
    let count = input.len() as u64;
    let _span =
        waffle::span!("allreduce", correlate = ("allreduce", round), caused_by = [cause], rank, count);
    let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    stream.write_all(&bytes)?;
    let mut theirs = vec![0u8; bytes.len()];
    stream.read_exact(&mut theirs)?;
    let output: Vec<f64> = theirs
        .chunks_exact(8)
        .zip(input)
        .map(|(b, x)| x + f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    if rank == 0 && output.iter().any(|x| x.is_nan()) {
        waffle::event!("Output buffer is NaN after AllReduce", rank = 0u64);
    }
    Ok(output)
}

/// 128 random bits from the standard library's randomly keyed hasher, the pid and the time.
fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let word = |i: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(i);
        h.write_u128(std::time::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_nanos()));
        h.finish()
    };
    u128::from(word(0)) << 64 | u128::from(word(1))
}
