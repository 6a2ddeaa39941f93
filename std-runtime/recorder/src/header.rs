//! The frames a trace file opens with: the process HEADER (pid, name, host, labels, clock
//! calibration, trace id, parent span) and CALLSITES, the string table of the callsites linked
//! into the image. The collector writes run-time callsites with [`write_callsites`] as they
//! appear. `docs/wire-format.md` specifies both frames.

use crate::{clock, frames::FrameWriter};
use std::{
    io::{self, Write},
    sync::OnceLock,
};
use waffle::{
    callsite::Callsite,
    wire::{CallsiteDesc, Callsites, Header},
};

/// The executable's file name, the default process name. Read once: the executable of a process
/// does not change, and every session start would otherwise read `/proc/self/exe` again.
fn process_name() -> String {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "unknown".to_owned())
    })
    .clone()
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
        let header = Header {
            pid: std::process::id(),
            name: self.process_name.map_or_else(process_name, str::to_owned),
            host: host_name(),
            labels: self.labels.to_vec(),
            clock_source: waffle::clock::SOURCE.to_owned(),
            calibration: *self.cal,
            salt: u64::from(self.salt),
            trace_id: self.trace_id.to_u128(),
            parent: self.parent_span.map_or(0, |s| s.to_u64()),
        };
        out.write(&header)?;
        // The string table: every callsite linked into this image, as module 0.
        let all = waffle::callsite::all();
        for (n, chunk) in all.chunks(1024).enumerate() {
            write_callsites(out, (n * 1024) as u32, chunk.iter().map(Callsite::desc).collect())?;
        }
        out.flush()
    }
}

/// Writes one CALLSITES frame (module 0) with consecutive ids from `first`.
pub(crate) fn write_callsites<W: Write>(
    out: &mut FrameWriter<W>,
    first: u32,
    callsites: Vec<CallsiteDesc<'_>>,
) -> io::Result<()> {
    out.write(&Callsites { module: 0, first, callsites })
}
