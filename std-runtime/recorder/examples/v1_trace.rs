//! Writes the small trace kept in `std-runtime/decoder/tests/data/v1.bin`: a format-version-1
//! file that every later decoder must still read (`tests/compat.rs` there). It has a process
//! name, labels, a trace id and a parent span, two threads, nested spans with typed fields, an
//! event with a causal link and a correlation, and a callsite registered at run time with
//! dynamic fields.
//!
//! `cargo run -p waffle-std --example v1_trace -- v1.bin`

use waffle::{callsite::Kind, wire::FieldType, FieldValue};

fn main() -> Result<(), waffle_std::Error> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "v1.bin".into());
    let parent = waffle::Context::from_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        .expect("a valid traceparent");
    let dynamic = waffle_std::dynamic::register(
        Kind::Span,
        "c_kernel",
        "kernels.c",
        "kernels.c",
        42,
        &[("n", FieldType::Dynamic), ("label", FieldType::Dynamic)],
        "",
    )
    .expect("a run-time callsite");
    let session = waffle_std::Config::new(&path)
        .process_name("v1-sample")
        .label("rank", "0")
        .label("job", "compat")
        .parent(parent)
        .start()?;
    let cause = {
        let _outer = waffle::span!("outer", step = 7u64, dt = 0.5);
        let _inner = waffle::span!("inner", delta = -3i64, ok = true);
        waffle::event!("ready", what = "halo")
    };
    std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || {
            let _k = waffle::span_begin_raw(dynamic, &|w| {
                12u64.encode_dynamic(w);
                "tile".encode_dynamic(w);
            });
            let _e = waffle::event!("consumed", caused_by = [cause], correlate = ("exchange", 9u64));
        })
        .expect("a thread")
        .join()
        .expect("the worker");
    session.stop()?;
    Ok(())
}
