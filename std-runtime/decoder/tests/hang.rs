//! `waffle-decode hang` on real files: three ranks recorded by `waffle-std` as `waffle-mpi`
//! records MPI calls, each stopped while inside a receive from the next (a deadlock), in text
//! and JSON; a clean run; missing and foreign files.

use serde_json::Value as Json;
use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// `waffle-decode hang ARGS...`: (exit code, stdout, stderr).
fn hang(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_waffle-decode")).arg("hang").args(args).output().expect("run");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!stderr.contains("panicked"), "waffle-decode panicked: {stderr}");
    (out.status.code().unwrap_or(-1), stdout.into_owned(), stderr.into_owned())
}

/// Records rank `rank`: inside `main`, a completed send to the next rank, then (if `stuck`)
/// a receive from the next rank still open when the session stops.
fn record(path: &Path, rank: i64, stuck: bool) {
    let session = waffle_std::Config::new(path).label("rank", rank.to_string()).start().unwrap();
    let next = (rank + 1) % 3;
    let main = waffle::span!("main");
    {
        let value = 1000 + rank as u64;
        let _send = waffle::span!(
            "MPI_Send",
            comm = 5u64,
            peer = next,
            tag = 1i64,
            bytes = 8u64,
            correlate = ("mpi.message>", value)
        );
    }
    let recv = stuck.then(|| waffle::span!("MPI_Recv", comm = 5u64, peer = next, tag = 7i64, bytes = 8u64));
    if !stuck {
        drop(main);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    session.stop().unwrap();
    drop(recv);
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-hang-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

// Sessions are per process: one test records every file, one after another.
#[test]
fn hang_names_the_deadlock_of_a_stopped_run() {
    let d = dir();
    let files: Vec<PathBuf> = (0..3).map(|r| d.join(format!("rank{r}.bin"))).collect();
    for (rank, f) in files.iter().enumerate() {
        record(f, rank as i64, true);
    }
    let args: Vec<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();

    let (code, text, err) = hang(&args);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("deadlock: rank 0 -> rank 1 -> rank 2 -> rank 0\n"), "{text}");
    for rank in 0..3 {
        let next = (rank + 1) % 3;
        assert!(
            text.contains(&format!("  rank {rank} -> rank {next}  MPI_Recv (comm 5, tag 7)\n")),
            "{text}"
        );
    }
    // Rank 0's block: its thread inside the receive, then `main`.
    let block = text.split("rank 0 (").nth(1).unwrap();
    let (recv, main) =
        (block.find("    MPI_Recv  open for ").unwrap(), block.find("    main      open for ").unwrap());
    assert!(recv < main, "{text}");
    // Every send went unreceived, and none was to the rank that waits on its sender.
    assert!(
        text.contains("unmatched sends\n  rank 0 MPI_Send to rank 1 (comm 5, tag 1, 8 bytes)\n"),
        "{text}"
    );
    let unmatched =
        "unmatched receives\n  rank 0 MPI_Recv from rank 1 (comm 5, tag 7, 8 bytes), still open\n";
    assert!(text.contains(unmatched), "{text}");

    let mut json_args = args.clone();
    json_args.push("--json".as_ref());
    let (code, json, err) = hang(&json_args);
    assert_eq!(code, 0, "{err}");
    let j: Json = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(j["stuck"], true);
    assert_eq!(j["deadlocks"], serde_json::json!([{ "ranks": [0, 1, 2] }]));
    let waits: Vec<(i64, i64)> = j["waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["from"].as_i64().unwrap(), w["to"].as_i64().unwrap()))
        .collect();
    assert_eq!(waits, [(0, 1), (1, 2), (2, 0)]);
    let thread = &j["threads"][0];
    assert_eq!((thread["rank"].as_i64(), thread["file"].as_str()), (Some(0), files[0].to_str()));
    let open = thread["open"].as_array().unwrap();
    assert_eq!(open.iter().map(|o| o["name"].as_str().unwrap()).collect::<Vec<_>>(), ["MPI_Recv", "main"]);
    // Open until the session stopped, at least the 20 ms slept inside it.
    assert!(open[0]["for_ns"].as_u64().unwrap() >= 20_000_000, "{json}");
    assert_eq!(open[0]["fields"]["peer"], 1);
    assert_eq!(j["unmatched_sends"].as_array().unwrap().len(), 3);

    // A clean run: nothing is stuck.
    let clean = d.join("clean.bin");
    record(&clean, 0, false);
    let (code, text, err) = hang(&[clean.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("nothing is stuck"), "{text}");
    let (_, json, _) = hang(&[clean.as_os_str(), "--json".as_ref()]);
    assert_eq!(serde_json::from_str::<Json>(&json).unwrap()["stuck"], false);

    // Missing and foreign files: the error names the file; nothing on stdout.
    let missing = d.join("missing.bin");
    let (code, text, err) = hang(&[files[0].as_os_str(), missing.as_os_str()]);
    assert_eq!(code, 1);
    assert!(text.is_empty() && err.contains("missing.bin") && err.contains("No such file"), "{err}");
    let foreign = d.join("notes.txt");
    std::fs::write(&foreign, "just some text, not a trace\n").unwrap();
    let (code, _, err) = hang(&[foreign.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("notes.txt: not a waffle trace"), "{err}");
    // A file cut short still reads, with a warning naming where.
    let full = std::fs::read(&files[1]).unwrap();
    let cut = d.join("cut.bin");
    std::fs::write(&cut, &full[..full.len() - 5]).unwrap();
    let (code, _, err) = hang(&[cut.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("cut.bin: offset"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
