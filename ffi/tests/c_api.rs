//! The C and C++ APIs end to end: programs in `tests/c` and `tests/cpp` are compiled with
//! warnings as errors against `libwaffle` (shared and static), run, and their trace files
//! decoded and compared with the exact tree they recorded.

mod common;

use common::{assert_tree, command, compile, decode, render, run_ok, scratch, Link, CXX_FLAGS, C_FLAGS};
use std::path::PathBuf;
use waffle_std::analysis::{why, Reached, Relation, Selector};

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

fn c_tree(link: Link, exe_name: &str) {
    let dir = scratch(exe_name);
    let exe = dir.join(exe_name);
    compile(&common::cc(), C_FLAGS, &[c_source("tree.c")], &exe, link, &[]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    let trace = decode(&[trace_file]);
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

#[test]
fn every_function_survives_null_and_garbage_arguments() {
    let dir = scratch("garbage");
    let exe = dir.join("garbage");
    compile(&common::cc(), C_FLAGS, &[c_source("garbage.c")], &exe, Link::Shared, &[]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    let trace = decode(&[trace_file]);
    let p = &trace.processes[0];
    assert_eq!(p.label("site"), Some("lab"));
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

/// The ABI version in `src/lib.rs`, read from the source (this test cannot link the cdylib).
fn waffle_abi_version() -> u32 {
    let lib = std::fs::read_to_string(common::ffi_dir().join("src/lib.rs")).unwrap();
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
    assert_eq!((r0.label("rank"), r1.label("rank")), (Some("0"), Some("1")));
    assert_ne!(r0.trace_id, 0);
    assert_eq!(r0.trace_id, r1.trace_id, "rank 1 records under rank 0's trace id");

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
