//! `why` through directed correlations: from a received message back to its send on another
//! rank, never from a send forward to what received it.

use super::*;
use waffle_read::fixtures;

fn steps(e: &Explanation) -> Vec<(usize, Relation, u64)> {
    e.steps.iter().map(|s| (s.depth, s.relation, s.id())).collect()
}

#[test]
fn a_receive_is_caused_by_the_send_on_another_rank() {
    let trace = fixtures::messages();
    let e = why(&trace, &Selector::id(0x22)).unwrap();
    // The message, then where the receive happened.
    assert_eq!(
        steps(&e),
        [(1, Relation::Message, 0x11), (1, Relation::Inside, 0x21), (2, Relation::Inside, 0x20)]
    );
    let send = e.steps[0].item().unwrap();
    assert_eq!((send.name.as_str(), send.rank.as_deref()), ("MPI_Send", Some("0")));
    assert_eq!(e.root_causes.iter().map(|r| r.id).collect::<Vec<_>>(), [0x11]);
    assert_eq!(e.links_followed, 1);

    let text = e.to_text();
    assert!(text.contains("← caused by message span \"MPI_Send\" 0000000000000011"), "{text}");
    assert!(text.contains("rank 0 (mpi1.bin, pid 1)"), "{text}");
    let j = e.to_json();
    assert_eq!(j["steps"][0]["relation"], "caused by message");
    assert_eq!(j["root_causes"][0]["correlation"]["key"], "mpi.message>");

    // From the receive's span, the walk goes down to nothing: the event is not its cause.
    let from_span = why(&trace, &Selector::id(0x21)).unwrap();
    assert_eq!(steps(&from_span), [(1, Relation::Inside, 0x20)]);
}

#[test]
fn a_send_never_walks_forward_to_its_receive() {
    let trace = fixtures::messages();
    for send in [0x11, 0x23, 0x31] {
        let e = why(&trace, &Selector::id(send)).unwrap();
        assert!(e.steps.iter().all(|s| s.relation != Relation::Message), "{}", e.to_text());
        assert!(e.root_causes.is_empty(), "{}", e.to_text());
    }
    // The effect of several causes reaches each of them; a cause reaches none of its peers.
    let fan_in = why(&trace, &Selector::id(0x32)).unwrap();
    let first = fan_in.steps.iter().filter(|s| s.depth == 1);
    let mut causes: Vec<(Relation, u64)> = first.map(|s| (s.relation, s.id())).collect();
    causes.sort_unstable_by_key(|c| c.1);
    assert_eq!(causes, [(Relation::Message, 0x14), (Relation::Message, 0x24)]);
    assert_eq!(fan_in.root_causes.len(), 2, "{}", fan_in.to_text());
    let fan_out = why(&trace, &Selector::id(0x14)).unwrap();
    assert!(fan_out.steps.is_empty(), "{}", fan_out.to_text());
}

#[test]
fn undirected_groups_still_join_every_member() {
    // The same keys without markers: one symmetric group, walked both ways.
    let mut trace = fixtures::messages();
    for p in &mut trace.processes {
        for t in &mut p.threads {
            for s in &mut t.spans {
                s.callsite = unmarked(&s.callsite);
            }
            for e in &mut t.events {
                e.callsite = unmarked(&e.callsite);
            }
        }
    }
    let e = why(&trace, &Selector::id(0x11)).unwrap();
    assert_eq!(steps(&e)[0], (1, Relation::CorrelatedWith, 0x22));
}

fn unmarked(cs: &std::sync::Arc<crate::model::Callsite>) -> std::sync::Arc<crate::model::Callsite> {
    let key = cs.correlate.trim_end_matches(['>', '<']).to_owned();
    std::sync::Arc::new(crate::model::Callsite {
        name: cs.name.clone(),
        module: cs.module.clone(),
        file: cs.file.clone(),
        line: cs.line,
        kind: cs.kind,
        fields: cs.fields.clone(),
        correlate: key.into(),
    })
}
