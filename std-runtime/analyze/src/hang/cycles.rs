//! The deadlocks of a wait-for graph: its elementary cycles, each once.
//!
//! Johnson's algorithm ("Finding all the elementary circuits of a directed graph", 1975): for
//! each rank `s` in ascending order, the circuits through `s` among the ranks not below it,
//! found by a depth-first search that blocks a rank while no path from it returns to `s`
//! (so each dead end is explored once per start). Every cycle is found once, from its lowest
//! rank, which is where it is written to start. The number of cycles can grow exponentially
//! with the ranks (waits on `MPI_ANY_SOURCE` make dense graphs), so the search stops at a limit.

use super::{Deadlock, Wait};
use std::collections::{BTreeMap, BTreeSet};

/// The elementary cycles of the graph whose edges are `waits` (each edge once, whatever
/// calls it came from), by lowest rank then path, at most `limit` of them; and whether there
/// were more.
pub(super) fn elementary(waits: &[Wait], limit: usize) -> (Vec<Deadlock>, bool) {
    let mut graph: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for w in waits {
        graph.entry(w.from).or_default().insert(w.to);
        graph.entry(w.to).or_default();
    }
    let nodes: Vec<i64> = graph.keys().copied().collect();
    let index: BTreeMap<i64, usize> = nodes.iter().enumerate().map(|(i, &r)| (r, i)).collect();
    let adjacency: Vec<Vec<usize>> =
        nodes.iter().map(|r| graph[r].iter().map(|to| index[to]).collect()).collect();
    let mut search = Search {
        adjacency: &adjacency,
        start: 0,
        blocked: vec![false; nodes.len()],
        unblock_on: vec![BTreeSet::new(); nodes.len()],
        path: Vec::new(),
        found: Vec::new(),
        limit,
        truncated: false,
    };
    for s in 0..nodes.len() {
        if search.truncated {
            break;
        }
        search.start = s;
        for v in s..nodes.len() {
            search.blocked[v] = false;
            search.unblock_on[v].clear();
        }
        search.circuit(s);
    }
    let deadlocks =
        search.found.into_iter().map(|c| Deadlock { ranks: c.into_iter().map(|i| nodes[i]).collect() });
    (deadlocks.collect(), search.truncated)
}

struct Search<'g> {
    adjacency: &'g [Vec<usize>],
    start: usize,
    blocked: Vec<bool>,
    /// Johnson's B sets: ranks to unblock when this one is.
    unblock_on: Vec<BTreeSet<usize>>,
    path: Vec<usize>,
    found: Vec<Vec<usize>>,
    limit: usize,
    truncated: bool,
}

impl Search<'_> {
    /// Whether a circuit through the start was found from `v` (Johnson's CIRCUIT).
    fn circuit(&mut self, v: usize) -> bool {
        let mut closed = false;
        self.path.push(v);
        self.blocked[v] = true;
        for &w in &self.adjacency[v] {
            if w < self.start || self.truncated {
                continue;
            }
            if w == self.start {
                if self.found.len() == self.limit {
                    self.truncated = true;
                    continue;
                }
                self.found.push(self.path.clone());
                closed = true;
            } else if !self.blocked[w] && self.circuit(w) {
                closed = true;
            }
        }
        if closed {
            self.unblock(v);
        } else {
            for &w in &self.adjacency[v] {
                if w >= self.start {
                    self.unblock_on[w].insert(v);
                }
            }
        }
        self.path.pop();
        closed
    }

    fn unblock(&mut self, v: usize) {
        let mut stack = vec![v];
        while let Some(u) = stack.pop() {
            if self.blocked[u] {
                self.blocked[u] = false;
                stack.extend(std::mem::take(&mut self.unblock_on[u]));
            }
        }
    }
}
