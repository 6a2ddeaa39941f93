//! One recorder per process, however many copies of waffle it loads.
//!
//! A process can carry several copies of this crate, each with statics of its own: a Rust
//! program, `libwaffle.so` under a C library, `libwaffle_mpi.so` preloaded into an MPI
//! program, Python's `waffle._native`, a C extension module linking `libwaffle.so`. Each copy
//! would start a session of its own and write its own file, and two of them writing the same
//! `WAFFLE_OUTPUT` path lose one's records. Instead the copies meet here: the first session
//! started in the process records for all of them, into one file, and the others *join* it.
//!
//! - **Meeting.** Every copy registers a [`Module`](abi::Module) when its image is loaded (the
//!   constructor of [`crate::autostart`]). The first one makes the [`Hub`](abi::Hub), a static
//!   of its own, and names its address in the environment variable [`VARIABLE`] (with the pid and
//!   a random token, so that a stale value is never taken for a hub); later ones find it there,
//!   which works for images loaded with `RTLD_LOCAL` (Python's extension modules) and for
//!   executables, whose symbols the loader does not export. Each copy pins its image, so that
//!   the pointers others hold into it never dangle. (The OpenMP runtimes of LLVM and Intel meet
//!   through an environment variable for the same reason: to find each other across images.)
//! - **Owning.** A copy that starts a session claims the hub under its lock; the other copies
//!   are told (`joined`) and from then on their records go to the owner through its
//!   [`SessionApi`](abi::SessionApi): `waffle::runtime::join` installs a forwarder in their core,
//!   which hands each record, encoded as the file format encodes field values, to the owner's
//!   recording stream of the calling thread. Records of all copies on one thread land in one
//!   stream, so they nest as they ran (an MPI call inside a Python span is its child). Callsites
//!   are registered with the owner on their first use (`joined.rs`). The owner's own hot path is
//!   unchanged; a joined copy pays a call across images per record.
//! - **Starting and stopping anywhere.** Starting, stopping, pausing and asking for the file go
//!   to whichever copy owns the session: an explicit start replaces a session `WAFFLE_OUTPUT`
//!   started in any copy, and fails while another explicit one records; `waffle.shutdown()` in
//!   Python stops the session a preloaded library started.
//! - **Copies that cannot meet.** A hub of another protocol (another version of waffle) cannot
//!   be joined, but its first fields never change: a copy that finds one still sees whether a
//!   session records there and into which file, and then records nothing itself, saying so in
//!   one line on stderr rather than writing a second file.

pub(crate) mod abi;
mod image;
mod joined;
mod serve;
mod slot;

use abi::{Head, Hub, Module, MAGIC, MAX_MODULES, PROTOCOL};
use std::{
    ffi::{CStr, CString},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering},
        Mutex, Once,
    },
    time::Duration,
};

pub(crate) use slot::{slot, Recorder, Slot};

/// The environment variable that names the process's hub: `PID:ADDRESS:TOKEN`, in hex.
pub const VARIABLE: &str = "WAFFLE_HUB";

/// This copy's hub, used if it is the first copy loaded.
static OWN_HUB: Hub = Hub {
    head: Head {
        magic: MAGIC,
        protocol: PROTOCOL,
        pid: AtomicU32::new(0),
        token: AtomicU64::new(0),
        recording: AtomicU32::new(0),
        file: AtomicPtr::new(std::ptr::null_mut()),
    },
    lock_holder: AtomicU64::new(0),
    lock_depth: AtomicU32::new(0),
    owner: AtomicPtr::new(std::ptr::null_mut()),
    modules: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_MODULES],
};

/// This copy, as the others see it.
pub(crate) static MODULE: Module = Module {
    magic: MAGIC,
    protocol: PROTOCOL,
    wire_version: waffle::wire::FORMAT_VERSION as u32,
    name: AtomicPtr::new(std::ptr::null_mut()),
    version: concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast(),
    joined: joined::joined,
    enabled: joined::enabled,
    api: serve::API,
};

/// The hub this copy registered with (null before, or if it found a foreign one).
static HUB: AtomicPtr<Hub> = AtomicPtr::new(std::ptr::null_mut());
/// The head of a hub of another protocol found in the environment (null if none).
static FOREIGN: AtomicPtr<Head> = AtomicPtr::new(std::ptr::null_mut());
static REGISTER: Once = Once::new();
/// Every file name this copy has published in a `Head`: another copy may still be reading an
/// earlier one, so none is freed, and a name published again reuses its string.
static NAMES: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// Registers this copy with the process's hub, making the hub if it is the first, and joins
/// the session another copy records, if one does. Runs once, from the image's constructor (or
/// from the first start or stop, where no constructor ran).
pub(crate) fn register() {
    REGISTER.call_once(|| {
        MODULE.name.store(image::name().into_raw(), Ordering::Release);
        image::pin();
        // SAFETY: `hub_after_fork` is an `extern "C" fn()` that only stores to atomics (which
        // is async-signal-safe, as a fork child handler must be) and never unwinds. A failure
        // to register leaves a forked child's hub as the parent's, whose pid tells it apart.
        let _ = unsafe { libc::pthread_atfork(None, None, Some(hub_after_fork)) };
        let hub = match found() {
            Found::Hub(hub) => hub,
            Found::Foreign(head) => {
                FOREIGN.store((head as *const Head).cast_mut(), Ordering::Release);
                return;
            }
            Found::Nothing => publish(&OWN_HUB),
        };
        HUB.store((hub as *const Hub).cast_mut(), Ordering::Release);
        let _lock = Locked::take(hub);
        let me = (&MODULE as *const Module).cast_mut();
        if !hub.modules.iter().any(|m| {
            m.compare_exchange(std::ptr::null_mut(), me, Ordering::AcqRel, Ordering::Acquire).is_ok()
        }) {
            say(&format!(
                "more than {MAX_MODULES} copies of waffle in one process; this one records on its own"
            ));
            return;
        }
        if let Some(owner) = owner_of(hub) {
            joined::join(owner);
        }
    });
}

/// Whether this copy records into a session another copy runs.
pub(crate) fn is_joined() -> bool {
    joined::is_joined()
}

/// What the environment names.
enum Found {
    Hub(&'static Hub),
    Foreign(&'static Head),
    Nothing,
}

fn found() -> Found {
    std::env::var(VARIABLE).map_or(Found::Nothing, |v| found_in(&v))
}

/// The hub a value of [`VARIABLE`] names, if it is one of this process.
fn found_in(value: &str) -> Found {
    let Some((pid, addr, token)) = parse(value) else {
        return Found::Nothing;
    };
    if pid != std::process::id() || !image::is_mapped_writable(addr, std::mem::size_of::<Head>()) {
        return Found::Nothing;
    }
    // SAFETY: `addr` lies, for a whole `Head`, in writable memory of an image loaded now (just
    // checked), so reading it is sound; every field but `magic` and `protocol` is an atomic,
    // and those two are compared only: a stale address holds anything, which the magic, pid and
    // token tell apart.
    let head = unsafe { &*(addr as *const Head) };
    if head.magic != MAGIC
        || head.pid.load(Ordering::Acquire) != pid
        || head.token.load(Ordering::Acquire) != token
    {
        return Found::Nothing;
    }
    if head.protocol != PROTOCOL || !image::is_mapped_writable(addr, std::mem::size_of::<Hub>()) {
        return Found::Foreign(head);
    }
    // SAFETY: a hub of this protocol (magic, pid, token and protocol checked) whose whole size
    // is mapped; images pin themselves, so it stays for the life of the process.
    Found::Hub(unsafe { &*(addr as *const Hub) })
}

/// `PID:ADDRESS:TOKEN` in hex.
fn parse(v: &str) -> Option<(u32, usize, u64)> {
    let mut parts = v.trim().split(':');
    let pid = u32::from_str_radix(parts.next()?, 16).ok()?;
    let addr = usize::from_str_radix(parts.next()?, 16).ok()?;
    let token = u64::from_str_radix(parts.next()?, 16).ok()?;
    parts.next().is_none().then_some((pid, addr, token))
}

/// Makes `hub` the process's: this pid, a fresh token, its address in the environment.
fn publish(hub: &'static Hub) -> &'static Hub {
    let pid = std::process::id();
    let token = (crate::random::random_u128() as u64).max(1);
    hub.head.pid.store(pid, Ordering::Release);
    hub.head.token.store(token, Ordering::Release);
    // Set from a constructor: before `main` the program has no other thread; under `dlopen`
    // (Python importing the module) other threads may run, and a C library's `getenv` racing
    // with this `setenv` is the one risk taken (as the OpenMP runtimes take it).
    std::env::set_var(VARIABLE, format!("{pid:x}:{:x}:{token:x}", hub as *const Hub as usize));
    hub
}

/// In a child made by `fork`: the parent's session is not this process's, nor is its lock.
extern "C" fn hub_after_fork() {
    waffle::runtime::uninstall(waffle::runtime::last_epoch());
    if let Some(hub) = hub() {
        // SAFETY: getpid has no preconditions and is async-signal-safe.
        let pid = unsafe { libc::getpid() } as u32;
        if hub.head.pid.swap(pid, Ordering::AcqRel) != pid {
            hub.lock_holder.store(0, Ordering::Release);
            hub.lock_depth.store(0, Ordering::Release);
            hub.owner.store(std::ptr::null_mut(), Ordering::Release);
            hub.head.recording.store(0, Ordering::Release);
            hub.head.file.store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

/// The first fields of the process's hub, of this protocol or another.
fn head() -> Option<&'static Head> {
    if let Some(hub) = hub() {
        return Some(&hub.head);
    }
    let p = FOREIGN.load(Ordering::Acquire);
    // SAFETY: the only non-null value stored is a `&'static Head` checked by `found`.
    unsafe { p.as_ref() }
}

fn hub() -> Option<&'static Hub> {
    let p = HUB.load(Ordering::Acquire);
    // SAFETY: the only non-null value stored is a `&'static Hub` (`register`).
    unsafe { p.as_ref() }
}

/// The owner of `hub`'s session, if it is another copy.
fn owner_of(hub: &Hub) -> Option<&'static Module> {
    let p = hub.owner.load(Ordering::Acquire);
    if std::ptr::eq(p, &MODULE) {
        return None;
    }
    // SAFETY: the only non-null values stored are `&'static Module`s of pinned images.
    unsafe { p.as_ref() }
}

/// The hub's lock, held by one thread at a time, which may take it again: a copy stopping its
/// session for another copy's start runs under the lock that start took.
struct Locked(&'static Hub);

impl Locked {
    fn take(hub: &'static Hub) -> Locked {
        let me = thread_id();
        if hub.lock_holder.load(Ordering::Acquire) != me {
            while hub.lock_holder.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire).is_err() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        hub.lock_depth.fetch_add(1, Ordering::AcqRel);
        Locked(hub)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if self.0.lock_depth.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.lock_holder.store(0, Ordering::Release);
        }
    }
}

fn thread_id() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u64 }
}

/// `path` as a NUL-terminated string that lives as long as the process.
fn published(path: &Path) -> *mut std::ffi::c_char {
    let name = CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let at = match names.iter().position(|n| *n == name) {
        Some(at) => at,
        None => {
            names.push(name);
            names.len() - 1
        }
    };
    // The string's bytes stay where they are when the vector grows: it holds owners, not bytes.
    names[at].as_ptr().cast_mut()
}

/// Every registered copy but this one (and any of another protocol, which cannot be called).
fn others(hub: &Hub) -> impl Iterator<Item = &'static Module> + '_ {
    hub.modules.iter().filter_map(|m| {
        let p = m.load(Ordering::Acquire);
        // SAFETY: the only non-null values stored are `&'static Module`s of pinned images.
        let m = unsafe { p.as_ref() }?;
        (!std::ptr::eq(m, &MODULE) && m.magic == MAGIC && m.protocol == PROTOCOL).then_some(m)
    })
}

/// Pauses or resumes the process's session: this copy's and every joined one's.
pub(crate) fn set_enabled(on: bool) {
    let slot = slot();
    match slot.recorder() {
        Recorder::Other(owner) => (owner.0.api.set_enabled)(on),
        _ => serve::set_enabled_here(on),
    }
}

/// Tells every joined copy that recording was paused or resumed (the owner calls it).
fn tell_enabled(on: bool) {
    if let Some(hub) = hub() {
        for m in others(hub) {
            (m.enabled)(on);
        }
    }
}

/// The session another copy runs.
#[derive(Clone, Copy)]
pub(crate) struct Remote(&'static Module);

impl Remote {
    /// Its file.
    pub(crate) fn path(self) -> PathBuf {
        let mut buf = vec![0u8; 4096];
        let n = (self.0.api.path)(buf.as_mut_ptr(), buf.len());
        if n > buf.len() {
            buf.resize(n, 0);
            let again = (self.0.api.path)(buf.as_mut_ptr(), buf.len());
            buf.truncate(again.min(n));
        } else {
            buf.truncate(n);
        }
        PathBuf::from(std::ffi::OsString::from(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// What it is, if it still runs.
    pub(crate) fn info(self) -> Option<abi::SessionInfo> {
        let mut info = serve::no_session();
        (self.0.api.describe)(&mut info).then_some(info)
    }

    /// Stops it (if its epoch is still `epoch`, when not 0).
    pub(crate) fn stop(self, epoch: u32) -> abi::StopResult {
        (self.0.api.stop)(epoch, false)
    }

    /// Stops it for an explicit start, if it is automatic (see `SessionApi::stop`).
    pub(crate) fn replace(self) {
        (self.0.api.stop)(0, true);
    }

    /// Makes its automatic session an ordinary one; whether there was one.
    pub(crate) fn take(self) -> bool {
        (self.0.api.take)()
    }

    /// The file name of the image it lives in.
    pub(crate) fn image(self) -> String {
        module_name(self.0)
    }
}

fn module_name(m: &Module) -> String {
    let p = m.name.load(Ordering::Acquire);
    if p.is_null() {
        return "another copy of waffle".to_owned();
    }
    // SAFETY: a non-null `name` is a NUL-terminated string its module leaked at registration.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// This copy's image, for messages.
pub(crate) fn this_image() -> String {
    module_name(&MODULE)
}

/// One line on stderr, written in one call (this may run before `main` or under the loader's
/// lock, where the standard library's stderr lock is better left alone).
pub(crate) fn say(what: &str) {
    let line = format!("waffle: {}: {what}\n", this_image());
    // SAFETY: the buffer is valid for `line.len()` bytes; a failed write has no one to tell.
    let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// The C string `p` lent across images, as text.
fn text(t: abi::Text) -> String {
    if t.ptr.is_null() || t.len == 0 {
        return String::new();
    }
    // SAFETY: a `Text` from another copy is `len` readable bytes for the call (its promise).
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(t.ptr, t.len) }).into_owned()
}

#[cfg(test)]
mod tests;
