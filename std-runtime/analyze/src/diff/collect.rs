//! One run read into what `diff` compares: a decoder [`Sink`] that sums kernels per (step, name)
//! and keeps one small record per tensor, streaming.
//!
//! A kernel is any span but a step marker (in a file with device queues, a span of a queue
//! unless `--cpu`, and no profiler annotation); its step is the step it lies in (see
//! [`steps`](super::steps)). A span is added to its step's sums as it ends, and steps are
//! folded into a few numbers per name and per run of like steps (see
//! [`window`](super::window)): what the sink keeps does not grow with the spans. Tensors
//! (events whose schema holds `tensor.hash`, `waffle_wire::reserved::tensor`) are numbered
//! (the k-th of their name and step) and handed on as [`TensorRec`]s of 64 bytes as soon as
//! their step is known, to be compared as they come (see [`tensors`](super::tensors)): the
//! sink keeps none of them.

use super::{
    handoff::{Msg, TensorRec, Tensors},
    names::Names,
    roles::{self, int, role_of, text, Role},
    steps::{Steps, NO_STEP},
    window::{Folded, Shapes, Window},
};
use crate::decode::stream::{FileEnd, Hand, Header, Item, Sink};
use crate::model::Callsite;
use std::{
    collections::HashSet,
    sync::{mpsc::SyncSender, Arc, Mutex, MutexGuard},
};
use waffle_wire::reserved::track::{DEVICE_QUEUES, DEVICE_TID_BASE};
use waffle_wire::{Calibration, Converter, FieldType};

/// What one run (one side of the diff) holds once its files are read.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Its kernels, folded step by step.
    pub kernels: Folded,
    /// Tensors read.
    pub tensors: u64,
    /// Spans read.
    pub spans: u64,
    /// Step markers ended, and their time, ns.
    pub steps: (u64, u64),
    /// The time of the kernels counted, ns.
    pub kernel_ns: u64,
}

/// `m` locked; a lock poisoned by a panic on the other run's thread is still usable (that
/// panic is reported where the thread is joined).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The category (the callsite's module, from `waffle-foreign`) of the PyTorch profiler's
/// annotations on a GPU stream: ranges that hold kernels, not work of their own.
const GPU_ANNOTATION: &str = "gpu_user_annotation";

/// A span open on a thread, as the sink knows it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Open {
    start: u64,
    name: u32,
    /// Its step when known at its begin (an enclosing step on its thread, or its own).
    step: Option<i64>,
    /// Whether it is a step marker.
    marker: bool,
    /// Whether it is counted (a stand-in of another kind of callsite is not).
    kernel: bool,
}

/// Reads one file of a run.
pub(crate) struct FileSink<'a> {
    run: &'a mut Run,
    names: &'a Mutex<Names>,
    shapes: &'a Mutex<Shapes>,
    tensors: Tensors<'a>,
    window: Window,
    rank: u32,
    /// The file's last CLOCK frame's calibration, if known before reading; else the header's.
    fixed: Option<Calibration>,
    conv: Converter,
    roles: Vec<Role>,
    /// Per thread, the steps open on it, innermost last.
    stacks: Vec<Vec<i64>>,
    steps: Steps<Pending>,
    /// Whether host spans are compared too (`--cpu`) in a file with [`DEVICE_QUEUES`].
    cpu: bool,
    /// Whether only device queues' spans are read: the file holds some, and `cpu` is off.
    queues_only: bool,
    /// Per thread, whether it is a device queue (its tid from [`DEVICE_TID_BASE`] up).
    device: Vec<bool>,
    /// Kernel names whose launching operation is noted (`Names::set_op`).
    ops_known: HashSet<u32>,
}

/// What waits for its step to be known.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pending {
    Kernel { name: u32, dur: u64 },
    Tensor(TensorRec),
}

impl<'a> FileSink<'a> {
    /// A sink adding file number `rank` of a run to `run`, its tensors sent to `out`;
    /// `calibration` is the file's final one when known (`decode::run::final_calibration`).
    pub(crate) fn new(
        (run, names, shapes): (&'a mut Run, &'a Mutex<Names>, &'a Mutex<Shapes>),
        out: &'a SyncSender<Msg>,
        (rank, cpu): (u32, bool),
        calibration: Option<Calibration>,
    ) -> Self {
        let conv = Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 }.converter();
        FileSink {
            run,
            names,
            shapes,
            tensors: Tensors::new(out),
            window: Window::default(),
            rank,
            fixed: calibration,
            conv,
            roles: Vec::new(),
            stacks: Vec::new(),
            steps: Steps::default(),
            cpu,
            queues_only: false,
            device: Vec::new(),
            ops_known: HashSet::new(),
        }
    }

    #[inline]
    fn role(&mut self, index: u32, callsite: &Arc<Callsite>) -> Role {
        match self.roles.get(index as usize) {
            Some(Role::Unknown) | None => self.learn(index, callsite),
            Some(role) => *role,
        }
    }

    #[cold]
    fn learn(&mut self, index: u32, callsite: &Arc<Callsite>) -> Role {
        let i = index as usize;
        if i >= self.roles.len() {
            self.roles.resize(i + 1, Role::Unknown);
        }
        if let Role::Unknown = self.roles[i] {
            self.roles[i] = role_of(callsite, &mut lock(self.names));
        }
        self.roles[i]
    }

    fn place(&mut self, at: u64, what: Pending) {
        let (run, window, tensors) = (&mut *self.run, &mut self.window, &mut self.tensors);
        self.steps.place(at, what, &mut |step, at, p| {
            settle((&mut *run, &mut *window, &mut *tensors), step, at, p)
        });
    }
}

/// Adds `p`, now that its step is known.
fn settle((run, window, tensors): (&mut Run, &mut Window, &mut Tensors<'_>), step: i64, at: u64, p: Pending) {
    match p {
        Pending::Kernel { name, dur } => window.add(step, name, at, dur, &mut run.kernels),
        Pending::Tensor(mut t) => {
            t.step = step;
            run.tensors += 1;
            tensors.add(t);
        }
    }
}

impl Sink for FileSink<'_> {
    type Span = Open;

    /// Field values are decoded only where they are read: tensors, step markers, kernels that
    /// say their launching operation (see `hand`).
    const FIELDS: bool = false;

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        match self.role(index, callsite) {
            Role::Kernel { step_field: None, op_field: None, .. } | Role::Other | Role::Unknown => {
                Hand::Referring
            }
            Role::Kernel { .. } | Role::Tensor(_) => Hand::Every,
        }
    }

    fn process(&mut self, _source: &str, header: &Header) {
        self.conv = self.fixed.unwrap_or(header.calibration).converter();
        let queues = header.label(DEVICE_QUEUES).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        self.queues_only = queues > 0 && !self.cpu;
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        if self.stacks.len() <= thread {
            self.stacks.resize(thread + 1, Vec::new());
            self.device.resize(thread + 1, false);
        }
        self.steps.thread(thread);
    }

    fn thread_named(&mut self, thread: usize, tid: u64, _name: &str) {
        if let Some(d) = self.device.get_mut(thread) {
            *d = tid >= DEVICE_TID_BASE;
        }
    }

    fn span_begin(&mut self, thread: usize, span: &Item<'_>) -> Open {
        self.run.spans += 1;
        let start = self.conv.to_unix_ns(span.ticks);
        self.steps.progress(thread, start);
        if self.queues_only && !self.device[thread] {
            return Open { start, ..Open::default() };
        }
        let Role::Kernel { name, step_field, op_field } = self.role(span.callsite_index, span.callsite)
        else {
            return Open { start, ..Open::default() };
        };
        if let Some(op) = op_field.and_then(|i| text(span.fields, Some(i))) {
            if self.ops_known.insert(name) {
                lock(self.names).set_op(name, op);
            }
        }
        let own = step_field.and_then(|i| int(span.fields, Some(i)));
        let stack = &mut self.stacks[thread];
        if let Some(step) = own {
            stack.push(step);
            self.steps.open(thread, start, step);
            self.window.open(step, start);
        }
        // A profiler's annotation on a device queue holds kernels; it is none itself.
        let kernel = !(self.queues_only && span.callsite.module == GPU_ANNOTATION);
        Open { start, name, step: own.or_else(|| stack.last().copied()), marker: own.is_some(), kernel }
    }

    fn event(&mut self, thread: usize, event: &Item<'_>) {
        let at = self.conv.to_unix_ns(event.ticks);
        self.steps.progress(thread, at);
        let Role::Tensor(tf) = self.role(event.callsite_index, event.callsite) else { return };
        let f = event.fields;
        let (types, words, _) = f.raw();
        let hash = match (types.get(usize::from(tf.hash)), words.get(usize::from(tf.hash))) {
            (Some(FieldType::U64), Some(&w)) => w,
            _ => return,
        };
        let name = match text(f, tf.name) {
            Some(n) => lock(self.names).intern(n),
            None => tf.event_name,
        };
        let count = |i| int(f, i).map_or(0, |v| v.max(0) as u64);
        let rec = TensorRec {
            rank: self.rank,
            name,
            step: NO_STEP,
            occurrence: 0,
            ns: at,
            hash,
            rms: roles::float(f, tf.rms),
            nan: count(tf.nan),
            pinf: count(tf.pinf),
            ninf: count(tf.ninf),
        };
        match self.stacks[thread].last() {
            Some(&step) => {
                let to = (&mut *self.run, &mut self.window, &mut self.tensors);
                settle(to, step, at, Pending::Tensor(rec));
            }
            None => self.place(at, Pending::Tensor(rec)),
        }
    }

    fn span_end(&mut self, thread: usize, span: Open, ticks: u64, _ended: bool) {
        self.ended(thread, span, ticks, true);
    }

    fn detach(&mut self, thread: usize, span: Open, _id: u64) {
        if span.marker {
            self.unstack(thread, span);
        }
    }

    fn detached_end(&mut self, thread: usize, span: Open, ticks: u64, _ended: bool) {
        self.ended(thread, span, ticks, false);
    }

    fn calibration(&mut self, calibration: Calibration) {
        // Only reached when the final calibration was not known beforehand (a reader without
        // a path): later records use the newer one.
        if self.fixed.is_none() {
            self.conv = calibration.converter();
        }
    }

    fn finish(&mut self, _end: &FileEnd) {
        let (run, window, tensors) = (&mut *self.run, &mut self.window, &mut self.tensors);
        self.steps.finish(&mut |step, at, p| settle((&mut *run, &mut *window, &mut *tensors), step, at, p));
        self.window.finish(self.rank as usize, &mut self.run.kernels, &mut lock(self.shapes));
        self.tensors.flush();
    }
}

impl FileSink<'_> {
    fn ended(&mut self, thread: usize, span: Open, ticks: u64, on_stack: bool) {
        let end = self.conv.to_unix_ns(ticks).max(span.start);
        self.steps.progress(thread, end);
        if span.marker {
            if on_stack {
                self.unstack(thread, span);
            }
            let step = span.step.unwrap_or(NO_STEP);
            self.steps.close(thread, span.start, end, step);
            self.window.close(step, self.rank as usize, &mut self.run.kernels, &mut lock(self.shapes));
            // A step is not a kernel: it holds them, and would lead every regression.
            // A queue's markers count where only queues are read, a host's otherwise.
            if self.queues_only == self.device.get(thread).copied().unwrap_or(false) {
                self.run.steps.0 += 1;
                self.run.steps.1 = self.run.steps.1.saturating_add(end - span.start);
            }
            return;
        }
        if !span.kernel {
            return;
        }
        let dur = end - span.start;
        self.run.kernel_ns = self.run.kernel_ns.saturating_add(dur);
        match span.step {
            Some(step) => self.window.add(step, span.name, span.start, dur, &mut self.run.kernels),
            None => self.place(span.start, Pending::Kernel { name: span.name, dur }),
        }
    }

    /// Takes a step marker off its thread's stack (the innermost with its number).
    fn unstack(&mut self, thread: usize, span: Open) {
        let stack = &mut self.stacks[thread];
        if let Some(i) = stack.iter().rposition(|&s| Some(s) == span.step) {
            stack.remove(i);
        }
    }
}
