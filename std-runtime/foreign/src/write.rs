//! The gathered events as `trace.bin` files, one per process: each thread's slices sorted by
//! begin and nested (a slice that outlasts the one holding it is cut at its end), ids given in
//! that order, causes resolved (a launch's device work to the launch, a flow's end to its
//! start), and the records written as DATA chunks in time order across threads, as a
//! recorder would have written them.

use crate::collect::{Collector, Key, Thread};
use chunk::{Chunk, ChunkWriter};
use std::{
    collections::HashMap,
    io::{self, Write},
};
use waffle_wire::{
    envelope::{encode_frame, file_head},
    frame,
    frames::{CallsiteDesc, Callsites, Clock, End, FieldDesc, FramePayload, Header, Stream},
    reserved::track::{DEVICE_QUEUES, DEVICE_TID_BASE},
    tag, Calibration, FieldType, Kind,
};

mod chunk;

/// Threads one process can have: stream slots are numbered below 4 096.
pub(crate) const MAX_THREADS: usize = 4095;

/// One output file: a process of the input and the threads it holds.
#[derive(Clone, Debug)]
pub struct Process {
    /// Its name: the file's `process_name`, else `pid N`.
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// Threads that ran on the host.
    pub threads: usize,
    /// Device queues (GPU streams) it holds, each a thread of its own.
    pub device_threads: usize,
    /// Spans and events written.
    pub events: u64,
    salt: u64,
    /// Its threads, by index among the collector's: host threads, then device queues.
    members: Vec<u32>,
}

/// Where each thread of the input went: its process, stream and name.
#[derive(Clone, Debug, Default)]
struct Placed {
    process: usize,
    stream: u32,
    tid: u64,
    name: String,
}

/// The files to write, planned from what was gathered.
pub(crate) struct Plan {
    pub processes: Vec<Process>,
    placed: Vec<Placed>,
    /// The causes of each item: (thread, position) → ids.
    links: HashMap<(u32, u32), Vec<u64>>,
    /// Slices cut at the end of the slice holding them.
    pub cut: u64,
}

fn pid_name(k: &Key) -> String {
    match k {
        Key::Int(i) => i.to_string(),
        Key::Str(s) => s.clone(),
    }
}

fn tid_of(k: &Key) -> u64 {
    match k {
        Key::Int(i) => i.unsigned_abs(),
        // A named row: a number of its own, from its name (FNV-1a), below Linux's tids' bound.
        Key::Str(s) => {
            s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
                & 0x3f_ffff
        }
    }
}

impl Plan {
    /// Sorts every thread and decides files, streams, ids and causes.
    pub(crate) fn new(c: &mut Collector) -> Result<Plan, String> {
        let mut cut = 0;
        for t in &mut c.threads {
            t.evs.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
            cut += nest(&mut t.evs);
        }
        let (processes, placed) = place(c)?;
        let mut plan = Plan { processes, placed, links: HashMap::new(), cut };
        plan.launches(c);
        plan.flows(c);
        Ok(plan)
    }

    fn id(&self, thread: u32, pos: usize) -> u64 {
        let p = &self.placed[thread as usize];
        self.processes[p.process].salt << 44 | u64::from(p.stream) << 32 | (pos as u64 + 1)
    }

    /// Device work with a `correlation` is caused by the host item with the same one.
    fn launches(&mut self, c: &Collector) {
        for pi in 0..self.processes.len() {
            let members = self.processes[pi].members.clone();
            let mut launchers: HashMap<u64, u64> = HashMap::new();
            for &t in members.iter().filter(|&&t| !c.threads[t as usize].device) {
                for (k, e) in c.threads[t as usize].evs.iter().enumerate() {
                    if e.correlation != 0 {
                        launchers.entry(e.correlation).or_insert_with(|| self.id(t, k));
                    }
                }
            }
            for &t in members.iter().filter(|&&t| c.threads[t as usize].device) {
                for (k, e) in c.threads[t as usize].evs.iter().enumerate() {
                    if let Some(&by) = launchers.get(&e.correlation).filter(|_| e.correlation != 0) {
                        self.links.entry((t, k as u32)).or_default().push(by);
                    }
                }
            }
        }
    }

    /// Flow points bound to slices; each step and end of a flow is caused by the point before.
    fn flows(&mut self, c: &mut Collector) {
        let mut flows = std::mem::take(&mut c.flows);
        flows.sort_by_key(|f| f.key);
        let mut prev: Option<(u32, u64)> = None;
        let mut key = u32::MAX;
        for f in &flows {
            if f.key != key {
                (key, prev) = (f.key, None);
            }
            let Some(pos) = bind(&c.threads[f.thread as usize], f.at, f.enclosing) else { continue };
            let here = self.id(f.thread, pos);
            match f.phase {
                b's' => prev = Some((f.thread, here)),
                phase => {
                    if let Some((_, by)) = prev.filter(|&(_, by)| by != here) {
                        self.links.entry((f.thread, pos as u32)).or_default().push(by);
                    }
                    prev = (phase == b't').then_some((f.thread, here));
                }
            }
        }
    }

    /// Writes process `i` as a `trace.bin`.
    pub(crate) fn write(
        &mut self,
        c: &Collector,
        i: usize,
        meta: (u64, u128, Option<u64>),
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let (base_ns, trace_id, rank) = meta;
        let p = self.processes[i].clone();
        out.write_all(&file_head())?;
        let calibration = Calibration { anchor_ticks: 0, anchor_unix_ns: base_ns, ticks: 1, ns: 1 };
        let mut labels = Vec::new();
        if let Some(rank) = rank {
            labels.push(("rank".to_owned(), rank.to_string()));
        }
        if p.device_threads > 0 {
            labels.push((DEVICE_QUEUES.to_owned(), p.device_threads.to_string()));
        }
        let header = Header {
            pid: p.pid,
            name: p.name.clone(),
            host: String::new(),
            labels,
            clock_source: "chrome-json".to_owned(),
            calibration,
            salt: p.salt,
            trace_id,
            parent: 0,
        };
        frame_out(out, frame::HEADER, &header.encode())?;
        let descs: Vec<CallsiteDesc<'_>> = c
            .sites
            .iter()
            .map(|s| CallsiteDesc {
                kind: if s.span { Kind::Span } else { Kind::Event },
                name: s.name.as_str().into(),
                module: s.cat.as_str().into(),
                file: "".into(),
                line: 0,
                fields: s
                    .keys
                    .iter()
                    .map(|k| FieldDesc { name: k.as_str().into(), ty: FieldType::Dynamic })
                    .collect(),
                correlate: "".into(),
            })
            .collect();
        for (n, part) in descs.chunks(1024).enumerate() {
            let frame = Callsites { module: 0, first: (n * 1024) as u32, callsites: part.to_vec() };
            frame_out(out, frame::CALLSITES, &frame.encode())?;
        }
        for &t in &p.members {
            let pl = &self.placed[t as usize];
            let s = Stream {
                stream: pl.stream,
                generation: 1,
                module: 0,
                tid: pl.tid,
                name: pl.name.as_str().into(),
            };
            frame_out(out, frame::STREAM, &s.encode())?;
        }
        let mut chunks = Vec::new();
        for &t in &p.members {
            self.chunks(c, t, &mut chunks);
        }
        // Time order across threads, as a recorder's collector would have written them.
        chunks.sort_by_key(|ch: &Chunk| ch.first_ts);
        for ch in &chunks {
            frame_out(out, frame::DATA, &ch.payload)?;
        }
        frame_out(out, frame::CLOCK, &Clock { calibration }.encode())?;
        frame_out(out, frame::END, &End::default().encode())?;
        Ok(())
    }

    /// Thread `t`'s records as chunks (its slices sorted and nested by [`nest`]).
    fn chunks(&mut self, c: &Collector, t: u32, out: &mut Vec<Chunk>) {
        let stream = self.placed[t as usize].stream;
        let thread = &c.threads[t as usize];
        let mut w = ChunkWriter::new(stream, self.id(t, 0));
        let mut ends: Vec<u64> = Vec::new();
        for (k, e) in thread.evs.iter().enumerate() {
            while let Some(&end) = ends.last().filter(|&&end| end <= e.start) {
                ends.pop();
                w.end(end);
            }
            if w.full() {
                out.push(w.close(ends.len()));
            }
            let bytes = &c.arena[e.args.0 as usize..e.args.1 as usize];
            let at = e.start;
            if e.span {
                w.item(tag::SPAN_BEGIN, e.site, at, bytes);
                ends.push(e.end);
            } else {
                w.item(tag::EVENT, e.site, at, bytes);
            }
            for &by in self.links.get(&(t, k as u32)).into_iter().flatten() {
                w.link(by);
            }
        }
        while let Some(end) = ends.pop() {
            w.end(end);
        }
        if w.records > 0 {
            out.push(w.close(0));
        }
    }
}

/// Cuts each slice of a thread sorted by begin (longest first) at the end of the slice that
/// holds it, so that the slices nest; returns how many were cut.
fn nest(evs: &mut [crate::collect::Ev]) -> u64 {
    let mut cut = 0;
    let mut ends: Vec<u64> = Vec::new();
    for e in evs.iter_mut().filter(|e| e.span) {
        while ends.last().is_some_and(|&end| end <= e.start) {
            ends.pop();
        }
        if let Some(&outer) = ends.last().filter(|&&outer| e.end > outer) {
            e.end = outer;
            cut += 1;
        }
        ends.push(e.end);
    }
    cut
}

/// The slice a flow point at `at` binds to: the innermost one enclosing it, or the next to
/// begin.
fn bind(t: &Thread, at: u64, enclosing: bool) -> Option<usize> {
    if enclosing {
        let after = t.evs.partition_point(|e| e.start <= at);
        // The latest-begun slice that still holds `at` is the innermost; a bounded look back.
        (after.saturating_sub(4096)..after).rev().find(|&k| t.evs[k].span && t.evs[k].end >= at)
    } else {
        let from = t.evs.partition_point(|e| e.start < at);
        (from..t.evs.len()).find(|&k| t.evs[k].span)
    }
}

/// Decides the files: a process per numeric pid that ran host threads; device queues and the
/// profiler's named rows join the first such process.
fn place(c: &Collector) -> Result<(Vec<Process>, Vec<Placed>), String> {
    let mut order: Vec<Key> = Vec::new();
    for t in &c.threads {
        if !order.contains(&t.pid) {
            order.push(t.pid.clone());
        }
    }
    let host = |k: &Key| matches!(k, Key::Int(_)) && c.threads.iter().any(|t| &t.pid == k && !t.device);
    let hosts: Vec<Key> = order.iter().filter(|k| host(k)).cloned().collect();
    let main = hosts.first().or(order.first()).cloned();
    let of =
        |k: &Key| if hosts.contains(k) { k.clone() } else { main.clone().expect("a thread has a process") };
    let mut processes = Vec::new();
    let mut placed = vec![Placed::default(); c.threads.len()];
    for (pi, pk) in hosts.iter().cloned().chain(main.clone().filter(|m| !hosts.contains(m))).enumerate() {
        let mut members: Vec<u32> = Vec::new();
        for device in [false, true] {
            for (t, th) in c.threads.iter().enumerate() {
                if of(&th.pid) == pk && th.device == device {
                    members.push(t as u32);
                }
            }
        }
        if members.len() > MAX_THREADS {
            return Err(format!(
                "process {} has {} threads; a trace.bin holds at most {MAX_THREADS}",
                pid_name(&pk),
                members.len()
            ));
        }
        let mut device_n = 0;
        for (s, &t) in members.iter().enumerate() {
            let th = &c.threads[t as usize];
            let given = c.thread_names.get(&(th.pid.clone(), th.tid.clone()));
            let (tid, name) = if th.device {
                device_n += 1;
                let proc_name = c
                    .process_names
                    .get(&th.pid)
                    .cloned()
                    .unwrap_or_else(|| format!("device {}", pid_name(&th.pid)));
                let queue = given.cloned().unwrap_or_else(|| format!("stream {}", pid_name(&th.tid)));
                (DEVICE_TID_BASE + device_n - 1, format!("{proc_name} {}", queue.trim()))
            } else if th.pid != pk {
                (
                    tid_of(&th.tid),
                    given.cloned().unwrap_or_else(|| format!("{} {}", pid_name(&th.pid), pid_name(&th.tid))),
                )
            } else {
                (tid_of(&th.tid), given.cloned().unwrap_or_default())
            };
            placed[t as usize] = Placed { process: pi, stream: s as u32 + 1, tid, name };
        }
        let name = c.process_names.get(&pk).cloned().unwrap_or_else(|| format!("pid {}", pid_name(&pk)));
        let pid = match pk {
            Key::Int(i) => i as u32,
            Key::Str(_) => 0,
        };
        let events = members.iter().map(|&t| c.threads[t as usize].evs.len() as u64).sum();
        let threads = members.len() - device_n as usize;
        processes.push(Process {
            name,
            pid,
            threads,
            device_threads: device_n as usize,
            events,
            salt: pi as u64 + 1,
            members,
        });
    }
    Ok((processes, placed))
}

fn frame_out(out: &mut dyn Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let bytes = encode_frame(kind, payload)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a frame over the format's 16 MiB"))?;
    out.write_all(&bytes)
}
