//! The reports' JSON, serialized straight from the reports: one shape per report, written to a
//! stream as it is serialized (`waits` and `critical-path` of a long run list millions of items,
//! whose tree of `serde_json::Value`s took ten times the memory of the analysis), or made a
//! value for callers that want one. Fields are declared in alphabetical order, the order the
//! value's maps keep.

use serde::{Serialize, Serializer};
use serde_json::Value as Json;

/// An id as 16 lower-case hex digits.
pub(crate) struct Hex(pub(crate) u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:016x}", self.0))
    }
}

/// A JSON array of what `F` makes, made while it is serialized.
pub(crate) struct Seq<F>(pub(crate) F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: IntoIterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// `v` as a JSON value.
pub(crate) fn value(v: &impl Serialize) -> Json {
    // Plain data with string keys only: serializing it to a value cannot fail.
    serde_json::to_value(v).expect("a report serializes")
}

/// `v` as pretty JSON to `out`, and a newline.
pub(crate) fn write_pretty(mut out: impl std::io::Write, v: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut out, v)?;
    out.write_all(b"\n")
}
