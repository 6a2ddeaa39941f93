//! The cold frames of `trace.bin`, written by hand without allocating.
//!
//! `waffle::wire`'s typed frames are postcard over `Vec`s (its `frames` feature needs
//! `alloc`); a firmware has no allocator to spare, and writes each frame straight into its
//! [`Output`]. The bytes are format version 1's (`docs/wire-format.md`), and the tests of this
//! module compare every frame with the grammar's own encoding of the same values, so the two
//! writers cannot drift apart.
//!
//! A frame's length comes before its payload, so each payload is produced twice: once into a
//! byte counter, then into the output through the running CRC. Nothing is buffered.

use crate::{crc::Crc32, output::Output};
use waffle::{
    callsite::Callsite,
    wire::{frame, Calibration, FORMAT_VERSION, MAGIC, MAX_FRAME_PAYLOAD},
};

/// Where a payload's bytes go: a counter, or the output with the CRC.
pub(crate) trait Out {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Appends one byte.
    fn byte(&mut self, b: u8) {
        self.put(&[b]);
    }

    /// Appends an unsigned LEB128 varint.
    fn varint(&mut self, mut v: u64) {
        let mut buf = [0u8; 10];
        let mut n = 0;
        while v >= 0x80 {
            buf[n] = v as u8 | 0x80;
            v >>= 7;
            n += 1;
        }
        buf[n] = v as u8;
        self.put(&buf[..=n]);
    }

    /// Appends a string: its varint byte length, then its bytes (whole, as frames hold them).
    fn str(&mut self, s: &str) {
        self.varint(s.len() as u64);
        self.put(s.as_bytes());
    }
}

/// Counts a payload's bytes.
struct Count(usize);

impl Out for Count {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Writes a payload to the output, keeping the CRC and the first error.
struct Through<'s, S: Output> {
    output: &'s mut S,
    crc: Crc32,
    error: Option<S::Error>,
}

impl<S: Output> Out for Through<'_, S> {
    fn put(&mut self, bytes: &[u8]) {
        self.crc.update(bytes);
        if self.error.is_none() {
            if let Err(e) = self.output.write(bytes) {
                self.error = Some(e);
            }
        }
    }
}

/// Writes the file's first ten bytes: the magic and the format version.
pub(crate) fn file_head<S: Output>(output: &mut S) -> Result<(), S::Error> {
    output.write(&MAGIC)?;
    output.write(&FORMAT_VERSION.to_le_bytes())
}

/// Writes one frame of `kind` whose payload `payload` produces (the same bytes each time it
/// is called). A payload over the format's 16 MiB limit is not written (a firmware's frames
/// are far smaller: one queue's contents at most).
pub(crate) fn frame<S: Output>(
    output: &mut S,
    kind: u8,
    payload: impl Fn(&mut dyn Out),
) -> Result<(), S::Error> {
    let mut count = Count(0);
    payload(&mut count);
    let Ok(len) = u32::try_from(count.0) else { return Ok(()) };
    if len > MAX_FRAME_PAYLOAD {
        return Ok(());
    }
    let mut head = [0u8; 5];
    head[0] = kind;
    head[1..].copy_from_slice(&len.to_le_bytes());
    let mut out = Through { output, crc: Crc32::new(), error: None };
    out.put(&head);
    payload(&mut out);
    if let Some(e) = out.error {
        return Err(e);
    }
    let tail = out.crc.finish().to_le_bytes();
    out.output.write(&tail)
}

/// What HEADER says about a firmware: the wire's fields, with no pid, labels or parent.
pub(crate) struct HeaderFields<'a> {
    pub name: &'a str,
    pub host: &'a str,
    pub calibration: Calibration,
    pub salt: u64,
    pub trace_id: u128,
}

/// The HEADER payload.
pub(crate) fn header(h: &HeaderFields<'_>, out: &mut dyn Out) {
    out.varint(0); // pid: a firmware has no process id
    out.str(h.name);
    out.str(h.host);
    out.varint(0); // no labels
    out.str(waffle::clock::SOURCE);
    let c = &h.calibration;
    for v in [c.anchor_ticks, c.anchor_unix_ns, c.ticks, c.ns, h.salt] {
        out.varint(v);
    }
    out.put(&h.trace_id.to_le_bytes());
    out.varint(0); // no parent span
}

/// Callsites per CALLSITES frame, as the std recorder writes them.
pub(crate) const CALLSITES_PER_FRAME: usize = 1024;

/// A CALLSITES payload: `sites`, the callsites of module 0 from id `first` on.
pub(crate) fn callsites(first: usize, sites: &[Callsite], out: &mut dyn Out) {
    out.varint(0); // module
    out.varint(first as u64);
    out.varint(sites.len() as u64);
    for cs in sites {
        out.byte(cs.kind as u8);
        out.str(cs.name);
        out.str(cs.module);
        out.str(cs.file);
        out.varint(u64::from(cs.line));
        out.varint(cs.fields.len() as u64);
        for f in cs.fields {
            out.str(f.name);
            out.byte(f.ty as u8);
        }
        out.str(cs.correlate);
    }
}

/// A STREAM payload: a stream's number and owner generation, with the same number as its
/// thread id and its name as the thread's.
pub(crate) fn stream(index: u32, generation: u32, name: &str, out: &mut dyn Out) {
    out.varint(u64::from(index));
    out.varint(u64::from(generation));
    out.varint(0); // module
    out.varint(u64::from(index));
    out.str(name);
}

/// A DATA payload: the stream, then whole chunks as the queue held them.
pub(crate) fn data(index: u32, chunks: &[u8], out: &mut dyn Out) {
    out.varint(u64::from(index));
    out.put(chunks);
}

/// An END payload: records each stream dropped, by stream.
pub(crate) fn end(drops: &[(u32, u64)], out: &mut dyn Out) {
    out.varint(drops.len() as u64);
    for &(stream, dropped) in drops {
        out.varint(u64::from(stream));
        out.varint(dropped);
    }
}

/// Writes the CALLSITES frames of every callsite linked into the firmware.
pub(crate) fn all_callsites<S: Output>(output: &mut S) -> Result<(), S::Error> {
    let sites = waffle::callsite::all();
    for (i, run) in sites.chunks(CALLSITES_PER_FRAME).enumerate() {
        frame(output, frame::CALLSITES, |out| callsites(i * CALLSITES_PER_FRAME, run, out))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
