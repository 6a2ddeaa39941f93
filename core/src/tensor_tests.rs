//! The fingerprint's values on data whose answers are known by hand.

use super::*;
use crate::wire::MAX_STR_LEN;
use std::vec::Vec;

fn le_bytes<T: Element>(data: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for &x in data {
        let mut b = [0u8; 8];
        let n = x.write_le(&mut b);
        out.extend_from_slice(&b[..n]);
    }
    out
}

#[test]
fn the_hash_is_xxh3_64_of_the_little_endian_bytes() {
    // XXH3-64 of no bytes, seed 0, from the specification's test vectors.
    assert_eq!(Fingerprint::of::<f32>(&[]).hash, 0x2D06_8005_38D3_94C2);
    let data = [1.0f32, -2.5, 3.25];
    let expected = xxh3_64(&[0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0, 0, 0, 0x50, 0x40]);
    assert_eq!(Fingerprint::of(&data).hash, expected);
    assert_eq!(hash(&data), expected);
}

#[test]
fn blocks_hash_as_one_input() {
    // Over one block, the streaming hash of the blocks equals the one-shot hash of the bytes.
    let data: Vec<f32> = (0..100_003).map(|i| (i as f32).sin()).collect();
    let fp = Fingerprint::of_blocks(&data);
    assert_eq!(fp.hash, xxh3_64(&le_bytes(&data)));
    assert_eq!(fp.count, 100_003);
    // Over one block, `of` takes the blocks.
    let big = std::vec![1.5f64; BLOCK_BYTES / 8 * 3 + 3];
    assert_eq!(Fingerprint::of(&big), Fingerprint::of_blocks(&big));
    assert_eq!(Fingerprint::of(&big).hash, xxh3_64(&le_bytes(&big)));
    let ints: Vec<u16> = (0..70_001u32).map(|i| (i * 7) as u16).collect();
    assert_eq!(Fingerprint::of_blocks(&ints).hash, xxh3_64(&le_bytes(&ints)));
}

#[test]
fn statistics_count_only_finite_elements() {
    let data = [1.0f64, -2.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 3.0, f64::NAN];
    let fp = Fingerprint::of(&data);
    assert_eq!((fp.dtype, fp.count, fp.nan, fp.pos_inf, fp.neg_inf), ("f64", 7, 2, 1, 1));
    assert_eq!((fp.min, fp.max), (-2.0, 3.0));
    assert_eq!(fp.rms, (14.0f64 / 3.0).sqrt());
}

#[test]
fn no_finite_element_gives_nan_statistics() {
    for data in [&[][..], &[f32::NAN, f32::INFINITY][..]] {
        let fp = Fingerprint::of(data);
        assert!(fp.rms.is_nan() && fp.min.is_nan() && fp.max.is_nan(), "{fp:?}");
    }
}

#[test]
fn integers_of_every_width() {
    let fp = Fingerprint::of(&[-3i8, 4, 0]);
    assert_eq!((fp.dtype, fp.min, fp.max, fp.rms), ("i8", -3.0, 4.0, (25.0f64 / 3.0).sqrt()));
    assert_eq!(fp.hash, xxh3_64(&[0xfd, 4, 0]));
    let fp = Fingerprint::of(&[u64::MAX, 1]);
    assert_eq!((fp.dtype, fp.max, fp.min), ("u64", u64::MAX as f64, 1.0));
    assert_eq!(Fingerprint::of(&[1i64]).dtype, "i64");
    assert_eq!(Fingerprint::of(&[1u32]).dtype, "u32");
}

#[test]
fn lanes_and_remainders_agree_with_a_plain_loop() {
    // 8 lanes and a remainder of 5: min, max exact, the mean of squares within rounding.
    let data: Vec<f32> = (0..8 * 37 + 5).map(|i| ((i * 7919) % 1000) as f32 / 10.0 - 50.0).collect();
    let fp = Fingerprint::of(&data);
    let min = data.iter().cloned().fold(f32::INFINITY, f32::min);
    let max = data.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let ms = data.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>() / data.len() as f64;
    assert_eq!((fp.min, fp.max), (f64::from(min), f64::from(max)));
    assert!((fp.rms - ms.sqrt()).abs() <= 1e-12 * ms.sqrt(), "{} vs {}", fp.rms, ms.sqrt());
}

#[cfg(feature = "half")]
#[test]
fn half_precision_floats() {
    use half::{bf16, f16};
    let data = [bf16::from_f32(1.5), bf16::from_f32(-4.0), bf16::NAN, bf16::INFINITY];
    let fp = Fingerprint::of(&data);
    assert_eq!((fp.dtype, fp.min, fp.max, fp.nan, fp.pos_inf), ("bf16", -4.0, 1.5, 1, 1));
    assert_eq!(fp.hash, xxh3_64(&[0xc0, 0x3f, 0x80, 0xc0, 0xc0, 0x7f, 0x80, 0x7f]));
    let fp = Fingerprint::of(&[f16::from_f32(0.5), f16::NEG_INFINITY]);
    assert_eq!((fp.dtype, fp.min, fp.max, fp.rms, fp.neg_inf), ("f16", 0.5, 0.5, 0.5, 1));
    assert_eq!(fp.hash, xxh3_64(&[0x00, 0x38, 0x00, 0xfc]));
}

#[test]
fn shapes_are_dimensions_joined_by_x() {
    let text = |s: Shape<'_>| {
        let mut buf = [0u8; MAX_STR_LEN];
        let n = s.write(&mut buf);
        std::string::String::from_utf8(buf[..n].to_vec()).unwrap()
    };
    assert_eq!(text(Shape::Dims(&[1, 2560])), "1x2560");
    assert_eq!(
        text(Shape::Sizes(&[4, 0, 18_446_744_073_709_551_615usize as u64 as usize])),
        "4x0x18446744073709551615"
    );
    assert_eq!(text(Shape::Count(12)), "12");
    assert_eq!(text(Shape::Dims(&[])), "");
    assert_eq!(text(Shape::Dims(&[7; 600])).len(), MAX_STR_LEN);
}

#[test]
fn the_schema_is_the_reserved_keys_in_order() {
    let keys: Vec<&str> = SCHEMA.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, crate::wire::reserved::tensor::ALL);
}

#[test]
fn encoded_fields_follow_the_schema() {
    let fp = Fingerprint::of(&[2u8, 2]);
    let mut buf = [0u8; 128];
    let mut w = Writer::new(&mut buf, 0);
    fp.encode("t", Shape::Dims(&[2, 1]), &mut w);
    let n = w.pos();
    let mut want = std::vec![1, b't', 2, b'u', b'8', 3, b'2', b'x', b'1', 2];
    let mut h = [0u8; 10];
    let mut hw = Writer::new(&mut h, 0);
    hw.varint(fp.hash);
    let hn = hw.pos();
    want.extend_from_slice(&h[..hn]);
    for v in [2.0f64, 2.0, 2.0] {
        want.extend_from_slice(&v.to_le_bytes());
    }
    want.extend_from_slice(&[0, 0, 0]);
    assert_eq!(&buf[..n], &want[..]);
}

#[test]
fn one_pass_and_two_passes_agree() {
    let data: Vec<f32> =
        (0..70_000).map(|i| if i % 9_999 == 0 { f32::NAN } else { i as f32 * 0.5 }).collect();
    let (a, b) = (Fingerprint::of_blocks(&data), Fingerprint::of_two_passes(&data));
    assert_eq!((a.hash, a.min, a.max, a.nan, a.count), (b.hash, b.min, b.max, b.nan, b.count));
    assert_eq!(a.nan, 8);
}
