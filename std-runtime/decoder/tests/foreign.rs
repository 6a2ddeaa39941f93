//! Other tools' traces as inputs, run as a user runs them: PyTorch profiler traces (Kineto's
//! Chrome JSON, plain and gzipped) made here in its shape, exported to every format, compared
//! with `diff` (kernels by step, name and occurrence, fusion, the kernel totals, `--cpu`),
//! explained by `why` back to the launch, mixed with a `trace.bin`, and bad or cut input.

use serde_json::{json, Value as Json};
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-foreign-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn decode(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waffle-decode")).args(args).output().unwrap()
}

fn ok(args: &[&str]) -> (String, String) {
    let out = decode(args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{args:?}: {stderr}");
    (stdout, stderr)
}

/// A profile in the PyTorch profiler's shape: `steps` steps on one host thread, each running
/// the ops of `kernels` (op, kernel, µs), each op launching its kernel on GPU 0's stream 7
/// through `cudaLaunchKernel` (a correlation, an `ac2g` flow, the op's External id on the
/// kernel), a copy after the kernels, and the step on the GPU as an annotation around its work.
fn profile(steps: u32, kernels: &[(&str, &str, f64)]) -> Json {
    let mut ev = vec![
        json!({"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}}),
        json!({"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4243, "args": {"name": "main"}}),
        json!({"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}),
        json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}}),
    ];
    let (mut corr, mut ext) = (1u64, 1u64);
    for s in 0..steps {
        let t0 = 10.0 + f64::from(s) * 2000.0;
        let mut host = t0 + 2.0;
        let mut gpu = t0 + 50.0;
        let gpu0 = gpu;
        for (op, name, us) in
            kernels.iter().copied().chain([("aten::copy_", "Memcpy DtoD (Device -> Device)", 3.5)])
        {
            let copy = name.starts_with("Memcpy");
            let (launch, cat) =
                if copy { ("cudaMemcpyAsync", "gpu_memcpy") } else { ("cudaLaunchKernel", "kernel") };
            ev.push(json!({"ph": "X", "cat": "cpu_op", "name": op, "pid": 4242, "tid": 4243, "ts": host, "dur": 20.0,
                "args": {"External id": ext, "Input Dims": [[8, 64], [64, 64]], "Sequence number": ext}}));
            ev.push(json!({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 4242, "tid": 4243, "ts": host + 5.0,
                "dur": 6.0, "args": {"correlation": corr, "cbid": 211}}));
            ev.push(json!({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": gpu, "dur": us,
                "args": {"correlation": corr, "External id": ext, "device": 0, "stream": 7}}));
            ev.push(json!({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 4242, "tid": 4243, "ts": host + 5.0}));
            ev.push(json!({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": gpu, "bp": "e"}));
            host += 25.0;
            gpu += us + 1.0;
            corr += 1;
            ext += 1;
        }
        ev.push(json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{s}"), "pid": 4242, "tid": 4243,
            "ts": t0, "dur": 1500.0}));
        ev.push(json!({"ph": "X", "cat": "gpu_user_annotation", "name": format!("ProfilerStep#{s}"), "pid": 0, "tid": 7,
            "ts": gpu0 - 0.5, "dur": gpu - gpu0 + 1.0}));
    }
    json!({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
        "baseTimeNanoseconds": 1_764_000_000_000_000_000u64, "displayTimeUnit": "ms", "traceEvents": ev})
}

/// The durations of the kernels, copies and sets of a profile, summed, in ns.
fn device_ns(p: &Json) -> f64 {
    let ev = p["traceEvents"].as_array().unwrap();
    let dev = ev.iter().filter(|e| matches!(e["cat"].as_str(), Some("kernel" | "gpu_memcpy" | "gpu_memset")));
    dev.map(|e| e["dur"].as_f64().unwrap() * 1000.0).sum()
}

/// A diff report's kernel total for `side` is the sum of profile `p`'s device durations.
fn assert_kernel_total(report: &Json, side: &str, p: &Json) {
    let kernel_ns = report[side]["kernel_ns"].as_f64().unwrap();
    assert!((kernel_ns - device_ns(p)).abs() < 1.0, "{side}: {kernel_ns} against {}", device_ns(p));
}

fn write_json(path: &Path, v: &Json) {
    std::fs::write(path, serde_json::to_vec(v).unwrap()).unwrap();
}

fn write_gz(path: &Path, v: &Json) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&serde_json::to_vec(v).unwrap()).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

const BASE: [(&str, &str, f64); 4] = [
    ("aten::mm", "sm90_gemm", 100.0),
    ("aten::add", "bias", 10.0),
    ("aten::gelu", "gelu", 20.0),
    ("aten::layer_norm", "layer_norm", 30.0),
];
const NEW: [(&str, &str, f64); 3] = [
    ("aten::mm", "sm90_gemm", 150.0),
    ("triton_poi_fused_add_gelu", "bias_gelu", 28.0),
    ("aten::layer_norm", "layer_norm", 30.0),
];
/// The base model on another vendor's GPU: its GEMM under another name, as slow as twice the
/// base's, and its layer norm split in two.
const OTHER: [(&str, &str, f64); 5] = [
    ("aten::mm", "Cijk_Ailk_Bljk_SB_MT128x128", 200.0),
    ("aten::add", "bias", 10.0),
    ("aten::gelu", "gelu", 20.0),
    ("aten::layer_norm", "layer_norm_stats", 12.0),
    ("aten::layer_norm", "layer_norm_apply", 14.0),
];

#[test]
fn diff_compares_the_gpu_work_of_two_profiles() {
    let d = dir("diff");
    let (base, new) = (profile(6, &BASE), profile(6, &NEW));
    let (a, b) = (d.join("fp32.json"), d.join("bf16.json.gz"));
    write_json(&a, &base);
    write_gz(&b, &new);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let (json, _) = ok(&["diff", a, b, "--json"]);
    let report: Json = serde_json::from_str(&json).unwrap();
    for (side, p) in [("base", &base), ("new", &new)] {
        assert_kernel_total(&report, side, p);
        assert_eq!(report[side]["steps"], 6, "{side}");
    }
    let rows = report["kernels"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no row {name}: {json}"))
    };
    let gemm = row("sm90_gemm");
    assert_eq!((gemm["base_count"].as_u64(), gemm["new_count"].as_u64()), (Some(6), Some(6)));
    assert!((gemm["ratio"].as_f64().unwrap() - 1.5).abs() < 1e-9, "{gemm}");
    assert_eq!(row("bias_gelu")["status"], "fused", "{json}");
    assert!(row("Memcpy DtoD (Device -> Device)")["status"] == "matched");
    // Only the device's work: no CPU op, runtime call or annotation is a row.
    assert!(!rows
        .iter()
        .any(|r| r["name"].as_str().unwrap().starts_with("aten::") || r["name"] == "cudaLaunchKernel"));
    assert!(!rows.iter().any(|r| r["name"].as_str().unwrap().starts_with("ProfilerStep")));
    // The report names the inputs, not the converted files.
    assert_eq!(report["base"]["files"], json!([a]));

    let (text, _) = ok(&["diff", "--cpu", a, b]);
    assert!(text.contains("aten::mm") && text.contains("cudaLaunchKernel"), "{text}");
    let aten = text.lines().find(|l| l.trim_start().starts_with("aten::layer_norm ")).unwrap();
    assert!(aten.contains("matched"), "{aten}");
}

#[test]
fn kernels_of_different_names_pair_by_the_op_that_launched_them() {
    let d = dir("vendors");
    let (a, b) = (d.join("nvidia.json"), d.join("amd.json"));
    write_json(&a, &profile(4, &BASE));
    write_json(&b, &profile(4, &OTHER));
    let (json, _) = ok(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    let report: Json = serde_json::from_str(&json).unwrap();
    let rows = report["kernels"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no row {name}: {json}"))
    };
    // Times that disagree (2x) and names that differ: paired by aten::mm all the same.
    assert_eq!(
        (&row("sm90_gemm")["status"], &row("sm90_gemm")["partners"]),
        (&json!("renamed"), &json!(["Cijk_Ailk_Bljk_SB_MT128x128"]))
    );
    assert_eq!(row("Cijk_Ailk_Bljk_SB_MT128x128")["partners"], json!(["sm90_gemm"]));
    assert_eq!(
        (&row("layer_norm")["status"], &row("layer_norm")["partners"]),
        (&json!("split"), &json!(["layer_norm_stats", "layer_norm_apply"]))
    );
    assert_eq!(row("gelu")["status"], "matched");
}

#[test]
fn every_format_takes_a_profile_and_keeps_its_launches() {
    let d = dir("formats");
    let p = profile(2, &BASE);
    let input = d.join("run.json.gz");
    write_gz(&input, &p);
    let input = input.to_str().unwrap();
    for ext in ["pftrace", "otlp.pb", "otlp.json", "jaeger.json", "zipkin.json", "chrome.json", "xplane.pb"] {
        let out = d.join(format!("run.{ext}"));
        let (_, stderr) = ok(&[input, "-o", out.to_str().unwrap()]);
        assert!(
            stderr.contains("PyTorch profiler trace, process python3 (pid 4242): 1 threads, 1 device queues"),
            "{stderr}"
        );
        assert!(std::fs::metadata(&out).unwrap().len() > 1000, "{ext}");
    }
    // Chrome JSON back: the kernels on the stream's thread, each with a flow from its launch.
    let back: Json = serde_json::from_slice(&std::fs::read(d.join("run.chrome.json")).unwrap()).unwrap();
    let ev = back["traceEvents"].as_array().unwrap();
    let gemms: Vec<_> = ev.iter().filter(|e| e["name"] == "sm90_gemm" && e["ph"] == "X").collect();
    assert_eq!(gemms.len(), 2);
    assert!(gemms.iter().all(|g| (g["dur"].as_f64().unwrap() - 100.0).abs() < 1e-6), "{gemms:?}");
    let stream = ev
        .iter()
        .find(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == gemms[0]["tid"])
        .unwrap();
    assert_eq!(stream["args"]["name"], "GPU 0 / stream 7");
    // XSpace: the streams on the GPU's plane, as device tracks are.
    let xspace = std::fs::read(d.join("run.xplane.pb")).unwrap();
    assert!(xspace.windows(13).any(|w| w == b"/device:GPU:0"), "no GPU plane");
    let flows = ev.iter().filter(|e| e["ph"] == "f").count();
    assert!(flows >= 2 * (BASE.len() + 1), "a flow into each kernel and copy: {flows}");
}

#[test]
fn why_leads_from_a_kernel_back_to_the_op_that_launched_it() {
    let d = dir("why");
    let input = d.join("run.json");
    write_json(&input, &profile(1, &BASE));
    let (text, _) = ok(&["why", input.to_str().unwrap(), "--event", "gelu"]);
    let (launch, op) = (text.find("cudaLaunchKernel"), text.find("aten::gelu"));
    assert!(launch.is_some() && op.is_some(), "{text}");
}

#[test]
fn a_profile_mixes_with_waffle_files() {
    let d = dir("mixed");
    let input = d.join("run.json");
    write_json(&input, &profile(1, &BASE));
    let v1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1.bin");
    let out = d.join("both.chrome.json");
    let (_, stderr) = ok(&[v1.to_str().unwrap(), input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(stderr.contains("v1.bin: pid") && stderr.contains("run.json: pid 4242 (python3)"), "{stderr}");
    let back: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let pids: std::collections::BTreeSet<_> =
        back["traceEvents"].as_array().unwrap().iter().filter_map(|e| e["pid"].as_u64()).collect();
    assert!(pids.len() >= 2 && pids.contains(&4242), "{pids:?}");
}

#[test]
fn bad_and_cut_profiles() {
    let d = dir("bad");
    let bad = d.join("bad.json");
    let text = r#"{"traceEvents": [{"ph": "X", "ts": 1 "dur": 2}]}"#;
    std::fs::write(&bad, text).unwrap();
    let at = format!("at byte {}", text.find(r#""dur""#).unwrap());
    let out = decode(&[bad.to_str().unwrap(), "-o", d.join("x.pftrace").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("bad.json: not a Chrome trace") && stderr.contains(&at), "{stderr}");
    assert!(!d.join("x.pftrace").exists(), "no output from bad input");

    // A gzipped profile cut in the middle: what came before the cut, and a warning.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&serde_json::to_vec(&profile(8, &BASE)).unwrap()).unwrap();
    let bytes = gz.finish().unwrap();
    let cut = d.join("cut.json.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = d.join("cut.chrome.json");
    let (_, stderr) = ok(&[cut.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(stderr.contains("warning") && stderr.contains("cut short"), "{stderr}");
    let back: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ops = back["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "aten::mm").count();
    assert!(ops > 0 && ops < 8, "some steps, not all: {ops}");
}

#[test]
fn two_profiles_of_the_same_file_name_stay_apart() {
    // The usual layout of two runs compared: `run_a/trace.json` against `run_b/trace.json`.
    // Their converted files were once named after the file alone, and the second overwrote the
    // first: the diff compared the new run with itself.
    let d = dir("same-name");
    let (da, db) = (d.join("run_a"), d.join("run_b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    let (base, new) = (profile(3, &BASE), profile(3, &NEW));
    let (a, b) = (da.join("trace.json"), db.join("trace.json"));
    write_json(&a, &base);
    write_json(&b, &new);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (json, stderr) = ok(&["diff", a, b, "--json"]);
    // Converted at once, on two threads where there are two cores; told in the inputs' order.
    let said = |file: &str| {
        stderr.find(&format!("{file}: PyTorch profiler trace")).unwrap_or_else(|| panic!("{stderr}"))
    };
    assert!(said(a) < said(b), "{stderr}");
    let report: Json = serde_json::from_str(&json).unwrap();
    for (side, p, file) in [("base", &base, a), ("new", &new, b)] {
        assert_kernel_total(&report, side, p);
        assert_eq!(report[side]["files"], json!([file]), "{side}");
    }

    // Exported together, each keeps its own launches: correlation values were salted with the
    // file's name, so the two files' values met and every launch linked across the two.
    let alone = |file: &str| -> usize { links(&export(&d, &[file], "alone")) };
    let out = export(&d, &[a, b], "both");
    assert_eq!(links(&out), alone(a) + alone(b), "links of the two exported together");
}

/// The OTLP JSON export of `inputs` into `dir`.
fn export(dir: &Path, inputs: &[&str], name: &str) -> Json {
    let out = dir.join(format!("{name}.otlp.json"));
    let mut args = vec!["-q"];
    args.extend(inputs);
    args.extend(["-o", out.to_str().unwrap()]);
    ok(&args);
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// How many links the spans of an OTLP JSON export hold.
fn links(otlp: &Json) -> usize {
    let spans =
        otlp["resourceSpans"].as_array().unwrap().iter().flat_map(|r| r["scopeSpans"].as_array().unwrap());
    spans
        .flat_map(|s| s["spans"].as_array().unwrap())
        .map(|s| s["links"].as_array().map_or(0, Vec::len))
        .sum()
}
