#[waffle::instrument]
async fn fetch(n: u64) -> u64 {
    n
}

fn main() {
    let _ = fetch(1);
}
