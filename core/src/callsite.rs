//! Callsites: the compile-time description of each `span!`, `event!` and `#[instrument]`.
//!
//! Every macro expansion defines one `static Callsite` and places it in the [`CALLSITES`]
//! distributed slice (a linker section, via `linkme`). The callsite's id is its index in that
//! slice, so nothing is registered at run time: the hot path writes the index, and the runtime
//! writes the whole slice into the file's string table once. Names, module paths, file names and
//! field schemas therefore cost nothing per record.
//!
//! One slice exists per linked image (executable or shared library); each copy of this crate
//! is one *module* of the trace and numbers its callsites from zero.

use crate::wire::FieldType;
use core::sync::atomic::{AtomicU32, Ordering};

pub use crate::wire::Kind;

/// One field of a callsite's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The key, as written in the macro.
    pub name: &'static str,
    /// The value's type when the macro could tell it, else [`FieldType::Dynamic`].
    pub ty: FieldType,
}

impl Field {
    /// A field of the schema (used by generated code).
    pub const fn new(name: &'static str, ty: FieldType) -> Field {
        Field { name, ty }
    }
}

/// The static description of one instrumentation point.
#[derive(Debug)]
pub struct Callsite {
    /// Span or event name.
    pub name: &'static str,
    /// `module_path!()` of the expansion.
    pub module: &'static str,
    /// `file!()` of the expansion.
    pub file: &'static str,
    /// `line!()` of the expansion.
    pub line: u32,
    /// Span or event.
    pub kind: Kind,
    /// Field schema, in the order values are written.
    pub fields: &'static [Field],
    /// Correlation key (`correlate = ("key", value)`), or "" if the callsite has none. A key
    /// ending in `>` marks a cause, one ending in `<` an effect of the group of its stem.
    pub correlate: &'static str,
    /// The id plus one once computed (0: not yet), so the hot path does one load.
    id_cache: AtomicU32,
}

impl Callsite {
    /// A callsite (used by generated code).
    pub const fn new(
        kind: Kind,
        name: &'static str,
        module: &'static str,
        file: &'static str,
        line: u32,
        fields: &'static [Field],
        correlate: &'static str,
    ) -> Callsite {
        Callsite { name, module, file, line, kind, fields, correlate, id_cache: AtomicU32::new(0) }
    }

    /// This callsite's id: its index in [`CALLSITES`].
    ///
    /// Only meaningful for callsites placed in the slice, which generated code always does.
    #[inline(always)]
    pub fn id(&'static self) -> u32 {
        match self.id_cache.load(Ordering::Relaxed) {
            0 => self.compute_id(),
            cached => cached - 1,
        }
    }

    #[cold]
    #[inline(never)]
    fn compute_id(&'static self) -> u32 {
        let base = CALLSITES.as_ptr() as usize;
        let this = self as *const Callsite as usize;
        let id = (this.wrapping_sub(base) / core::mem::size_of::<Callsite>()) as u32;
        self.id_cache.store(id.wrapping_add(1), Ordering::Relaxed);
        id
    }

    /// This callsite as the CALLSITES frame describes it, borrowing its strings.
    #[cfg(feature = "frames")]
    pub fn desc(&self) -> crate::wire::CallsiteDesc<'static> {
        use crate::wire::{CallsiteDesc, FieldDesc};
        use alloc::borrow::Cow;
        CallsiteDesc {
            kind: self.kind,
            name: Cow::Borrowed(self.name),
            module: Cow::Borrowed(self.module),
            file: Cow::Borrowed(self.file),
            line: self.line,
            fields: self.fields.iter().map(|f| FieldDesc { name: Cow::Borrowed(f.name), ty: f.ty }).collect(),
            correlate: Cow::Borrowed(self.correlate),
        }
    }
}

/// Every callsite linked into this image, in id order.
#[linkme::distributed_slice]
pub static CALLSITES: [Callsite];

/// All callsites of this image, indexed by id.
pub fn all() -> &'static [Callsite] {
    &CALLSITES
}
