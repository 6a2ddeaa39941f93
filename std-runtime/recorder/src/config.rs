//! How to record: [`Config`], the builder a session starts from (output file, process name and
//! labels, trace id and parent, buffer sizes, drain interval, hooks run at stop, tensor
//! fingerprints), with its defaults read from the environment, and [`Config::start`], which opens
//! the file, writes its head and starts the collector. [`crate::session`] keeps the running
//! session and stops it.

use crate::{
    clock,
    collector::Collector,
    error::{Error, HookError},
    frames::FrameWriter,
    header::Preamble,
    hub::{self, Recorder},
    launcher,
    live::{LiveWriter, Output},
    registry,
    session::{active, replace_automatic, stop_at_exit, take_own, Active, AtStop, Session},
};
use std::{
    fs::File,
    io::BufWriter,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

/// How long a session's start measures the clock's rate, spinning, so that the first records
/// convert well before the end's longer measurement. Under the fuzzer (`cfg(fuzzing)`, set by
/// cargo-fuzz), where a target starts a session per input, it does not spin: the rate is then
/// rough until the end's measurement, and times are not what the fuzzer checks.
const START_CALIBRATION: Duration = if cfg!(fuzzing) { Duration::ZERO } else { Duration::from_millis(2) };

/// How to record: the output file, labels and buffer sizes. [`start`](crate::start) uses the
/// defaults.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) path: PathBuf,
    pub(crate) process_name: Option<String>,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) parent: Option<waffle::Context>,
    pub(crate) trace_id: Option<waffle::TraceId>,
    /// The fraction of roots kept (1: all, sampling off).
    pub(crate) sample: f64,
    pub(crate) queue_bytes: usize,
    pub(crate) staging_bytes: usize,
    pub(crate) drain_interval: Duration,
    pub(crate) exit_wait: Duration,
    pub(crate) at_stop: Vec<AtStop>,
    pub(crate) live: Option<LiveWriter>,
    pub(crate) tensors: bool,
}

impl Config {
    /// Records to `path` with default settings: 4 MiB queue and 16 KiB staging per thread,
    /// a drain every millisecond, and a `rank` label taken from the MPI launcher's environment
    /// (`OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `PMIX_RANK`, `SLURM_PROCID`) or `WAFFLE_RANK`, with
    /// a `size` label, the number of ranks, beside it when the launcher says it
    /// (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `SLURM_NTASKS`, or `WAFFLE_SIZE`).
    ///
    /// The trace id comes from the environment, in this order: the parent context of
    /// `WAFFLE_TRACEPARENT` (see [`Config::parent`]), then `WAFFLE_TRACE_ID` (see
    /// [`Config::trace_id`]), then the launch this process belongs to, so that the ranks of one
    /// `mpirun` or `srun` share a trace and two launches do not (see [`crate::launcher`]);
    /// without any of these, a random id.
    pub fn new(path: impl AsRef<Path>) -> Config {
        let env = |name: &str| std::env::var(name).ok();
        // A rank's file says how many ranks the launch has, so that a reader can tell one is
        // missing.
        let labels = match (launcher::rank(env), launcher::size(env)) {
            (Some(rank), Some(size)) => vec![("rank".to_owned(), rank), ("size".to_owned(), size)],
            (Some(rank), None) => vec![("rank".to_owned(), rank)],
            (None, _) => Vec::new(),
        };
        let parent = env("WAFFLE_TRACEPARENT").and_then(|t| waffle::Context::from_traceparent(&t).ok());
        let trace_id =
            env("WAFFLE_TRACE_ID").and_then(|t| parse_trace_id(&t)).or_else(|| launcher::job_trace_id(env));
        let sample = env("WAFFLE_SAMPLE").map_or(1.0, |v| {
            parse_sample(&v).unwrap_or_else(|| {
                eprintln!("waffle: WAFFLE_SAMPLE={v:?} is not a number from 0 to 1; every span is kept");
                1.0
            })
        });
        Config {
            path: path.as_ref().to_owned(),
            process_name: None,
            labels,
            parent,
            trace_id,
            sample,
            queue_bytes: 4 << 20,
            staging_bytes: 16 << 10,
            drain_interval: Duration::from_millis(1),
            exit_wait: Duration::from_millis(250),
            at_stop: Vec::new(),
            live: None,
            tensors: env("WAFFLE_TENSORS").is_some_and(|v| tensors_on(&v)),
        }
    }

    /// Names the process in the trace (default: the executable's name).
    pub fn process_name(mut self, name: impl Into<String>) -> Config {
        self.process_name = Some(name.into());
        self
    }

    /// Adds a label to the file header, such as `("rank", "3")`; a key given twice keeps the
    /// last value.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Config {
        let key = key.into();
        self.labels.retain(|(k, _)| *k != key);
        self.labels.push((key, value.into()));
        self
    }

    /// Makes this process part of the trace of `parent` (another process's context, say from
    /// [`waffle::Context::from_traceparent`]): the session takes its trace id, and the
    /// decoder makes `parent`'s span the parent of this process's top-level spans. By default
    /// it is read from the `WAFFLE_TRACEPARENT` environment variable, if set; otherwise the
    /// session starts a new trace with a random id.
    pub fn parent(mut self, parent: waffle::Context) -> Config {
        self.parent = Some(parent);
        self
    }

    /// Records under trace id `id`, so that the processes of one run share a trace without a
    /// parent span (say, ranks started by a launcher that set `WAFFLE_TRACE_ID`, 32 lower-case
    /// hex digits, which [`Config::new`] reads). A parent context, if any, wins: its trace id
    /// is used.
    pub fn trace_id(mut self, id: waffle::TraceId) -> Config {
        self.trace_id = Some(id).filter(|t| !t.is_null());
        self
    }

    /// Keeps a fraction `rate` (0 to 1; default 1, everything, or `WAFFLE_SAMPLE`) of the
    /// roots (spans and events begun outside any span or entered context), each with
    /// everything recorded inside it: head sampling for long runs. A dropped root costs less
    /// than a recorded span; a root naming causes is kept if one of them was kept; a process
    /// with a parent context ([`Config::parent`]) follows its sampled flag instead (every root
    /// kept, or none). The file's header carries the label `waffle.sample` with the rate. What
    /// is guaranteed, and what is not: `docs/sampling.md` and [`waffle::local::sample`].
    /// Values outside 0 to 1 are clamped; NaN means 1.
    pub fn sample(mut self, rate: f64) -> Config {
        self.sample = if rate.is_nan() { 1.0 } else { rate.clamp(0.0, 1.0) };
        self
    }

    /// Bytes of each thread's queue (at least 4 KiB, at most 8 MiB). Applies to threads that
    /// first record after this session starts; a full queue drops records and counts them.
    pub fn queue_bytes(mut self, bytes: usize) -> Config {
        self.queue_bytes = bytes.clamp(4 << 10, 8 << 20);
        self
    }

    /// Bytes each thread stages before pushing a chunk (at least 256, at most 64 KiB).
    pub fn staging_bytes(mut self, bytes: usize) -> Config {
        self.staging_bytes = bytes.clamp(256, 64 << 10);
        self
    }

    /// How often the collector drains the queues (default 1 ms). Records also wait at most
    /// about this long in a thread's staging area while the thread keeps recording. Together
    /// these bound what a process killed outright loses: about two intervals of records (see
    /// `docs/reliability.md`).
    pub fn drain_interval(mut self, d: Duration) -> Config {
        self.drain_interval = d.max(Duration::from_micros(100));
        self
    }

    /// Runs `hook` with the trace's path once the session has stopped and the file is closed,
    /// in the thread that stops it; hooks run in the order given, and the first that fails
    /// makes the stop fail with [`Error::AtStop`] (the trace file itself is complete). This is
    /// how a program that never runs `waffle-decode` gets other formats: the decoder crate
    /// makes such a hook.
    ///
    /// ```ignore
    /// let export = waffle_export::at_stop(["run.pftrace", "run.jaeger.json"])?;
    /// let _session = waffle_std::Config::new("run.bin").at_stop(export).start()?;
    /// ```
    pub fn at_stop(
        mut self,
        hook: impl Fn(&Path) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Config {
        self.at_stop.push(AtStop(Arc::new(hook)));
        self
    }

    /// Also hands a copy of the trace, as it is written, to `writer`, from the collector
    /// thread: after each drain pass that wrote something (and after the header, and after the
    /// END frame at stop), one `write_all` of the whole frames written since the last one, the
    /// first starting with the file head. This is how a program sends its spans to a backend
    /// while it runs, without a second process: the decoder crate makes such a writer, which
    /// decodes and sends on a thread of its own and links the HTTP code only into programs
    /// that ask for it. The threads that record are not slowed: they never see the writer.
    ///
    /// The writer must not block the collector (hand the bytes off, bounded); one that returns
    /// an error is dropped and the file goes on. At stop it is dropped on the collector
    /// thread after the END frame, so a writer that finishes its work on drop (sending what it
    /// holds) delays the stop by that long. It serves one session: a second session started
    /// from a clone of this config has none.
    ///
    /// ```ignore
    /// let live = waffle_export::follow::live("otlp=http://127.0.0.1:4318")?;
    /// let _session = waffle_std::Config::new("run.bin").live(live).start()?;
    /// ```
    pub fn live(mut self, writer: impl std::io::Write + Send + 'static) -> Config {
        self.live = Some(LiveWriter::new(writer));
        self
    }

    /// Whether `waffle::tensor!` (and `waffle.tensor`, `waffle_tensor_*`) record fingerprints
    /// in this session: off by default, since each one reads the whole tensor; on when
    /// `WAFFLE_TENSORS` is `1` (or `true`, `yes`, `on`) at [`Config::new`].
    pub fn tensors(mut self, on: bool) -> Config {
        self.tensors = on;
        self
    }

    /// Starts recording.
    ///
    /// A session that `WAFFLE_OUTPUT` started ([`crate::autostart`]) is stopped first and this
    /// one starts as asked: its file is kept if it holds any record, removed if not.
    pub fn start(self) -> Result<Session, Error> {
        let (epoch, path) = self.start_as(false)?;
        Ok(Session::started(epoch, path))
    }

    /// Starts the session `WAFFLE_OUTPUT` asks for: the exit handler stops it, or a
    /// [`Session`] from [`take_automatic`] does, and an explicit start replaces it.
    pub(crate) fn start_automatic(self) -> Result<(), Error> {
        self.start_as(true).map(drop)
    }

    /// Starts recording as `config` says; `automatic` for the session `WAFFLE_OUTPUT` asks for.
    pub(crate) fn start_as(self, automatic: bool) -> Result<(u32, PathBuf), Error> {
        if registry::forked() {
            return Err(Error::ForkedChild);
        }
        // The process's session first (another copy of waffle may run it), then this copy's.
        let slot = hub::slot();
        match slot.recorder() {
            Recorder::Free => {}
            Recorder::Foreign(file) => return Err(Error::OtherCopy(hub::this_image(), file)),
            Recorder::Other(remote) => match remote.info() {
                // An explicit start replaces an automatic session, whichever copy runs it.
                Some(info) if info.automatic && !automatic => remote.replace(),
                Some(_) => return Err(Error::AlreadyStarted(remote.path())),
                None => {}
            },
        }
        let mut active = active();
        if let Some(a) = take_own(&mut active) {
            if !a.automatic {
                let path = a.path.clone();
                *active = Some(a);
                return Err(Error::AlreadyStarted(path));
            }
            replace_automatic(a, &slot);
        }
        crate::crash::install(stop_at_exit);
        let file = File::create(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let start = Arc::new(clock::Start::now());
        let cal = start.measure_over(START_CALIBRATION);
        let salt = crate::random::random_u128() as u32;
        let trace_id = match (self.parent, self.trace_id) {
            (Some(p), _) => p.trace_id(),
            (None, Some(id)) => id,
            (None, None) => waffle::TraceId::from_u128(crate::random::random_u128().max(1)),
        };
        waffle::runtime::set_trace_id(trace_id);
        let mut labels = self.labels.clone();
        // A parent context decided for the whole trace; otherwise this process decides.
        let rate = match self.parent {
            Some(p) if !p.is_sampled() => 0.0,
            Some(_) => 1.0,
            None => self.sample,
        };
        let seed = trace_id.to_u128();
        waffle::local::sample::set_sample_rate(rate, (seed ^ seed >> 32 ^ seed >> 64 ^ seed >> 96) as u32);
        if rate < 1.0 {
            labels.retain(|(k, _)| k != "waffle.sample");
            labels.push(("waffle.sample".to_owned(), format!("{rate}")));
        }
        let live = self.live.as_ref().and_then(LiveWriter::take);
        let mut out = FrameWriter::new(Output::new(BufWriter::with_capacity(1 << 20, file), live))
            .map_err(|e| Error::io(&self.path, e))?;
        let preamble = Preamble {
            process_name: self.process_name.as_deref(),
            labels: &labels,
            cal: &cal,
            salt,
            trace_id,
            parent_span: self.parent.map(|c| c.span_id()),
        };
        preamble.write(&mut out).map_err(|e| Error::io(&self.path, e))?;
        registry::configure(self.queue_bytes, self.staging_bytes, salt);
        waffle::local::set_flush_ticks(cal.ticks_in(self.drain_interval));
        let collector =
            Collector::spawn(out, start, self.drain_interval).map_err(|e| Error::io(&self.path, e))?;
        waffle::runtime::set_tensors(self.tensors);
        let epoch = waffle::runtime::install(&registry::HOOKS);
        *active = Some(Active {
            epoch,
            path: self.path.clone(),
            collector,
            at_stop: self.at_stop,
            pid: std::process::id(),
            automatic,
            exit_wait: self.exit_wait,
        });
        // The copies that join describe the session, which takes `ACTIVE`.
        drop(active);
        slot.claim(&self.path);
        Ok((epoch, self.path))
    }
}

/// A sampling rate: a decimal number from 0 to 1.
fn parse_sample(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r))
}

/// Whether a `WAFFLE_TENSORS` value turns fingerprints on.
fn tensors_on(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

/// A trace id written as 32 lower-case hex digits, not all zero.
fn parse_trace_id(s: &str) -> Option<waffle::TraceId> {
    let s = s.trim();
    let hex = s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let v = u128::from_str_radix(s, 16).ok().filter(|&v| hex && v != 0)?;
    Some(waffle::TraceId::from_u128(v))
}
