//! What the C, C++ and MPI tests share: building `libwaffle`, compiling and running programs
//! against it, and rendering a decoded trace as a tree to compare exactly. `waffle-mpi`'s tests
//! include this module too (by path), and `mpi` for running MPI programs.

#![allow(dead_code)] // each test binary uses part of it

use std::{
    collections::HashMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
};
use waffle_read::model::{Item, Trace};

pub mod mpi;

/// `target/<profile>`: the test executable is `target/<profile>/deps/<test>-<hash>`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_owned()
}

fn release() -> bool {
    profile_dir().file_name().is_some_and(|n| n == "release")
}

/// Runs `cargo build` for `args` in the profile of this test (once per package and target).
pub fn cargo_build(args: &[&str]) {
    let mut cargo = Command::new(env!("CARGO"));
    cargo.arg("build").args(args);
    // Into this test's target directory, also when the outer `cargo test` was given one.
    cargo.arg("--target-dir").arg(profile_dir().parent().expect("target directory"));
    if release() {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("run cargo");
    assert!(status.success(), "cargo build {args:?} failed: {status}");
}

/// The directory holding `libwaffle.so` and `libwaffle.a`, built now if needed: `cargo test`
/// builds only an rlib's tests, not a cdylib or staticlib.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        cargo_build(&["-p", "waffle-ffi", "--lib"]);
        let dir = profile_dir();
        for lib in ["libwaffle.so", "libwaffle.a"] {
            assert!(dir.join(lib).exists(), "{} was not built", dir.join(lib).display());
        }
        dir
    })
}

/// The `waffle-decode` binary, built now if needed.
pub fn waffle_decode() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "waffle-decode", "--bin", "waffle-decode"]);
        profile_dir().join("waffle-decode")
    })
}

/// `ffi/`: the package's directory, or for a package inside it (`ffi/mpi`), the nearest
/// directory above holding `include/waffle.h`.
pub fn ffi_dir() -> &'static Path {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package.ancestors().find(|d| d.join("include/waffle.h").is_file()).unwrap_or(package)
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("waffle-ffi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

/// How a program is linked against waffle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `-lwaffle` with an rpath to the build directory.
    Shared,
    /// `libwaffle.a` and the system libraries Rust's standard library needs.
    Static,
}

/// Warnings are errors; C is ISO C11 with `-pedantic` (the macros' GNU extensions are spelled
/// so that it accepts them), C++ is C++17.
pub const C_FLAGS: &[&str] = &["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-g"];
pub const CXX_FLAGS: &[&str] = &["-std=c++17", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-g"];

/// `compiler` with `flags`, then `include` first on the include path (then `ffi/include` and
/// `ffi/tests/c`).
fn compiler_command(compiler: &str, flags: &[&str], include: &[&Path]) -> Command {
    let mut cmd = Command::new(compiler);
    cmd.args(flags);
    for dir in include {
        cmd.arg("-I").arg(dir);
    }
    cmd.arg("-I").arg(ffi_dir().join("include")).arg("-I").arg(ffi_dir().join("tests/c"));
    cmd
}

/// Compiles `sources` with `compiler` and `flags` into `out`, linked against waffle, with
/// `include` first on the include path (then `ffi/include` and `ffi/tests/c`).
pub fn compile(
    compiler: &str,
    flags: &[&str],
    sources: &[PathBuf],
    out: &Path,
    link: Link,
    include: &[&Path],
) {
    let lib = lib_dir();
    let mut cmd = compiler_command(compiler, flags, include);
    cmd.args(sources).arg("-o").arg(out);
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(lib).arg("-lwaffle").arg(format!("-Wl,-rpath,{}", lib.display()));
            cmd.arg("-lpthread");
        }
        Link::Static => {
            cmd.arg(lib.join("libwaffle.a")).args(["-lpthread", "-ldl", "-lm"]);
        }
    }
    let output = cmd.output().unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(
        output.status.success(),
        "compiling {sources:?} failed ({:?}):\n{}{}",
        cmd,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Compiles `source` with `compiler` and `flags` (the include path as for [`compile`]) to an
/// object file in `dir`, without linking, and returns the compiler's output: for what must and
/// must not compile.
pub fn compile_only(compiler: &str, flags: &[&str], source: &Path, dir: &Path) -> Output {
    let mut cmd = compiler_command(compiler, flags, &[]);
    cmd.arg("-c").arg(source).arg("-o").arg(dir.join("out.o"));
    cmd.output().unwrap_or_else(|e| panic!("run {compiler}: {e}"))
}

/// `name` on the `PATH`, if there.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The C compiler: `$CC`, else `cc`.
pub fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

/// The C++ compiler: `$CXX`, else `c++`.
pub fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned())
}

/// A command for `exe` without the variables that would change what it records
/// (`waffle_std::launcher::variables`).
pub fn command(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    for var in waffle_std::launcher::variables() {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `cmd`; asserts that it succeeded, printed "ok" and nothing on stderr.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert_eq!(stdout.trim(), "ok", "{cmd:?} printed:\n{stdout}\n{stderr}");
    assert!(stderr.is_empty(), "{cmd:?} wrote to stderr:\n{stderr}");
    out
}

/// `waffle-decode why FILES --event EVENT --nth NTH --json` and `extra` arguments, as a user
/// runs it: its JSON answer (the run must succeed).
#[allow(dead_code)] // not every test binary asks why
pub fn why_json(files: &[PathBuf], event: &str, nth: usize, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(waffle_decode())
        .arg("why")
        .args(files)
        .args(["--event", event, "--nth", &nth.to_string(), "--json"])
        .args(extra)
        .output()
        .expect("run waffle-decode");
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "waffle-decode why failed:\n{text}\n{err}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// Decodes `files` as one trace; asserts there were no warnings and every file is complete.
pub fn decode(files: &[PathBuf]) -> Trace {
    let decoded = waffle_read::decode::decode_files(files).expect("decode");
    assert!(decoded.warnings.is_empty(), "warnings: {:?}", decoded.warnings);
    for p in &decoded.trace.processes {
        assert!(p.complete, "{} has no END frame", p.source);
        assert_eq!(p.dropped, 0, "{} dropped records", p.source);
    }
    decoded.trace
}

/// The trace as text: per process and thread (threads without records left out), each span
/// and event on a line, children indented under their parent, in record order. A line shows
/// the name, the fields, the causes (`<- kind "name"`), the correlation (`~ key=value`) and,
/// for the first item of a thread whose parent is elsewhere, that parent (`in span "name"`).
/// Spans that did not end are marked `(not ended)`.
pub fn render(trace: &Trace) -> String {
    let index = trace.index();
    let describe = |id: u64| match index.get(&id) {
        Some(&r) => {
            let kind = if matches!(r.item, Item::Span(_)) { "span" } else { "event" };
            format!("{kind} {:?}", trace.describe(r).callsite.name)
        }
        None => format!("unknown {id:016x}"),
    };
    let mut out = String::new();
    for p in &trace.processes {
        let rank = p.header.label("rank").map_or(String::new(), |r| format!(" rank={r}"));
        writeln!(out, "process {}{rank}", p.header.name).unwrap();
        for t in p.threads.iter().filter(|t| !t.spans.is_empty() || !t.events.is_empty()) {
            writeln!(out, "  thread").unwrap();
            // (id, parent, line) of every item of the thread, in id (record) order.
            let mut items: Vec<(u64, Option<u64>, String)> = Vec::new();
            for s in &t.spans {
                let fields: Vec<String> = s.fields().map(|(k, v)| format!(" {k}={v}")).collect();
                let mut line = format!("{}{}", s.name(), fields.concat());
                for l in &s.links {
                    write!(line, " <- {}", describe(*l)).unwrap();
                }
                if let Some(v) = s.correlation {
                    write!(line, " ~ {}={v}", s.callsite.correlate).unwrap();
                }
                if !s.ended {
                    line.push_str(" (not ended)");
                }
                items.push((s.id, s.parent, line));
            }
            for e in &t.events {
                let fields: Vec<String> = e.fields().map(|(k, v)| format!(" {k}={v}")).collect();
                let mut line = format!("! {}{}", e.name(), fields.concat());
                for l in &e.links {
                    write!(line, " <- {}", describe(*l)).unwrap();
                }
                if let Some(v) = e.correlation {
                    write!(line, " ~ {}={v}", e.callsite.correlate).unwrap();
                }
                items.push((e.id, e.parent, line));
            }
            items.sort_by_key(|&(id, _, _)| id);
            let here: HashMap<u64, usize> =
                items.iter().enumerate().map(|(i, (id, _, _))| (*id, i)).collect();
            let mut children: HashMap<Option<u64>, Vec<usize>> = HashMap::new();
            for (i, (_, parent, _)) in items.iter().enumerate() {
                let key = parent.filter(|p| here.contains_key(p));
                children.entry(key).or_default().push(i);
            }
            fn walk(
                out: &mut String,
                items: &[(u64, Option<u64>, String)],
                children: &HashMap<Option<u64>, Vec<usize>>,
                at: Option<u64>,
                depth: usize,
                describe: &dyn Fn(u64) -> String,
            ) {
                for &i in children.get(&at).map_or(&[][..], Vec::as_slice) {
                    let (id, parent, line) = &items[i];
                    let foreign = match (at, parent) {
                        (None, Some(p)) => format!(" (in {})", describe(*p)),
                        _ => String::new(),
                    };
                    writeln!(out, "{}{line}{foreign}", "  ".repeat(depth + 2)).unwrap();
                    walk(out, items, children, Some(*id), depth + 1, describe);
                }
            }
            walk(&mut out, &items, &children, None, 0, &describe);
        }
    }
    out
}

/// Asserts that two renderings are equal, showing both in full when they are not.
pub fn assert_tree(actual: &str, expected: &str) {
    let expected = expected.trim_start_matches('\n');
    assert!(actual == expected, "trace tree differs.\n--- actual\n{actual}--- expected\n{expected}");
}
