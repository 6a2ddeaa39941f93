//! [`Shape`]: a tensor's dimensions, recorded as the `tensor.shape` text.

use crate::{
    encode::Writer,
    wire::{FieldType, MAX_STR_LEN},
    FieldValue,
};

/// A tensor's dimensions, as the program gave them.
#[derive(Clone, Copy, Debug)]
pub enum Shape<'a> {
    /// No shape given: recorded as the element count.
    Count(u64),
    /// Dimensions; none for a scalar.
    Dims(&'a [u64]),
    /// Dimensions as `usize` (what Rust and Python code usually hold).
    Sizes(&'a [usize]),
}

impl<'a> From<&'a [u64]> for Shape<'a> {
    fn from(d: &'a [u64]) -> Shape<'a> {
        Shape::Dims(d)
    }
}

impl<'a> From<&'a [usize]> for Shape<'a> {
    fn from(d: &'a [usize]) -> Shape<'a> {
        Shape::Sizes(d)
    }
}

impl Shape<'_> {
    /// The `tensor.shape` text: dimensions joined by `x` (`1x2560`), cut at [`MAX_STR_LEN`]
    /// bytes; returns its length in `out`.
    pub fn write(&self, out: &mut [u8; MAX_STR_LEN]) -> usize {
        let mut n = 0;
        let mut put = |i: usize, d: u64| {
            let mut digits = [0u8; 20];
            let mut k = digits.len();
            let mut d = d;
            loop {
                k -= 1;
                digits[k] = b'0' + (d % 10) as u8;
                d /= 10;
                if d == 0 {
                    break;
                }
            }
            let sep: &[u8] = if i == 0 { b"" } else { b"x" };
            for &b in sep.iter().chain(&digits[k..]) {
                if n < out.len() {
                    out[n] = b;
                    n += 1;
                }
            }
        };
        match *self {
            Shape::Count(c) => put(0, c),
            Shape::Dims(d) => d.iter().enumerate().for_each(|(i, &d)| put(i, d)),
            Shape::Sizes(d) => d.iter().enumerate().for_each(|(i, &d)| put(i, d as u64)),
        }
        n
    }
}

impl FieldValue for Shape<'_> {
    const TYPE: FieldType = FieldType::Str;
    fn encode(&self, w: &mut Writer<'_>) {
        let mut buf = [0u8; MAX_STR_LEN];
        let n = self.write(&mut buf);
        w.varint(n as u64);
        w.bytes(&buf[..n]);
    }
}
