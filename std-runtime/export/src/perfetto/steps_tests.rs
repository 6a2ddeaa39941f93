//! Step spans on a "Steps" track of their own under their process, one per thread that records
//! steps, with their children left on the thread's track; other spans named `step` stay there.

use super::tests::{resolved, span};
use super::*;
use crate::model::Value;
use prost::Message;
use proto::AnnotationValue;
use std::collections::HashMap;
use waffle_read::fixtures::{callsite, process, thread};
use waffle_wire::Kind;

/// A track event as the test reads it: type, name, first annotation.
type Slice = (i32, Option<String>, Option<AnnotationValue>);

/// Thread 1: steps 0 and 1, each holding a `work` span; a span named `step` whose first field
/// is not `step` (no step marker here). Thread 2: step 5 alone.
fn stepped() -> Trace {
    let step = callsite("step", Kind::Span, &["step", "lr"]);
    let other = callsite("step", Kind::Span, &["n"]);
    let work = callsite("work", Kind::Span, &[]);
    let t1 = vec![
        span(1, None, &step, vec![Value::U64(0), Value::F64(0.5)], [100, 200]),
        span(2, Some(1), &work, vec![], [110, 190]),
        span(3, None, &step, vec![Value::U64(1), Value::F64(0.25)], [200, 300]),
        span(4, Some(3), &work, vec![], [210, 290]),
        span(5, None, &other, vec![Value::U64(9)], [300, 310]),
    ];
    let t2 = vec![span(6, None, &step, vec![Value::U64(5), Value::F64(1.0)], [150, 250])];
    Trace { processes: vec![process(10, "train", vec![thread(1, t1, vec![]), thread(2, t2, vec![])])] }
}

#[test]
fn steps_have_a_track_of_their_own_under_the_process() {
    let mut bytes = Vec::new();
    write(&stepped(), &mut bytes).unwrap();
    let packets = resolved(proto::Trace::decode(bytes.as_slice()).unwrap().packet);
    let tracks: Vec<&proto::TrackDescriptor> =
        packets.iter().filter_map(|p| p.track_descriptor.as_ref()).collect();
    let process_uuid = tracks.iter().find(|d| d.process.is_some()).unwrap().uuid;
    let thread_uuid = |tid: i64| {
        tracks.iter().find(|d| d.thread.as_ref().is_some_and(|t| t.tid == Some(tid))).unwrap().uuid.unwrap()
    };
    let steps: Vec<&&proto::TrackDescriptor> =
        tracks.iter().filter(|d| d.name.as_deref() == Some("Steps")).collect();
    assert_eq!(steps.len(), 2, "one steps track per thread with steps");
    for d in &steps {
        assert_eq!(d.parent_uuid, process_uuid, "under the process");
        assert!(d.thread.is_none() && d.process.is_none());
    }

    // Per track, in order: (type, name, first annotation).
    let mut names = HashMap::new();
    let mut on: HashMap<u64, Vec<Slice>> = HashMap::new();
    for p in &packets {
        let seq = p.trusted_packet_sequence_id.unwrap();
        for e in p.interned_data.iter().flat_map(|d| &d.event_names) {
            names.insert((seq, e.iid.unwrap()), e.name.clone().unwrap());
        }
        let Some(ev) = &p.track_event else { continue };
        let name = ev.name_iid.map(|i| names[&(seq, i)].clone());
        let value = ev.debug_annotations.first().and_then(|a| a.value.clone());
        on.entry(ev.track_uuid.unwrap()).or_default().push((ev.r#type.unwrap(), name, value));
    }
    let begin = |name: &str, v: Option<AnnotationValue>| (TYPE_SLICE_BEGIN, Some(name.to_owned()), v);
    let end = (TYPE_SLICE_END, None, None);
    let (s1, s2) = (steps[0].uuid.unwrap(), steps[1].uuid.unwrap());
    assert_eq!(
        on[&s1],
        [
            begin("step", Some(AnnotationValue::Uint(0))),
            end.clone(),
            begin("step", Some(AnnotationValue::Uint(1))),
            end.clone()
        ]
    );
    assert_eq!(on[&s2], [begin("step", Some(AnnotationValue::Uint(5))), end.clone()]);
    assert_eq!(
        on[&thread_uuid(1)],
        [
            begin("work", None),
            end.clone(),
            begin("work", None),
            end.clone(),
            begin("step", Some(AnnotationValue::Uint(9))),
            end.clone()
        ],
        "children stay on the thread's track, and so does a `step` span without the field"
    );
    assert!(!on.contains_key(&thread_uuid(2)));
    // Children inside a step get no arrow from it: it holds them, on another track.
    assert!(packets.iter().filter_map(|p| p.track_event.as_ref()).all(|e| e.flow_ids.is_empty()));
}
