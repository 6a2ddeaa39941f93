//! The file's first ten bytes and the envelope around every frame payload:
//! `[kind u8][len u32 LE][payload][crc32 u32 LE]`, the CRC (IEEE) taken over head and payload.
//!
//! Writers and readers both go through these functions, so that the magic, the version
//! check, the length limit and the checksum are decided once.

use super::{FORMAT_VERSION, FRAME_HEAD_LEN, FRAME_TAIL_LEN, MAGIC, MAX_FRAME_PAYLOAD};
use alloc::vec::Vec;

/// Bytes before the first frame: [`MAGIC`] and the format version.
pub const FILE_HEAD_LEN: usize = MAGIC.len() + 2;

/// The first bytes of a file this crate writes.
pub fn file_head() -> [u8; FILE_HEAD_LEN] {
    let mut head = [0u8; FILE_HEAD_LEN];
    head[..MAGIC.len()].copy_from_slice(&MAGIC);
    head[MAGIC.len()..].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    head
}

/// Why a file's first bytes are not those of a trace this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileHeadError {
    /// Fewer than eight bytes, or not the magic.
    NotATrace,
    /// The magic, then the file ends inside the version (at this many bytes).
    Truncated(usize),
    /// Version 0, or newer than [`FORMAT_VERSION`].
    UnknownVersion(u16),
}

/// The format version of a file whose first (up to ten) bytes are `head`.
pub fn check_file_head(head: &[u8]) -> Result<u16, FileHeadError> {
    if head.len() < MAGIC.len() || head[..MAGIC.len()] != MAGIC {
        return Err(FileHeadError::NotATrace);
    }
    let Some(&[lo, hi]) = head.get(MAGIC.len()..FILE_HEAD_LEN) else {
        return Err(FileHeadError::Truncated(head.len()));
    };
    match u16::from_le_bytes([lo, hi]) {
        v if v == 0 || v > FORMAT_VERSION => Err(FileHeadError::UnknownVersion(v)),
        v => Ok(v),
    }
}

/// A frame's head: its kind and payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// The frame kind ([`super::frame`]).
    pub kind: u8,
    /// Payload bytes, at most [`MAX_FRAME_PAYLOAD`].
    pub len: u32,
}

impl FrameHead {
    /// The head of a frame of `len` payload bytes; `None` beyond [`MAX_FRAME_PAYLOAD`].
    pub fn new(kind: u8, len: usize) -> Option<FrameHead> {
        let len = u32::try_from(len).ok().filter(|&l| l <= MAX_FRAME_PAYLOAD)?;
        Some(FrameHead { kind, len })
    }

    /// Its five bytes.
    pub fn encode(&self) -> [u8; FRAME_HEAD_LEN] {
        let mut b = [0u8; FRAME_HEAD_LEN];
        b[0] = self.kind;
        b[1..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// The head in `bytes`; `Err` with the length when it is beyond [`MAX_FRAME_PAYLOAD`]
    /// (a corrupt length field: nothing after it can be found).
    pub fn decode(bytes: [u8; FRAME_HEAD_LEN]) -> Result<FrameHead, u32> {
        let len = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        if len > MAX_FRAME_PAYLOAD {
            return Err(len);
        }
        Ok(FrameHead { kind: bytes[0], len })
    }

    /// Bytes of the whole frame: head, payload, tail.
    pub fn frame_len(&self) -> u64 {
        (FRAME_HEAD_LEN + FRAME_TAIL_LEN) as u64 + u64::from(self.len)
    }
}

/// The checksum of one frame, fed its head and then its payload, possibly in pieces.
pub struct FrameCrc(crc32fast::Hasher);

impl FrameCrc {
    /// Starts the checksum of the frame with this head.
    pub fn new(head: &[u8; FRAME_HEAD_LEN]) -> FrameCrc {
        let mut crc = crc32fast::Hasher::new();
        crc.update(head);
        FrameCrc(crc)
    }

    /// Adds payload bytes.
    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    /// The frame's tail.
    pub fn tail(self) -> [u8; FRAME_TAIL_LEN] {
        self.0.finalize().to_le_bytes()
    }

    /// Whether `tail` is the frame's tail.
    pub fn check(self, tail: [u8; FRAME_TAIL_LEN]) -> bool {
        self.tail() == tail
    }
}

/// A whole frame of `kind` around `payload`; `None` if the payload is over the limit.
pub fn encode_frame(kind: u8, payload: &[u8]) -> Option<Vec<u8>> {
    let head = FrameHead::new(kind, payload.len())?.encode();
    let mut crc = FrameCrc::new(&head);
    crc.update(payload);
    let mut out = Vec::with_capacity(FRAME_HEAD_LEN + payload.len() + FRAME_TAIL_LEN);
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc.tail());
    Some(out)
}
