//! A trace file read while its process still writes it.
//!
//! The collector appends whole frames every drain interval, but a read can land between two
//! `write` calls of one frame, and the file may not exist yet when `--follow` starts.
//! [`GrowingFile`] is an [`io::Read`] over such a file that hands on only whole frames: it
//! follows the envelopes (`[kind][len u32 LE][payload][crc]`) as bytes arrive, keeps a partial
//! frame at the end until the rest is written, and says end of file only once the END frame
//! has been handed on (a clean stop), or when the file has not grown for the idle timeout (a
//! writer that was killed: what it left is handed on as it is, a cut frame included, and the
//! frame reader warns of the cut as for any damaged file). The frames themselves, CRCs
//! included, are still checked by the ordinary [`FrameReader`](crate::reader::FrameReader).

use std::{
    fs::File,
    io::{self, Read},
    path::Path,
    thread,
    time::{Duration, Instant},
};

use waffle_wire::{
    envelope::{FrameHead, FILE_HEAD_LEN},
    frame, FRAME_HEAD_LEN,
};

use crate::Error;

/// How long a reader at the end of the file sleeps before looking again.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Bytes read from the file at a time.
const READ_BYTES: usize = 256 << 10;

/// Reads a growing trace file whole frame by whole frame; see the module docs.
pub(crate) struct GrowingFile {
    file: File,
    /// Bytes read and not yet handed on; `buf[..whole]` are whole frames (and the file head).
    buf: Vec<u8>,
    pos: usize,
    whole: usize,
    /// Where the next frame head starts in `buf`, once the file head is passed.
    scan: Option<usize>,
    /// The END frame is in `buf[..whole]`: nothing after it is read.
    ended: bool,
    /// A frame head with an impossible length was met: frames can no longer be found, so
    /// bytes are handed on as they come (the frame reader says where the damage is).
    lost: bool,
    /// How long the file may stay the same size before it counts as done; `None`: forever.
    idle: Option<Duration>,
    grew: Instant,
    /// Bytes of the file read so far.
    pub(crate) offset: u64,
}

impl GrowingFile {
    /// Opens `path`, waiting up to `wait` for it to appear (`None`: as long as it takes).
    pub(crate) fn open(
        path: &Path,
        wait: Option<Duration>,
        idle: Option<Duration>,
    ) -> Result<GrowingFile, Error> {
        let started = Instant::now();
        let file = loop {
            match File::open(path) {
                Ok(file) => break file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if wait.is_some_and(|w| started.elapsed() >= w) {
                        let waited = wait.unwrap_or_default().as_secs_f64();
                        let what = format!("no such file after waiting {waited:.1} s (--wait)");
                        return Err(Error::io(path, io::Error::new(io::ErrorKind::NotFound, what)));
                    }
                    thread::sleep(POLL);
                }
                Err(e) => return Err(Error::io(path, e)),
            }
        };
        Ok(GrowingFile {
            file,
            buf: Vec::new(),
            pos: 0,
            whole: 0,
            scan: None,
            ended: false,
            lost: false,
            idle,
            grew: Instant::now(),
            offset: 0,
        })
    }

    /// Moves `whole` over every frame now complete in `buf`.
    fn find_frames(&mut self) {
        if self.lost {
            self.whole = self.buf.len();
            return;
        }
        let mut at = match self.scan {
            Some(at) => at,
            None if self.buf.len() >= FILE_HEAD_LEN => FILE_HEAD_LEN,
            None => return,
        };
        self.whole = self.whole.max(at);
        while !self.ended && self.buf.len() - at >= FRAME_HEAD_LEN {
            let mut head = [0u8; FRAME_HEAD_LEN];
            head.copy_from_slice(&self.buf[at..at + FRAME_HEAD_LEN]);
            let Ok(head) = FrameHead::decode(head) else {
                self.lost = true;
                self.whole = self.buf.len();
                return;
            };
            let len = usize::try_from(head.frame_len()).unwrap_or(usize::MAX);
            if self.buf.len() - at < len {
                break;
            }
            at += len;
            self.whole = at;
            self.ended = head.kind == frame::END;
        }
        self.scan = Some(at);
    }

    /// Reads what the file has gained; returns how many bytes.
    fn grow(&mut self) -> io::Result<usize> {
        // Keep only what is not handed on yet.
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.whole -= self.pos;
            self.scan = self.scan.map(|s| s - self.pos);
            self.pos = 0;
        }
        let have = self.buf.len();
        self.buf.resize(have + READ_BYTES, 0);
        let n = loop {
            match self.file.read(&mut self.buf[have..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(e);
                }
            }
        };
        self.buf.truncate(have + n);
        self.offset += n as u64;
        Ok(n)
    }
}

impl Read for GrowingFile {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.whole {
                let n = out.len().min(self.whole - self.pos);
                out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.ended || out.is_empty() {
                return Ok(0);
            }
            if self.grow()? > 0 {
                self.grew = Instant::now();
                self.find_frames();
            } else if self.idle.is_some_and(|idle| self.grew.elapsed() >= idle) {
                // The writer is gone without an END frame: hand on what it left.
                self.whole = self.buf.len();
                self.ended = true;
            } else {
                thread::sleep(POLL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use waffle_wire::envelope::{encode_frame, file_head};

    fn frames(kinds: &[(u8, usize)]) -> Vec<u8> {
        let mut out = file_head().to_vec();
        for &(kind, len) in kinds {
            out.extend(encode_frame(kind, &vec![7u8; len]).unwrap());
        }
        out
    }

    #[test]
    fn whole_frames_only_then_the_end() {
        let dir = std::env::temp_dir().join(format!("waffle-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.bin");
        let bytes = frames(&[(frame::HEADER, 30), (frame::DATA, 100), (frame::END, 3)]);
        let cut = FILE_HEAD_LEN + 30 + 9 + 20; // inside the DATA frame
        let mut f = File::create(&path).unwrap();
        f.write_all(&bytes[..cut]).unwrap();
        let mut r = GrowingFile::open(&path, Some(Duration::ZERO), None).unwrap();
        let mut got = vec![0u8; FILE_HEAD_LEN + 39];
        r.read_exact(&mut got).unwrap();
        assert_eq!(got, bytes[..FILE_HEAD_LEN + 39]);
        // The partial DATA frame is waited for, not handed on.
        let writer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            f.write_all(&bytes[cut..]).unwrap();
            bytes
        });
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        let bytes = writer.join().unwrap();
        assert_eq!(rest, bytes[FILE_HEAD_LEN + 39..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_waited_for_then_refused() {
        let path = std::env::temp_dir().join(format!("waffle-tail-missing-{}.bin", std::process::id()));
        let started = Instant::now();
        let Err(e) = GrowingFile::open(&path, Some(Duration::from_millis(150)), None) else { panic!() };
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert!(e.to_string().contains("no such file after waiting 0.1 s (--wait)"), "{e}");
    }

    #[test]
    fn an_idle_file_without_end_is_handed_on_as_it_is() {
        let path = std::env::temp_dir().join(format!("waffle-tail-idle-{}.bin", std::process::id()));
        let bytes = frames(&[(frame::HEADER, 30), (frame::DATA, 100)]);
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let mut r = GrowingFile::open(&path, None, Some(Duration::from_millis(100))).unwrap();
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got, bytes[..bytes.len() - 10]);
        std::fs::remove_file(&path).unwrap();
    }
}
