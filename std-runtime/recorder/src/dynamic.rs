//! Callsites made at run time, for names that are not known to the Rust compiler: C and C++
//! macros, Python decorators.
//!
//! A foreign callsite is registered once (its struct caches the returned id) and then recorded
//! exactly like a Rust one: the hot path writes only the id. Ids continue where the image's
//! linker-section callsites end ([`first_dynamic_id`]), so that they stay as short on the wire as
//! Rust's (a varint of one or two bytes, not four), and stay valid for the life of the process,
//! across sessions. The collector writes every registered callsite into the file's string table
//! before the first chunk that can use it.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};
use waffle::{
    callsite::Kind,
    wire::{CallsiteDesc, FieldDesc, FieldType},
};

/// The first id given to a run-time callsite: the number of callsites linked into this image
/// (whose ids are their indexes in the linker section), so run-time ids follow them.
pub fn first_dynamic_id() -> u32 {
    waffle::callsite::all().len() as u32
}

/// Most run-time callsites per process; registering more returns `None`.
pub const MAX_DYNAMIC: usize = 1 << 20;

/// A callsite registered at run time: the format's description of a callsite, owned.
pub type Site = CallsiteDesc<'static>;

#[derive(Default)]
struct Registry {
    all: Vec<Arc<Site>>,
    ids: HashMap<Arc<Site>, u32>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers a callsite and returns its id; registering an identical description again
/// returns the same id. `None` once [`MAX_DYNAMIC`] callsites exist.
pub fn register(
    kind: Kind,
    name: &str,
    module: &str,
    file: &str,
    line: u32,
    fields: &[(&str, FieldType)],
    correlate: &str,
) -> Option<u32> {
    let cs = Arc::new(Site {
        name: Cow::Owned(name.to_owned()),
        module: Cow::Owned(module.to_owned()),
        file: Cow::Owned(file.to_owned()),
        line,
        kind,
        fields: fields.iter().map(|&(n, t)| FieldDesc::new(n, t)).collect(),
        correlate: Cow::Owned(correlate.to_owned()),
    });
    let mut g = registry();
    let reg = g.get_or_insert_with(Registry::default);
    if let Some(&id) = reg.ids.get(&cs) {
        return Some(id);
    }
    if reg.all.len() >= MAX_DYNAMIC {
        return None;
    }
    let id = first_dynamic_id() + reg.all.len() as u32;
    reg.all.push(cs.clone());
    reg.ids.insert(cs, id);
    Some(id)
}

/// The run-time callsite `id`, if it is one.
pub(crate) fn site(id: u32) -> Option<Arc<Site>> {
    let index = id.checked_sub(first_dynamic_id())? as usize;
    registry().as_ref()?.all.get(index).cloned()
}

/// Callsites registered from index `from` on (index = id − [`first_dynamic_id`]).
pub(crate) fn since(from: usize) -> Vec<Arc<Site>> {
    registry().as_ref().map_or_else(Vec::new, |r| r.all.get(from..).unwrap_or_default().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_descriptions_share_an_id() {
        let f = [("rank", FieldType::Dynamic)];
        let a = register(Kind::Span, "dyn-test-a", "c", "x.c", 3, &f, "").unwrap();
        let b = register(Kind::Span, "dyn-test-a", "c", "x.c", 3, &f, "").unwrap();
        let c = register(Kind::Event, "dyn-test-a", "c", "x.c", 3, &f, "").unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a >= first_dynamic_id() && c >= first_dynamic_id(), "after every linked callsite");
        let listed = since((a - first_dynamic_id()) as usize);
        assert_eq!(listed[0].name, "dyn-test-a");
    }
}
