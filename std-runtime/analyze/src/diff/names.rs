//! Names of kernels and tensors, numbered once for both runs of a diff.

use std::collections::HashMap;

/// Names of kernels and tensors, numbered once for both runs, so that a number means the same
/// name on either side.
#[derive(Debug, Default)]
pub(crate) struct Names {
    ids: HashMap<String, u32>,
    list: Vec<String>,
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
}
