//! One XSpace as it is built: its host plane's names interned, its lines with their events
//! encoded, and the file written from them (planes and lines are length-prefixed, so by hand
//! around the prost messages).

use std::{
    collections::HashMap,
    io::{self, Write},
};

use prost::{
    encoding::{encode_key, encode_varint, WireType},
    Message,
};

use super::proto::{XEvent, XEventMetadata, XLine, XPlane, XStat, XStatMetadata};
use super::{file_name, HOST_PLANE, MAX_MESSAGE};

/// One XSpace being built: its one host plane.
#[derive(Default)]
pub(super) struct Space {
    /// Its hosts, the first one naming its file.
    pub(super) hosts: Vec<String>,
    /// Processes on it (indices in the context), in input order.
    pub(super) processes: Vec<usize>,
    pub(super) events: Interned,
    pub(super) stats: Interned,
    /// Its lines, in the order of their processes and threads.
    pub(super) lines: Vec<Line>,
    /// The bytes of its lines' events.
    pub(super) bytes: usize,
}

/// Names and their ids (from 1), in the order first seen.
#[derive(Default)]
pub(super) struct Interned {
    ids: HashMap<String, i64>,
    names: Vec<String>,
}

impl Interned {
    pub(super) fn id(&mut self, name: &str) -> i64 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        self.names.push(name.to_owned());
        let id = self.names.len() as i64;
        self.ids.insert(name.to_owned(), id);
        id
    }

    fn iter(&self) -> impl Iterator<Item = (i64, &str)> {
        self.names.iter().enumerate().map(|(i, n)| (i as i64 + 1, n.as_str()))
    }
}

/// A thread's line (or a process's detached spans): everything but its events, its events
/// encoded as `XLine.events` in the order they ended, and where each one is there.
pub(super) struct Line {
    pub(super) head: XLine,
    pub(super) events: Vec<u8>,
    /// Where its events are in `events`, in the order they ended until the line is written.
    pub(super) order: Vec<Placed>,
    /// The bytes in `events` that no event uses any more (the old copy of one re-encoded).
    unused: usize,
    /// Whether it holds detached spans, which need not nest: written as rows that do.
    detached: bool,
    /// The device plane it is on (a device track's line), or `None` for the host's.
    pub(super) plane: Option<String>,
}

/// An encoded event: its offset and duration (to sort by), and its bytes in [`Line::events`]
/// (a plane is below 2 GiB, so `u32` holds them).
#[derive(Clone, Copy)]
pub(super) struct Placed {
    pub(super) offset_ps: i64,
    pub(super) duration_ps: i64,
    pub(super) at: u32,
    pub(super) len: u32,
}

impl Line {
    /// A line without events.
    pub(super) fn new(id: i64, name: String, timestamp_ns: i64, detached: bool) -> Line {
        let head = XLine {
            id,
            display_id: id,
            name: name.clone(),
            display_name: name,
            timestamp_ns,
            ..XLine::default()
        };
        Line { head, events: Vec::new(), order: Vec::new(), unused: 0, detached, plane: None }
    }

    /// Adds the stat `stat` to the event `order[index]`: the event is decoded, given the stat
    /// and encoded again after the others (its old bytes are left unused). Returns how many
    /// bytes longer it is.
    pub(super) fn add_stat(&mut self, index: usize, stat: XStat) -> io::Result<usize> {
        let p = &mut self.order[index];
        let (at, len) = (p.at as usize, p.len as usize);
        // The bytes are `XLine.events`' key (one byte), then the length-delimited event.
        let mut event = XEvent::decode_length_delimited(&self.events[at + 1..at + len]).map_err(|e| {
            io::Error::other(format!("an XSpace event the writer encoded does not decode: {e}"))
        })?;
        event.stats.push(stat);
        let new_at = self.events.len();
        prost::encoding::message::encode(4, &event, &mut self.events);
        (p.at, p.len) = (new_at as u32, (self.events.len() - new_at) as u32);
        self.unused += len;
        Ok(p.len as usize - len)
    }

    /// A detached line as rows whose events do not overlap, each event on the first row free at
    /// its start; ids from `next_id` on, names numbered from the second row.
    fn rows(mut self, next_id: &mut i64) -> Vec<Line> {
        self.sort();
        let mut rows: Vec<Line> = Vec::new();
        for p in &self.order {
            let free = rows.iter().position(|r| r.head.duration_ps <= p.offset_ps);
            let row = match free {
                Some(r) => &mut rows[r],
                None => {
                    let name = match rows.len() {
                        0 => self.head.name.clone(),
                        n => format!("{} {}", self.head.name, n + 1),
                    };
                    rows.push(Line::new(*next_id, name, self.head.timestamp_ns, false));
                    *next_id += 1;
                    rows.last_mut().expect("just pushed")
                }
            };
            let (at, len) = (p.at as usize, p.len as usize);
            let moved = Placed { at: row.events.len() as u32, ..*p };
            row.events.extend_from_slice(&self.events[at..at + len]);
            row.order.push(moved);
            row.head.duration_ps = row.head.duration_ps.max(p.offset_ps.saturating_add(p.duration_ps));
        }
        rows
    }

    /// Puts the events in the order xprof expects (it nests a line's events as a stack in file
    /// order): by start, an enclosing event before the events it encloses.
    fn sort(&mut self) {
        self.order.sort_by_key(|p| (p.offset_ps, std::cmp::Reverse(p.duration_ps), p.at));
    }

    /// The line as the field `XPlane.lines`: its head, its length, its events in order.
    fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let head = self.head.encode_to_vec();
        out.write_all(&key_and_length(3, head.len() + self.events.len() - self.unused))?;
        out.write_all(&head)?;
        for p in &self.order {
            let at = p.at as usize;
            out.write_all(&self.events[at..at + p.len as usize])?;
        }
        Ok(())
    }

    /// The bytes of [`Line::write`].
    fn encoded_len(&self) -> usize {
        let len = self.head.encoded_len() + self.events.len() - self.unused;
        key_and_length(3, len).len() + len
    }
}

impl Space {
    /// Writes the XSpace to `out`, streaming its lines (their lengths are known).
    pub(super) fn write(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let mut plane = XPlane::default();
        for (id, name) in self.events.iter() {
            plane
                .event_metadata
                .insert(id, XEventMetadata { id, name: name.to_owned(), ..Default::default() });
        }
        for (id, name) in self.stats.iter() {
            plane.stat_metadata.insert(id, XStatMetadata { id, name: name.to_owned(), ..Default::default() });
        }
        let mut next_id = self.lines.iter().map(|l| l.head.id).max().unwrap_or(0) + 1;
        let mut lines = Vec::with_capacity(self.lines.len());
        for line in std::mem::take(&mut self.lines) {
            match line.detached {
                true => lines.extend(line.rows(&mut next_id)),
                false => lines.push(line),
            }
        }
        self.lines = lines;
        // The host's plane, then one per device (device tracks' lines), in order of first
        // line; they share the names, so that the events' metadata ids hold on every plane.
        let mut planes: Vec<Option<String>> = vec![None];
        for line in &self.lines {
            if !planes.contains(&line.plane) {
                planes.push(line.plane.clone());
            }
        }
        let mut total = 0;
        for (id, name) in planes.iter().enumerate() {
            plane.id = id as i64;
            plane.name = name.clone().unwrap_or_else(|| HOST_PLANE.to_owned());
            let head = plane.encode_to_vec();
            let on = |l: &&mut Line| l.plane == *name;
            let len = head.len() + self.lines.iter_mut().filter(on).map(|l| l.encoded_len()).sum::<usize>();
            total += len;
            if total > MAX_MESSAGE {
                return Err(too_large(&self.hosts[0]));
            }
            out.write_all(&key_and_length(1, len))?;
            out.write_all(&head)?;
            for line in self.lines.iter_mut().filter(on) {
                line.sort();
                line.write(out)?;
            }
        }
        for host in self.hosts.iter().filter(|h| !h.is_empty()) {
            out.write_all(&key_and_length(4, host.len()))?;
            out.write_all(host.as_bytes())?;
        }
        out.flush()
    }
}

/// The error of a plane past protobuf's limit.
pub(super) fn too_large(host: &str) -> io::Error {
    io::Error::other(format!(
        "the {HOST_PLANE} plane of {} passes protobuf's 2 GiB message limit; export fewer files at once",
        file_name(host)
    ))
}

/// The key of the length-delimited field `tag` and the length `len`.
fn key_and_length(tag: u32, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    encode_key(tag, WireType::LengthDelimited, &mut out);
    encode_varint(len as u64, &mut out);
    out
}
