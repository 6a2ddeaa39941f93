//! The replay behind "what if it were free": every lane's work in its order, each wait ending
//! when its cause happens in the replay, with one contributor's work taking no time.

use super::{holding, Walk, What};

impl Walk<'_> {
    /// Every lane replayed with the work `free` (a lane and what it was doing, by its label's
    /// number) taking no time: the new time of each item's end, by lane.
    pub(super) fn replay(&self, order: &[(u32, u32)], free: Option<(u32, u32)>) -> Vec<Vec<u64>> {
        let mut end: Vec<Vec<u64>> = self.items.iter().map(|i| vec![u64::MAX; i.len()]).collect();
        let start = |end: &Vec<Vec<u64>>, lane: u32, k: usize| {
            let items = &self.items[lane as usize];
            match k.checked_sub(1) {
                Some(p) if end[lane as usize][p] != u64::MAX => end[lane as usize][p],
                Some(_) => items[k].a,
                None => items[0].a,
            }
        };
        for &(lane, k) in order {
            let item = self.items[lane as usize][k as usize];
            let s = start(&end, lane, k as usize);
            let e = match item.what {
                What::Work(_) => {
                    let label = self.labels[lane as usize][k as usize];
                    if free.is_some_and(|(l, id)| l == lane && id == label) {
                        s
                    } else {
                        s + (item.b - item.a)
                    }
                }
                What::Wait(f) => {
                    let cause = self.found[f as usize].cause;
                    let citems = &self.items[cause.lane as usize];
                    let at = match holding(citems, cause.at_ns.max(1)) {
                        Some(c) if citems[c].b <= cause.at_ns => end[cause.lane as usize][c],
                        Some(c) => start(&end, cause.lane, c).saturating_add(cause.at_ns - citems[c].a),
                        None => cause.at_ns,
                    };
                    s.max(if at == u64::MAX { item.b } else { at })
                }
            };
            end[lane as usize][k as usize] = e;
        }
        end
    }

    /// The new time of `t` on `lane` after a replay.
    pub(super) fn moved(&self, end: &[Vec<u64>], lane: u32, t: u64) -> u64 {
        let items = &self.items[lane as usize];
        match holding(items, t) {
            Some(k) if items[k].b <= t => end[lane as usize][k],
            Some(k) => {
                let s = if k == 0 { items[0].a } else { end[lane as usize][k - 1] };
                let e = end[lane as usize][k];
                (s + (t - items[k].a)).min(e)
            }
            None => t,
        }
    }
}
