//! Fused and split kernels: the heuristic that pairs, within one step, kernels found on one
//! side only.
//!
//! A compiler or a hand-written change often replaces kernels by one that does their work
//! (fusion), or one kernel by several (a split). Within a step, take the kernels present on
//! one side only, each side's in the order of their first start in the step. A kernel of one
//! side and a run of **two or more consecutive** kernels of the other side are paired when
//! their times agree within [`TOLERANCE`] (the difference at most that fraction of the larger
//! time), the shortest such run being taken (then the closest in time): the run was fused into
//! the kernel when the run is on the base side, the kernel was split into the run when it is. Fusions are looked for
//! first, each new kernel in its order, then splits; each kernel takes part in one pairing at
//! most. Names alone are not used: a fused kernel rarely keeps its parts' names.
//!
//! Where the host operation that launched each kernel is known (another tool's profile, whose
//! kernels say their launching operation, `reserved::LAUNCH_OP`), that comes first: the lone
//! kernels of one operation on each side are paired whatever their times, one with one (a
//! **rename**: another name for the same work, such as another vendor's GEMM), several with
//! one (fused) or one with several (split). Only what is left goes by time.

/// How far the times of a pairing may differ, as a fraction of the larger one.
pub const TOLERANCE: f64 = 0.25;

/// A kernel found on one side only in a step: (first start, name, total ns).
pub(crate) type Lone = (u64, u32, u64);

/// Kernels of one side paired with one kernel of the other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pairing {
    /// The base side's names (several when fused).
    pub base: Vec<u32>,
    /// The new side's names (several when split).
    pub new: Vec<u32>,
}

/// The pairings among one step's lone kernels, each side sorted by first start; `op` gives a
/// kernel name's launching operation where known.
pub(crate) fn pair(base: &[Lone], new: &[Lone], op: &dyn Fn(u32) -> Option<u32>) -> Vec<Pairing> {
    let mut out = Vec::new();
    let (mut used_base, mut used_new) = (vec![false; base.len()], vec![false; new.len()]);
    // By launching operation: one side's kernels of it against the other's, unless both
    // sides have several (which goes by time).
    let mut ops: Vec<u32> = base.iter().chain(new).filter_map(|l| op(l.1)).collect();
    ops.sort_unstable();
    ops.dedup();
    for o in ops {
        let of = |side: &[Lone]| (0..side.len()).filter(|&i| op(side[i].1) == Some(o)).collect::<Vec<_>>();
        let (b, n) = (of(base), of(new));
        if b.is_empty() || n.is_empty() || (b.len() > 1 && n.len() > 1) {
            continue;
        }
        b.iter().for_each(|&i| used_base[i] = true);
        n.iter().for_each(|&j| used_new[j] = true);
        out.push(Pairing {
            base: b.iter().map(|&i| base[i].1).collect(),
            new: n.iter().map(|&j| new[j].1).collect(),
        });
    }
    // Fused: a run of base kernels, one new kernel.
    for (j, one) in new.iter().enumerate() {
        if used_new[j] {
            continue;
        }
        if let Some(run) = find_run(base, &used_base, one.2) {
            run.clone().for_each(|i| used_base[i] = true);
            used_new[j] = true;
            out.push(Pairing { base: base[run].iter().map(|l| l.1).collect(), new: vec![one.1] });
        }
    }
    // Split: one base kernel, a run of new kernels.
    for (one, used) in base.iter().zip(used_base.iter_mut()) {
        if *used {
            continue;
        }
        if let Some(run) = find_run(new, &used_new, one.2) {
            *used = true;
            run.clone().for_each(|j| used_new[j] = true);
            out.push(Pairing { base: vec![one.1], new: new[run].iter().map(|l| l.1).collect() });
        }
    }
    out
}

/// The shortest run of two or more consecutive unused kernels whose time agrees with `total`
/// (the closest in time of equally long ones, then the earliest).
fn find_run(side: &[Lone], used: &[bool], total: u64) -> Option<std::ops::Range<usize>> {
    let mut best: Option<((usize, u64), std::ops::Range<usize>)> = None;
    for start in 0..side.len() {
        let mut sum = 0u64;
        for end in start..side.len() {
            if used[end] {
                break;
            }
            sum = sum.saturating_add(side[end].2);
            let rank = (end - start, sum.abs_diff(total));
            if end > start && agrees(sum, total) && best.as_ref().is_none_or(|b| rank < b.0) {
                best = Some((rank, start..end + 1));
            }
            if sum as f64 > total as f64 / (1.0 - TOLERANCE) {
                break;
            }
        }
    }
    best.map(|(_, run)| run)
}

/// Whether two times agree within [`TOLERANCE`].
fn agrees(a: u64, b: u64) -> bool {
    let (a, b) = (a as f64, b as f64);
    (a - b).abs() <= TOLERANCE * a.max(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_kernels_whose_sum_matches_are_fused() {
        // base: a(1000) b(300) c(50) d(900); new: bc(340) z(5)
        let base = [(0, 1, 1000), (1, 2, 300), (2, 3, 50), (3, 4, 900)];
        let new = [(0, 10, 340), (1, 11, 5)];
        assert_eq!(pair(&base, &new, &|_| None), [Pairing { base: vec![2, 3], new: vec![10] }]);
    }

    #[test]
    fn a_kernel_whose_time_matches_consecutive_new_ones_is_split() {
        let base = [(0, 1, 1000)];
        let new = [(0, 10, 10), (1, 11, 480), (2, 12, 530)];
        assert_eq!(pair(&base, &new, &|_| None), [Pairing { base: vec![1], new: vec![11, 12] }]);
    }

    #[test]
    fn times_that_disagree_or_a_single_kernel_pair_nothing() {
        // One lone kernel on each side is a rename or a replacement, not a fusion.
        assert!(pair(&[(0, 1, 100)], &[(0, 2, 100)], &|_| None).is_empty());
        // The sum is off by more than the tolerance.
        assert!(pair(&[(0, 1, 100), (1, 2, 100)], &[(0, 3, 300)], &|_| None).is_empty());
        // Not consecutive: c sits between a and b.
        assert!(pair(&[(0, 1, 100), (1, 3, 5000), (2, 2, 100)], &[(0, 4, 200)], &|_| None).is_empty());
    }

    #[test]
    fn kernels_of_one_launching_operation_pair_whatever_their_times() {
        // Operation 100 launched a (base) and b (new): a rename at any time ratio; operation
        // 200 launched c and d (base) and e (new): fused; 300 only on one side: nothing.
        let op = |name: u32| match name {
            1 | 2 => Some(100),
            3..=5 => Some(200),
            6 => Some(300),
            _ => None,
        };
        let base = [(0, 1, 1000), (1, 3, 10), (2, 4, 10), (3, 6, 50)];
        let new = [(0, 2, 40), (1, 5, 900)];
        let pairs = pair(&base, &new, &op);
        assert_eq!(
            pairs,
            [Pairing { base: vec![1], new: vec![2] }, Pairing { base: vec![3, 4], new: vec![5] }]
        );
    }
}
