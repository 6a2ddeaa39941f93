//! "What caused this event?": the causal chain from a symptom back to its root causes.
//!
//! [`why`] walks the cause graph of a decoded [`Trace`] backwards from one span or event (the
//! symptom), breadth first, across threads and files. From each item it follows
//!
//! - its **links**, the ids named in `caused_by` ([`Relation::CausedBy`]);
//! - its **parent** span, which may be on another thread or in another process
//!   ([`Relation::Inside`]);
//! - for an item with a correlation value, the **other members of its correlation group**, such
//!   as the same allreduce on the other ranks ([`Relation::CorrelatedWith`]);
//! - for an **effect** of a directed correlation group (a key ending in `<`, see
//!   [`crate::correlation`]), **the group's causes** (keys ending in `>`), such as the send of
//!   the message a receive got ([`Relation::Message`]). A cause is never walked forward to its
//!   effects: a send did not happen because of its receive;
//! - for a span matched by order ([`crate::matching`]: the k-th span of its name on every
//!   rank of an SPMD program), **the same operation on the other ranks**
//!   ([`Relation::MatchedByOrder`]), unless [`Options::match_by_order`] is off. The step says
//!   it was matched by order, so that a reader can tell it from a recorded link.
//!
//! Every item is visited once, so cycles (a group always is one) end the walk. Ids
//! that none of the files holds are reported as unknown and not followed.
//!
//! The **root causes** are the items reached through a causal link or a message whose own
//! causes are not in the walk: neither they, their ancestors, nor what they are correlated with
//! (and that one's ancestors) carry a link (or are the effect of a message) to an item of these
//! files; likewise for what it is matched with. A root cause whose links all point outside the
//! files is still one, as far as these files can tell. When no link is reachable from the
//! symptom at all, there is no root cause to name: [`Explanation::root_causes`] is empty and the
//! steps show only where the symptom happened.
//!
//! [`Explanation::to_text`] renders the result as an indented tree and
//! [`Explanation::to_json`] as JSON (its shape is documented there).
//!
//! ```
//! use waffle_analyze::why::{why, Selector};
//! # let trace = waffle_read::model::Trace::default();
//! match why(&trace, &Selector::name("Output buffer is NaN after AllReduce", 0)) {
//!     Ok(explanation) => print!("{}", explanation.to_text()),
//!     Err(e) => eprintln!("{e}"),
//! }
//! ```

use crate::model::{ItemRef, Trace, Value};

mod groups;
mod index;
#[cfg(test)]
mod message_tests;
mod model_source;
#[cfg(test)]
mod order_tests;
pub(crate) mod render;
mod select;
mod source;
#[cfg(test)]
mod tests;
mod walk;

pub use render::JSON_VERSION;
pub use select::{Selector, WhyError};

/// How a step's item relates to the item it was reached from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Relation {
    /// Named in the other item's `caused_by`.
    CausedBy,
    /// The other item's parent span.
    Inside,
    /// In the same correlation group as the other item (same key and value).
    CorrelatedWith,
    /// The same operation as the other item on another rank: the k-th span of the same name
    /// on each rank, matched by order, not by anything recorded.
    MatchedByOrder,
    /// A cause of the other item through a directed correlation: the other item is an effect
    /// (key `stem<`) of the group this item is a cause of (key `stem>`, same value), such as
    /// the send of a received message.
    Message,
}

impl Relation {
    /// The relation as the text and JSON outputs write it: `caused by`, `inside`,
    /// `correlated with`, `matched by order with`, `caused by message`.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::CausedBy => "caused by",
            Relation::Inside => "inside",
            Relation::CorrelatedWith => "correlated with",
            Relation::MatchedByOrder => "matched by order with",
            Relation::Message => "caused by message",
        }
    }

    /// Whether it goes from an effect to its cause: a recorded link or a message.
    pub fn causal(self) -> bool {
        matches!(self, Relation::CausedBy | Relation::Message)
    }
}

/// A span or event, described for a reader.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemInfo {
    /// Where it is in the trace.
    pub at: ItemRef,
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// `"span"` or `"event"`.
    pub kind: &'static str,
    /// The file it was read from, as given.
    pub source: String,
    /// OS process id.
    pub pid: u32,
    /// Process name.
    pub process_name: String,
    /// Host name.
    pub host: String,
    /// The process's `rank` label, if any.
    pub rank: Option<String>,
    /// All the process's labels.
    pub labels: Vec<(String, String)>,
    /// Thread name ("" if unnamed).
    pub thread_name: String,
    /// OS thread id.
    pub tid: u64,
    /// Begin (span) or time (event), in µs after the earliest timestamp of the trace.
    pub offset_us: f64,
    /// Field names and values.
    pub fields: Vec<(String, Value)>,
    /// Correlation key and value, if any.
    pub correlation: Option<(String, u64)>,
    /// Its parent span's id.
    pub parent: Option<u64>,
    /// Ids of its causes.
    pub links: Vec<u64>,
}

/// What a step reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Reached {
    /// An item seen here for the first time; the walk continues from it.
    Item(ItemInfo),
    /// An item already shown higher up (only causal links are shown again, so that cycles of
    /// causes are visible).
    Again(ItemInfo),
    /// An id that none of the files holds.
    Unknown(u64),
}

/// One edge of the walk, in tree order (each step's predecessor is the closest step above it
/// with a smaller depth, or the symptom).
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Edges from the symptom: 1 for what is reached from the symptom directly.
    pub depth: usize,
    /// How the item relates to the item it was reached from.
    pub relation: Relation,
    /// The id of the item it was reached from.
    pub from: u64,
    /// What it reached.
    pub reached: Reached,
    /// For [`Relation::MatchedByOrder`]: k, the occurrence of its name on each rank (from 0).
    pub occurrence: Option<u64>,
}

impl Step {
    /// The id of the item reached.
    pub fn id(&self) -> u64 {
        match &self.reached {
            Reached::Item(i) | Reached::Again(i) => i.id,
            Reached::Unknown(id) => *id,
        }
    }

    /// The item reached, unless its id is unknown.
    pub fn item(&self) -> Option<&ItemInfo> {
        match &self.reached {
            Reached::Item(i) | Reached::Again(i) => Some(i),
            Reached::Unknown(_) => None,
        }
    }
}

/// The answer to "what caused this?".
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The item asked about.
    pub symptom: ItemInfo,
    /// The walk as a tree, depth first, in the order the walk found each step's siblings
    /// (causes, then correlated items, then the parent).
    pub steps: Vec<Step>,
    /// The root causes, in the order the walk reached them (nearest first).
    pub root_causes: Vec<ItemInfo>,
    /// Ids named as causes or parents that none of the files holds.
    pub unknown_ids: Vec<u64>,
    /// How many causal links (recorded, or messages) between items of these files the walk
    /// followed.
    pub links_followed: usize,
    /// Why spans the walk passed were not matched by order with other ranks, one sentence per
    /// name (see [`crate::matching::Unmatched`]).
    pub notes: Vec<String>,
}

/// How the walk may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whether spans are matched by order across ranks (default: yes).
    pub match_by_order: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { match_by_order: true }
    }
}

/// Explains the span or event `selector` picks: the causal chain back to its root causes.
pub fn why(trace: &Trace, selector: &Selector) -> Result<Explanation, WhyError> {
    why_with(trace, selector, &Options::default())
}

/// What can stop [`why_files`]: a file that cannot be read, or a symptom not found.
#[derive(Debug, thiserror::Error)]
pub enum WhyFilesError {
    /// A file is missing, foreign, newer, damaged before anything usable, or changed while it
    /// was read.
    #[error(transparent)]
    Read(#[from] crate::Error),
    /// The selector picks nothing.
    #[error(transparent)]
    Why(#[from] WhyError),
}

/// [`why_with`] on files, without building the model: the files are read once into an index
/// of where things are (see `index/mod.rs`), the walk reads again the parts of them it
/// reaches. Memory grows with threads, correlation groups and checkpoints (one per MiB of
/// input), not with spans and events. The answer is the one [`why_with`] gives on the decoded
/// files; the warnings are those of decoding them.
pub fn why_files<P: AsRef<std::path::Path>>(
    paths: &[P],
    selector: &Selector,
    options: &Options,
) -> Result<(Explanation, Vec<crate::reader::Warning>), WhyFilesError> {
    why_files_every(paths, selector, options, index::CHECKPOINT_EVERY)
}

/// [`why_files`] with a checkpoint every `every` bytes of frames.
fn why_files_every<P: AsRef<std::path::Path>>(
    paths: &[P],
    selector: &Selector,
    options: &Options,
    every: u64,
) -> Result<(Explanation, Vec<crate::reader::Warning>), WhyFilesError> {
    let built = index::build(paths, selector, options.match_by_order, every)?;
    let symptom = built.symptom.clone()?;
    let warnings = built.warnings.clone();
    let mut source = index::Indexed::new(built);
    Ok((walk::walk(&mut source, symptom)?, warnings))
}

/// [`why`], with options.
pub fn why_with(trace: &Trace, selector: &Selector, options: &Options) -> Result<Explanation, WhyError> {
    let index = trace.index();
    let symptom = select::select(trace, &index, selector)?;
    let symptom = trace.describe(symptom).id;
    let mut source = model_source::ModelSource::new(trace, index, options);
    let Ok(explanation) = walk::walk(&mut source, symptom);
    Ok(explanation)
}
