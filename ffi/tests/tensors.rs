//! `waffle_tensor_*` and `WAFFLE_STEP` end to end: `tests/c/tensors.c` compiled against the
//! shared library, run with `WAFFLE_TENSORS=1`, and its trace decoded; every fingerprint field
//! compared with values computed here from the same data (the hash with XXH3-64 of the bytes).

mod common;

use common::{command, compile, decode, run_ok, scratch, Link, CXX_FLAGS, C_FLAGS};
use waffle::wire::reserved;
use waffle_read::model::{Event, Value};
use xxhash_rust::xxh3::xxh3_64;

fn s(v: &str) -> Value {
    Value::Str(v.to_owned())
}

/// The fields after the name: dtype, shape, count, hash, rms, min, max, nan, +inf, -inf.
#[allow(clippy::too_many_arguments)]
fn fields(
    name: &str,
    dtype: &str,
    shape: &str,
    bytes: &[u8],
    count: u64,
    rms: f64,
    min: f64,
    max: f64,
    bad: [u64; 3],
) -> Vec<Value> {
    let mut v = vec![s(name), s(dtype), s(shape), Value::U64(count), Value::U64(xxh3_64(bytes))];
    v.extend([Value::F64(rms), Value::F64(min), Value::F64(max)]);
    v.extend(bad.map(Value::U64));
    v
}

fn same(a: &[Value], b: &[Value]) -> bool {
    // NaN statistics (a tensor with no finite element) compare equal to NaN.
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
            _ => x == y,
        })
}

#[test]
fn c_tensors_decode_to_the_fingerprints_of_their_data() {
    let dir = scratch("tensors");
    let exe = dir.join("tensors");
    compile(&common::cc(), C_FLAGS, &[common::ffi_dir().join("tests/c/tensors.c")], &exe, Link::Shared, &[]);
    check(&dir, &exe);
}

/// The same program compiled as C++17: `WAFFLE_STEP` from `waffle.hpp`, the functions from
/// `waffle.h`.
#[test]
fn cpp_tensors_decode_alike() {
    let dir = scratch("tensors-cpp");
    let exe = dir.join("tensors");
    let flags: Vec<&str> = CXX_FLAGS.iter().copied().chain(["-x", "c++"]).collect();
    compile(&common::cxx(), &flags, &[common::ffi_dir().join("tests/c/tensors.c")], &exe, Link::Shared, &[]);
    check(&dir, &exe);
}

/// Runs `exe` with fingerprints on and compares its trace with the fingerprints of its data.
fn check(dir: &std::path::Path, exe: &std::path::Path) {
    let file = dir.join("trace.bin");
    run_ok(command(exe).env("WAFFLE_TENSORS", "1").arg(&file));
    let trace = decode(&[file]);
    let thread = &trace.processes[0].threads[0];

    let steps: Vec<_> = thread.spans.iter().map(|sp| (&*sp.callsite.name, sp.fields.clone())).collect();
    assert_eq!(
        steps,
        [(reserved::STEP_SPAN, vec![Value::U64(10)]), (reserved::STEP_SPAN, vec![Value::U64(11)])]
    );
    assert_eq!(thread.spans[0].callsite.fields[0].name, reserved::STEP);

    let act = [0.5f32, -0.25, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 2.0];
    let act_bytes: Vec<u8> = act.iter().flat_map(|x| x.to_le_bytes()).collect();
    let ids_bytes: Vec<u8> = [7i32, -9, 3, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let step = [
        fields(
            "blk0/act",
            "f32",
            "2x3",
            &act_bytes,
            6,
            ((0.25f64 + 0.0625 + 4.0) / 3.0).sqrt(),
            -0.25,
            2.0,
            [1, 1, 1],
        ),
        fields(
            "halves",
            "bf16",
            "3",
            &[0xc0, 0x3f, 0x80, 0xc0, 0, 0],
            3,
            ((2.25f64 + 16.0) / 3.0).sqrt(),
            -4.0,
            1.5,
            [0; 3],
        ),
        fields("ids", "i32", "4", &ids_bytes, 4, ((49.0f64 + 81.0 + 9.0) / 4.0).sqrt(), -9.0, 7.0, [0; 3]),
        fields("scalar", "f64", "", &3.0f64.to_le_bytes(), 1, 3.0, 3.0, 3.0, [0; 3]),
    ];
    let empty = fields("empty", "u8", "0", &[], 0, f64::NAN, f64::NAN, f64::NAN, [0; 3]);
    let want: Vec<&Vec<Value>> = step.iter().chain(&step).chain([&empty]).collect();
    let events: Vec<&Event> = thread.events.iter().collect();
    assert_eq!(events.len(), want.len(), "{events:#?}");
    for (i, (e, w)) in events.iter().zip(want).enumerate() {
        assert_eq!(e.callsite.name, "tensor");
        let keys: Vec<&str> = e.callsite.field_names().collect();
        assert_eq!(keys, reserved::tensor::ALL);
        assert!(same(&e.fields, w), "event {i}:\n{:?}\n{:?}", e.fields, w);
        let parent = if i < 8 { Some(thread.spans[i / 4].id) } else { None };
        assert_eq!(e.parent, parent, "event {i}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
