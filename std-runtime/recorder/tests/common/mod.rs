//! Helpers shared by the integration tests.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The binary of example `name`: `cargo test` builds examples next to the test's `deps/`
/// directory; when only the test was built, or the example's source is newer, it is built now.
#[allow(dead_code)]
pub fn example(name: &str) -> PathBuf {
    // The examples are the recorder's; the decoder's tests include this file too.
    example_of("waffle-std", "recorder", name)
}

/// [`example`] for the package `package` in `std-runtime/<dir>` (the `tracing` layer's tests
/// include this file too).
#[allow(dead_code)]
pub fn example_of(package: &str, dir: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let bin = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../{dir}/examples/{name}.rs"));
    if modified(&bin).is_none_or(|built| modified(&source).is_some_and(|edited| edited > built)) {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "--example", name, "-p", package]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cargo.arg("--release");
        }
        let status = cargo.status().expect("run cargo");
        assert!(status.success() && bin.exists(), "building the example {name} failed: {status}");
    }
    bin
}

/// The `waffle-decode` binary, for the recorder's tests that read a trace the way a user does.
/// It is another package's, so cargo does not build it for them: it is built here when absent
/// (cargo then decides whether anything changed).
#[allow(dead_code)]
pub fn decoder_binary() -> PathBuf {
    if let Some(bin) = option_env!("CARGO_BIN_EXE_waffle-decode") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "-p", "waffle-decode", "--bin", "waffle-decode"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("run cargo");
    let bin = profile_dir.join(format!("waffle-decode{}", std::env::consts::EXE_SUFFIX));
    assert!(status.success() && bin.exists(), "building waffle-decode failed: {status}");
    bin
}

/// A waker that does nothing: the tests poll futures by hand.
#[allow(dead_code)] // not every test binary that includes this module polls futures
pub struct NoopWake;

impl std::task::Wake for NoopWake {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// A no-op waker.
#[allow(dead_code)]
pub fn noop_waker() -> std::task::Waker {
    std::task::Waker::from(std::sync::Arc::new(NoopWake))
}

/// Polls `fut` until it is ready, on the calling thread.
#[allow(dead_code)]
pub fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    let waker = noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// Pending on the first poll (waking its waker), ready on the next: an `.await` that hands the
/// future back to whoever polls it, possibly on another thread.
#[allow(dead_code)]
pub struct YieldOnce(pub bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}
