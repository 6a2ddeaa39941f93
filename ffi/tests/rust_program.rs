//! A Rust program (this test binary, which links `waffle-std`) that loads a C library recording
//! through `libwaffle.so`: two copies of waffle in one process, one session and one file. The
//! C spans are children of the Rust span that called into the library, whichever copy started
//! the session: the Rust program (the library loaded after the start joins it when it loads),
//! or the library through `waffle_start` (the Rust copy, loaded first, joins it then).
//!
//! Each case runs in a child run of this binary, so that its process holds only its session:
//! the child runs only [`child`], in the mode `WAFFLE_RUST_PROGRAM_CHILD` names.

mod common;

use common::{compile, decode, lib_dir, render, scratch, Link, C_FLAGS};
use std::{
    ffi::{c_char, c_void, CString},
    path::{Path, PathBuf},
    process::Command,
};

const CHILD: &str = "WAFFLE_RUST_PROGRAM_CHILD";

/// `plugin/plugin.c` built as a shared library linked with `libwaffle.so`.
fn plugin(dir: &Path) -> PathBuf {
    let lib = dir.join("libplugin.so");
    let source = common::ffi_dir().join("tests/plugin/plugin.c");
    let flags: Vec<&str> = C_FLAGS.iter().copied().chain(["-shared", "-fPIC"]).collect();
    compile(&common::cc(), &flags, &[source], &lib, Link::Shared, &[]);
    lib
}

fn run_child(mode: &str, plugin: &Path, trace: &Path) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env("PLUGIN", plugin)
        .env("TRACE", trace)
        .env_remove("WAFFLE_OUTPUT")
        .env_remove("WAFFLE_HUB");
    let out = cmd.output().expect("run child");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child {mode} failed:\n{}\n{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(!stderr.contains("waffle:"), "{stderr}");
}

const EXPECTED: &str = "\
process rust_program
  thread
    rust_outer
      c_work n=3
        ! c_done n=3
";

fn check(mode: &str) {
    let _ = lib_dir(); // libwaffle.so, built before the plugin links it
    let dir = scratch(&format!("rust-program-{mode}"));
    let plugin = plugin(&dir);
    let trace = dir.join("trace.bin");
    run_child(mode, &plugin, &trace);
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files.len(), 2, "the plugin and one trace: {files:?}");
    let rendered = render(&decode(&[trace]));
    let masked = rendered.replacen(&rendered[..rendered.find('\n').unwrap()], "process rust_program", 1);
    common::assert_tree(&masked, EXPECTED);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_c_library_loaded_after_the_rust_session_started_records_into_it() {
    check("rust-first");
}

#[test]
fn the_rust_program_records_into_the_session_its_c_library_started() {
    check("c-first");
}

/// What a child run does.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    let trace = std::env::var("TRACE").unwrap();
    let plugin = CString::new(std::env::var("PLUGIN").unwrap()).unwrap();
    let open = || {
        // SAFETY: the path is NUL-terminated; loading the plugin runs libwaffle.so's
        // constructor, which registers its copy of waffle.
        let handle = unsafe { libc::dlopen(plugin.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen plugin");
        handle
    };
    let symbol = |handle: *mut c_void, name: &std::ffi::CStr| {
        // SAFETY: `handle` is a live handle and `name` NUL-terminated.
        let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
        assert!(!f.is_null(), "{name:?}");
        f
    };
    match mode.as_str() {
        "rust-first" => {
            let session = waffle_std::start(&trace).expect("start");
            let handle = open();
            // SAFETY: `plugin_work` is `void (long long)` in plugin.c.
            let work: extern "C" fn(i64) = unsafe { std::mem::transmute(symbol(handle, c"plugin_work")) };
            {
                let _outer = waffle::span!("rust_outer");
                work(3);
            }
            session.stop().expect("stop");
        }
        "c-first" => {
            let handle = open();
            // SAFETY: the signatures are those of plugin.c.
            let (start, work, stop) = unsafe {
                (
                    std::mem::transmute::<*mut c_void, extern "C" fn(*const c_char) -> i32>(symbol(
                        handle,
                        c"plugin_start",
                    )),
                    std::mem::transmute::<*mut c_void, extern "C" fn(i64)>(symbol(handle, c"plugin_work")),
                    std::mem::transmute::<*mut c_void, extern "C" fn() -> i32>(symbol(
                        handle,
                        c"plugin_stop",
                    )),
                )
            };
            let path = CString::new(trace).unwrap();
            assert_eq!(start(path.as_ptr()), 0, "waffle_start");
            {
                let _outer = waffle::span!("rust_outer");
                work(3);
            }
            assert_eq!(stop(), 0, "waffle_stop");
        }
        other => panic!("unknown mode {other}"),
    }
}
