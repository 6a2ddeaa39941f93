//! A run stopped while stuck: three ranks of a ring exchange, each inside an `MPI_Recv` from
//! the next rank that never sends to it, recorded with the spans and keys `waffle-mpi` uses
//! (one process stands in for the three ranks, one session after another).
//!
//! ```text
//! cargo run -p waffle-std --example stuck_ring -- stuck-run/
//! waffle-decode hang stuck-run/rank0.bin stuck-run/rank1.bin stuck-run/rank2.bin
//! ```
//!
//! Each rank sends to the next rank (tag 1, a message no one receives: an `mpi.message>`
//! correlation without an effect), then waits for the next rank's tag-7 message. `hang` shows
//! each rank inside `MPI_Recv` inside `main`, the waits 0 -> 1 -> 2 -> 0, and names that cycle
//! as a deadlock.

use std::path::PathBuf;

/// The communicator key every rank records for MPI_COMM_WORLD.
const WORLD: u64 = 0x5eed;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args_os().nth(1).unwrap_or_else(|| "stuck-run".into()));
    std::fs::create_dir_all(&dir)?;
    for rank in 0..3i64 {
        let path = dir.join(format!("rank{rank}.bin"));
        let session =
            waffle_std::Config::new(&path).process_name("ring").label("rank", rank.to_string()).start()?;
        let next = (rank + 1) % 3;
        let _main = waffle::span!("main");
        {
            // The value both sides of a message compute; no rank receives this one.
            let message = (WORLD << 8) ^ ((rank as u64) << 4) ^ next as u64;
            let _send = waffle::span!(
                "MPI_Send",
                comm = WORLD,
                peer = next,
                tag = 1i64,
                bytes = 8u64,
                correlate = ("mpi.message>", message)
            );
        }
        let _recv = waffle::span!("MPI_Recv", comm = WORLD, peer = next, tag = 7i64, bytes = 8u64);
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Stopped while inside `MPI_Recv` and `main`: both stay open in the file.
        session.stop()?;
        println!("wrote {}", path.display());
    }
    println!(
        "waffle-decode hang {}",
        (0..3).map(|r| dir.join(format!("rank{r}.bin")).display().to_string()).collect::<Vec<_>>().join(" ")
    );
    Ok(())
}
