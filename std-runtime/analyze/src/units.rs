//! How the analyses write amounts, and pick what to list, for a reader.

/// A duration: `2.000 s`, `15.250 ms`, `3.5 µs`, `800 ns`.
pub(crate) fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// `n` with the noun for it: `1 wait`, `3 waits`.
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first `n` of `items` in the order `cmp` gives, ties in their order in `items`: what a
/// stable sort's first `n` would be, without sorting the rest (a long run's report lists ten of
/// millions).
pub(crate) fn first_by<T>(items: &[T], n: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> Vec<&T> {
    let mut all: Vec<(usize, &T)> = items.iter().enumerate().collect();
    let order = |a: &(usize, &T), b: &(usize, &T)| cmp(a.1, b.1).then(a.0.cmp(&b.0));
    if all.len() > n {
        all.select_nth_unstable_by(n, order);
        all.truncate(n);
    }
    all.sort_unstable_by(order);
    all.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_by_is_a_stable_sorts_first_n() {
        let items: Vec<(u32, char)> =
            "ebdacfbeadcb".chars().enumerate().map(|(k, c)| ((k % 4) as u32, c)).collect();
        let mut sorted: Vec<&(u32, char)> = items.iter().collect();
        sorted.sort_by_key(|t| std::cmp::Reverse(t.0));
        for n in [0, 1, 3, 5, 12, 20] {
            let got = super::first_by(&items, n, |a, b| b.0.cmp(&a.0));
            assert_eq!(got, sorted.iter().copied().take(n).collect::<Vec<_>>(), "n = {n}");
        }
    }
}
