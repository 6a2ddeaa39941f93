//! The frames a trace file opens with: the process HEADER (pid, name, host, labels, clock
//! calibration, trace id, parent span) and CALLSITES, the string table of the callsites linked
//! into the image. The collector writes run-time callsites with [`write_callsites`] as they
//! appear. `docs/wire-format.md` specifies both frames.

use crate::{
    clock,
    frames::{FrameWriter, Payload},
};
use std::io::{self, Write};
use waffle::wire::frame;

/// The executable's file name, the default process name.
fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// This machine's host name ("unknown" if it has none).
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `buf.len()` bytes; gethostname writes at most that many.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_owned();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// What a session's HEADER frame says about the process, besides what every header says (pid,
/// host, clock source).
pub(crate) struct Preamble<'a> {
    /// The process name; the executable's name if `None`.
    pub process_name: Option<&'a str>,
    pub labels: &'a [(String, String)],
    pub cal: &'a clock::Calibration,
    /// The process salt of span and event ids.
    pub salt: u32,
    pub trace_id: waffle::TraceId,
    /// The span of another process that this process's top-level spans belong to.
    pub parent_span: Option<waffle::SpanId>,
}

impl Preamble<'_> {
    /// Writes the HEADER frame and the string table of the callsites linked into this image.
    pub(crate) fn write<W: Write>(&self, out: &mut FrameWriter<W>) -> io::Result<()> {
        let mut p = Payload::new();
        p.varint(u64::from(std::process::id()));
        p.str(self.process_name.unwrap_or(&process_name()));
        p.str(&host_name());
        p.varint(self.labels.len() as u64);
        for (k, v) in self.labels {
            p.str(k).str(v);
        }
        p.str(waffle::clock::SOURCE);
        let cal = self.cal;
        p.varint(cal.anchor_ticks).varint(cal.anchor_unix_ns).varint(cal.ticks).varint(cal.ns);
        p.varint(u64::from(self.salt));
        p.bytes(&self.trace_id.to_u128().to_le_bytes());
        p.varint(self.parent_span.map_or(0, |s| s.to_u64()));
        out.frame(frame::HEADER, &[&p.0])?;
        // The string table: every callsite linked into this image, as module 0.
        let all = waffle::callsite::all();
        for (n, chunk) in all.chunks(1024).enumerate() {
            write_callsites(out, (n * 1024) as u32, chunk.iter().map(CallsiteDesc::Static))?;
        }
        out.flush()
    }
}

/// A callsite as written in a CALLSITES frame: one compiled in, or one made at run time.
pub(crate) enum CallsiteDesc<'a> {
    Static(&'a waffle::callsite::Callsite),
    Dynamic(&'a crate::dynamic::Site),
}

/// Writes one CALLSITES frame (module 0) with consecutive ids from `first`.
pub(crate) fn write_callsites<'a, W: Write>(
    out: &mut FrameWriter<W>,
    first: u32,
    callsites: impl ExactSizeIterator<Item = CallsiteDesc<'a>>,
) -> io::Result<()> {
    let mut p = Payload::new();
    p.varint(0).varint(u64::from(first)).varint(callsites.len() as u64);
    for cs in callsites {
        match cs {
            CallsiteDesc::Static(cs) => {
                p.byte(cs.kind as u8).str(cs.name).str(cs.module).str(cs.file).varint(u64::from(cs.line));
                p.varint(cs.fields.len() as u64);
                for f in cs.fields {
                    p.str(f.name).byte(f.ty as u8);
                }
                p.str(cs.correlate);
            }
            CallsiteDesc::Dynamic(cs) => {
                p.byte(cs.kind as u8).str(&cs.name).str(&cs.module).str(&cs.file).varint(u64::from(cs.line));
                p.varint(cs.fields.len() as u64);
                for (name, ty) in &cs.fields {
                    p.str(name).byte(*ty as u8);
                }
                p.str(&cs.correlate);
            }
        }
    }
    out.frame(frame::CALLSITES, &[&p.0])
}
