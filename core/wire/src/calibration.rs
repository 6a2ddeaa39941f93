//! The calibration of clock ticks to Unix nanoseconds, as HEADER and CLOCK frames carry it, and
//! its fast conversion for decoders.

use core::time::Duration;

/// Converts ticks to Unix nanoseconds: `anchor_ns + (t - anchor_ticks) * ns / ticks`.
///
/// On the wire (HEADER, CLOCK): four varints, in field order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "frames", derive(serde::Serialize, serde::Deserialize))]
pub struct Calibration {
    /// A tick reading taken together with `anchor_unix_ns`.
    pub anchor_ticks: u64,
    /// Wall-clock time of the anchor, ns since the Unix epoch.
    pub anchor_unix_ns: u64,
    /// Ticks elapsed over the calibration interval (non-zero).
    pub ticks: u64,
    /// Nanoseconds elapsed over the same interval (non-zero).
    pub ns: u64,
}

impl Calibration {
    /// The Unix time in ns of tick reading `t`.
    pub fn to_unix_ns(&self, t: u64) -> u64 {
        let dt = i128::from(t) - i128::from(self.anchor_ticks);
        // Saturating: only a corrupt calibration (rates beyond 2^63 ns per tick) reaches the
        // limits, and the result is clamped to the u64 range anyway.
        let ns = dt.saturating_mul(i128::from(self.ns)) / i128::from(self.ticks.max(1));
        i128::from(self.anchor_unix_ns).saturating_add(ns).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// Nanoseconds in `ticks` ticks (rounded down).
    pub fn ns_in(&self, ticks: u64) -> u64 {
        let ns = u128::from(ticks) * u128::from(self.ns) / u128::from(self.ticks.max(1));
        ns.min(u128::from(u64::MAX)) as u64
    }

    /// Ticks in `d`.
    pub fn ticks_in(&self, d: Duration) -> u64 {
        (d.as_nanos() * u128::from(self.ticks) / u128::from(self.ns.max(1))) as u64
    }

    /// A converter giving exactly [`to_unix_ns`](Self::to_unix_ns)'s results without a 128-bit
    /// division per timestamp, for decoders that convert millions of them.
    pub fn converter(&self) -> Converter {
        let ticks = self.ticks.max(1);
        // ns / ticks = whole + fraction / 2^64 (rounded down).
        let whole = self.ns / ticks;
        let rest = self.ns % ticks;
        let fraction = ((u128::from(rest) << 64) / u128::from(ticks)) as u64;
        // Beyond 2^62 ticks or ns per interval, `to_unix_ns` may saturate its product before it
        // divides; only a corrupt calibration gets there, and it takes the exact slow path.
        let fast = self.ticks <= 1 << 62 && self.ns <= 1 << 62;
        Converter { cal: *self, whole, rest, fraction, fast }
    }
}

/// [`Calibration::to_unix_ns`] by multiplication: the quotient is estimated with a 64-bit
/// fixed-point reciprocal and corrected by one where the estimate fell short.
#[derive(Clone, Copy, Debug)]
pub struct Converter {
    cal: Calibration,
    whole: u64,
    rest: u64,
    fraction: u64,
    fast: bool,
}

impl Converter {
    /// The Unix time in ns of tick reading `t`.
    #[inline]
    pub fn to_unix_ns(&self, t: u64) -> u64 {
        if !self.fast {
            return self.cal.to_unix_ns(t);
        }
        let (dt, later) = match t.checked_sub(self.cal.anchor_ticks) {
            Some(d) => (d, true),
            None => (self.cal.anchor_ticks - t, false),
        };
        // floor(dt * ns / ticks) = dt * whole + floor(dt * rest / ticks); the second term is
        // estimated from the reciprocal: dt * fraction / 2^64 falls short of dt * rest / ticks
        // by less than dt / 2^64, so its floor is one short only if its fractional part (the
        // low word) is above 1 - dt / 2^64. Only then is it checked, by multiplying back.
        let estimate = u128::from(dt) * u128::from(self.fraction);
        let mut part = estimate >> 64;
        if estimate as u64 >= dt.wrapping_neg() && dt != 0 {
            let ticks = u128::from(self.cal.ticks.max(1));
            if (part + 1) * ticks <= u128::from(dt) * u128::from(self.rest) {
                part += 1;
            }
        }
        let ns = u128::from(dt) * u128::from(self.whole) + part;
        let anchor = u128::from(self.cal.anchor_unix_ns);
        if later {
            (anchor + ns).min(u128::from(u64::MAX)) as u64
        } else {
            anchor.saturating_sub(ns) as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_is_affine_and_handles_earlier_ticks() {
        let c = Calibration { anchor_ticks: 1000, anchor_unix_ns: 5_000_000, ticks: 3, ns: 1 };
        assert_eq!(c.to_unix_ns(1000), 5_000_000);
        assert_eq!(c.to_unix_ns(4000), 5_001_000);
        assert_eq!(c.to_unix_ns(0), 4_999_667); // before the anchor: earlier, not wrapped
        assert_eq!(c.ticks_in(Duration::from_micros(1)), 3000);
    }

    #[test]
    fn the_converter_agrees_with_the_division() {
        // A xorshift walk over calibrations and ticks, with the edges added.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0, 1, 2, 999, u64::MAX / 2, u64::MAX - 1, u64::MAX];
        for round in 0..20_000 {
            let pick = |v: u64, bits: u32| if bits == 64 { v } else { v >> (64 - bits) };
            let cal = Calibration {
                anchor_ticks: if round % 7 == 0 { edges[round % edges.len()] } else { next() },
                anchor_unix_ns: pick(next(), 61),
                ticks: pick(next(), 1 + (round % 64) as u32).max(1),
                ns: pick(next(), 1 + (round % 63) as u32).max(1),
            };
            let conv = cal.converter();
            for k in 0..8 {
                let t = match k {
                    0 => cal.anchor_ticks,
                    1 => cal.anchor_ticks.wrapping_add(1),
                    2 => cal.anchor_ticks.wrapping_sub(1),
                    3 => edges[round % edges.len()],
                    _ => next() >> (round % 64),
                };
                assert_eq!(conv.to_unix_ns(t), cal.to_unix_ns(t), "{cal:?} at {t}");
            }
        }
    }
}
