//! The C and C++ APIs end to end: programs in `tests/c` and `tests/cpp` are compiled with
//! warnings as errors against `libwaffle` (shared and static), run, and their trace files
//! decoded and compared with the exact tree they recorded.

mod common;

use common::{
    assert_tree, command, compile, compile_only, decode, render, run_ok, scratch, which, Link, CXX_FLAGS,
    C_FLAGS,
};
use std::path::PathBuf;
use waffle_analyze::why::{why, Reached, Relation, Selector};

fn c_source(name: &str) -> PathBuf {
    common::ffi_dir().join("tests/c").join(name)
}

const TREE: &str = r#"
process PROGRAM
  thread
    outer neg=-5 big=18446744073709551615 x=1.5 ok=true s=héllo n=abc none=
      ! cause why=testing
      inner <- event "cause" <- span "outer"
        ! leaf
      loop i=0 ~ round=0
      loop i=1 ~ round=1
        ! odd one odd=true
      loop i=2 ~ round=2
  thread
    process_task items=2 <- event "cause" (in span "outer")
      item i=0
      item i=1
"#;

/// `tests/c/SOURCE` compiled as `exe_name` (linked as `link`) in a scratch directory, run with a
/// trace file to write, and the trace decoded; and the directory, to remove.
fn recorded(source: &str, exe_name: &str, link: Link) -> (waffle_read::model::Trace, PathBuf) {
    let dir = scratch(exe_name);
    let exe = dir.join(exe_name);
    compile(&common::cc(), C_FLAGS, &[c_source(source)], &exe, link, &[]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    (decode(&[trace_file]), dir)
}

fn c_tree(link: Link, exe_name: &str) {
    let (trace, dir) = recorded("tree.c", exe_name, link);
    assert_tree(&render(&trace), &TREE.replace("PROGRAM", exe_name));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn c_macros_record_the_exact_tree() {
    c_tree(Link::Shared, "tree");
}

/// The same program linked with `libwaffle.a`: C callsites are registered at run time, so no
/// `--whole-archive` is needed; only the system libraries Rust's standard library uses.
#[test]
fn c_macros_record_the_exact_tree_statically_linked() {
    c_tree(Link::Static, "tree-static");
}

/// `tests/c/detach.c`: a span detached on the main thread and ended on a worker that recorded
/// inside it is one span, ended, with the worker's span as its child; what the main thread
/// records after detaching is not inside it.
#[test]
fn a_detached_span_ends_on_another_thread() {
    let (trace, dir) = recorded("detach.c", "detach", Link::Shared);
    assert_tree(
        &render(&trace),
        r#"
process detach
  thread
    job
    after
  thread
    step (in span "job")
"#,
    );
    let job = trace.processes[0].threads[0].spans.iter().find(|s| s.name() == "job").expect("job");
    let step = trace.processes[0].threads[1].spans.iter().find(|s| s.name() == "step").expect("step");
    assert!(job.ended && job.end_ns >= step.end_ns, "job ends after its step, on the worker");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_function_survives_null_and_garbage_arguments() {
    let (trace, dir) = recorded("garbage.c", "garbage", Link::Shared);
    let p = &trace.processes[0];
    assert_eq!(p.header.label("site"), Some("lab"));
    let g = "g".repeat(1024);
    assert_tree(
        &render(&trace).replace(&g, "g*1024"),
        r#"
process garbage-test rank=7
  thread
    odd � name null= bad utf8=a�b long=g*1024 huge len=g*1024 <- unknown 7777777777777777
      ! odd � name null=2.5
      ! named �
    ! after garbage n=42
"#,
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `C_FLAGS` or `CXX_FLAGS` followed by `extra`.
fn flags<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

/// The compiler's messages, for an assertion.
fn messages(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `WAFFLE_EVENT("x");` as a statement, its id ignored, warns neither in C nor in C++, with GCC
/// and (if installed) Clang, with and without `-pedantic`.
#[test]
fn a_bare_event_statement_compiles_without_warnings() {
    let dir = scratch("bare-event");
    let source = c_source("bare_event.c");
    let mut compilers = vec![(common::cc(), false), (common::cxx(), true)];
    match (which("clang"), which("clang++")) {
        (Some(clang), Some(clangxx)) => compilers.extend([
            (clang.to_str().unwrap().to_owned(), false),
            (clangxx.to_str().unwrap().to_owned(), true),
        ]),
        _ => eprintln!("clang is not installed: checked with {} and {} only", common::cc(), common::cxx()),
    }
    for (compiler, cxx) in &compilers {
        let base = if *cxx { CXX_FLAGS } else { C_FLAGS };
        let lang: &[&str] = if *cxx { &["-x", "c++"] } else { &[] };
        let with_pedantic = flags(base, lang);
        let without: Vec<&str> = with_pedantic.iter().copied().filter(|f| *f != "-pedantic").collect();
        for flags in [with_pedantic, without] {
            let out = compile_only(compiler, &flags, &source, &dir);
            assert!(out.status.success(), "{compiler} {flags:?}:\n{}", messages(&out));
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// With `WAFFLE_NO_SHORT_NAMES` the header defines no `SPAN`, `KV_*`: the program's own macros
/// and functions of those names compile, as C and as C++, and the `WAFFLE_` names work. Without
/// it the same program does not compile, which shows that the short names are there by default.
#[test]
fn no_short_names_leaves_the_short_names_to_the_program() {
    let dir = scratch("no-short-names");
    let source = c_source("no_short_names.c");
    let exe = dir.join("no_short_names");
    compile(&common::cc(), C_FLAGS, std::slice::from_ref(&source), &exe, Link::Shared, &[]);
    run_ok(&mut command(&exe));
    let exe = dir.join("no_short_names_cxx");
    compile(
        &common::cxx(),
        &flags(CXX_FLAGS, &["-x", "c++"]),
        std::slice::from_ref(&source),
        &exe,
        Link::Shared,
        &[],
    );
    run_ok(&mut command(&exe));

    let text = std::fs::read_to_string(&source).unwrap();
    let line = "#define WAFFLE_NO_SHORT_NAMES\n";
    assert!(text.contains(line));
    let with_short_names = dir.join("with_short_names.c");
    std::fs::write(&with_short_names, text.replace(line, "")).unwrap();
    let out = compile_only(&common::cc(), C_FLAGS, &with_short_names, &dir);
    assert!(!out.status.success(), "the short names are defined by default");
    assert!(messages(&out).contains("\"SPAN\" redefined"), "{}", messages(&out));
    let _ = std::fs::remove_dir_all(dir);
}

/// A span id where an event id belongs (and the other way round) does not compile, in C and in
/// C++ (where `waffle::SpanId` and `waffle::EventId` convert to the C types, but not into each
/// other); the right kind compiles.
#[test]
fn a_span_id_is_not_an_event_id() {
    let dir = scratch("id-types");
    let c = r#"#include "waffle_macros.h"
int main(void) {
  WAFFLE_SPAN_VAR(span, "span");
  waffle_event_id_t event = WAFFLE_EVENT("event");
  WAFFLE_SPAN("caused", WAFFLE_KV_CAUSE_SPAN(SPAN_ID), WAFFLE_KV_CAUSE_EVENT(EVENT_ID));
  return 0;
}
"#;
    let cxx = c.replace("waffle_event_id_t event", "waffle::EventId event");
    for (lang, text, flags, span_id) in
        [("c", c.to_owned(), C_FLAGS, "span.id"), ("cpp", cxx, CXX_FLAGS, "span.id()")]
    {
        let compiler = if lang == "c" { common::cc() } else { common::cxx() };
        for (swap, ok) in [(false, true), (true, false)] {
            let (s, e) = if swap { ("event", span_id) } else { (span_id, "event") };
            let source = dir.join(format!("ids.{lang}"));
            std::fs::write(&source, text.replace("SPAN_ID", s).replace("EVENT_ID", e)).unwrap();
            let out = compile_only(&compiler, flags, &source, &dir);
            assert_eq!(out.status.success(), ok, "{lang}, ids swapped: {swap}:\n{}", messages(&out));
            if !ok {
                let text = messages(&out);
                assert!(text.contains("waffle_event_id_t") && text.contains("waffle_span_id_t"), "{text}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `tests/cpp/c_macros.cpp`: C++ spans and events with the C macros' key-values (`WAFFLE_KV_*`
/// and the short `KV_*`) mixed with `"key", value` pairs and `waffle::CausedBy` /
/// `waffle::Correlate`, recorded with the right fields, links and correlations; ids assigned
/// to and from the C id types.
#[test]
fn cpp_macros_take_the_c_key_values() {
    let dir = scratch("c-macros-cpp");
    let exe = dir.join("c_macros");
    let source = common::ffi_dir().join("tests/cpp/c_macros.cpp");
    compile(&common::cxx(), CXX_FLAGS, &[source], &exe, Link::Shared, &[]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    let trace = decode(&[trace_file]);
    assert_tree(
        &render(&trace),
        r#"
process c_macros
  thread
    ! cause why=testing n=1
    ! other
    outer neg=-5 count=3 big=18446744073709551615 x=1.5 name=abc ok=true s=abc none= <- event "cause"
      inner x=2.5 <- event "other" <- span "outer" ~ round=7
        ! typed <- event "other" <- span "outer" ~ round=7
      loop i=0 twice=0 ~ round=0
      loop i=1 twice=2 ~ round=1
        ! odd one odd=true i=1
      loop i=2 twice=4 ~ round=2
"#,
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The original C++ example's `PJRT_NcclClient::AllReduce`, verbatim in
/// `tests/original/nccl_allreduce_body.inc`, compiles unchanged inside
/// `tests/original/nccl_allreduce_harness.cpp` (its class, `contains_nan` and a stand-in
/// `nccl.h`), with warnings as errors, and runs as two processes and as two threads: the fake
/// collective sums the ranks' buffers, rank 1's NaN reaches both. The harness starts no
/// session, so nothing is recorded; with `WAFFLE_OUTPUT` set it is, and `waffle-decode why`
/// leads from rank 0's symptom to rank 1's "Input buffer contains NaN" whether the ranks are
/// processes (their rank labels) or threads of one process (their spans' `rank` fields).
#[test]
fn original_cpp_example_body_compiles_unchanged_and_leads_to_rank_1() {
    let dir = scratch("original-nccl");
    let exe = dir.join("nccl_allreduce_harness");
    let original = common::ffi_dir().join("tests/original");
    let source = original.join("nccl_allreduce_harness.cpp");
    compile(&common::cxx(), CXX_FLAGS, &[source], &exe, Link::Shared, &[&original.join("include")]);
    for mode in ["procs", "threads"] {
        let run = dir.join(mode);
        std::fs::create_dir_all(&run).unwrap();
        run_ok(command(&exe).arg(mode).arg(&run).env_remove("WAFFLE_RANK"));
        let written: Vec<_> = std::fs::read_dir(&run).unwrap().collect();
        assert!(written.is_empty(), "{mode}: nothing is recorded without a session: {written:?}");

        // Recorded by WAFFLE_OUTPUT alone; `why` from rank 0's symptom reaches rank 1's cause
        // through the two ranks' NcclAllReduce spans, matched by order.
        let traced = dir.join(format!("{mode}-traced"));
        std::fs::create_dir_all(&traced).unwrap();
        let output = traced.join("nccl-%r.bin");
        run_ok(command(&exe).arg(mode).arg(&traced).env_remove("WAFFLE_RANK").env("WAFFLE_OUTPUT", output));
        let files: Vec<_> = match mode {
            "procs" => vec![traced.join("nccl-0.bin"), traced.join("nccl-1.bin")],
            _ => std::fs::read_dir(&traced).unwrap().map(|e| e.unwrap().path()).collect(),
        };
        assert_eq!(files.len(), if mode == "procs" { 2 } else { 1 }, "{mode}: {files:?}");
        let why = common::why_json(&files, SYMPTOM, 0, &[]);
        assert_eq!(why["symptom"]["fields"], serde_json::json!({}), "{why:#}");
        let relations: Vec<&str> =
            why["steps"].as_array().unwrap().iter().map(|s| s["relation"].as_str().unwrap()).collect();
        assert_eq!(relations, ["inside", "matched by order with", "caused by"], "{mode}: {why:#}");
        let (ours, theirs) = (&why["steps"][0]["item"], &why["steps"][1]["item"]);
        assert_eq!(
            (ours["name"].as_str(), ours["fields"]["rank"].as_i64()),
            (Some("NcclAllReduce"), Some(0))
        );
        assert_eq!(
            (theirs["name"].as_str(), theirs["fields"]["rank"].as_i64()),
            (Some("NcclAllReduce"), Some(1))
        );
        assert_eq!(why["steps"][1]["occurrence"], 1, "the second of three steps");
        let root = &why["root_causes"];
        assert_eq!(root.as_array().map(Vec::len), Some(1), "{mode}: {why:#}");
        assert_eq!((root[0]["name"].as_str(), root[0]["fields"]["rank"].as_i64()), (Some(CAUSE), Some(1)));
        if mode == "procs" {
            assert_eq!(root[0]["process"]["rank"], "1");
        } else {
            assert_ne!(root[0]["thread"]["tid"], why["symptom"]["thread"]["tid"], "rank 1's thread");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A program built with another release's header (simulated: a copy of `waffle.h` with
/// another `WAFFLE_ABI_VERSION`) is refused at start, with a status that says so.
#[test]
fn a_header_of_another_abi_version_is_refused_at_start() {
    let dir = scratch("abi");
    let include = dir.join("include");
    std::fs::create_dir_all(&include).unwrap();
    let header = std::fs::read_to_string(common::ffi_dir().join("include/waffle.h")).unwrap();
    let current = format!("#define WAFFLE_ABI_VERSION {}", waffle_abi_version());
    assert!(header.contains(&current), "waffle.h defines {current}");
    let other = header.replace(&current, &format!("#define WAFFLE_ABI_VERSION {}", waffle_abi_version() + 1));
    std::fs::write(include.join("waffle.h"), other).unwrap();
    let exe = dir.join("abi");
    compile(&common::cc(), C_FLAGS, &[c_source("abi.c")], &exe, Link::Shared, &[&include]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    assert!(!trace_file.exists(), "nothing is written when the ABI differs");
    let _ = std::fs::remove_dir_all(dir);
}

/// The ABI version in `capi/src/lib.rs`, read from the source.
fn waffle_abi_version() -> u32 {
    let lib = std::fs::read_to_string(common::ffi_dir().join("capi/src/lib.rs")).unwrap();
    let line = lib.lines().find(|l| l.starts_with("pub const WAFFLE_ABI_VERSION: u32 = ")).unwrap();
    line.trim_start_matches("pub const WAFFLE_ABI_VERSION: u32 = ").trim_end_matches(';').parse().unwrap()
}

const SYMPTOM: &str = "Output buffer is NaN after AllReduce";
const CAUSE: &str = "Input buffer contains NaN";

#[test]
fn cpp_nccl_example_across_two_processes() {
    let dir = scratch("nccl");
    let exe = dir.join("nccl_allreduce");
    let source = common::ffi_dir().join("tests/cpp/nccl_allreduce.cpp");
    compile(&common::cxx(), CXX_FLAGS, &[source], &exe, Link::Shared, &[]);
    run_ok(command(&exe).arg(&dir));
    let files = [dir.join("rank0.bin"), dir.join("rank1.bin")];
    let trace = decode(&files);
    let [r0, r1] = &trace.processes[..] else { panic!("two processes") };
    assert_eq!((r0.header.label("rank"), r1.header.label("rank")), (Some("0"), Some("1")));
    assert_ne!(r0.header.trace_id, 0);
    assert_eq!(r0.header.trace_id, r1.header.trace_id, "rank 1 records under rank 0's trace id");

    let mut expected = String::new();
    for rank in 0..2 {
        expected += &format!("process nccl_allreduce rank={rank}\n  thread\n");
        for it in 0..4 {
            expected += &format!("    train_step iteration={it}\n");
            if rank == 1 && it == 2 {
                expected += &format!(
                    "      ! {CAUSE} rank=1 suggestion=Check data loading pipeline for this rank.\n"
                );
            }
            let cause = if rank == 1 && it == 2 { format!(" <- event {CAUSE:?}") } else { String::new() };
            expected += &format!("      NcclAllReduce element_count=4 rank={rank}{cause} ~ allreduce={it}\n");
            if rank == 0 && it == 2 {
                expected += &format!("        ! {SYMPTOM}\n");
            }
            expected += &format!("      dispatch_task iteration={it}\n");
        }
        expected += &format!("    named {rank} kind=runtime\n      ! named event chars=55\n");
        for _ in 0..4 {
            expected += "  thread\n    process_task on_worker=true (in span \"dispatch_task\")\n";
        }
    }
    assert_tree(&render(&trace), &expected);

    // "What caused the symptom?": rank 0's span, correlated with rank 1's, caused by the NaN.
    let e = why(&trace, &Selector::name(SYMPTOM, 0)).expect("why");
    assert_eq!(e.symptom.rank.as_deref(), Some("0"));
    let [root] = &e.root_causes[..] else { panic!("one root cause: {}", e.to_text()) };
    assert_eq!((root.name.as_str(), root.rank.as_deref()), (CAUSE, Some("1")));
    let relations: Vec<(Relation, &str, Option<&str>)> = e
        .steps
        .iter()
        .filter_map(|s| match &s.reached {
            Reached::Item(i) => Some((s.relation, i.name.as_str(), i.rank.as_deref())),
            _ => None,
        })
        .collect();
    for step in [
        (Relation::Inside, "NcclAllReduce", Some("0")),
        (Relation::CorrelatedWith, "NcclAllReduce", Some("1")),
        (Relation::CausedBy, CAUSE, Some("1")),
    ] {
        assert!(relations.contains(&step), "missing {step:?} in\n{}", e.to_text());
    }
    let _ = std::fs::remove_dir_all(dir);
}
