//! Reading `trace.bin` frames without trusting the file: the io loop around the envelope that
//! `waffle_wire::envelope` defines (file head check, frame head, checksum).
//!
//! A frame whose checksum fails is skipped with a warning; a frame cut short, or a length
//! field beyond the format's limit, ends the reading with a warning that names the offset.
//! Allocation grows with the bytes actually present, never with a length field.

use crate::error::Error;
use std::{
    fmt,
    fs::File,
    io::{self, BufReader, Read, Seek},
    path::{Path, PathBuf},
};
use waffle_wire::{
    self as wire,
    envelope::{check_file_head, FileHeadError, FrameCrc, FrameHead, FILE_HEAD_LEN},
    FORMAT_VERSION, FRAME_HEAD_LEN, FRAME_TAIL_LEN, MAX_FRAME_PAYLOAD,
};

/// Something wrong in a file that did not stop the decoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The file.
    pub path: PathBuf,
    /// Byte offset the problem starts at.
    pub offset: u64,
    /// What was wrong, and what was done about it.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: offset {}: {}", self.path.display(), self.offset, self.message)
    }
}

/// One frame as read.
#[derive(Debug)]
pub struct Frame {
    /// Frame kind (`waffle_wire::frame`).
    pub kind: u8,
    /// Offset of the frame's first byte in the file.
    pub offset: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Reads frames from a trace file.
pub struct FrameReader<R: Read> {
    input: R,
    path: PathBuf,
    offset: u64,
    done: bool,
    /// The file's format version.
    pub version: u16,
}

impl FrameReader<BufReader<File>> {
    /// Opens `path` and checks its magic and version.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        FrameReader::new(BufReader::with_capacity(1 << 20, file), path)
    }
}

impl<R: Read + Seek> FrameReader<BufReader<R>> {
    /// Goes on at `offset`, which must be where a frame begins (one that [`offset`](Self::offset)
    /// gave on an earlier read of the same file): the frames before it are not read.
    pub(crate) fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.input.seek(io::SeekFrom::Start(offset))?;
        self.offset = offset;
        self.done = false;
        Ok(())
    }

    /// The next intact frame of kind `kind`, its payload in `payload`: the frames are walked as
    /// [`read_frame`](Self::read_frame) walks them, but only the heads of other frames are read
    /// and their payloads are seeked over, so finding the last CLOCK frame of a large file
    /// costs a few bytes per frame. Damage ends the walk silently (reading the file reports it).
    pub(crate) fn next_of_kind(&mut self, kind: u8, payload: &mut Vec<u8>) -> Option<u64> {
        while !self.done {
            let offset = self.offset;
            let Ok(Some((k, len, head))) = self.head() else {
                self.done = true;
                return None;
            };
            self.offset += (FRAME_HEAD_LEN + len as usize + FRAME_TAIL_LEN) as u64;
            if k != kind {
                if self.input.seek_relative(i64::from(len) + FRAME_TAIL_LEN as i64).is_err() {
                    self.done = true;
                }
                continue;
            }
            payload.clear();
            let got = (&mut self.input).take(u64::from(len)).read_to_end(payload).unwrap_or(0);
            let mut tail = [0u8; FRAME_TAIL_LEN];
            if got < len as usize || read_full(&mut self.input, &mut tail).unwrap_or(0) < FRAME_TAIL_LEN {
                self.done = true;
                return None;
            }
            let mut crc = FrameCrc::new(&head);
            crc.update(payload);
            if crc.check(tail) {
                return Some(offset);
            }
        }
        None
    }
}

impl<R: Read> FrameReader<R> {
    /// Reads the magic and version from `input`; `path` names it in messages.
    pub fn new(mut input: R, path: &Path) -> Result<Self, Error> {
        let mut head = [0u8; FILE_HEAD_LEN];
        let n = read_full(&mut input, &mut head).map_err(|e| Error::io(path, e))?;
        let version = match check_file_head(&head[..n]) {
            Ok(v) => v,
            Err(FileHeadError::NotATrace) => return Err(Error::NotATrace { path: path.to_owned() }),
            Err(FileHeadError::Truncated(at)) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    offset: at as u64,
                    what: "file ends inside the format version".into(),
                })
            }
            Err(FileHeadError::UnknownVersion(found)) => {
                return Err(Error::UnknownVersion { path: path.to_owned(), found, supported: FORMAT_VERSION })
            }
        };
        Ok(FrameReader { input, path: path.to_owned(), offset: head.len() as u64, done: false, version })
    }

    /// The next intact frame, or `None` at the end of the readable part of the file. Problems
    /// on the way are added to `warnings`.
    pub fn next_frame(&mut self, warnings: &mut Vec<Warning>) -> Option<Frame> {
        let mut payload = Vec::new();
        let (kind, offset) = self.read_frame(warnings, &mut payload)?;
        Some(Frame { kind, offset, payload })
    }

    /// Like [`next_frame`](Self::next_frame), but reads the payload into `payload` (replacing
    /// what it held), so that one buffer serves a whole file. Returns the frame's kind and
    /// offset.
    pub fn read_frame(&mut self, warnings: &mut Vec<Warning>, payload: &mut Vec<u8>) -> Option<(u8, u64)> {
        while !self.done {
            let offset = self.offset;
            let (kind, len, head) = match self.head() {
                Ok(Some(h)) => h,
                Ok(None) => return None,
                Err(message) => return self.stop(warnings, offset, message),
            };
            payload.clear();
            // `take` + `read_to_end` grows the buffer with the bytes that arrive, never to a
            // length the file claims.
            let got = match (&mut self.input).take(u64::from(len)).read_to_end(payload) {
                Ok(g) => g,
                Err(e) => return self.stop(warnings, offset, format!("read error: {e}")),
            };
            let mut tail = [0u8; FRAME_TAIL_LEN];
            let tail_n =
                if got == len as usize { read_full(&mut self.input, &mut tail).unwrap_or(0) } else { 0 };
            if got < len as usize || tail_n < FRAME_TAIL_LEN {
                return self.stop(warnings, offset, format!("file ends inside a frame of kind {kind} ({got} of {len} payload bytes); the frame is lost"));
            }
            self.offset += (FRAME_HEAD_LEN + len as usize + FRAME_TAIL_LEN) as u64;
            let mut crc = FrameCrc::new(&head);
            crc.update(payload);
            if !crc.check(tail) {
                warnings.push(self.warning(
                    offset,
                    format!("frame of kind {kind} ({len} bytes) fails its checksum; skipped"),
                ));
                continue;
            }
            return Some((kind, offset));
        }
        None
    }

    /// Reads the next frame head: `Ok(None)` at a clean end of file, `Err` (with the message
    /// of the warning) when the head is cut or its length is beyond the format's limit. Either
    /// way, reading is over when it is not `Ok(Some(..))`.
    fn head(&mut self) -> Result<Option<(u8, u32, [u8; FRAME_HEAD_LEN])>, String> {
        let mut head = [0u8; FRAME_HEAD_LEN];
        let n = read_full(&mut self.input, &mut head).map_err(|e| format!("read error: {e}"))?;
        if n == 0 {
            self.done = true;
            return Ok(None);
        }
        if n < head.len() {
            return Err(format!(
                "file ends inside a frame header ({n} of {FRAME_HEAD_LEN} bytes); the rest is lost"
            ));
        }
        match FrameHead::decode(head) {
            Ok(h) => Ok(Some((h.kind, h.len, head))),
            Err(len) => Err(format!("frame length {len} exceeds the {MAX_FRAME_PAYLOAD}-byte limit (corrupt length field); the rest of the file is not read")),
        }
    }

    /// Byte offset of the next frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn warning(&self, offset: u64, message: String) -> Warning {
        Warning { path: self.path.clone(), offset, message }
    }

    fn stop<T>(&mut self, warnings: &mut Vec<Warning>, offset: u64, message: String) -> Option<T> {
        warnings.push(self.warning(offset, message));
        self.done = true;
        None
    }
}

#[inline(never)]
fn long_varint(buf: &[u8], pos: usize) -> Result<(u64, usize), String> {
    wire::read_varint(&buf[pos.min(buf.len())..]).map_err(|e| format!("bad varint at byte {pos} ({e:?})"))
}

#[cold]
#[inline(never)]
fn short(buf: &[u8], pos: usize, n: usize) -> String {
    format!("{n} bytes wanted at byte {pos} but only {} remain", buf.len().saturating_sub(pos))
}

#[cold]
#[inline(never)]
fn out_of_range(v: u64, at: usize) -> String {
    format!("value {v} at byte {at} is out of range")
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads varints, strings and bytes from a payload; errors name the position.
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }

    /// Bytes consumed.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A varint.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, String> {
        // Most varints in a trace (tags aside: deltas, callsite ids, small fields) take a byte,
        // most others two or three. (Indexed from the position: slicing the rest first costs
        // registers the record loop needs.)
        let p = self.pos;
        if let Some(&b) = self.buf.get(p) {
            if b < 0x80 {
                self.pos = p + 1;
                return Ok(u64::from(b));
            }
            if let Some(&c) = self.buf.get(p + 1) {
                if c < 0x80 {
                    self.pos = p + 2;
                    return Ok(u64::from(b & 0x7f) | u64::from(c) << 7);
                }
                if let Some(&d) = self.buf.get(p + 2) {
                    if d < 0x80 {
                        self.pos = p + 3;
                        return Ok(u64::from(b & 0x7f) | u64::from(c & 0x7f) << 7 | u64::from(d) << 14);
                    }
                }
            }
        }
        // Out of line, and given the position rather than the cursor, so that the cursor can
        // stay in registers in the record loop.
        let (v, n) = long_varint(self.buf, self.pos)?;
        self.pos += n;
        Ok(v)
    }

    /// A varint that must fit in `u32`.
    #[inline]
    pub(crate) fn varint_u32(&mut self) -> Result<u32, String> {
        let at = self.pos;
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| out_of_range(v, at))
    }

    /// `n` raw bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        let p = self.pos;
        match p.checked_add(n).and_then(|end| self.buf.get(p..end)) {
            Some(b) => {
                self.pos = p + n;
                Ok(b)
            }
            None => Err(short(self.buf, self.pos, n)),
        }
    }

    /// `N` raw bytes, as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let p = self.pos;
        match self.buf.get(p..p + N).and_then(|b| b.first_chunk::<N>()) {
            Some(&b) => {
                self.pos = p + N;
                Ok(b)
            }
            None => Err(short(self.buf, self.pos, N)),
        }
    }

    /// One byte.
    #[inline]
    pub fn byte(&mut self) -> Result<u8, String> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(short(self.buf, self.pos, 1)),
        }
    }

    /// The next byte, if any, without consuming it.
    #[inline]
    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// A length-prefixed string (invalid UTF-8 is replaced, not rejected).
    pub fn str(&mut self) -> Result<String, String> {
        Ok(String::from_utf8_lossy(self.str_bytes()?).into_owned())
    }

    /// The bytes of a length-prefixed string, as they are (not checked as UTF-8).
    #[inline]
    pub(crate) fn str_bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| format!("string length {n} is out of range"))?;
        self.bytes(n)
    }

    /// The rest of the payload.
    pub fn rest(&mut self) -> &'a [u8] {
        let b = &self.buf[self.pos.min(self.buf.len())..];
        self.pos = self.buf.len();
        b
    }
}
