//! `waffle-decode why` on a real two-process run: the `nan_allreduce` example's ranks exchange
//! buffers over TCP, rank 1 injects a NaN, rank 0 sees it after the allreduce, and `why` must
//! name rank 1's input event as the root cause, through both ranks' correlated allreduce spans.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;

use serde_json::Value as Json;
use std::{path::PathBuf, process::Command, sync::OnceLock};

const SYMPTOM: &str = "Output buffer is NaN after AllReduce";
const CAUSE: &str = "Input buffer contains NaN";

/// The `nan_allreduce` example's binary.
fn example() -> PathBuf {
    common::example("nan_allreduce")
}

/// Runs the example once for all tests; returns its output directory and the trace id it
/// printed.
fn run() -> &'static (PathBuf, String) {
    static RUN: OnceLock<(PathBuf, String)> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("waffle-why-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(example()).arg(&dir).output().expect("run the example");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the example failed: {stdout}\n{stderr}");
        assert!(stdout.contains("waffle-decode why"), "{stdout}");
        let trace_id = stdout.strip_prefix("trace ").and_then(|s| s.split(':').next()).expect("trace id");
        (dir, trace_id.to_owned())
    })
}

/// `waffle-decode why rank0.bin rank1.bin ARGS...`: (exit code, stdout, stderr).
fn why(args: &[&str]) -> (i32, String, String) {
    let dir = &run().0;
    let out = Command::new(env!("CARGO_BIN_EXE_waffle-decode"))
        .arg("why")
        .args([dir.join("rank0.bin"), dir.join("rank1.bin")])
        .args(args)
        .output()
        .expect("run waffle-decode");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!stderr.contains("panicked"), "waffle-decode panicked: {stderr}");
    (out.status.code().unwrap_or(-1), stdout.into_owned(), stderr.into_owned())
}

#[test]
fn why_names_rank_1s_input_as_the_root_cause() {
    let (code, text, err) = why(&["--event", SYMPTOM]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "no warnings expected: {err}");
    let (chain, root) = text.split_once("\nRoot cause\n").expect("a single root cause");
    assert!(chain.starts_with(&format!("Symptom\n  event {SYMPTOM:?}")), "{text}");
    for step in [
        "\n  ← inside span \"allreduce\"",
        "\n    ← correlated with span \"allreduce\"",
        &format!("\n      ← caused by event {CAUSE:?}"),
    ] {
        assert!(chain.contains(step), "missing {step:?} in\n{text}");
    }
    let mut root = root.lines();
    assert!(root.next().unwrap().starts_with(&format!("  event {CAUSE:?} ")), "{text}");
    assert!(root.next().unwrap().trim_start().starts_with("rank 1 ("), "{text}");
    assert_eq!(
        root.next().unwrap().trim(),
        "rank=1 suggestion=\"Check data loading pipeline for this rank.\""
    );
    assert_eq!(root.next(), None, "{text}");

    let (code, json, err) = why(&["--event", SYMPTOM, "--json"]);
    assert_eq!(code, 0, "{err}");
    let j: Json = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(j["version"], 3);
    assert_eq!(j["symptom"]["name"], SYMPTOM);
    assert_eq!(j["symptom"]["process"]["rank"], "0");
    let roots = j["root_causes"].as_array().unwrap();
    assert_eq!(roots.len(), 1, "{json}");
    assert_eq!(roots[0]["name"], CAUSE);
    assert_eq!(roots[0]["kind"], "event");
    assert_eq!(roots[0]["process"]["rank"], "1");

    // The chain: symptom → inside rank 0's allreduce → correlated with rank 1's → caused by.
    let steps = j["steps"].as_array().unwrap();
    let find = |relation: &str, name: &str, rank: &str| {
        steps
            .iter()
            .find(|s| {
                s["relation"] == relation && s["item"]["name"] == name && s["item"]["process"]["rank"] == rank
            })
            .unwrap_or_else(|| panic!("no step {relation} {name} on rank {rank} in {json}"))
    };
    let ar0 = find("inside", "allreduce", "0");
    assert_eq!(ar0["from"], j["symptom"]["id"]);
    assert_eq!(ar0["depth"], 1);
    let ar1 = find("correlated with", "allreduce", "1");
    assert_eq!(ar1["from"], ar0["id"]);
    assert_eq!(ar1["item"]["correlation"], ar0["item"]["correlation"]);
    assert_eq!(ar1["item"]["correlation"]["value"], 2);
    let cause = find("caused by", CAUSE, "1");
    assert_eq!(cause["from"], ar1["id"]);
    assert_eq!(cause["id"], roots[0]["id"]);
    assert_eq!(ar1["item"]["links"], serde_json::json!([roots[0]["id"]]));
}

#[test]
fn both_ranks_share_the_trace_and_each_round_is_one_correlation_group() {
    let (dir, trace_id) = run();
    let decoded = waffle_read::decode::decode_files(&[dir.join("rank0.bin"), dir.join("rank1.bin")]).unwrap();
    assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
    let trace = &decoded.trace;
    let [r0, r1] = &trace.processes[..] else { panic!("two processes") };
    assert_eq!((r0.header.label("rank"), r1.header.label("rank")), (Some("0"), Some("1")));
    assert_ne!(r0.header.trace_id, 0);
    assert_eq!(r0.header.trace_id, r1.header.trace_id, "both ranks record under one trace id");
    assert_eq!(format!("{:032x}", r0.header.trace_id), *trace_id, "the driver's WAFFLE_TRACE_ID");
    assert!(r0.header.parent_span().is_none() && r1.header.parent_span().is_none(), "no parent span needed");

    let groups: Vec<_> = trace.correlations().into_iter().filter(|g| g.key == "allreduce").collect();
    assert_eq!(groups.iter().map(|g| g.value).collect::<Vec<_>>(), [0, 1, 2, 3], "one group per round");
    for g in &groups {
        let mut procs: Vec<usize> = g.members.iter().map(|m| m.process).collect();
        procs.sort_unstable();
        assert_eq!(procs, [0, 1], "round {}: one allreduce span per rank", g.value);
        for &m in &g.members {
            assert_eq!(trace.describe(m).callsite.name, "allreduce");
        }
    }
}

#[test]
fn why_errors_say_what_is_there() {
    let (code, out, err) = why(&["--event", "Output buffer NaN"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.starts_with("waffle-decode: error: no event named \"Output buffer NaN\" in these files"),
        "{err}"
    );
    assert!(err.contains(&format!("closest names present: {SYMPTOM:?}")), "{err}");

    let (code, _, err) = why(&["--event", SYMPTOM, "--nth", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("there is only 1; --nth takes 0 to 0"), "{err}");
    let (code, _, err) = why(&["--event", "allreduce", "--nth", "8"]);
    assert_eq!(code, 1);
    assert!(err.contains("there are only 8"), "{err}");

    let (code, _, err) = why(&["--id", "0x1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no span or event with id 0000000000000001"), "{err}");
    let (code, _, err) = why(&["--id", "nonsense"]);
    assert_eq!(code, 2, "a usage error: {err}");

    // The nth occurrence and the id select the same symptom.
    let (code, json, _) = why(&["--event", "allreduce", "--nth", "7", "--json"]);
    assert_eq!(code, 0);
    let j: Json = serde_json::from_str(&json).unwrap();
    let id = j["symptom"]["id"].as_str().unwrap().to_owned();
    let (code, json, _) = why(&["--id", &id, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Json>(&json).unwrap()["symptom"]["id"], id.as_str());
}
