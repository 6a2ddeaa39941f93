//! Any bytes given to the decoder as a trace file: it returns an error or a trace with
//! warnings, and never panics. Allocation stays bounded (`-malloc_limit_mb` in scripts/fuzz.sh).
//!
//! The bytes are decoded twice: as given, and with every frame's CRC recomputed, so that
//! mutations get past the checksum and reach the payload decoders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use waffle::wire::{
    envelope::{FrameCrc, FrameHead, FILE_HEAD_LEN},
    FRAME_HEAD_LEN, FRAME_TAIL_LEN,
};

fn decode(bytes: &[u8]) {
    if let Ok((_process, warnings)) = waffle_read::decode::decode_reader(bytes, Path::new("fuzz.bin")) {
        for w in &warnings {
            assert!(w.offset <= bytes.len() as u64, "warning past the end: {w}");
        }
    }
}

/// The bytes with each whole frame's checksum made right.
fn fix_crcs(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = FILE_HEAD_LEN;
    while at + FRAME_HEAD_LEN <= out.len() {
        let head: [u8; FRAME_HEAD_LEN] = out[at..at + FRAME_HEAD_LEN].try_into().unwrap();
        let Ok(h) = FrameHead::decode(head) else { break };
        let end = at + FRAME_HEAD_LEN + h.len as usize;
        if end + FRAME_TAIL_LEN > out.len() {
            break;
        }
        let mut crc = FrameCrc::new(&head);
        crc.update(&out[at + FRAME_HEAD_LEN..end]);
        out[end..end + FRAME_TAIL_LEN].copy_from_slice(&crc.tail());
        at = end + FRAME_TAIL_LEN;
    }
    out
}

waffle_fuzz::limit_allocations!();

fuzz_target!(|bytes: &[u8]| {
    decode(bytes);
    decode(&fix_crcs(bytes));
});
