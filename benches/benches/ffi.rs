//! A span through waffle's C macros against a span through its Rust macros, in one criterion
//! group of one run. The budget: a C span costs at most 1.3× a Rust span.
//!
//! The C side is real C: `benches/c/ffi_bench.c` loops over `WAFFLE_SPAN` from
//! `waffle_macros.h`. At start-up this bench builds `libwaffle.so` and `libwaffle.a` (`cargo
//! build -p waffle-ffi`, same profile) and compiles that file twice with `cc -O2`, linked to
//! each, as a C program would be. It is compiled here rather than by a build script because
//! it links `libwaffle`, which cargo does not build for a bench (the crate has no rlib), and a
//! build script cannot run cargo on the target directory being built.
//!
//! Each C program runs in its own process (a second copy of waffle's runtime cannot share this
//! one's statics) and is driven over a pipe: criterion's `iter_custom` asks it to run n spans
//! and it answers with the time of its loop alone, read from the same monotonic clock the Rust
//! benches use around the same loop shape (an out-of-line function running n spans back to
//! back). Every side records to `/dev/null` in its own session.
//!
//! `cargo bench -p waffle-benches --bench ffi`; the ratios are printed at the end and recorded
//! in README.md.

use criterion::Criterion;
use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

/// `target/<profile>`, from this executable's path (`target/<profile>/deps/ffi-<hash>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_owned()
}

/// A C bench program, running, and the pipe to it.
struct CBench {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CBench {
    /// Builds `ffi_bench.c` linked with `link` (arguments after the source) and starts it: as
    /// C11 with `$CC`, or (`cxx`) as C++20 with `$CXX`, where `waffle_macros.h` gives
    /// `waffle.hpp`'s `WAFFLE_SPAN` (a `waffle::Span`).
    fn start(name: &str, cxx: bool, link: &[&std::ffi::OsStr]) -> CBench {
        let profile = profile_dir();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
        let out = profile.join("waffle-c-bench");
        std::fs::create_dir_all(&out).expect("create the C bench directory");
        let exe = out.join(name);
        let (cc, lang): (String, &[&str]) = if cxx {
            (std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned()), &["-x", "c++", "-std=c++20"])
        } else {
            (std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()), &["-std=c11"])
        };
        let status = Command::new(&cc)
            .args(lang)
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(root.join("ffi/include"))
            .arg(root.join("benches/c/ffi_bench.c"))
            .arg("-o")
            .arg(&exe)
            .args(link)
            .status()
            .unwrap_or_else(|e| panic!("run {cc}: {e}"));
        assert!(status.success(), "compiling benches/c/ffi_bench.c ({name}) failed");
        let mut child = Command::new(&exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the C bench");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        CBench { child, stdin, stdout }
    }

    /// Runs `n` spans of `bench` in the C program; the time its loop took.
    fn run(&mut self, bench: &str, n: u64) -> Duration {
        writeln!(self.stdin, "{bench} {n}").expect("write to the C bench");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from the C bench");
        Duration::from_nanos(line.trim().parse().unwrap_or_else(|_| panic!("C bench answered {line:?}")))
    }

    fn stop(mut self) {
        drop(self.stdin);
        let status = self.child.wait().expect("wait for the C bench");
        assert!(status.success(), "the C bench failed: {status}");
    }
}

/// Builds libwaffle and starts the C programs: linked with `libwaffle.so`, and with
/// `libwaffle.a`; and the same source as C++, linked with `libwaffle.so`.
fn start_c_benches() -> (CBench, CBench, CBench) {
    let profile = profile_dir();
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "-p", "waffle-ffi", "--lib", "--target-dir"]);
    cargo.arg(profile.parent().expect("target directory"));
    if profile.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    assert!(cargo.status().expect("run cargo").success(), "building waffle-ffi failed");
    let rpath = format!("-Wl,-rpath,{}", profile.display());
    let dynamic: [&std::ffi::OsStr; 4] =
        ["-L".as_ref(), profile.as_os_str(), "-lwaffle".as_ref(), rpath.as_ref()];
    let shared = CBench::start("ffi_bench_shared", false, &dynamic);
    let archive = profile.join("libwaffle.a");
    let fixed = CBench::start(
        "ffi_bench_static",
        false,
        &[archive.as_os_str(), "-lpthread".as_ref(), "-ldl".as_ref(), "-lm".as_ref()],
    );
    let cpp = CBench::start("ffi_bench_cpp", true, &dynamic);
    (shared, fixed, cpp)
}

/// n spans without fields, back to back: the Rust twin of the C program's `span`.
#[inline(never)]
fn rust_span(n: u64) {
    for _ in 0..n {
        let _s = waffle::span!("x");
    }
}

/// The Rust twin of the C program's `span_2_fields`.
#[inline(never)]
fn rust_span_2_fields(n: u64) {
    for i in 0..n {
        let _s = waffle::span!("x2", n = i, x = 1.5f64);
    }
}

fn timed(f: fn(u64)) -> impl FnMut(u64) -> Duration {
    move |n| {
        let t = Instant::now();
        f(n);
        t.elapsed()
    }
}

/// The least time per span over `rounds` interleaved runs of `n` spans of every side: a shared
/// or busy machine only ever adds time, so the minimum of interleaved runs is the steadiest
/// comparison it allows. Prints it as a table.
fn interleaved_min(sides: &mut [&mut CBench; 3], rounds: usize, n: u64) {
    let ns = |d: Duration| d.as_secs_f64() * 1e9 / n as f64;
    for (bench, rust) in [("span", rust_span as fn(u64)), ("span_2_fields", rust_span_2_fields)] {
        let mut best = [f64::MAX; 4];
        for _ in 0..rounds {
            best[0] = best[0].min(ns(timed(rust)(n)));
            for (k, side) in sides.iter_mut().enumerate() {
                best[k + 1] = best[k + 1].min(ns(side.run(bench, n)));
            }
        }
        let [r, s, f, p] = best;
        println!(
            "interleaved minimum, {bench}: Rust {r:.2} ns, C shared {s:.2} ns ({:.2}x), C static {f:.2} ns ({:.2}x), C++ shared {p:.2} ns ({:.2}x)",
            s / r,
            f / r,
            p / r
        );
    }
}

fn ffi_group(c: &mut Criterion) {
    let (mut shared, mut fixed, mut cpp) = start_c_benches();
    let session = waffle_std::Config::new("/dev/null").start().expect("start the Rust session");
    let bench_mode = std::env::args().any(|a| a == "--bench");
    // 4 sides × 2 benches × 30 rounds of 200 000 spans: about 1.5 s.
    interleaved_min(&mut [&mut shared, &mut fixed, &mut cpp], if bench_mode { 30 } else { 1 }, 200_000);
    let mut g = c.benchmark_group("ffi");
    g.bench_function("rust_span", |b| b.iter_custom(timed(rust_span)));
    g.bench_function("c_span_shared", |b| b.iter_custom(|n| shared.run("span", n)));
    g.bench_function("c_span_static", |b| b.iter_custom(|n| fixed.run("span", n)));
    g.bench_function("cpp_span_shared", |b| b.iter_custom(|n| cpp.run("span", n)));
    g.bench_function("rust_span_2_fields", |b| b.iter_custom(timed(rust_span_2_fields)));
    g.bench_function("c_span_2_fields_shared", |b| b.iter_custom(|n| shared.run("span_2_fields", n)));
    g.bench_function("c_span_2_fields_static", |b| b.iter_custom(|n| fixed.run("span_2_fields", n)));
    g.bench_function("cpp_span_2_fields_shared", |b| b.iter_custom(|n| cpp.run("span_2_fields", n)));
    g.finish();
    shared.stop();
    fixed.stop();
    cpp.stop();
    let stats = session.stop().expect("stop the Rust session");
    println!("waffle Rust session totals: {} records dropped", stats.dropped);
}

/// Prints C / Rust from the estimates criterion saved (nothing in `--test` mode).
fn print_ratios() {
    let dir = profile_dir().parent().expect("target").join("criterion/ffi");
    let estimate = |bench: &str, stat: &str| -> Option<f64> {
        let text = std::fs::read_to_string(dir.join(bench).join("new/estimates.json")).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        json[stat]["point_estimate"].as_f64()
    };
    for (rust, c) in [
        ("rust_span", "c_span_shared"),
        ("rust_span", "c_span_static"),
        ("rust_span", "cpp_span_shared"),
        ("rust_span_2_fields", "c_span_2_fields_shared"),
        ("rust_span_2_fields", "c_span_2_fields_static"),
        ("rust_span_2_fields", "cpp_span_2_fields_shared"),
    ] {
        for stat in ["median", "slope"] {
            if let (Some(a), Some(b)) = (estimate(c, stat), estimate(rust, stat)) {
                println!("{c} / {rust} ({stat}): {a:.2} ns / {b:.2} ns = {:.2}x", a / b);
            }
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .configure_from_args();
    ffi_group(&mut c);
    c.final_summary();
    if std::env::args().any(|a| a == "--bench") {
        print_ratios();
    }
}
