//! Tensor fingerprints: what `waffle::tensor!` (and the C and Python bindings) record about an
//! array instead of its contents.
//!
//! A [`Fingerprint`] is the element count, an XXH3-64 hash of the elements' little-endian bytes,
//! the root mean square, smallest and largest of the finite elements, and how many elements are
//! NaN, +Inf and -Inf. Two runs that compute the same tensor record the same hash, so the first
//! tensor whose hash differs between two traces is where they diverged; the statistics say how
//! (a NaN appeared, the scale drifted). The fields and their order are
//! [`wire::reserved::tensor`](crate::wire::reserved::tensor).
//!
//! The hash is XXH3-64 with seed 0 (crate `xxhash-rust`, no_std): it is well kept, the fastest
//! portable 64-bit hash there is, and its output is fixed by a published specification, so that
//! Python (`xxhash`), C (`libxxhash`) and Rust compute the same value for the same bytes and a
//! fingerprint can be checked outside waffle.
//!
//! Computing one reads the data once from memory: it is cut into blocks that fit the L2 cache,
//! each folded into the statistics and then fed to the streaming hash while still cached (two
//! whole passes were no faster for tensors that fit a cache, and slower for those that do not).
//! Sums of squares are taken in `f64` in four independent lanes (the compiler turns them into
//! vector code; with `std` on x86_64 an AVX2 copy of the loop runs where the processor has it);
//! non-finite elements are only counted in that loop, and split into NaN, +Inf and -Inf by
//! another pass only when there are some. Nothing allocates, and nothing needs `std` but the
//! question to the processor.

use crate::{encode::Writer, wire::FieldType, FieldValue};
use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};

/// Elements per lane group of the statistics loop: four lanes of four sums each fill SSE2's
/// sixteen registers (eight lanes spilled them to the stack) and two AVX2 registers a sum.
const LANES: usize = 4;
/// Bytes per block: statistics, then hash, while the block is in the L2 cache.
const BLOCK_BYTES: usize = 64 << 10;

mod sealed {
    pub trait Sealed {}
}

/// An element type a tensor may have: the floats (`f32`, `f64`, and `half::f16`/`half::bf16`
/// with the feature `half`) and every integer type.
pub trait Element: Copy + sealed::Sealed {
    /// The name recorded as `tensor.dtype`.
    const DTYPE: &'static str;
    /// The value as an `f64` (integers beyond 2^53 rounded).
    fn to_f64(self) -> f64;
    /// The element's little-endian bytes, written to the front of `out`; returns how many.
    fn write_le(self, out: &mut [u8]) -> usize;
}

macro_rules! element {
    ($($t:ty => $name:literal, $conv:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: &'static str = $name;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                ($conv)(self)
            }
            #[inline(always)]
            fn write_le(self, out: &mut [u8]) -> usize {
                let b = self.to_le_bytes();
                out[..b.len()].copy_from_slice(&b);
                b.len()
            }
        }
    )*};
}

element! {
    f32 => "f32", f64::from;
    f64 => "f64", |x: f64| x;
    i8 => "i8", f64::from;
    i16 => "i16", f64::from;
    i32 => "i32", f64::from;
    i64 => "i64", |x: i64| x as f64;
    u8 => "u8", f64::from;
    u16 => "u16", f64::from;
    u32 => "u32", f64::from;
    u64 => "u64", |x: u64| x as f64;
}

#[cfg(feature = "half")]
element! {
    half::f16 => "f16", |x: half::f16| f64::from(x.to_f32());
    half::bf16 => "bf16", |x: half::bf16| f64::from(f32::from_bits(u32::from(x.to_bits()) << 16));
}

/// What is recorded about one tensor (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fingerprint {
    /// The element type's name (`tensor.dtype`).
    pub dtype: &'static str,
    /// The number of elements.
    pub count: u64,
    /// XXH3-64, seed 0, of the elements' little-endian bytes.
    pub hash: u64,
    /// Root mean square of the finite elements; NaN when none is finite.
    pub rms: f64,
    /// Smallest finite element; NaN when none is finite.
    pub min: f64,
    /// Largest finite element; NaN when none is finite.
    pub max: f64,
    /// How many elements are NaN.
    pub nan: u64,
    /// How many elements are +Inf.
    pub pos_inf: u64,
    /// How many elements are -Inf.
    pub neg_inf: u64,
}

/// The reserved fields of a tensor event with their types, in schema order: what a binding
/// registers its tensor callsite with (the macro writes the same schema).
pub const SCHEMA: [(&str, FieldType); 11] = {
    use crate::wire::reserved::tensor::*;
    use FieldType::{Str, F64, U64};
    [
        (NAME, Str),
        (DTYPE, Str),
        (SHAPE, Str),
        (COUNT, U64),
        (HASH, U64),
        (RMS, F64),
        (MIN, F64),
        (MAX, F64),
        (NAN, U64),
        (POS_INF, U64),
        (NEG_INF, U64),
    ]
};

impl Fingerprint {
    /// Writes the fields of [`SCHEMA`] for a tensor called `name` of shape `shape`: what a
    /// binding's event writes before any fields of its own.
    pub fn encode(&self, name: &str, shape: Shape<'_>, w: &mut Writer<'_>) {
        name.encode(w);
        self.dtype.encode(w);
        shape.encode(w);
        for v in [self.count, self.hash] {
            v.encode(w);
        }
        for v in [self.rms, self.min, self.max] {
            v.encode(w);
        }
        for v in [self.nan, self.pos_inf, self.neg_inf] {
            v.encode(w);
        }
    }
}

/// The running sums of the statistics pass, one per lane.
struct Lanes {
    squares: [f64; LANES],
    low: [f64; LANES],
    high: [f64; LANES],
    non_finite: [u64; LANES],
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            squares: [0.0; LANES],
            low: [f64::INFINITY; LANES],
            high: [f64::NEG_INFINITY; LANES],
            non_finite: [0; LANES],
        }
    }

    /// Folds `group` (at most [`LANES`] elements) into the lanes.
    #[inline(always)]
    fn fold<T: Element>(&mut self, group: &[T]) {
        for (i, &x) in group.iter().enumerate() {
            fold_one(
                x.to_f64(),
                &mut self.squares[i],
                &mut self.low[i],
                &mut self.high[i],
                &mut self.non_finite[i],
            );
        }
    }

    /// Folds `block` into the lanes, with AVX2 where the processor has it (with `std`, which
    /// can ask; checked once, cached by the standard library).
    #[inline(never)]
    fn fold_block<T: Element>(&mut self, block: &[T]) {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, which is all `fold_block_avx2` enables.
            return unsafe { self.fold_block_avx2(block) };
        }
        self.fold_block_here(block)
    }

    /// [`Lanes::fold_block_here`] compiled for AVX2: four `f64` lanes per instruction instead
    /// of SSE2's two (about twice the throughput).
    ///
    /// # Safety
    /// The processor supports AVX2.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2")]
    unsafe fn fold_block_avx2<T: Element>(&mut self, block: &[T]) {
        self.fold_block_here(block)
    }

    /// Folds `block` into the lanes: whole groups with the lanes in locals (so that the
    /// compiler keeps them in vector registers), then the remainder.
    #[inline(always)]
    fn fold_block_here<T: Element>(&mut self, block: &[T]) {
        let (mut sq, mut lo, mut hi, mut bad) = (self.squares, self.low, self.high, self.non_finite);
        let mut groups = block.chunks_exact(LANES);
        for g in &mut groups {
            let g: &[T; LANES] = g.try_into().expect("chunks_exact gives whole groups");
            for i in 0..LANES {
                fold_one(g[i].to_f64(), &mut sq[i], &mut lo[i], &mut hi[i], &mut bad[i]);
            }
        }
        (self.squares, self.low, self.high, self.non_finite) = (sq, lo, hi, bad);
        self.fold(groups.remainder());
    }
}

/// One element into one lane: its square, bounds and finiteness, without branches.
#[inline(always)]
fn fold_one(v: f64, squares: &mut f64, low: &mut f64, high: &mut f64, non_finite: &mut u64) {
    // `v - v` is 0 for finite `v` and NaN for NaN and ±Inf: one compare, no integer masks.
    #[allow(clippy::eq_op)]
    let finite = v - v == 0.0;
    let f = if finite { v } else { 0.0 };
    *squares += f * f;
    let lo = if finite { v } else { f64::INFINITY };
    let hi = if finite { v } else { f64::NEG_INFINITY };
    *low = if lo < *low { lo } else { *low };
    *high = if hi > *high { hi } else { *high };
    *non_finite += u64::from(!finite);
}

/// The bytes of `data` as they lie in memory (little-endian targets hash them in place).
#[cfg(target_endian = "little")]
fn bytes_of<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: every `Element` is a primitive integer or float (or `half`'s `repr(transparent)`
    // wrappers of `u16`): no padding, every byte initialised; `u8` has alignment 1 and the
    // length is the slice's size in bytes, so the new slice covers exactly the same memory.
    unsafe { core::slice::from_raw_parts(data.as_ptr().cast::<u8>(), core::mem::size_of_val(data)) }
}

/// Feeds the little-endian bytes of `block` to `hasher`.
fn hash_block<T: Element>(hasher: &mut Xxh3Default, block: &[T]) {
    #[cfg(target_endian = "little")]
    hasher.update(bytes_of(block));
    #[cfg(not(target_endian = "little"))]
    for group in block.chunks(32) {
        let mut buf = [0u8; 256];
        let mut n = 0;
        for &x in group {
            n += x.write_le(&mut buf[n..]);
        }
        hasher.update(&buf[..n]);
    }
}

/// XXH3-64 (seed 0) of the little-endian bytes of `data`, alone.
pub fn hash<T: Element>(data: &[T]) -> u64 {
    #[cfg(target_endian = "little")]
    return xxh3_64(bytes_of(data));
    #[cfg(not(target_endian = "little"))]
    {
        let mut h = Xxh3Default::new();
        hash_block(&mut h, data);
        h.digest()
    }
}

impl Fingerprint {
    /// Fingerprints `data`, reading it once from memory: in one pass of cache-sized blocks
    /// (see the [module docs](self)).
    pub fn of<T: Element>(data: &[T]) -> Fingerprint {
        if core::mem::size_of_val(data) <= BLOCK_BYTES {
            let mut lanes = Lanes::new();
            lanes.fold_block(data);
            Fingerprint::finish(data, &lanes, hash(data))
        } else {
            Fingerprint::of_blocks(data)
        }
    }

    /// [`Fingerprint::of`] for any size: blocks, each folded into the statistics and then
    /// hashed while it is cached.
    #[doc(hidden)]
    pub fn of_blocks<T: Element>(data: &[T]) -> Fingerprint {
        let per_block = (BLOCK_BYTES / core::mem::size_of::<T>().max(1)).max(LANES);
        let mut lanes = Lanes::new();
        let mut hasher = Xxh3Default::new();
        for block in data.chunks(per_block) {
            lanes.fold_block(block);
            hash_block(&mut hasher, block);
        }
        Fingerprint::finish(data, &lanes, hasher.digest())
    }

    /// [`Fingerprint::of`] in two passes over the whole of `data`, statistics then hash: what
    /// the blocks are measured against (`benches/tensors.rs`).
    #[doc(hidden)]
    pub fn of_two_passes<T: Element>(data: &[T]) -> Fingerprint {
        let mut lanes = Lanes::new();
        lanes.fold_block(data);
        Fingerprint::finish(data, &lanes, hash(data))
    }

    fn finish<T: Element>(data: &[T], lanes: &Lanes, hash: u64) -> Fingerprint {
        let non_finite: u64 = lanes.non_finite.iter().sum();
        let (mut nan, mut pos_inf, mut neg_inf) = (0, 0, 0);
        if non_finite > 0 {
            for v in data.iter().map(|x| x.to_f64()).filter(|v| !v.is_finite()) {
                match v {
                    f64::INFINITY => pos_inf += 1,
                    f64::NEG_INFINITY => neg_inf += 1,
                    _ => nan += 1,
                }
            }
        }
        let count = data.len() as u64;
        let finite = count - non_finite;
        let (rms, min, max) = if finite == 0 {
            (f64::NAN, f64::NAN, f64::NAN)
        } else {
            let s = &lanes.squares;
            let squares = (s[0] + s[1]) + (s[2] + s[3]);
            let min = lanes.low.iter().fold(f64::INFINITY, |a, &b| a.min(b));
            let max = lanes.high.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
            (sqrt(squares / finite as f64), min, max)
        };
        Fingerprint { dtype: T::DTYPE, count, hash, rms, min, max, nan, pos_inf, neg_inf }
    }
}

/// The square root: `f64::sqrt` with `std`; without it (`core` has none), Newton's iteration
/// from a first guess that halves the exponent, which converges to within an ulp.
fn sqrt(x: f64) -> f64 {
    #[cfg(feature = "std")]
    return x.sqrt();
    #[cfg(not(feature = "std"))]
    {
        if !(x > 0.0 && x.is_finite()) {
            return x; // 0, +Inf and NaN are their own roots; x is a mean of squares, never < 0
        }
        let mut y = f64::from_bits((x.to_bits() >> 1) + (1023u64 << 51));
        for _ in 0..8 {
            y = 0.5 * (y + x / y);
        }
        y
    }
}

mod shape;
pub use shape::Shape;

#[cfg(test)]
#[path = "tensor_tests.rs"]
mod tests;
