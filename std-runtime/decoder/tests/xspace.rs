//! `waffle-decode FILES -o OUT.xplane.pb` and `-o DIR/` on a recorded trace: the XSpace read
//! back, the profile layout, and the command line's refusals.

use std::{path::Path, process::Command};

use prost::Message;
use waffle_export::xspace::proto::{StatValue, XSpace};

fn decode(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_waffle-decode")).args(args).output().expect("run waffle-decode");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "waffle-decode panicked: {stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

/// Three `round` spans around a `work` span each, and one `batch` with a `step` field.
fn record(path: &Path) {
    let session = waffle_std::start(path).unwrap();
    for i in 0..3u64 {
        let _round = waffle::span!("round", i);
        let _work = waffle::span!("work");
    }
    {
        let _batch = waffle::span!("batch", step = 7u64);
    }
    session.stop().unwrap();
}

fn read(path: &Path) -> XSpace {
    XSpace::decode(std::fs::read(path).unwrap().as_slice()).expect("the file decodes as an XSpace")
}

/// Per event name, the `step_num` of each of its events that is a step (`_r` = 1).
fn steps(space: &XSpace, name: &str) -> Vec<i64> {
    let plane = &space.planes[0];
    let stat = |s: &str| plane.stat_metadata.values().find(|m| m.name == s).map(|m| m.id);
    let (root, num) = (stat("_r"), stat("step_num"));
    let mut found = Vec::new();
    for e in plane.lines.iter().flat_map(|l| &l.events) {
        if plane.event_metadata[&e.metadata_id].name != name {
            continue;
        }
        let is_root =
            e.stats.iter().any(|s| Some(s.metadata_id) == root && s.value == Some(StatValue::Int64(1)));
        if let (true, Some(n)) = (is_root, e.stats.iter().find(|s| Some(s.metadata_id) == num)) {
            let Some(StatValue::Int64(n)) = n.value else { panic!("step_num {n:?}") };
            found.push(n);
        }
    }
    found
}

#[test]
fn files_and_directories_with_steps() {
    let d = std::env::temp_dir().join(format!("waffle-xspace-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let trace = d.join("run.bin");
    record(&trace);

    let out = d.join("run.xplane.pb");
    let (code, err) = decode(&[
        trace.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--step-span".as_ref(),
        "round".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(xspace)"), "{err}");
    let space = read(&out);
    assert_eq!(space.planes.len(), 1);
    assert_eq!(space.planes[0].name, "/host:CPU");
    assert_eq!(steps(&space, "round"), [0, 1, 2]);
    assert_eq!(steps(&space, "batch"), [7]);
    assert!(steps(&space, "work").is_empty());
    let events: usize = space.planes[0].lines.iter().map(|l| l.events.len()).sum();
    assert_eq!(events, 7);

    // --format without the extension; no --step-span: only the step field makes a step.
    let plain = d.join("plain.pb");
    let (code, err) = decode(&[
        trace.as_os_str(),
        "-q".as_ref(),
        "--format".as_ref(),
        "xspace".as_ref(),
        "-o".as_ref(),
        plain.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(steps(&read(&plain), "round").is_empty());
    assert_eq!(steps(&read(&plain), "batch"), [7]);

    // A directory: LOGDIR/plugins/profile/RUN/HOST.xplane.pb.
    let logdir = d.join("logdir");
    let mut slash = logdir.clone().into_os_string();
    slash.push("/");
    let (code, err) = decode(&[trace.as_os_str(), "-o".as_ref(), &slash, "--run".as_ref(), "first".as_ref()]);
    assert_eq!(code, 0, "{err}");
    let run = logdir.join("plugins/profile/first");
    let files: Vec<_> = std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().ends_with(".xplane.pb"), "{files:?}");
    assert!(err.contains(&*files[0].to_string_lossy()), "{err}");
    assert_eq!(read(&files[0]).planes[0].lines.len(), 1);
    // The directory exists now: no slash needed; the run is named after the trace's time.
    let (code, err) = decode(&[trace.as_os_str(), "-q".as_ref(), "-o".as_ref(), logdir.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let runs = std::fs::read_dir(logdir.join("plugins/profile")).unwrap().count();
    assert_eq!(runs, 2);

    let (code, err) = decode(&[
        trace.as_os_str(),
        "-o".as_ref(),
        logdir.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("a directory takes the xspace format") && err.contains("not chrome"), "{err}");
    let (code, err) =
        decode(&[trace.as_os_str(), "-o".as_ref(), logdir.as_os_str(), "--run".as_ref(), "../up".as_ref()]);
    assert_eq!(code, 1);
    assert!(err.contains("--run \"../up\": a run is one directory name"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
