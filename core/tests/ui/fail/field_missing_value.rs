fn main() {
    let _s = waffle::span!("solve", n = , m = 1u64);
}
