fn main() {
    let name = "solve";
    let _s = waffle::span!(name, n = 4u64);
}
