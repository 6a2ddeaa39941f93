fn main() {
    let bytes: Vec<u8> = vec![1, 2, 3];
    let _s = waffle::span!("upload", bytes = bytes);
}
