//! Decoding a `trace.bin` into a [`Sink`]: the drivers that read a file's frames and hand them
//! to the decoder, with or without checkpoints, and the calibration that applies to its ticks.

use super::{
    decoder::Decoder,
    resume::Checkpoint,
    stream::{Header, Sink},
};
use crate::{
    error::Error,
    reader::{FrameReader, Warning},
};
use std::{
    fs::File,
    io::{BufReader, Read},
    path::Path,
};
use waffle_wire::{frame, Calibration, Clock, FramePayload};

/// Decodes one file into `sink`; returns the warnings.
pub fn decode_path<S: Sink>(path: &Path, sink: &mut S) -> Result<Vec<Warning>, Error> {
    decode(FrameReader::open(path)?, path, sink)
}

/// Decodes the frames of `reader` into `sink`; `path` names the file in messages. Fails only
/// when the file has no usable header; later damage becomes warnings.
pub fn decode<R: Read, S: Sink>(
    reader: FrameReader<R>,
    path: &Path,
    sink: &mut S,
) -> Result<Vec<Warning>, Error> {
    decode_observed(reader, path, sink, None)
}

/// [`decode_path`], also handing `keep` a [`Checkpoint`] (with the sink) before the first frame
/// after the header and then before the first frame that begins `every` bytes or more after
/// the previous checkpoint: the places from which [`resume`](super::resume::resume) can
/// decode the file again.
pub fn decode_checkpointed<S: Sink>(
    path: &Path,
    sink: &mut S,
    every: u64,
    keep: &mut dyn FnMut(&mut S, Checkpoint<S::Span>),
) -> Result<Vec<Warning>, Error> {
    decode_observed(FrameReader::open(path)?, path, sink, Some((every, keep)))
}

/// Where checkpoints are handed, and how far apart.
type Observer<'k, S> = (u64, &'k mut dyn FnMut(&mut S, Checkpoint<<S as Sink>::Span>));

fn decode_observed<R: Read, S: Sink>(
    mut reader: FrameReader<R>,
    path: &Path,
    sink: &mut S,
    mut observer: Option<Observer<'_, S>>,
) -> Result<Vec<Warning>, Error> {
    let mut warnings = Vec::new();
    let mut payload = Vec::new();
    let first = reader.read_frame(&mut warnings, &mut payload);
    let Some((_, offset)) = first.filter(|&(kind, _)| kind == frame::HEADER) else {
        let what = warnings.first().map_or("the file has no header frame".to_owned(), |w| w.message.clone());
        return Err(Error::Corrupt { path: path.to_owned(), offset: 10, what });
    };
    let header = Header::decode(&payload).map_err(|e| Error::Corrupt {
        path: path.to_owned(),
        offset,
        what: e.to_string(),
    })?;
    // Device tracks' slices are held and handed over as threads of their own at the end.
    let mut sink = super::track::Tracks::new(sink);
    sink.process(&path.display().to_string(), &header);
    let mut d = Decoder::new(path, header.parent_span());
    let mut checked: Option<u64> = None;
    loop {
        if let Some((every, keep)) = observer.as_mut() {
            let at = reader.offset();
            if checked.is_none_or(|c| at >= c.saturating_add(*every)) {
                checked = Some(at);
                keep(sink.inner(), Checkpoint::new(at, &d));
            }
        }
        let Some((kind, offset)) = reader.read_frame(&mut warnings, &mut payload) else { break };
        if let Err(message) = d.frame(kind, offset, &payload, &mut sink) {
            warnings.push(Warning { path: path.to_owned(), offset, message });
        }
    }
    d.finish(&mut sink);
    warnings.append(&mut d.warnings);
    let at = reader.offset();
    warnings.extend(sink.warnings.drain(..).map(|message| Warning {
        path: path.to_owned(),
        offset: at,
        message,
    }));
    Ok(warnings)
}

/// The calibration that applies to `path`'s ticks: its last valid CLOCK frame's, found by
/// reading frame heads only. `None` if it has none (the header's applies) or cannot be read.
pub fn final_calibration(path: &Path) -> Option<Calibration> {
    let file = File::open(path).ok()?;
    let mut reader = FrameReader::new(BufReader::with_capacity(8 << 10, file), path).ok()?;
    let (mut payload, mut last) = (Vec::new(), None);
    while reader.next_of_kind(frame::CLOCK, &mut payload).is_some() {
        last = Clock::decode(&payload).ok().map(|c| c.calibration).or(last);
    }
    last
}
