//! Where a thread of the input goes, decided when it is first met: a process per numeric pid
//! that runs host threads, each an output file; device queues (GPU streams) and the
//! profiler's named rows join the first such process (a queue met before any host thread
//! makes a process of its own pid); thread ids, and names from the metadata met so far.

use crate::{
    emit::Emit,
    event::Lenient,
    values::{fnv, FastMap},
    OpenOutput,
};
use std::{collections::HashMap, io};
use waffle_wire::{
    frames::Header,
    reserved::track::{DEVICE_QUEUES, DEVICE_TID_BASE},
    Calibration,
};

/// Threads one process can have: stream slots are numbered below 4 096.
pub(crate) const MAX_THREADS: usize = 4095;

/// One output file: a process of the input and the threads it holds.
#[derive(Clone, Debug, Default)]
pub struct Process {
    /// Its name: the file's `process_name` if it came before the process's first event, else
    /// `pid N`.
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// Threads that ran on the host.
    pub threads: usize,
    /// Device queues (GPU streams) it holds, each a thread of its own.
    pub device_threads: usize,
    /// Spans and events written.
    pub events: u64,
}

/// What the top-level object says besides its events.
#[derive(Debug, Default)]
pub(crate) struct Meta {
    pub base_ns: Option<u64>,
    pub rank: Option<u64>,
    pub kineto: bool,
    pub trace_name: Option<String>,
    /// Devices the profile lists (`deviceProperties`).
    pub devices: usize,
    /// What the file's correlation values are salted with (the hash of its path as given).
    pub salt: u64,
}

/// A process or thread id as the file gives it: a number, or a name (the profiler's own rows).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    Int(i64),
    Str(String),
}

impl Key {
    pub(crate) fn of(v: &Lenient<'_>) -> Key {
        match v {
            Lenient::Int(i) => Key::Int(*i),
            Lenient::UInt(u) => i64::try_from(*u).map_or_else(|_| Key::Str(u.to_string()), Key::Int),
            Lenient::Float(f) => Key::Int(*f as i64),
            Lenient::Str(s) => s.trim().parse().map_or_else(|_| Key::Str(s.clone().into_owned()), Key::Int),
            Lenient::Null => Key::Int(0),
            other => Key::Str(other.text().into_owned()),
        }
    }
}

/// Where each thread of the input went, and the processes made for them.
pub(crate) struct Places<'a> {
    /// Where each output file goes, asked when a process is met.
    open: &'a mut OpenOutput<'a>,
    pub processes: Vec<Process>,
    threads: FastMap<(Key, Key), usize>,
    /// Output by the pid it was made for.
    outputs: HashMap<Key, usize>,
    /// The first host process, which device queues and named rows join.
    main: Option<Key>,
    process_names: HashMap<Key, String>,
    thread_names: HashMap<(Key, Key), String>,
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
        // A named row: a number of its own, from its name, below Linux's tids' bound.
        Key::Str(s) => fnv(0xcbf2_9ce4_8422_2325, &[s.as_bytes()]) & 0x3f_ffff,
    }
}

impl<'a> Places<'a> {
    pub(crate) fn new(open: &'a mut OpenOutput<'a>) -> Places<'a> {
        Places {
            open,
            processes: Vec::new(),
            threads: FastMap::default(),
            outputs: HashMap::new(),
            main: None,
            process_names: HashMap::new(),
            thread_names: HashMap::new(),
        }
    }

    /// A process's name, for the outputs made after it.
    pub(crate) fn name_process(&mut self, pid: Key, name: String) {
        self.process_names.insert(pid, name);
    }

    /// A thread's name; the thread renamed if it is already written.
    pub(crate) fn name_thread(&mut self, emit: &mut Emit, key: (Key, Key), name: String) {
        self.thread_names.insert(key.clone(), name);
        if let Some(&t) = self.threads.get(&key) {
            let named = self.thread_name(emit, &key.0, &key.1, t);
            emit.rename(t, named);
        }
    }

    /// The thread of (`pid`, `tid`), placed the first time; `device` says whether the event
    /// that meets it first is device work.
    pub(crate) fn thread(
        &mut self,
        emit: &mut Emit,
        meta: &Meta,
        (pid, tid): (Key, Key),
        device: bool,
    ) -> io::Result<usize> {
        let key = (pid, tid);
        if let Some(&t) = self.threads.get(&key) {
            return Ok(t);
        }
        let (pid, tid) = key;
        let host = !device && matches!(pid, Key::Int(_));
        let home = match (&self.main, host) {
            (_, true) => pid.clone(),
            (Some(main), false) => main.clone(),
            (None, false) => pid.clone(),
        };
        if host && self.main.is_none() {
            self.main = Some(pid.clone());
        }
        let o = match self.outputs.get(&home) {
            Some(&o) => o,
            None => self.output(emit, meta, &home)?,
        };
        let p = &mut self.processes[o];
        if p.threads + p.device_threads >= MAX_THREADS {
            let what =
                format!("process {} has more than {MAX_THREADS} threads, the most a trace.bin holds", p.pid);
            return Err(io::Error::new(io::ErrorKind::InvalidData, what));
        }
        let tid_n = if device {
            p.device_threads += 1;
            DEVICE_TID_BASE + p.device_threads as u64 - 1
        } else {
            p.threads += 1;
            tid_of(&tid)
        };
        let t = emit.thread(o, tid_n, String::new(), o as u64 + 1);
        self.threads.insert((pid.clone(), tid.clone()), t);
        let name = self.thread_name(emit, &pid, &tid, t);
        emit.rename(t, name);
        Ok(t)
    }

    /// What thread `t` of (`pid`, `tid`) is called: a device queue after its device and
    /// stream, a row of another pid after that pid, a thread by its metadata.
    fn thread_name(&self, emit: &Emit, pid: &Key, tid: &Key, t: usize) -> String {
        let given = self.thread_names.get(&(pid.clone(), tid.clone()));
        let home = &self.processes[emit.threads[t].output];
        if emit.threads[t].tid >= DEVICE_TID_BASE {
            let device =
                self.process_names.get(pid).cloned().unwrap_or_else(|| format!("device {}", pid_name(pid)));
            let queue = given.cloned().unwrap_or_else(|| format!("stream {}", pid_name(tid)));
            format!("{device} / {}", queue.trim())
        } else if !matches!(pid, Key::Int(p) if *p as u32 == home.pid) {
            given.cloned().unwrap_or_else(|| format!("{} {}", pid_name(pid), pid_name(tid)))
        } else {
            given.cloned().unwrap_or_default()
        }
    }

    /// A new output for the process of `pid`, its HEADER written.
    fn output(&mut self, emit: &mut Emit, meta: &Meta, pid: &Key) -> io::Result<usize> {
        let o = self.processes.len();
        let name = self.process_names.get(pid).cloned().unwrap_or_else(|| format!("pid {}", pid_name(pid)));
        let num = match pid {
            Key::Int(i) => *i as u32,
            Key::Str(_) => 0,
        };
        let process = Process { name: name.clone(), pid: num, ..Process::default() };
        let out = (self.open)(o, &process)?;
        let mut labels = Vec::new();
        if let Some(rank) = meta.rank {
            labels.push(("rank".to_owned(), rank.to_string()));
        }
        if meta.devices > 0 {
            labels.push((DEVICE_QUEUES.to_owned(), meta.devices.to_string()));
        }
        let header = Header {
            pid: num,
            name,
            host: String::new(),
            labels,
            clock_source: "chrome-json".to_owned(),
            calibration: Calibration {
                anchor_ticks: 0,
                anchor_unix_ns: meta.base_ns.unwrap_or(0),
                ticks: 1,
                ns: 1,
            },
            salt: o as u64 + 1,
            trace_id: trace_id(meta),
            parent: 0,
        };
        emit.output(out, &header)?;
        self.processes.push(process);
        self.outputs.insert(pid.clone(), o);
        Ok(o)
    }
}

/// The trace id the file's processes share: from its own id or name, else its base time, else
/// the salt (its path as given), so that converting a file twice gives the same id.
fn trace_id(meta: &Meta) -> u128 {
    let seed = match (&meta.trace_name, meta.base_ns) {
        (Some(name), _) => name.clone(),
        (None, Some(base)) => base.to_string(),
        (None, None) => meta.salt.to_string(),
    };
    let hi = fnv(0xcbf2_9ce4_8422_2325, &[seed.as_bytes()]);
    let lo = fnv(0x6c62_272e_07bb_0142, &[seed.as_bytes()]);
    (u128::from(hi) << 64 | u128::from(lo)).max(1)
}
