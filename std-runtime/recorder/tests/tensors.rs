//! `tensor!` and `step!` recorded through a real session and decoded: the reserved fields in
//! their order and types, values computed here independently, and nothing recorded (nor the data
//! touched) while fingerprints are off.

use half::bf16;
use std::cell::Cell;
use waffle::wire::{reserved, FieldType};
use waffle_read::model::{Event, Value};
use xxhash_rust::xxh3::xxh3_64;

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("waffle-tensors-{name}-{}.bin", std::process::id()))
}

fn bytes_f32(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn field<'a>(e: &'a Event, key: &str) -> &'a Value {
    let i = e.callsite.field_index(key).unwrap_or_else(|| panic!("no {key}"));
    &e.fields[i]
}

#[test]
fn tensors_and_steps_decode_to_their_fingerprints() {
    // Off (the default without WAFFLE_TENSORS): no event, and neither name nor data evaluated.
    let path = temp("off");
    let session = waffle_std::Config::new(&path).tensors(false).start().unwrap();
    let touched = Cell::new(false);
    let data = [1.0f32; 4];
    let id = waffle::tensor!(
        {
            touched.set(true);
            "never"
        },
        {
            touched.set(true);
            &data
        }
    );
    assert!(id.is_null() && !touched.get());
    drop(waffle::step!(9u64));
    session.stop().unwrap();
    let d = waffle_read::decode::decode_files(&[&path]).unwrap();
    let th = &d.trace.processes[0].threads;
    assert_eq!(th.iter().map(|t| t.events.len()).sum::<usize>(), 0);
    assert_eq!(th[0].spans.len(), 1, "steps record whether or not tensors are on");
    std::fs::remove_file(&path).ok();

    let path = temp("on");
    let session = waffle_std::Config::new(&path).tensors(true).start().unwrap();
    let act: Vec<f32> = (0..2560).map(|i| (i as f32 - 1280.0) / 64.0).collect();
    let mut bad = vec![0.5f32, -0.25, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 2.0];
    bad.push(f32::NAN);
    let halves: Vec<bf16> = [1.5f32, -4.0, 0.0].iter().map(|&x| bf16::from_f32(x)).collect();
    let ints = [7i64, -9, 3];
    let (first, second) = {
        let _step = waffle::step!(42u32, lr = 0.5);
        let first = waffle::tensor!("blk0/attn_norm", &act, shape = [1, 2560], layer = 0u64);
        let name = format!("blk{}/bad", 1);
        let second = waffle::tensor!(&name, &bad, caused_by = first);
        let dims: Vec<usize> = vec![halves.len()];
        waffle::tensor!("halves", &halves[..], shape = dims);
        waffle::tensor!("ints", &ints, shape = [] as [u64; 0]);
        (first, second)
    };
    session.stop().unwrap();

    let d = waffle_read::decode::decode_files(&[&path]).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let thread = &d.trace.processes[0].threads[0];
    let step = &thread.spans[0];
    assert_eq!(step.callsite.name, reserved::STEP_SPAN);
    assert_eq!(step.callsite.fields[0], waffle::wire::FieldDesc::new(reserved::STEP, FieldType::U64));
    assert_eq!(step.fields, vec![Value::U64(42), Value::F64(0.5)]);
    let ev = &thread.events;
    assert_eq!(ev.len(), 4);
    for e in ev {
        let keys: Vec<&str> = e.callsite.field_names().take(11).collect();
        assert_eq!(keys, reserved::tensor::ALL);
        assert_eq!(e.parent, Some(step.id));
    }
    let types: Vec<FieldType> = ev[0].callsite.fields.iter().map(|f| f.ty).collect();
    use FieldType::{Str, F64, U64};
    assert_eq!(types, [Str, Str, Str, U64, U64, F64, F64, F64, U64, U64, U64, U64]);

    // The literal name names the event; the values, computed here on their own.
    let a = &ev[0];
    assert_eq!((a.id, &*a.callsite.name), (first.to_u64(), "blk0/attn_norm"));
    let ms = act.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / 2560.0;
    let rms = match field(a, reserved::tensor::RMS) {
        Value::F64(v) => *v,
        other => panic!("{other:?}"),
    };
    assert!((rms - ms.sqrt()).abs() < 1e-12 * ms.sqrt());
    let want = [
        Value::Str("blk0/attn_norm".into()),
        Value::Str("f32".into()),
        Value::Str("1x2560".into()),
        Value::U64(2560),
        Value::U64(xxh3_64(&bytes_f32(&act))),
    ];
    assert_eq!(a.fields[..5], want);
    assert_eq!(
        a.fields[6..],
        [
            Value::F64(-20.0),
            Value::F64(19.984375),
            Value::U64(0),
            Value::U64(0),
            Value::U64(0),
            Value::U64(0)
        ]
    );

    // A name known only at run time: the event is `tensor`; non-finite elements counted apart.
    let b = &ev[1];
    assert_eq!(
        (b.id, &*b.callsite.name, b.links.as_slice()),
        (second.to_u64(), "tensor", &[first.to_u64()][..])
    );
    let rms = ((0.25f64 + 0.0625 + 4.0) / 3.0).sqrt();
    assert_eq!(
        b.fields,
        [
            Value::Str("blk1/bad".into()),
            Value::Str("f32".into()),
            Value::Str("7".into()),
            Value::U64(7),
            Value::U64(xxh3_64(&bytes_f32(&bad))),
            Value::F64(rms),
            Value::F64(-0.25),
            Value::F64(2.0),
            Value::U64(2),
            Value::U64(1),
            Value::U64(1),
        ]
    );

    let c = &ev[2];
    let bits: Vec<u8> = halves.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
    assert_eq!(bits, [0xc0, 0x3f, 0x80, 0xc0, 0, 0]);
    assert_eq!(
        c.fields[1..5],
        [Value::Str("bf16".into()), Value::Str("3".into()), Value::U64(3), Value::U64(xxh3_64(&bits))]
    );
    assert_eq!(c.fields[6..8], [Value::F64(-4.0), Value::F64(1.5)]);

    let i = &ev[3];
    let bytes: Vec<u8> = ints.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        i.fields[1..5],
        [Value::Str("i64".into()), Value::Str(String::new()), Value::U64(3), Value::U64(xxh3_64(&bytes))]
    );
    std::fs::remove_file(&path).ok();
}
