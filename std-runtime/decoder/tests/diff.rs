//! `waffle-decode diff` and `why --first-nan` on recorded runs: kernels aligned by step, name
//! and occurrence (a regression, fused and split kernels, extra occurrences, a worker thread's
//! kernel placed in a step by time), tensors of two ranks (the first divergence in time order,
//! the first NaN or Inf of each run), 200,000 tensors compared with a bounded number held, the
//! `diff_model` example run twice, and bad input.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;

use serde_json::Value as Json;
use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    thread::sleep,
    time::Duration,
};

/// Opens step `n` (the one place these tests record steps).
fn step(n: u64) -> waffle::Span {
    waffle::span!("step", step = n)
}

/// Records a tensor fingerprint with the reserved fields (the one place these tests record
/// tensors): its name, hash and RMS, and how many elements are NaN, +Inf and -Inf.
fn tensor(name: &str, hash: u64, rms: f64, (nan, pinf, ninf): (u64, u64, u64)) {
    waffle::event!(
        "tensor",
        "tensor.name" = name,
        "tensor.dtype" = "f32",
        "tensor.shape" = "1x8",
        "tensor.count" = 8u64,
        "tensor.hash" = hash,
        "tensor.rms" = rms,
        "tensor.min" = -1.0f64,
        "tensor.max" = 1.0f64,
        "tensor.nan" = nan,
        "tensor.pinf" = pinf,
        "tensor.ninf" = ninf
    );
}

/// A kernel that takes about `ms` milliseconds.
fn kernel(name: &'static str, ms: f64) {
    let _span = match name {
        "attn" => waffle::span!("attn"),
        "mlp" => waffle::span!("mlp"),
        "bias" => waffle::span!("bias"),
        "act" => waffle::span!("act"),
        "bias_act" => waffle::span!("bias_act"),
        "norm" => waffle::span!("norm"),
        "norm_a" => waffle::span!("norm_a"),
        "norm_b" => waffle::span!("norm_b"),
        "old_only" => waffle::span!("old_only"),
        "new_only" => waffle::span!("new_only"),
        _ => waffle::span!("worker"),
    };
    sleep(Duration::from_secs_f64(ms / 1e3));
}

/// The kernels run: four steps; the new run's `attn` takes five times as long, `bias` and
/// `act` are fused into `bias_act`, `norm` is split into `norm_a` and `norm_b`, `old_only` is
/// gone and `new_only` appears, step 3 runs `mlp` once more, and a worker thread's kernel lies
/// in step 1 in the base run and in step 2 in the new one. A sleep oversleeps on a busy machine,
/// by up to tens of milliseconds when every core is taken: the kernels that pair are 50 ms or
/// more, so that the fused and split kernels' sums agree within the heuristic's 25 % however
/// late a few of their ends are recorded, and those that must not pair (`old_only` 2 ms,
/// `new_only` 10 ms, `worker` 1 ms) stay far from every sum they could be part of.
fn record_kernels(path: &Path, new: bool) {
    let session = waffle_std::Config::new(path).start().unwrap();
    for n in 0..4u64 {
        let _step = step(n);
        kernel("attn", if new { 200.0 } else { 40.0 });
        for _ in 0..(2 + u64::from(new && n == 3)) {
            kernel("mlp", 5.0);
        }
        if new {
            kernel("bias_act", 100.0);
            kernel("norm_a", 75.0);
            kernel("norm_b", 75.0);
            kernel("new_only", 10.0);
        } else {
            kernel("bias", 50.0);
            kernel("act", 50.0);
            kernel("old_only", 2.0);
            kernel("norm", 150.0);
        }
        if n == if new { 2 } else { 1 } {
            std::thread::scope(|s| s.spawn(|| kernel("worker", 1.0)).join().unwrap());
        }
    }
    session.stop().unwrap();
}

/// The tensors run, two ranks: tensors `x` and `y` in steps 0..3 (`y` twice in step 2). The
/// new run differs at rank 0's `x` of step 2 and at rank 1's first `y` of step 1 and second of
/// step 2; rank 1's new run adds `z` in step 0. Base rank 1's second `y` of step 2 has a NaN
/// and two +Inf; new rank 0's `x` of step 2 has three NaN.
fn record_tensors(path: &Path, rank: u64, new: bool) {
    let session = waffle_std::Config::new(path).label("rank", rank.to_string()).start().unwrap();
    for n in 0..3u64 {
        let _step = step(n);
        let changed_x = new && rank == 0 && n == 2;
        let x_nan = if changed_x { 3 } else { 0 };
        tensor("x", 100 * rank + n + 7 * u64::from(changed_x), 1.0 + n as f64, (x_nan, 0, 0));
        for occ in 0..(1 + u64::from(n == 2)) {
            let changed_y = new && rank == 1 && ((n == 1 && occ == 0) || (n == 2 && occ == 1));
            let bad = !new && rank == 1 && n == 2 && occ == 1;
            let hash = 1000 + 100 * rank + 10 * n + occ + 5 * u64::from(changed_y);
            let rms = if changed_y { 9.5 } else { 2.0 };
            tensor("y", hash, rms, if bad { (1, 2, 0) } else { (0, 0, 0) });
        }
        if new && rank == 1 && n == 0 {
            tensor("z", 1, 1.0, (0, 0, 0));
        }
        sleep(Duration::from_millis(1));
    }
    session.stop().unwrap();
}

/// Steps and tensors per step of the many-tensors runs.
const MANY: (u64, u64) = (2000, 100);

/// A run of `MANY` tensors: in each step, tensors `t0` to `t99`; the new run's `t42` differs
/// from step 1500 on.
fn record_many(path: &Path, new: bool) {
    let session = waffle_std::Config::new(path).start().unwrap();
    let names: Vec<String> = (0..MANY.1).map(|i| format!("t{i}")).collect();
    for n in 0..MANY.0 {
        let _step = step(n);
        for (i, name) in names.iter().enumerate() {
            let changed = new && i == 42 && n >= 1500;
            tensor(name, n * 1000 + i as u64 + u64::from(changed), 1.0, (0, 0, 0));
        }
        if n % 100 == 99 {
            // Lets the collector drain the thread's buffer (no record is dropped).
            sleep(Duration::from_millis(5));
        }
    }
    session.stop().unwrap();
}

/// Records every file once (sessions are per process, so one after another).
fn files() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("waffle-diff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        record_kernels(&dir.join("k_base.bin"), false);
        record_kernels(&dir.join("k_new.bin"), true);
        for rank in 0..2 {
            record_tensors(&dir.join(format!("t_base{rank}.bin")), rank, false);
            record_tensors(&dir.join(format!("t_new{rank}.bin")), rank, true);
        }
        record_many(&dir.join("many_base.bin"), false);
        record_many(&dir.join("many_new.bin"), true);
        dir
    })
}

/// `waffle-decode ARGS...`: (exit code, stdout, stderr).
fn decode(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_waffle-decode")).args(args).output().expect("run");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!stderr.contains("panicked"), "waffle-decode panicked: {stderr}");
    (out.status.code().unwrap_or(-1), stdout.into_owned(), stderr.into_owned())
}

fn diff_json(args: &[&std::ffi::OsStr]) -> Json {
    let mut all: Vec<&std::ffi::OsStr> = vec!["diff".as_ref(), "--json".as_ref()];
    all.extend_from_slice(args);
    let (code, out, err) = decode(&all);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn kernel_row<'a>(json: &'a Json, name: &str) -> &'a Json {
    let rows = json["kernels"].as_array().unwrap();
    rows.iter().find(|k| k["name"] == name).unwrap_or_else(|| panic!("no kernel {name}: {json:#}"))
}

#[test]
fn kernels_are_aligned_by_step_name_and_occurrence() {
    let d = files();
    let json = diff_json(&[d.join("k_base.bin").as_ref(), d.join("k_new.bin").as_ref()]);
    let rows = json["kernels"].as_array().unwrap();
    // Slowest regression first: attn, about 5x (4 x 160 ms more).
    assert_eq!(rows[0]["name"], "attn", "{json:#}");
    let ratio = rows[0]["ratio"].as_f64().unwrap();
    assert!((3.0..6.0).contains(&ratio), "{ratio}");
    assert_eq!((rows[0]["base_count"].as_u64(), rows[0]["new_count"].as_u64()), (Some(4), Some(4)));
    assert!(rows.windows(2).all(|w| w[0]["change_ns"].as_i64() >= w[1]["change_ns"].as_i64()), "{json:#}");
    // One more mlp in step 3: 8 matched, 1 only in the new run.
    let mlp = kernel_row(&json, "mlp");
    assert_eq!(
        (mlp["status"].as_str(), mlp["matched"].as_u64(), mlp["only_new"].as_u64()),
        (Some("matched"), Some(8), Some(1))
    );
    // Fused and split, by time.
    for (name, status, partners) in [
        ("bias", "fused", vec!["bias_act"]),
        ("act", "fused", vec!["bias_act"]),
        ("bias_act", "fused", vec!["bias", "act"]),
        ("norm", "split", vec!["norm_a", "norm_b"]),
        ("norm_a", "split", vec!["norm"]),
        ("norm_b", "split", vec!["norm"]),
    ] {
        let row = kernel_row(&json, name);
        assert_eq!(row["status"], status, "{name}: {row}");
        assert_eq!(row["partners"], serde_json::json!(partners), "{name}: {row}");
    }
    assert_eq!(kernel_row(&json, "old_only")["status"], "missing_in_new");
    assert_eq!(kernel_row(&json, "new_only")["status"], "missing_in_base");
    // The worker thread's kernel lies in step 1 in the base run and step 2 in the new one, by
    // time: never in the same step.
    let worker = kernel_row(&json, "worker");
    assert_eq!(worker["status"], "other_steps", "{worker}");
    assert_eq!((worker["only_base"].as_u64(), worker["only_new"].as_u64()), (Some(1), Some(1)));
    // Step markers are not kernels; their time is the run's.
    assert!(rows.iter().all(|k| k["name"] != "step"));
    assert_eq!(json["base"]["steps"], 4);
    assert!(json["new"]["step_ns"].as_u64() > json["base"]["step_ns"].as_u64());
    // The text says the same, slowest first.
    let (code, text, err) =
        decode(&["diff".as_ref(), d.join("k_base.bin").as_ref(), d.join("k_new.bin").as_ref()]);
    assert_eq!(code, 0, "{err}");
    let table = text.split("kernels, slowest regressions first").nth(1).expect(&text);
    assert!(table.lines().nth(2).unwrap().trim_start().starts_with("attn "), "{text}");
    assert!(text.contains("fused (bias, act)"), "{text}");
    assert!(text.contains("split (norm_a, norm_b)"), "{text}");
}

#[test]
fn the_first_divergence_is_the_earliest_differing_tensor_across_ranks() {
    let d = files();
    let side = |which: &str| (0..2).map(|r| d.join(format!("t_{which}{r}.bin"))).collect::<Vec<_>>();
    let (base, new) = (side("base"), side("new"));
    let mut args: Vec<&std::ffi::OsStr> = vec!["--base".as_ref()];
    args.extend(base.iter().map(|p| p.as_os_str()));
    args.push("--new".as_ref());
    args.extend(new.iter().map(|p| p.as_os_str()));
    let json = diff_json(&args);
    // Rank 0 was recorded first: its step-2 x is earlier than rank 1's step-1 y.
    let first = &json["first_divergence"];
    assert_eq!(
        (first["name"].as_str(), first["step"].as_i64(), first["rank"].as_u64()),
        (Some("x"), Some(2), Some(0)),
        "{json:#}"
    );
    assert_eq!((first["base_rms"].as_f64(), first["new_rms"].as_f64()), (Some(3.0), Some(3.0)));
    assert_eq!(first["later_differing"], 2);
    let t = &json["tensors"];
    assert_eq!(
        (t["base"].as_u64(), t["compared"].as_u64(), t["differ"].as_u64(), t["only_new"].as_u64()),
        (Some(14), Some(14), Some(3), Some(1))
    );
    let nf = &json["first_nonfinite"];
    assert_eq!(
        (nf["base"]["name"].as_str(), nf["base"]["step"].as_i64(), nf["base"]["rank"].as_u64()),
        (Some("y"), Some(2), Some(1))
    );
    assert_eq!(
        (nf["base"]["occurrence"].as_u64(), nf["base"]["nan"].as_u64(), nf["base"]["pinf"].as_u64()),
        (Some(1), Some(1), Some(2))
    );
    assert_eq!(
        (nf["new"]["name"].as_str(), nf["new"]["rank"].as_u64(), nf["new"]["nan"].as_u64()),
        (Some("x"), Some(0), Some(3))
    );
    // Rank 1 alone: its first divergence is y of step 1, with both RMS values.
    let json = diff_json(&[base[1].as_ref(), new[1].as_ref()]);
    let first = &json["first_divergence"];
    assert_eq!(
        (first["name"].as_str(), first["step"].as_i64(), first["occurrence"].as_u64()),
        (Some("y"), Some(1), Some(0))
    );
    assert_eq!(
        (first["base_rms"].as_f64(), first["new_rms"].as_f64(), first["later_differing"].as_u64()),
        (Some(2.0), Some(9.5), Some(1))
    );
    // A run against itself: no divergence.
    let (code, text, err) = decode(&["diff".as_ref(), base[0].as_ref(), base[0].as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("first divergence: none, every aligned tensor is equal"), "{text}");
}

#[test]
fn many_tensors_are_compared_as_they_are_read_with_few_held() {
    let d = files();
    let diff =
        waffle_analyze::diff::diff_files(&[d.join("many_base.bin")], &[d.join("many_new.bin")], &mut |_| {})
            .unwrap();
    let t = &diff.tensors;
    let all = MANY.0 * MANY.1;
    assert_eq!((t.base, t.new, t.compared, t.differ), (all, all, all, MANY.0 - 1500));
    assert_eq!((t.only_base, t.only_new), (0, 0));
    let first = t.first_divergence.as_ref().expect("a divergence");
    assert_eq!((first.at.name.as_str(), first.at.step, first.at.occurrence), ("t42", Some(1500), 0));
    assert_eq!(first.later, MANY.0 - 1500 - 1);
    // Counterparts arrive close together (each run's reader hands tensors over 256 at a time):
    // a batch waits at most, never more than the window allows, far below the tensors' number.
    assert!(t.held <= 256, "{} tensors held at once", t.held);
    assert!(2 * waffle_analyze::diff::WINDOW < all as usize);
}

#[test]
fn why_first_nan_walks_back_from_the_first_tensor_with_a_nan() {
    let d = files();
    let (new0, new1) = (d.join("t_new0.bin"), d.join("t_new1.bin"));
    let (code, text, err) = decode(&["why".as_ref(), new0.as_ref(), new1.as_ref(), "--first-nan".as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("first NaN: tensor x (event "), "{text}");
    assert!(text.contains("\nSymptom\n  event \"tensor\""), "{text}");
    assert!(text.contains("← inside span \"step\""), "{text}");
    // Base rank 0 has no NaN (rank 1's has one, with a `y`).
    let (code, _, err) = decode(&["why".as_ref(), d.join("t_base0.bin").as_ref(), "--first-nan".as_ref()]);
    assert_ne!(code, 0);
    assert!(err.contains("no tensor with a NaN element"), "{err}");
    let (code, text, err) = decode(&["why".as_ref(), d.join("t_base1.bin").as_ref(), "--first-nan".as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("first NaN: tensor y (event "), "{text}");
}

#[test]
fn bad_input_names_the_file_and_fails_without_panicking() {
    let d = files();
    let base = d.join("k_base.bin");
    let missing = d.join("missing.bin");
    let (code, _, err) = decode(&["diff".as_ref(), base.as_ref(), missing.as_ref()]);
    assert_ne!(code, 0);
    assert!(err.contains(&missing.display().to_string()), "{err}");
    // Cut inside its header frame: damaged, at an offset.
    let cut = d.join("cut.bin");
    std::fs::write(&cut, &std::fs::read(&base).unwrap()[..16]).unwrap();
    let (code, _, err) = decode(&["diff".as_ref(), cut.as_ref(), base.as_ref()]);
    assert_ne!(code, 0);
    assert!(err.contains(&cut.display().to_string()) && err.contains("offset"), "{err}");
    // Damaged in the middle: a warning naming the file and the offset, and the rest compared.
    let mut bytes = std::fs::read(&base).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 64].iter_mut().for_each(|b| *b ^= 0x5a);
    let damaged = d.join("damaged.bin");
    std::fs::write(&damaged, bytes).unwrap();
    let (code, text, err) = decode(&["diff".as_ref(), damaged.as_ref(), base.as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("waffle-decode: warning: {}: offset ", damaged.display())), "{err}");
    assert!(text.contains("kernels, slowest regressions first"), "{text}");
    let foreign = d.join("foreign.bin");
    std::fs::write(&foreign, b"not a trace at all").unwrap();
    let (code, _, err) = decode(&["diff".as_ref(), base.as_ref(), foreign.as_ref(), "--json".as_ref()]);
    assert_ne!(code, 0);
    assert!(err.contains("not a waffle trace"), "{err}");
    // One file is not a diff.
    let (code, _, err) = decode(&["diff".as_ref(), base.as_ref()]);
    assert_ne!(code, 0);
    assert!(err.contains("BASE NEW"), "{err}");
}

/// The README's example: `diff_model` run twice, the second with layer 2 perturbed and `gelu`
/// slowed; the diff finds exactly both.
#[test]
fn the_example_run_twice_shows_the_perturbed_layer_and_the_slowed_kernel() {
    let dir = files().join("example");
    std::fs::create_dir_all(&dir).unwrap();
    let example = common::example("diff_model");
    let run = |out: &str, args: &[&str]| {
        let status = Command::new(&example).arg(dir.join(out)).args(args).status().unwrap();
        assert!(status.success());
    };
    run("base.bin", &[]);
    // 5 ms more per gelu, 80 ms in all: far more than the scheduler can add to the base run's
    // 16 gelus of a few µs each on a loaded machine. At the example's 500 µs (8 ms in all) the
    // ratio once came out under 2 while other tests ran: a preemption of a few ms in the base.
    run("new.bin", &["--perturb", "2", "--slow", "gelu", "--slow-us", "5000"]);
    let html = dir.join("diff.html");
    let json = diff_json(&[
        dir.join("base.bin").as_ref(),
        dir.join("new.bin").as_ref(),
        "--html".as_ref(),
        html.as_ref(),
    ]);
    let first = &json["first_divergence"];
    assert_eq!((first["name"].as_str(), first["step"].as_i64()), (Some("blk2/mlp"), Some(0)), "{json:#}");
    // In each of the 4 steps, blk2/mlp, blk2/out and blk3's three tensors differ; layers 0 and
    // 1 never change.
    assert_eq!(first["later_differing"], 5 * 4 - 1);
    assert_eq!(json["kernels"][0]["name"], "gelu", "{json:#}");
    assert!(json["kernels"][0]["ratio"].as_f64().unwrap() > 2.0);
    assert!(json["kernels"].as_array().unwrap().iter().all(|k| k["status"] == "matched"), "{json:#}");
    // The loader thread's `load` spans lie in the steps by time: each matched in its step.
    let load = kernel_row(&json, "load");
    assert_eq!((load["matched"].as_u64(), load["steps"].as_u64()), (Some(4), Some(4)), "{load}");
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: the data inline, nothing fetched.
    assert!(page.contains("\"blk2/mlp\""), "{page}");
    assert!(!page.contains(" src=") && !page.contains(" href=") && !page.contains("url("), "{page}");
}
