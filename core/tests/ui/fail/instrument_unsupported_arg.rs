#[waffle::instrument]
fn upload(bytes: Vec<u8>, attempt: u32) {
    let _ = (bytes, attempt);
}

fn main() {
    upload(vec![1, 2, 3], 1);
}
