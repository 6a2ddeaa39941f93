//! Writing `trace.bin`: the file head, then frames. The bytes come from `waffle::wire` (the
//! envelope in `wire::envelope`, payloads from `wire::frames`); this file only puts them into
//! an `io::Write`. `docs/wire-format.md` specifies them.

use std::io::{self, Write};
use waffle::wire::{
    chunk::MAX_CHUNK_PREFIX_LEN,
    envelope::{file_head, FrameCrc, FrameHead},
    ChunkHead, DataHead, FramePayload, TailHead,
};

/// Writes frames to `out`, after the file's magic and version.
pub struct FrameWriter<W: Write> {
    out: W,
}

impl<W: Write> FrameWriter<W> {
    /// Starts a file: writes the magic and the format version.
    pub fn new(mut out: W) -> io::Result<FrameWriter<W>> {
        out.write_all(&file_head())?;
        Ok(FrameWriter { out })
    }

    /// Writes one frame of the grammar.
    pub fn write<'a, F: FramePayload<'a>>(&mut self, payload: &F) -> io::Result<()> {
        self.frame(F::KIND, &[&payload.encode()])
    }

    /// Writes one DATA frame: its head, then whole chunks as the queue held them.
    pub fn data(&mut self, head: DataHead, chunks: &[u8]) -> io::Result<()> {
        self.frame(DataHead::KIND, &[&head.encode(), chunks])
    }

    /// Writes one TAIL frame: the staged `records` of `stream`, as one chunk with `head`.
    pub fn tail(&mut self, stream: u32, head: &ChunkHead, records: &[u8]) -> io::Result<()> {
        let mut prefix = [0u8; MAX_CHUNK_PREFIX_LEN];
        let prefix = head.encode(records.len(), &mut prefix);
        self.frame(TailHead::KIND, &[&TailHead { stream }.encode(), prefix, records])
    }

    /// Writes one frame of `kind` around payload bytes, which may come in several pieces.
    /// Payloads are made by `waffle::wire` ([`write`](Self::write)); this is for the chunks
    /// of DATA and for tests that need bytes the grammar would not make.
    pub fn frame(&mut self, kind: u8, pieces: &[&[u8]]) -> io::Result<()> {
        let len = pieces.iter().map(|p| p.len()).sum();
        let head = FrameHead::new(kind, len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame payload too large"))?
            .encode();
        let mut crc = FrameCrc::new(&head);
        self.out.write_all(&head)?;
        for p in pieces {
            crc.update(p);
            self.out.write_all(p)?;
        }
        self.out.write_all(&crc.tail())
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
