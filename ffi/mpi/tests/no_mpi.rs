//! Without MPI, building `waffle-mpi` stops with one message from its build script that says
//! what is missing, how to install MPI and how to point at one (here `MPICC` names a program
//! that does not exist). Built in a target directory of its own, so that the real build's
//! script output stays as it is.

use std::{path::Path, process::Command};

#[test]
fn a_missing_mpi_is_one_clear_build_error() {
    let exe = std::env::current_exe().expect("test executable");
    let target = exe.ancestors().nth(3).expect("target directory").join("no-mpi");
    let out = Command::new(env!("CARGO"))
        .args(["build", "--offline", "-p", "waffle-mpi", "--lib", "--target-dir"])
        .arg(&target)
        .env("MPICC", "/nonexistent/bin/mpicc")
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("run cargo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the build succeeded without MPI:\n{stderr}");
    let messages: Vec<&str> =
        stderr.lines().filter(|l| l.contains("waffle-mpi needs an MPI installation")).collect();
    assert_eq!(messages.len(), 1, "one message:\n{stderr}");
    for says in [
        "MPICC=\"/nonexistent/bin/mpicc\" names no program",
        "apt-get install openmpi-bin libopenmpi-dev",
        "point at one with MPICC=/path/to/mpicc",
    ] {
        assert!(stderr.contains(says), "the message does not say {says:?}:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}
