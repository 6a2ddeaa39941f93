//! Tensor fingerprints and steps: three steps of a toy four-layer model, each layer's output
//! fingerprinted; the run given `--nan` turns one element of layer 2 into NaN at step 1, so two
//! traces show where the runs part. See docs/tensors.md.
//!
//! `cargo run -p waffle-std --example tensors -- run.bin [--nan]`

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "tensors.bin".to_owned());
    let nan = args.next().as_deref() == Some("--nan");
    let session = waffle_std::Config::new(&path).tensors(true).start()?;
    let mut x: Vec<f32> = (0..2560).map(|i| (i as f32 / 2560.0) - 0.5).collect();
    for step in 0..3u64 {
        let _step = waffle::step!(step);
        for layer in 0..4u64 {
            for v in &mut x {
                *v = (*v * 1.5 + 0.1).tanh();
            }
            if nan && step == 1 && layer == 2 {
                x[7] = f32::NAN;
            }
            waffle::tensor!(&format!("blk{layer}/out"), &x, shape = [1, 2560], layer);
        }
    }
    let stats = session.stop()?;
    println!("{path}: {} bytes of records", stats.data_bytes);
    Ok(())
}
