//! Work shared out over threads, its results kept in order: what the exports' passes and the
//! command line's conversions of other tools' traces use to read several things at once.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Mutex,
};

/// `f` of each of `items`, in their order, on up to `threads` threads (each taking the next
/// item as it is free: items differ in size). With one thread, or one item, on the calling
/// thread.
pub fn on_threads<T: Send, R: Send>(items: Vec<T>, threads: usize, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let n = items.len();
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let results: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let item = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(item) = item {
                    let r = f(item);
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every item is done"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_the_items_order_whatever_the_threads() {
        let items: Vec<u64> = (0..50).collect();
        let want: Vec<u64> = items.iter().map(|i| i * i).collect();
        for threads in [1, 2, 3, 8, 64] {
            // Later items are quicker, so threads finish out of order.
            let got = on_threads(items.clone(), threads, |i| {
                std::thread::sleep(std::time::Duration::from_micros(50 - i));
                i * i
            });
            assert_eq!(got, want, "{threads} threads");
        }
    }
}
