//! Running MPI programs in the tests of `waffle-ffi` and `waffle-mpi`: finding Open MPI (or
//! skipping, unless `CI=true` or `WAFFLE_REQUIRE_MPI` is set), `mpirun` with flags that work in
//! a container as root, and a run with a time limit.

use super::which;
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// The Open MPI tool `name` (`mpicc`, `mpicxx`), or None when MPI is not installed
/// and not required: then the test says it is skipped.
pub fn mpi_tool(name: &str) -> Option<PathBuf> {
    let tool = which(name);
    if tool.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true") && std::env::var_os("WAFFLE_REQUIRE_MPI").is_none(),
            "{name} is missing; install openmpi-bin and libopenmpi-dev (scripts/test.sh does)"
        );
        eprintln!("skipped: no {name} on PATH (apt-get install openmpi-bin libopenmpi-dev)");
    }
    tool
}

/// `mpirun -np RANKS` with [`MPIRUN_FLAGS`] and the variables that would change the trace removed.
pub fn mpirun_command(mpirun: &Path, ranks: u32) -> Command {
    let mut cmd = Command::new(mpirun);
    cmd.arg("-np").arg(ranks.to_string()).args(MPIRUN_FLAGS);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for var in waffle_std::launcher::variables() {
        cmd.env_remove(var);
    }
    cmd
}

/// `mpirun` flags that work in a container as root: no resource binding, no rsh agent for a
/// single host, shared-memory and self transports only.
pub const MPIRUN_FLAGS: &[&str] = &[
    "--allow-run-as-root",
    "--oversubscribe",
    "--bind-to",
    "none",
    "--mca",
    "btl",
    "self,vader",
    "--mca",
    "btl_vader_single_copy_mechanism",
    "none",
    "--mca",
    "plm_rsh_agent",
    "",
];

/// Runs `cmd`, killing it after `limit`; returns (success, stdout, stderr).
pub fn run_with_limit(cmd: &mut Command, limit: Duration) -> (bool, String, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn mpirun");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mpirun") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("mpirun output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(status.is_some(), "mpirun ran longer than {limit:?}:\n{stdout}\n{stderr}");
    (status.is_some_and(|s| s.success()), stdout, stderr)
}
