//! Names of kernels and tensors, numbered once for both runs of a diff.

use std::collections::HashMap;

/// Names of kernels and tensors, numbered once for both runs, so that a number means the same
/// name on either side.
#[derive(Debug, Default)]
pub(crate) struct Names {
    ids: HashMap<String, u32>,
    list: Vec<String>,
    /// Per kernel name, the host operation that launched it (the first seen), by number.
    ops: HashMap<u32, u32>,
}

impl Names {
    /// The number of `name`, given one the first time it is seen.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    /// The name numbered `id`.
    pub(crate) fn get(&self, id: u32) -> &str {
        &self.list[id as usize]
    }

    /// Notes that kernel `name` was launched by the host operation `op` (the first one said
    /// is kept).
    pub(crate) fn set_op(&mut self, name: u32, op: &str) {
        let op = self.intern(op);
        self.ops.entry(name).or_insert(op);
    }

    /// The host operation that launched kernel `name`, if known.
    pub(crate) fn op(&self, name: u32) -> Option<u32> {
        self.ops.get(&name).copied()
    }
}
