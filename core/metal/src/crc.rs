//! CRC-32 (IEEE, reflected, as zlib and `crc32fast` compute it) with a 16-entry table: the
//! frame checksum in 64 bytes of flash, at two table lookups per byte. A firmware writes a few
//! kilobytes of frames per drain, so the table-of-1-KiB (or 16-KiB) speed is not worth its
//! flash here.

/// The reflected IEEE polynomial.
const POLY: u32 = 0xedb8_8320;

/// The CRC of each 4-bit value, for the nibble-at-a-time loop.
const TABLE: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut n = 0;
    while n < 16 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 4 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

/// A running CRC-32.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crc32(u32);

impl Crc32 {
    /// The CRC of no bytes yet.
    pub(crate) fn new() -> Crc32 {
        Crc32(!0)
    }

    /// Takes in `bytes`.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        let mut c = self.0;
        for &b in bytes {
            c ^= u32::from(b);
            c = (c >> 4) ^ TABLE[(c & 0xf) as usize];
            c = (c >> 4) ^ TABLE[(c & 0xf) as usize];
        }
        self.0 = c;
    }

    /// The CRC of everything taken in.
    pub(crate) fn finish(self) -> u32 {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Crc32;

    #[test]
    fn check_value_and_crc32fast_agree() {
        let mut crc = Crc32::new();
        crc.update(b"123456789");
        assert_eq!(crc.finish(), 0xcbf4_3926, "the CRC-32 check value");
        let bytes: [u8; 300] = core::array::from_fn(|i| (i * 7 + i / 5) as u8);
        let mut crc = Crc32::new();
        crc.update(&bytes[..100]);
        crc.update(&bytes[100..]);
        let mut head = [0u8; 5];
        head.copy_from_slice(&bytes[..5]);
        let mut theirs = waffle::wire::FrameCrc::new(&head);
        theirs.update(&bytes[5..]);
        assert_eq!(crc.finish().to_le_bytes(), theirs.tail());
    }
}
