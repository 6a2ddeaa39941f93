//! Runs recorded rank by rank for the tests that read files as a stream: each rank is recorded
//! by the test binary itself, in a process of its own as an MPI rank would be (a session is the
//! process's), by a test that does nothing unless its variable is set.

use std::path::PathBuf;

/// Records `ranks` files, `rank0.bin` and on, in a fresh directory named for `name`: for each,
/// the test binary runs the test `test` alone with `var` set to `"{path},{rank}{extra}"`. Then
/// copies the first file cut at three fifths of its length (`cut.bin`), as a killed run leaves
/// it. Returns the files, and the copy last.
pub(crate) fn ranks(name: &str, test: &str, var: &str, ranks: usize, extra: &str) -> Vec<PathBuf> {
    let dir = std::env::temp_dir().join(format!("waffle-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths: Vec<PathBuf> = (0..ranks).map(|r| dir.join(format!("rank{r}.bin"))).collect();
    for (rank, p) in paths.iter().enumerate() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--test-threads=1"])
            .env(var, format!("{},{rank}{extra}", p.display()))
            .output()
            .expect("record a rank");
        assert!(out.status.success(), "recording rank {rank}: {out:?}");
    }
    let whole = std::fs::read(&paths[0]).unwrap();
    let cut = dir.join("cut.bin");
    std::fs::write(&cut, &whole[..whole.len() * 3 / 5]).unwrap();
    paths.push(cut);
    paths
}
