//! A producer that outpaces the drain: with a 4 KiB queue, 256-byte staging and a drain every
//! 50 ms, most chunks find the queue full. Nothing blocks, every record is either in the file or
//! counted as dropped (exactly), the spans that survive are well formed, and the drops are
//! reported by `waffle-decode` and in the Perfetto output.

use std::{process::Command, time::Duration};
use waffle_read::model::Value;

/// Perfetto's `Trace` and the `TracePacket` fields this test reads (numbers from perfetto's
/// protos: `trace_packet.proto`, `track_descriptor.proto`, `thread_descriptor.proto`).
#[derive(Clone, PartialEq, prost::Message)]
struct PerfettoTrace {
    #[prost(message, repeated, tag = "1")]
    packet: Vec<Packet>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Packet {
    #[prost(uint32, optional, tag = "10")]
    trusted_packet_sequence_id: Option<u32>,
    #[prost(bool, optional, tag = "42")]
    previous_packet_dropped: Option<bool>,
    #[prost(message, optional, tag = "60")]
    track_descriptor: Option<TrackDescriptor>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TrackDescriptor {
    #[prost(message, optional, tag = "4")]
    thread: Option<ThreadDescriptor>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ThreadDescriptor {
    #[prost(string, optional, tag = "5")]
    thread_name: Option<String>,
}

const STAND_IN: &str = "(begin lost: records dropped)";

fn field_i(fields: &[Value]) -> u64 {
    match fields {
        [Value::U64(i)] => *i,
        other => panic!("fields {other:?}"),
    }
}

#[test]
fn every_record_is_written_or_counted_as_dropped() {
    let dir = std::env::temp_dir().join(format!("waffle-overflow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("overflow.bin");
    let session = waffle_std::Config::new(&path)
        .queue_bytes(4096)
        .staging_bytes(256)
        .drain_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    let started = std::time::Instant::now();
    let attempted = std::thread::Builder::new()
        .name("producer".into())
        .spawn(|| {
            // Long enough for several drain passes, each of which empties the queue once.
            let until = std::time::Instant::now() + Duration::from_millis(300);
            let mut records = 0u64;
            for i in 0u64.. {
                if i % 64 == 0 && std::time::Instant::now() > until {
                    break;
                }
                let _outer = waffle::span!("outer", i);
                {
                    let _inner = waffle::span!("inner", i);
                    let _tick = waffle::event!("tick", i);
                }
                records += 5; // two begins, two ends, one event
            }
            records
        })
        .unwrap()
        .join()
        .unwrap();
    let took = started.elapsed();
    let stats = session.stop().unwrap();

    let (p, warnings) = waffle_read::decode::decode_file(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let th = p.threads.iter().find(|t| t.name == "producer").expect("the producer's stream");
    // A begin for every span with an id, an end for every ended span (stand-ins included).
    let written = th.spans.iter().map(|s| u64::from(s.id != 0) + u64::from(s.ended)).sum::<u64>()
        + th.events.len() as u64;
    assert!(stats.dropped > attempted / 2, "the queue overflowed: {} of {attempted} dropped", stats.dropped);
    assert_eq!(written + stats.dropped, attempted, "written {written} + dropped {}", stats.dropped);
    assert_eq!(p.dropped, stats.dropped, "the file's count is the session's");
    assert!(th.dropped > 0 && th.dropped <= p.dropped);

    // What survived is well formed: outer spans at the top in order, inner spans inside the
    // outer span of the same step (or a stand-in for it), events inside their inner span.
    let mut by_id = std::collections::HashMap::new();
    let mut last_outer = None;
    let mut stand_ins = 0;
    for s in &th.spans {
        match s.name() {
            "outer" => {
                assert_eq!((s.depth, s.parent), (0, None));
                let i = field_i(&s.fields);
                assert!(last_outer.is_none_or(|l| i > l), "outer {i} after {last_outer:?}");
                last_outer = Some(i);
            }
            "inner" => {
                assert_eq!(s.depth, 1);
                if let Some(parent) = s.parent {
                    let (name, i) = by_id[&parent];
                    assert_eq!((name, i), ("outer", field_i(&s.fields)));
                }
            }
            STAND_IN => {
                assert!(s.depth <= 1 && s.fields.is_empty());
                stand_ins += 1;
            }
            other => panic!("span {other}"),
        }
        if s.id != 0 {
            assert!(s.end_ns >= s.start_ns);
            by_id.insert(s.id, (s.name(), s.fields.first().map_or(0, |_| field_i(&s.fields))));
        }
    }
    for e in &th.events {
        if let Some(parent) = e.parent {
            assert_eq!(by_id[&parent], ("inner", field_i(&e.fields)));
        }
    }
    println!(
        "overflow: {attempted} records attempted in {took:?}, {written} written, {} dropped ({:.1}%), \
         {stand_ins} stand-ins for lost begins",
        stats.dropped,
        100.0 * stats.dropped as f64 / attempted as f64
    );

    // waffle-decode says so, and Perfetto marks the producer's sequence.
    let out = dir.join("overflow.pftrace");
    let run =
        Command::new(env!("CARGO_BIN_EXE_waffle-decode")).arg(&path).arg("-o").arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("dropped") && stderr.contains(&p.dropped.to_string()),
        "the summary reports the drops: {stderr}"
    );
    let trace = <PerfettoTrace as prost::Message>::decode(&std::fs::read(&out).unwrap()[..]).unwrap();
    let seq = trace
        .packet
        .iter()
        .find(|pk| {
            pk.track_descriptor
                .as_ref()
                .and_then(|t| t.thread.as_ref())
                .and_then(|t| t.thread_name.as_deref())
                == Some("producer")
        })
        .and_then(|pk| pk.trusted_packet_sequence_id)
        .expect("the producer's track");
    assert!(
        trace
            .packet
            .iter()
            .any(|pk| pk.trusted_packet_sequence_id == Some(seq) && pk.previous_packet_dropped == Some(true)),
        "previous_packet_dropped on the producer's sequence"
    );
    std::fs::remove_dir_all(&dir).ok();
}
