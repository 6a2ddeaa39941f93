#[waffle::instrument(bogus)]
fn solve(n: u64) -> u64 {
    n
}

fn main() {
    solve(1);
}
