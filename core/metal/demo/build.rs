//! Puts `memory.x` where the linker finds it (cortex-m-rt's `link.x` includes it), and with
//! the `trace` feature links waffle-metal's `waffle.x` after `link.x` (a firmware that always
//! traces puts `-Twaffle.x` in its `.cargo/config.toml` instead; this one also builds without
//! waffle-metal, which has the script).

use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::copy("memory.x", out.join("memory.x")).expect("memory.x is next to Cargo.toml");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    if env::var_os("CARGO_FEATURE_TRACE").is_some() {
        println!("cargo:rustc-link-arg=-Twaffle.x");
    }
}
