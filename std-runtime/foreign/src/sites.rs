//! The callsites a conversion makes: one per kind, name, category (kept as the module), field
//! keys and correlation key, numbered once for every file the conversion writes.

use crate::values::{FastHash, FastMap};
use std::hash::{Hash, Hasher};
use waffle_wire::{
    frames::{CallsiteDesc, FieldDesc},
    FieldType, Kind,
};

/// The correlation key of a runtime call that launched device work (the cause), and of the
/// work (the effect): their `correlation` arguments are the value.
pub(crate) const LAUNCH: [&str; 2] = ["launch>", "launch<"];

/// The correlation key of a flow's start or step (the cause) and of its step or end (the
/// effect): its category, name and id are the value.
pub(crate) const FLOW: [&str; 2] = ["flow>", "flow<"];

/// One callsite.
#[derive(Debug)]
pub(crate) struct Site {
    pub span: bool,
    pub name: String,
    pub cat: String,
    pub keys: Vec<String>,
    pub correlate: &'static str,
}

impl Site {
    pub(crate) fn desc(&self) -> CallsiteDesc<'_> {
        CallsiteDesc {
            kind: if self.span { Kind::Span } else { Kind::Event },
            name: self.name.as_str().into(),
            module: self.cat.as_str().into(),
            file: "".into(),
            line: 0,
            fields: self
                .keys
                .iter()
                .map(|k| FieldDesc { name: k.as_str().into(), ty: FieldType::Dynamic })
                .collect(),
            correlate: self.correlate.into(),
        }
    }
}

/// Every callsite made so far, found by what makes it: a hash of its parts, then the parts
/// compared (no text is built per event).
#[derive(Default)]
pub(crate) struct Sites {
    pub list: Vec<Site>,
    index: FastMap<u64, Vec<u32>>,
}

impl Sites {
    /// The number of the callsite of these parts, made the first time.
    pub(crate) fn get<'k>(
        &mut self,
        span: bool,
        (name, cat): (&str, &str),
        keys: impl Iterator<Item = &'k str> + Clone,
        correlate: &'static str,
    ) -> u32 {
        let mut h = FastHash::default();
        (span, correlate, name, cat).hash(&mut h);
        keys.clone().for_each(|k| k.hash(&mut h));
        let bucket = self.index.entry(h.finish()).or_default();
        let same = |s: &Site| {
            s.span == span
                && s.correlate == correlate
                && s.name == name
                && s.cat == cat
                && s.keys.iter().map(String::as_str).eq(keys.clone())
        };
        if let Some(&id) = bucket.iter().find(|&&id| same(&self.list[id as usize])) {
            return id;
        }
        let id = self.list.len() as u32;
        let keys = keys.map(str::to_owned).collect();
        self.list.push(Site { span, name: name.to_owned(), cat: cat.to_owned(), keys, correlate });
        bucket.push(id);
        id
    }
}
