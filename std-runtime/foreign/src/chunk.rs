//! One stream's records cut into DATA chunks, each with the head a decoder needs to go on
//! counting (base time, first id, depth), as the recorder writes them.

use waffle_wire::{tag, write_varint, zigzag, ChunkHead, MAX_VARINT_LEN};

/// Bytes of records after which a chunk is closed (the recorder's default staging area).
const CHUNK: usize = 16 << 10;

/// A DATA frame's payload: the stream, one chunk.
pub(super) struct Chunk {
    pub(super) payload: Vec<u8>,
}

/// One stream's records, cut into chunks.
pub(super) struct ChunkWriter {
    stream: u32,
    pub(super) records: u64,
    bytes: Vec<u8>,
    /// The head's base and first id, the time of the latest record and the next id.
    base: u64,
    first_id: u64,
    depth: u64,
    prev: u64,
    next_id: u64,
    started: bool,
}

impl ChunkWriter {
    pub(super) fn new(stream: u32, first_id: u64) -> ChunkWriter {
        ChunkWriter {
            stream,
            records: 0,
            bytes: Vec::new(),
            base: 0,
            first_id,
            depth: 0,
            prev: 0,
            next_id: first_id,
            started: false,
        }
    }

    pub(super) fn full(&self) -> bool {
        self.bytes.len() >= CHUNK
    }

    fn varint(&mut self, v: u64) {
        let mut buf = [0u8; MAX_VARINT_LEN];
        let n = write_varint(&mut buf, v);
        self.bytes.extend_from_slice(&buf[..n]);
    }

    fn delta(&mut self, at: u64) {
        if !self.started {
            (self.base, self.prev, self.started) = (at, at, true);
        }
        let d = at.wrapping_sub(self.prev) as i64;
        self.prev = at;
        self.varint(zigzag(d));
    }

    pub(super) fn item(&mut self, tag: u8, site: u32, at: u64, fields: &[u8]) {
        self.bytes.push(tag);
        self.varint(u64::from(site));
        self.delta(at);
        self.bytes.extend_from_slice(fields);
        self.records += 1;
        self.next_id += 1;
    }

    pub(super) fn end(&mut self, at: u64) {
        self.bytes.push(tag::SPAN_END);
        self.delta(at);
        self.records += 1;
    }

    pub(super) fn correlate(&mut self, value: u64) {
        self.bytes.push(tag::CORRELATE);
        self.varint(value);
        self.records += 1;
    }

    /// The chunk so far; the next begins with `depth` spans open.
    pub(super) fn close(&mut self, depth: usize) -> Chunk {
        let head = ChunkHead {
            generation: 1,
            base_ts: self.base,
            first_id: self.first_id,
            depth: self.depth,
            dropped: 0,
            records: self.records,
        };
        let mut prefix = [0u8; waffle_wire::chunk::MAX_CHUNK_PREFIX_LEN];
        let prefix = head.encode(self.bytes.len(), &mut prefix);
        let mut payload = Vec::with_capacity(5 + prefix.len() + self.bytes.len());
        let mut buf = [0u8; MAX_VARINT_LEN];
        let n = write_varint(&mut buf, u64::from(self.stream));
        payload.extend_from_slice(&buf[..n]);
        payload.extend_from_slice(prefix);
        payload.extend_from_slice(&self.bytes);
        let chunk = Chunk { payload };
        self.bytes.clear();
        (self.records, self.first_id, self.depth, self.base) = (0, self.next_id, depth as u64, self.prev);
        chunk
    }
}
