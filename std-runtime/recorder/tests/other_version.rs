//! A copy of waffle of another version in the process: this copy cannot join its session, and
//! must neither write a second file over it nor record silently nowhere. The other copy is
//! played here by its hub's first fields, laid out as every version lays them out (the frozen
//! part of `WAFFLE_HUB`'s hub, docs/one-recorder.md), with another protocol number.
//!
//! The case runs in a child run of this binary: the hub is looked up once per process, at this
//! copy's first start, and this binary opts out of `WAFFLE_OUTPUT` so that no constructor looks
//! it up earlier.

use std::{
    ffi::c_char,
    process::Command,
    sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering},
};

waffle_std::no_autostart!("tests/other_version.rs");

/// The first fields of a hub, as every protocol keeps them.
#[repr(C)]
struct Head {
    magic: u64,
    protocol: u32,
    pid: AtomicU32,
    token: AtomicU64,
    recording: AtomicU32,
    file: AtomicPtr<c_char>,
}

/// The other version's hub: protocol 1000.
static OTHER: Head = Head {
    magic: u64::from_le_bytes(*b"waffle-h"),
    protocol: 1000,
    pid: AtomicU32::new(0),
    token: AtomicU64::new(0),
    recording: AtomicU32::new(0),
    file: AtomicPtr::new(std::ptr::null_mut()),
};

const CHILD: &str = "WAFFLE_OTHER_VERSION_CHILD";

#[test]
fn a_session_of_another_version_keeps_this_copy_from_recording_and_says_where() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_session_of_another_version_keeps_this_copy_from_recording_and_says_where"])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env_remove("WAFFLE_HUB")
        .env_remove("WAFFLE_OUTPUT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn child() {
    let dir = std::env::temp_dir().join(format!("waffle-other-version-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (theirs, ours) = (dir.join("theirs.bin"), dir.join("ours.bin"));
    let name = std::ffi::CString::new(theirs.to_str().unwrap()).unwrap().into_raw();
    OTHER.pid.store(std::process::id(), Ordering::Release);
    OTHER.token.store(0x1234_abcd, Ordering::Release);
    OTHER.file.store(name, Ordering::Release);
    OTHER.recording.store(1, Ordering::Release);
    let addr = &OTHER as *const Head as usize;
    std::env::set_var("WAFFLE_HUB", format!("{:x}:{addr:x}:1234abcd", std::process::id()));

    // While the other copy records: no file, and an error that names that copy's file.
    let err = waffle_std::start(&ours).err().expect("a start beside a recording copy of another version");
    assert!(matches!(&err, waffle_std::Error::OtherCopy(_, f) if *f == theirs), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(theirs.to_str().unwrap()) && text.contains("records nothing"), "{text}");
    assert!(!ours.exists(), "nothing written beside the other copy's file");
    assert_eq!(waffle_std::current_path(), None);

    // Once it stopped, this copy records, and tells other versions so through the same fields.
    OTHER.recording.store(0, Ordering::Release);
    let session = waffle_std::start(&ours).expect("start once the other copy stopped");
    assert_eq!(OTHER.recording.load(Ordering::Acquire), 1, "this copy's session is visible to the other");
    // SAFETY: `file` was just set by this copy's start: a NUL-terminated string it keeps.
    let named = unsafe { std::ffi::CStr::from_ptr(OTHER.file.load(Ordering::Acquire)) };
    assert_eq!(named.to_str().unwrap(), ours.to_str().unwrap());
    {
        let _s = waffle::span!("recorded");
    }
    session.stop().unwrap();
    assert_eq!(OTHER.recording.load(Ordering::Acquire), 0, "and that it stopped");
    let trace = waffle_read::decode::decode_files(&[ours]).unwrap().trace;
    let spans: Vec<_> = trace.processes[0].threads.iter().flat_map(|t| &t.spans).map(|s| s.name()).collect();
    assert_eq!(spans, ["recorded"]);
    let _ = std::fs::remove_dir_all(dir);
}
