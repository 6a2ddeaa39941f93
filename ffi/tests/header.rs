//! `include/waffle.h` is generated from the crate's source by cbindgen and committed; this test
//! regenerates it with the cbindgen library and fails if the committed file differs.
//! `WAFFLE_BLESS=1 cargo test -p waffle-ffi --test header` rewrites it.

use std::path::Path;

#[test]
fn committed_waffle_h_matches_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("read cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("capi/src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let header = dir.join("include/waffle.h");
    if std::env::var_os("WAFFLE_BLESS").is_some() {
        std::fs::write(&header, &fresh).expect("write include/waffle.h");
        return;
    }
    let committed = std::fs::read(&header).unwrap_or_default();
    if committed != fresh {
        let (old, new) = (String::from_utf8_lossy(&committed), String::from_utf8_lossy(&fresh));
        let first = old.lines().zip(new.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "ffi/include/waffle.h is out of date with ffi/capi/src (first difference at line {}:\n  committed: {:?}\n  generated: {:?}).\n\
             Regenerate it with: WAFFLE_BLESS=1 cargo test -p waffle-ffi --test header",
            first + 1,
            old.lines().nth(first).unwrap_or("<end of file>"),
            new.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}
