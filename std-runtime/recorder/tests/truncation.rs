//! A real four-thread trace cut at thousands of byte offsets: every prefix decodes to exactly
//! the spans of the frames it holds whole, with a warning naming the frame that was cut.

use std::{collections::BTreeMap, path::Path};
use waffle_read::decode::decode_reader;
use waffle_read::model::{Process, Value};
use waffle_read::reader::FrameReader;
use waffle_read::Error;

#[waffle::instrument]
fn step(t: u64, i: u64) {
    let cause = waffle::event!("input", i);
    let _inner = waffle::span!("inner", caused_by = [cause], label = "stencil", x = i as f64 * 0.5);
    if i % 7 == 0 {
        let _deep = waffle::span!("deep", correlate = ("round", i), t);
        let _e = waffle::event!("mark", ok = i % 2 == 0);
    }
}

/// About 3,700 spans and 1,700 events on four threads, pushed in many small DATA frames.
fn record(path: &Path) {
    let session = waffle_std::Config::new(path).staging_bytes(1024).start().unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                for i in 0..400 {
                    step(t, i);
                    if i % 40 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        // more frames
                    }
                }
            });
        }
    });
    let stats = session.stop().unwrap();
    assert_eq!(stats.dropped, 0);
}

/// What a reader compares: each span by id, with its name, fields, parent and depth.
type Spans = BTreeMap<u64, (String, Vec<Value>, Option<u64>, u32)>;

fn spans(p: &Process) -> Spans {
    p.threads
        .iter()
        .flat_map(|t| &t.spans)
        .map(|s| (s.id, (s.name().to_owned(), s.fields.clone(), s.parent, s.depth)))
        .collect()
}

/// Offsets where a frame ends: the clean cuts.
fn frame_ends(bytes: &[u8]) -> Vec<u64> {
    let mut r = FrameReader::new(bytes, Path::new("full.bin")).unwrap();
    let mut warnings = Vec::new();
    let mut ends = vec![r.offset()];
    while r.next_frame(&mut warnings).is_some() {
        ends.push(r.offset());
    }
    assert!(warnings.is_empty());
    assert_eq!(*ends.last().unwrap(), bytes.len() as u64);
    ends
}

#[test]
fn every_prefix_decodes_to_the_frames_it_holds() {
    let path = std::env::temp_dir().join(format!("waffle-truncation-{}.bin", std::process::id()));
    record(&path);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let name = Path::new("cut.bin");
    let (full, warnings) = decode_reader(&bytes[..], name).unwrap();
    assert!(warnings.is_empty() && full.complete);
    let full_spans = spans(&full);
    assert!(full_spans.len() > 3000, "{} spans", full_spans.len());

    let ends = frame_ends(&bytes);
    assert!(ends.len() > 20, "only {} frames", ends.len());
    let header_end = ends[1];
    // The spans each clean cut holds: the reference for every cut inside the next frame.
    let at_end: Vec<Spans> = ends
        .iter()
        .map(|&e| match decode_reader(&bytes[..e as usize], name) {
            Ok((p, w)) => {
                assert!(w.is_empty(), "clean cut at {e}: {w:?}");
                spans(&p)
            }
            Err(_) => Spans::new(), // before the header is whole
        })
        .collect();
    assert_eq!(at_end.last(), Some(&full_spans));
    for pair in at_end.windows(2) {
        assert!(pair[0].keys().all(|id| pair[1].contains_key(id)), "a later cut keeps every span");
    }

    // Every offset in the first 4 KiB, every frame boundary and its neighbours, and an even
    // sample of the rest.
    let len = bytes.len() as u64;
    let mut offsets: Vec<u64> = (0..4096.min(len)).collect();
    offsets.extend(ends.iter().flat_map(|&e| [e.saturating_sub(1), e, e + 1]).filter(|&o| o <= len));
    offsets.extend((0..1000).map(|k| 4096 + k * len.saturating_sub(4096) / 1000));
    offsets.sort_unstable();
    offsets.dedup();
    assert!(offsets.len() >= 2000);

    let mut last_count = 0;
    for &cut in &offsets {
        let prefix = &bytes[..cut as usize];
        let result = decode_reader(prefix, name);
        if cut < header_end {
            match result {
                Err(Error::NotATrace { .. }) => assert!(cut < 8, "cut {cut}"),
                Err(Error::Corrupt { offset, .. }) => assert!(cut >= 8 && offset <= cut, "cut {cut}"),
                other => panic!("cut {cut} inside the preamble: {other:?}"),
            }
            continue;
        }
        let (p, warnings) = result.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        // The frames wholly before the cut, and the one it falls in.
        let whole = ends.iter().rposition(|&e| e <= cut).unwrap();
        // Ids of every cut; names, fields, parents and depths too next to frame boundaries.
        let mut ids: Vec<u64> = p.threads.iter().flat_map(|t| &t.spans).map(|s| s.id).collect();
        ids.sort_unstable();
        assert!(ids.iter().eq(at_end[whole].keys()), "cut {cut}: the spans of the {whole} whole frames");
        if cut - ends[whole] <= 1 || ends.get(whole + 1).is_some_and(|&e| e - cut <= 1) {
            let got = spans(&p);
            assert_eq!(got, at_end[whole], "cut {cut}");
            for (id, s) in &got {
                assert_eq!(Some(s), full_spans.get(id), "cut {cut}: span {id:x} as in the full file");
            }
        }
        assert!(ids.len() >= last_count, "cut {cut}: count went down");
        last_count = ids.len();
        if cut == ends[whole] {
            assert!(warnings.is_empty(), "clean cut {cut}: {warnings:?}");
            assert_eq!(p.complete, cut == len);
        } else {
            assert_eq!(warnings.len(), 1, "cut {cut}: {warnings:?}");
            assert_eq!(warnings[0].offset, ends[whole], "cut {cut}: names the cut frame's offset");
            assert!(warnings[0].message.contains("file ends inside"), "{}", warnings[0]);
            assert!(!p.complete);
        }
    }
    println!(
        "{} offsets of a {len}-byte trace ({} frames, {} spans): every prefix decoded",
        offsets.len(),
        ends.len() - 1,
        full_spans.len()
    );
}
