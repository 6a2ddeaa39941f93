//! Recording with no start call: `WAFFLE_OUTPUT=PATH`.
//!
//! A program that records spans but never starts a session (the C, C++ and Python examples
//! written before sessions existed) records nothing. With `WAFFLE_OUTPUT` set, every program
//! that links this crate starts a session by itself before `main` runs, into `PATH` with the
//! placeholders expanded ([`expand`]): `%r` the rank ([`launcher::rank`], the pid when there is
//! none), `%p` the pid, `%h` the host name, `%%` a `%`. The exit handler of `crate::crash`
//! stops it at exit, as it stops any session still running then; the trace id is
//! [`Config::new`]'s, so the ranks of one `mpirun` or `srun` share one.
//!
//! Missing directories of the path are made (`run/rank%r.bin` makes `run/`, as every rank
//! may at once). A bad value (an unknown placeholder, an empty path, a directory that cannot
//! be made or written) is reported in one line on stderr, naming the variable, the value and
//! the fault, and the program runs on without recording. Nothing here panics or aborts.
//!
//! An explicit start ([`crate::start`], [`Config::start`], `waffle_start`, Python's
//! `waffle.start`) replaces the automatic session: that one is stopped, its file kept if it
//! holds any record and removed if not, and the explicit one starts as asked. [`take`] hands
//! the automatic session to a binding that stops it itself (C's `waffle_stop`, Python's
//! `waffle.shutdown`, whose exporters then read its file).
//!
//! # How the session starts before `main`
//!
//! An ELF constructor: a pointer to a function in the `.init_array` section, which the dynamic
//! loader (or the C runtime of a static executable) calls before `main`, and when a shared
//! object is loaded later (`dlopen`, as Python imports an extension module). It is a `#[used]`
//! static, not a call the program makes, because the programs this is for make none (written
//! out rather than taken from the `ctor` crate: it is one static, and needs no proc macro). The
//! same hook reaches every way of linking:
//!
//! - **Rust binaries.** rustc adds a small object to every link that refers to each `#[used]`
//!   static of the crates linked in, so the constructor is kept from this crate's rlib. rustc
//!   links a crate only if the program names it, though: a program that records through
//!   `waffle`'s macros alone names it once with `use waffle_std as _;`
//!   (`examples/autostart.rs`, tested by `tests/autostart.rs`).
//! - **`libwaffle.so`** and **Python's `waffle._native`**: cdylibs, linked by rustc as above.
//! - **`libwaffle.a`**: the C linker takes an archive member only if it defines a symbol the
//!   program still needs, and no C program needs a symbol of this module. `waffle-ffi`'s
//!   recording functions therefore refer to [`CONSTRUCTOR`], so that the member holding it comes
//!   with them (`ffi/tests/autostart.rs` links a C program statically).
//!
//! The constructor runs before Rust's runtime is set up in a Rust binary, and under the
//! loader's lock in a library loaded by `dlopen`, so it keeps to what is sound there: reading
//! the environment, creating the file, spawning the collector thread (the standard library makes
//! a spawned thread's handle itself; this thread's own handle is never asked for, which Rust's
//! runtime set-up would refuse afterwards), and writing a message with one `write(2)` rather
//! than through `std::io::stderr`'s lock. The collector thread may wait for the loader's lock
//! on its first thread-local access, until `dlopen` returns; the constructor never waits for the
//! collector, so this cannot deadlock. A panic is caught at the constructor's edge.
//!
//! `fork()` after the session started: the child stops recording at once (the fork handler of
//! `crate::crash`) and its exit handler leaves the parent's file alone. A child that `exec`s
//! another program linking waffle starts a session of its own, so a `PATH` shared by several
//! processes needs `%p` or `%r`.
//!
//! A program that links this crate but must not record, such as `waffle-decode` (it would
//! truncate a file it is about to read), opts out with [`no_autostart!`](crate::no_autostart).
//! An image that shares its process with another image carrying the same recorder, and whose
//! API calls bind to that other image (`libwaffle.so` with `libwaffle_mpi.so` preloaded), leaves
//! the start to it: the checks in [`DEFER`] run first.
//!
//! The constructor is for ELF targets (Linux, Android, the BSDs); elsewhere `WAFFLE_OUTPUT` is
//! ignored.

use crate::{header, launcher, session, Config, Error, Session};
use std::{
    ffi::OsStr,
    fmt,
    os::unix::ffi::{OsStrExt, OsStringExt},
    path::{Path, PathBuf},
};

/// The variable read at start-up.
pub const VARIABLE: &str = "WAFFLE_OUTPUT";

/// Programs that link this crate but must not start a session from `WAFFLE_OUTPUT`: the
/// constructor starts none if this slice has an element. Add one with [`no_autostart!`](crate::no_autostart).
#[linkme::distributed_slice]
pub static OPT_OUT: [&'static str];

/// Checks an image runs before starting a session from `WAFFLE_OUTPUT`: the constructor starts
/// none if one of them returns true. For an image that shares its process with another image
/// carrying the same recorder and API, and that lost to it: when a program linking
/// `libwaffle.so` runs with `LD_PRELOAD=libwaffle_mpi.so`, both carry the C ABI, the dynamic
/// linker binds the program's `waffle_*` calls to the preloaded one, and `libwaffle.so`, whose
/// functions nothing calls, must not start a second session writing the same file.
#[linkme::distributed_slice]
pub static DEFER: [fn() -> bool];

/// Keeps a program from starting a session from `WAFFLE_OUTPUT`: for tools that link
/// `waffle-std` to read traces, not to record (`waffle-decode` uses it). Use it once, at the
/// top level of the binary's crate.
///
/// ```
/// waffle_std::no_autostart!("trace-inspector");
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! no_autostart {
    ($name:expr) => {
        const _: () = {
            #[$crate::__private::linkme::distributed_slice($crate::autostart::OPT_OUT)]
            #[linkme(crate = $crate::__private::linkme)]
            static NO_AUTOSTART: &'static str = $name;
        };
    };
}

/// The constructor: called with the process's arguments by the loader, which the function
/// ignores (a C function may take fewer arguments than its caller passes). Public only so that
/// `waffle-ffi` can refer to it (see the module docs on static linking).
///
/// Where there is no `.init_array` (not ELF), it is an ordinary static, so that references to
/// it still resolve, and `WAFFLE_OUTPUT` is not read.
#[cfg_attr(
    any(
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "dragonfly"
    ),
    used,
    link_section = ".init_array"
)]
#[doc(hidden)]
pub static CONSTRUCTOR: extern "C" fn() = at_load;

extern "C" fn at_load() {
    // A panic must not unwind into the loader; there is nothing to report it to either.
    let _ = std::panic::catch_unwind(|| {
        if !OPT_OUT.is_empty() {
            return;
        }
        // Meet the other copies of waffle in the process first: if one records already, this
        // one records into its session, whatever `WAFFLE_OUTPUT` says.
        crate::hub::register();
        if crate::hub::is_joined() || DEFER.iter().any(|defer| defer()) {
            return;
        }
        if let Some(value) = std::env::var_os(VARIABLE) {
            if let Err(fault) = start(&value) {
                report(&value, &fault);
            }
        }
    });
}

/// Starts the automatic session for the value `template` of `WAFFLE_OUTPUT`.
fn start(template: &OsStr) -> Result<(), Fault> {
    let env = |name: &str| std::env::var(name).ok();
    let pid = std::process::id().to_string();
    let rank = launcher::rank(env).unwrap_or_else(|| pid.clone());
    let host = header::host_name();
    let path = expand(template, &Placeholders { rank: &rank, pid: &pid, host: &host })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        // Ranks of one launch may make it at once: create_dir_all takes one that appeared.
        std::fs::create_dir_all(dir).map_err(|e| Fault::NoDirectory(dir.to_owned(), e))?;
    }
    if !dir.is_dir() {
        return Err(Fault::NotADirectory(dir.to_owned()));
    }
    Config::new(&path).start_automatic().map_err(|e| match e {
        Error::Io { source, .. } if is_denied(&source) => Fault::NotWritable(dir.to_owned(), source),
        Error::Io { source, .. } => Fault::Create(path.clone(), source),
        other => Fault::Other(other),
    })
}

fn is_denied(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem)
}

/// The file the session `WAFFLE_OUTPUT` started records to, while it runs (not once it was
/// stopped, replaced by an explicit start, or taken with [`take`]).
pub fn path() -> Option<PathBuf> {
    session::automatic_path()
}

/// Hands over the session `WAFFLE_OUTPUT` started, if it runs: the [`Session`] stops it when
/// dropped (or by [`Session::stop`]), and an explicit start no longer replaces it. For bindings
/// that stop the process's session themselves.
pub fn take() -> Option<Session> {
    session::take_automatic()
}

/// What the placeholders of a `WAFFLE_OUTPUT` template stand for.
#[derive(Clone, Copy, Debug)]
pub struct Placeholders<'a> {
    /// `%r`: the rank, or the pid when the launcher gives none.
    pub rank: &'a str,
    /// `%p`: the process id.
    pub pid: &'a str,
    /// `%h`: the host name.
    pub host: &'a str,
}

/// Why a `WAFFLE_OUTPUT` template cannot be expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// The value is empty.
    Empty,
    /// `%` followed by something other than `r`, `p`, `h` or `%` (the text after the `%`).
    UnknownPlaceholder(String),
    /// A `%` at the very end.
    TrailingPercent,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Empty => write!(f, "empty path"),
            TemplateError::UnknownPlaceholder(p) => {
                write!(f, "unknown placeholder %{p} (use %r, %p, %h or %%)")
            }
            TemplateError::TrailingPercent => write!(f, "a lone % at the end (write %% for a %)"),
        }
    }
}

impl std::error::Error for TemplateError {}

/// The path `template` names: `%r`, `%p` and `%h` replaced as `values` says, `%%` by `%`, every
/// other byte kept (paths need not be UTF-8).
pub fn expand(template: &OsStr, values: &Placeholders<'_>) -> Result<PathBuf, TemplateError> {
    let t = template.as_bytes();
    if t.is_empty() {
        return Err(TemplateError::Empty);
    }
    let mut out = Vec::with_capacity(t.len() + 16);
    let mut rest = t;
    while let Some(at) = rest.iter().position(|&b| b == b'%') {
        out.extend_from_slice(&rest[..at]);
        let after = &rest[at + 1..];
        let value: &[u8] = match after.first() {
            Some(b'r') => values.rank.as_bytes(),
            Some(b'p') => values.pid.as_bytes(),
            Some(b'h') => values.host.as_bytes(),
            Some(b'%') => b"%",
            Some(_) => {
                // The whole character after the `%`, for the message.
                let s = String::from_utf8_lossy(&after[..after.len().min(4)]);
                let c = s.chars().next().map_or(String::new(), String::from);
                return Err(TemplateError::UnknownPlaceholder(c));
            }
            None => return Err(TemplateError::TrailingPercent),
        };
        out.extend_from_slice(value);
        rest = &after[1..];
    }
    out.extend_from_slice(rest);
    Ok(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// Why the automatic session did not start.
#[derive(Debug)]
enum Fault {
    Template(TemplateError),
    NoDirectory(PathBuf, std::io::Error),
    NotADirectory(PathBuf),
    NotWritable(PathBuf, std::io::Error),
    Create(PathBuf, std::io::Error),
    Other(Error),
}

impl From<TemplateError> for Fault {
    fn from(e: TemplateError) -> Fault {
        Fault::Template(e)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Template(e) => write!(f, "{e}"),
            Fault::NoDirectory(d, e) => {
                write!(f, "directory {:?} cannot be made: {e}", d.display().to_string())
            }
            Fault::NotADirectory(d) => write!(f, "{:?} is not a directory", d.display().to_string()),
            Fault::NotWritable(d, e) => {
                write!(f, "directory {:?} is not writable: {e}", d.display().to_string())
            }
            Fault::Create(p, e) => write!(f, "cannot create {:?}: {e}", p.display().to_string()),
            Fault::Other(e) => write!(f, "{e}"),
        }
    }
}

/// The one line on stderr saying why nothing is recorded.
fn message(value: &OsStr, fault: &Fault) -> String {
    format!("waffle: {VARIABLE}={:?}: {fault}; not recording\n", value.to_string_lossy())
}

/// Writes [`message`] to file descriptor 2 in one call: before `main`, the standard library's
/// `stderr` (a lock keyed by thread) is better left alone.
fn report(value: &OsStr, fault: &Fault) {
    let line = message(value, fault);
    // SAFETY: the buffer is valid for `line.len()` bytes; writing to a descriptor that is
    // closed or not writable only returns an error, which there is no one to report to.
    let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUES: Placeholders<'static> = Placeholders { rank: "3", pid: "4021", host: "node7" };

    fn ok(t: &str) -> String {
        expand(OsStr::new(t), &VALUES).unwrap_or_else(|e| panic!("{t:?}: {e}")).display().to_string()
    }

    fn err(t: &str) -> TemplateError {
        expand(OsStr::new(t), &VALUES).expect_err(t)
    }

    #[test]
    fn placeholders_expand() {
        assert_eq!(ok("trace.bin"), "trace.bin");
        assert_eq!(ok("run/rank%r.bin"), "run/rank3.bin");
        assert_eq!(ok("t-%p.bin"), "t-4021.bin");
        assert_eq!(ok("%h.bin"), "node7.bin");
        assert_eq!(ok("/tmp/%h/%r-%p"), "/tmp/node7/3-4021");
        assert_eq!(ok("%r%p%h"), "34021node7");
        assert_eq!(ok("%r%r"), "33");
        assert_eq!(ok("100%%.bin"), "100%.bin");
        assert_eq!(ok("%%r"), "%r", "an escaped % does not start a placeholder");
        assert_eq!(ok("%%%r"), "%3");
        assert_eq!(ok("%%%%"), "%%");
        assert_eq!(ok("é-%r/ü"), "é-3/ü");
    }

    #[test]
    fn the_rank_stands_in_as_given() {
        let pid_only = Placeholders { rank: "4021", ..VALUES };
        assert_eq!(expand(OsStr::new("rank%r.bin"), &pid_only).unwrap(), Path::new("rank4021.bin"));
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        assert_eq!(err(""), TemplateError::Empty);
        assert_eq!(err("run/%q.bin"), TemplateError::UnknownPlaceholder("q".into()));
        assert_eq!(err("%R"), TemplateError::UnknownPlaceholder("R".into()), "placeholders are lower case");
        assert_eq!(err("a%ä"), TemplateError::UnknownPlaceholder("ä".into()));
        assert_eq!(err("%%%x"), TemplateError::UnknownPlaceholder("x".into()));
        assert_eq!(err("% r"), TemplateError::UnknownPlaceholder(" ".into()));
        assert_eq!(err("trace%"), TemplateError::TrailingPercent);
        assert_eq!(err("%%%"), TemplateError::TrailingPercent);
        assert_eq!(err("run/%q.bin").to_string(), "unknown placeholder %q (use %r, %p, %h or %%)");
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        let t = std::ffi::OsString::from_vec(b"a\xff%r\xfe".to_vec());
        assert_eq!(expand(&t, &VALUES).unwrap().as_os_str().as_bytes(), b"a\xff3\xfe");
        let t = std::ffi::OsString::from_vec(b"%\xff".to_vec());
        assert_eq!(expand(&t, &VALUES), Err(TemplateError::UnknownPlaceholder("\u{fffd}".into())));
    }

    #[test]
    fn the_message_is_one_line_naming_variable_value_and_fault() {
        let m = message(OsStr::new("run/%q.bin"), &Fault::Template(err("run/%q.bin")));
        assert_eq!(
            m,
            "waffle: WAFFLE_OUTPUT=\"run/%q.bin\": unknown placeholder %q (use %r, %p, %h or %%); not recording\n"
        );
        let not_dir = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        let m = message(OsStr::new("f/run/t.bin"), &Fault::NoDirectory("f/run".into(), not_dir));
        assert_eq!(
            m,
            "waffle: WAFFLE_OUTPUT=\"f/run/t.bin\": directory \"f/run\" cannot be made: \
             Not a directory (os error 20); not recording\n"
        );
        assert_eq!(message(OsStr::new(""), &Fault::Template(err(""))).lines().count(), 1);
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        let m = message(OsStr::new("/sys/t.bin"), &Fault::NotWritable("/sys".into(), denied));
        assert_eq!(
            m,
            "waffle: WAFFLE_OUTPUT=\"/sys/t.bin\": directory \"/sys\" is not writable: \
             Permission denied (os error 13); not recording\n"
        );
    }
}
