//! Writing `trace.bin` frames: magic, version, then `[kind][len u32][payload][crc32]` frames.
//! The byte layout is specified in `docs/wire-format.md`; constants come from `waffle::wire`.

use std::io::{self, Write};
use waffle::wire::{FORMAT_VERSION, MAGIC};

/// Builds a frame payload out of varints, strings and raw bytes.
#[derive(Default)]
pub struct Payload(pub Vec<u8>);

impl Payload {
    /// An empty payload.
    pub fn new() -> Payload {
        Payload(Vec::new())
    }

    /// Appends a LEB128 varint.
    pub fn varint(&mut self, v: u64) -> &mut Payload {
        let mut buf = [0u8; waffle::wire::MAX_VARINT_LEN];
        let n = waffle::wire::write_varint(&mut buf, v);
        self.0.extend_from_slice(&buf[..n]);
        self
    }

    /// Appends a string: varint byte length, then UTF-8.
    pub fn str(&mut self, s: &str) -> &mut Payload {
        self.varint(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    /// Appends one byte.
    pub fn byte(&mut self, b: u8) -> &mut Payload {
        self.0.push(b);
        self
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Payload {
        self.0.extend_from_slice(b);
        self
    }
}

/// Writes frames to `out`, after the file's magic and version.
pub struct FrameWriter<W: Write> {
    out: W,
}

impl<W: Write> FrameWriter<W> {
    /// Starts a file: writes the magic and the format version.
    pub fn new(mut out: W) -> io::Result<FrameWriter<W>> {
        out.write_all(&MAGIC)?;
        out.write_all(&FORMAT_VERSION.to_le_bytes())?;
        Ok(FrameWriter { out })
    }

    /// Writes one frame of `kind` holding `payload`, which may come in several pieces.
    pub fn frame(&mut self, kind: u8, pieces: &[&[u8]]) -> io::Result<()> {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let len = u32::try_from(len)
            .ok()
            .filter(|&l| l <= waffle::wire::MAX_FRAME_PAYLOAD)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame payload too large"))?;
        let mut head = [0u8; waffle::wire::FRAME_HEAD_LEN];
        head[0] = kind;
        head[1..].copy_from_slice(&len.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        self.out.write_all(&head)?;
        for p in pieces {
            crc.update(p);
            self.out.write_all(p)?;
        }
        self.out.write_all(&crc.finalize().to_le_bytes())
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }
}
