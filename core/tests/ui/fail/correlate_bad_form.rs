fn main() {
    let seq = 3u64;
    let _s = waffle::span!("allreduce", correlate = seq);
}
