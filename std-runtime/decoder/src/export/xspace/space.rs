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

use super::proto::{XEventMetadata, XLine, XPlane, XStatMetadata};
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

/// A thread's line: everything but its events, its events encoded as `XLine.events` in the
/// order they ended, and where each one is there.
pub(super) struct Line {
    pub(super) head: XLine,
    pub(super) events: Vec<u8>,
    pub(super) order: Vec<Placed>,
}

/// An encoded event: its offset and duration (to sort by), and its bytes in [`Line::events`].
#[derive(Clone, Copy)]
pub(super) struct Placed {
    pub(super) offset_ps: i64,
    pub(super) duration_ps: i64,
    pub(super) at: usize,
    pub(super) len: usize,
}

impl Line {
    /// The events' bytes in the order xprof expects (it nests a line's events as a stack in
    /// file order): by start, an enclosing event before the events it encloses.
    fn sorted_events(&self) -> Vec<u8> {
        let mut order = self.order.clone();
        order.sort_by_key(|p| (p.offset_ps, std::cmp::Reverse(p.duration_ps), p.at));
        let mut out = Vec::with_capacity(self.events.len());
        for p in order {
            out.extend_from_slice(&self.events[p.at..p.at + p.len]);
        }
        out
    }
}

impl Space {
    /// Writes the XSpace to `out`.
    pub(super) fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut plane = XPlane { id: 0, name: HOST_PLANE.to_owned(), ..XPlane::default() };
        for (id, name) in self.events.iter() {
            plane
                .event_metadata
                .insert(id, XEventMetadata { id, name: name.to_owned(), ..Default::default() });
        }
        for (id, name) in self.stats.iter() {
            plane.stat_metadata.insert(id, XStatMetadata { id, name: name.to_owned(), ..Default::default() });
        }
        let mut body = plane.encode_to_vec();
        for line in &self.lines {
            let mut head = line.head.encode_to_vec();
            head.extend_from_slice(&line.sorted_events());
            field(3, &head, &mut body);
            if body.len() > MAX_MESSAGE {
                return Err(io::Error::other(format!(
                    "the {HOST_PLANE} plane of {} passes protobuf's 2 GiB limit; export fewer files at once",
                    file_name(&self.hosts[0])
                )));
            }
        }
        let mut space = Vec::with_capacity(body.len() + 16);
        field(1, &body, &mut space);
        drop(body);
        for host in self.hosts.iter().filter(|h| !h.is_empty()) {
            field(4, host.as_bytes(), &mut space);
        }
        out.write_all(&space)?;
        out.flush()
    }
}

/// Appends `bytes` as the length-delimited field `tag`.
fn field(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}
