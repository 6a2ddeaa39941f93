//! What the first pass of every streaming exporter learns of each process (its header, its
//! threads, whose names may come after their records, and its counts), and the pids and tids
//! the formats with process and thread ids write.

use std::collections::HashSet;

use crate::decode::{
    stream::{FileEnd, Header},
    track::DEVICE_TID_BASE,
    ProcessStats,
};

/// One process (one file), as the first pass learns it.
pub(crate) struct ProcessInfo {
    /// Its file, as given.
    pub(crate) source: String,
    /// Its header.
    pub(crate) header: Header,
    /// Its threads, in the order they appeared.
    pub(crate) threads: Vec<ThreadInfo>,
    /// Spans (stand-ins included) and events.
    pub(crate) spans: u64,
    pub(crate) events: u64,
    /// Records the producer dropped.
    pub(crate) dropped: u64,
    /// Whether the file ended with a clean-shutdown frame.
    pub(crate) complete: bool,
}

/// One thread.
#[derive(Default)]
pub(crate) struct ThreadInfo {
    /// OS thread id.
    pub(crate) tid: u64,
    /// Thread name ("" if unnamed).
    pub(crate) name: String,
    /// Records dropped on it.
    pub(crate) dropped: u64,
    /// Whether it is a device track's (`decode::Sink::device_track`), or another device
    /// timeline's (a tid from `DEVICE_TID_BASE` up), not an OS thread.
    pub(crate) device: bool,
}

impl ProcessInfo {
    /// A process as its header describes it; threads and counts follow.
    pub(crate) fn new(source: &str, header: &Header) -> ProcessInfo {
        ProcessInfo {
            source: source.to_owned(),
            header: header.clone(),
            threads: Vec::new(),
            spans: 0,
            events: 0,
            dropped: 0,
            complete: false,
        }
    }

    /// A new thread.
    pub(crate) fn thread(&mut self) {
        self.threads.push(ThreadInfo::default());
    }

    /// A thread's OS id and name. A tid from `DEVICE_TID_BASE` up is a device's timeline (a
    /// GPU stream of another tool's profile, converted), drawn as a device track is.
    pub(crate) fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        let t = &mut self.threads[thread];
        t.tid = tid;
        t.device |= tid >= DEVICE_TID_BASE;
        name.clone_into(&mut t.name);
    }

    /// A thread that is a device track.
    pub(crate) fn device_track(&mut self, thread: usize) {
        self.threads[thread].device = true;
    }

    /// Records lost on a thread.
    pub(crate) fn dropped(&mut self, thread: usize, records: u64) {
        let t = &mut self.threads[thread];
        t.dropped = t.dropped.saturating_add(records);
    }

    /// The file is read: its drops are the larger of the threads' sum and the END frame's.
    pub(crate) fn finish(&mut self, end: &FileEnd) {
        let thread_drops = self.threads.iter().fold(0u64, |sum, t| sum.saturating_add(t.dropped));
        (self.dropped, self.complete) = (thread_drops.max(end.dropped), end.complete);
    }

    /// The process in numbers.
    pub(crate) fn stats(&self) -> ProcessStats {
        ProcessStats {
            source: self.source.clone(),
            pid: self.header.pid,
            name: self.header.name.clone(),
            threads: self.threads.len(),
            spans: self.spans,
            events: self.events,
            dropped: self.dropped,
            complete: self.complete,
            sample: crate::decode::sample_label(&self.header),
        }
    }
}

/// Remapped pids and tids start above Linux's `PID_MAX_LIMIT`, so they never look real.
const FRESH_ID_BASE: i64 = 1 << 22;

/// Pids and tids as written, unique over the trace. They share one space, as they do in the
/// kernel: a tid equal to another process's pid would make a viewer think it is that process's
/// main thread. Ranks on different hosts can share ids; duplicates (and ids that are 0 or do not
/// fit an `i32`) are remapped to fresh ids above Linux's largest pid, and a main thread
/// (tid = pid) follows its process.
pub(crate) struct OsIds {
    used: HashSet<i64>,
    fresh: i64,
}

/// The pid of each process and the tid of each of its threads.
pub(crate) struct Assigned {
    pub(crate) pids: Vec<i64>,
    pub(crate) tids: Vec<Vec<i64>>,
}

impl Default for OsIds {
    /// No id handed out yet.
    fn default() -> Self {
        OsIds { used: HashSet::new(), fresh: FRESH_ID_BASE }
    }
}

impl OsIds {
    /// The ids of every process and thread; the `OsIds` hands out fresh ones for more rows.
    pub(crate) fn assign(processes: &[ProcessInfo]) -> (OsIds, Assigned) {
        let mut ids = OsIds::default();
        let pids: Vec<i64> = processes.iter().map(|p| ids.claim(Some(p.header.pid.into()))).collect();
        let tids = processes
            .iter()
            .zip(&pids)
            .map(|(process, &pid)| {
                let mut main_taken = false;
                let threads = process.threads.iter();
                threads
                    .map(|t| {
                        if t.tid == u64::from(process.header.pid) && !main_taken {
                            main_taken = true;
                            pid
                        } else {
                            ids.claim(i64::try_from(t.tid).ok())
                        }
                    })
                    .collect()
            })
            .collect();
        (ids, Assigned { pids, tids })
    }

    /// `wanted` if it is a usable id not yet taken, else a fresh one.
    pub(crate) fn claim(&mut self, wanted: Option<i64>) -> i64 {
        let id = match wanted {
            Some(id) if id > 0 && id <= i64::from(i32::MAX) && !self.used.contains(&id) => id,
            _ => self.fresh(),
        };
        self.used.insert(id);
        id
    }

    /// An id no process or thread has.
    pub(crate) fn fresh(&mut self) -> i64 {
        loop {
            self.fresh += 1;
            if self.used.insert(self.fresh) {
                return self.fresh;
            }
        }
    }
}
