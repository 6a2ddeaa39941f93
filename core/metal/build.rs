//! Puts `waffle.x` (the linker script fragment that keeps the callsite table in flash and
//! copies it to RAM at start-up) where the linker finds it, so that a firmware links with
//! `-C link-arg=-Twaffle.x`.

use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::copy("waffle.x", out.join("waffle.x")).expect("waffle.x is next to Cargo.toml");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=waffle.x");
}
