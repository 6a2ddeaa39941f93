fn main() {
    let _s = waffle::span!("solve", n = 4u64, m = 1u64, n = 5u64);
}
