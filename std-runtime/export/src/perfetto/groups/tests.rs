//! The two passes over correlated items, without files: every arrow once, numbered as before.

use super::*;
use std::collections::BTreeMap;

/// A correlated item in pass order: (process, thread, key, value, role, time). Its id is its
/// index.
type Item = (usize, usize, u32, u64, Role, u64);

/// The flows an item starts and those it ends.
type Ends = (Vec<u64>, Vec<u64>);

/// Key numbers' places by name in these tests: 3 before 1 before 0 before 2 and 4.
const RANK: [u32; 5] = [2, 1, 3, 0, 4];

/// Both passes over `items` (threads per process as given, processes in order): each item's
/// flows started and ended, in the order given, checked against [`numbered`], with the plan
/// made on one thread and on three.
fn flows(threads: &[usize], items: &[Item]) -> Vec<Ends> {
    let one = flows_on(threads, items, 1);
    assert!(flows_on(threads, items, 3) == one, "the plan on three threads");
    one
}

fn flows_on(threads: &[usize], items: &[Item], plan_threads: usize) -> Vec<Ends> {
    let mut groups = Groups::default();
    for (p, &n) in threads.iter().enumerate() {
        groups.process();
        (0..n).for_each(|_| groups.thread());
        for (id, it) in items.iter().enumerate().filter(|(_, it)| it.0 == p) {
            groups.add(it.1, (it.2, it.3), it.4, id as u64, || it.5);
        }
    }
    let mut next = 7;
    let Correlations { mut queues, mut large } = groups.plan(&mut next, &RANK, plan_threads);
    let flows: Vec<Ends> = items
        .iter()
        .enumerate()
        .map(|(id, it)| {
            let (mut out, mut into) = (Vec::new(), Vec::new());
            let flows = match queues[it.0][it.1].next(it.5, id as u64) {
                Ok(flows) => Some(flows),
                Err(member) => large.get_mut(&(it.2, it.3)).map(|g| g.next(it.4, member)),
            };
            if let Some(f) = flows {
                f.push(&mut out, &mut into);
            }
            (out, into)
        })
        .collect();
    let (want, end) = numbered(threads, items, 7);
    assert_eq!(next, end);
    for (k, (got, want)) in flows.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "item {k}: {:?}", items[k]);
    }
    flows
}

/// The flows of `items` as numbered from `first` by a sorted table of every group, searched
/// per item (as the export did before the queues): keys by name, each key's groups by value;
/// a directed group's causes and effects numbered in pass order; an undirected group's flow
/// ended by its latest member by (time, process, thread, id). Also the next flow id.
fn numbered(threads: &[usize], items: &[Item], first: u64) -> (Vec<Ends>, u64) {
    #[derive(Default)]
    struct G {
        causes: u64,
        effects: u64,
        members: u64,
        last: (u64, usize, usize, usize),
        flow: u64,
        causes_met: u64,
        effects_met: u64,
    }
    let streams: Vec<usize> = threads.iter().scan(0, |s, &n| Some(std::mem::replace(s, *s + n))).collect();
    let mut groups: BTreeMap<(u32, u64), G> = BTreeMap::new();
    for (id, it) in items.iter().enumerate() {
        let g = groups.entry((RANK[it.2 as usize], it.3)).or_default();
        match it.4 {
            Role::Cause => g.causes += 1,
            Role::Effect => g.effects += 1,
            Role::Member => g.members += 1,
        }
        g.last = g.last.max((it.5, it.0, streams[it.0] + it.1, id));
    }
    let mut next = first;
    for g in groups.values_mut() {
        g.flow = next;
        next += if g.causes > 0 || g.effects > 0 { g.causes * g.effects } else { u64::from(g.members > 1) };
    }
    let flows = items
        .iter()
        .enumerate()
        .map(|(id, it)| {
            let g = groups.get_mut(&(RANK[it.2 as usize], it.3)).unwrap();
            let (c, e) = (g.causes, g.effects);
            match it.4 {
                Role::Cause => {
                    let i = g.causes_met;
                    g.causes_met += 1;
                    ((0..e).map(|j| g.flow + i * e + j).collect(), vec![])
                }
                Role::Effect => {
                    let j = g.effects_met;
                    g.effects_met += 1;
                    (vec![], (0..c).map(|i| g.flow + i * e + j).collect())
                }
                Role::Member if g.members < 2 => (vec![], vec![]),
                Role::Member if g.last.3 == id => (vec![], vec![g.flow]),
                Role::Member => (vec![g.flow], vec![]),
            }
        })
        .collect();
    (flows, next)
}

/// Every flow id is started by exactly one item and ended by exactly one: the arrows, as
/// (from, to) item pairs.
fn arrows(flows: &[Ends]) -> Vec<(usize, usize)> {
    let mut ends: BTreeMap<u64, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (k, (out, into)) in flows.iter().enumerate() {
        out.iter().for_each(|&f| ends.entry(f).or_default().0.push(k));
        into.iter().for_each(|&f| ends.entry(f).or_default().1.push(k));
    }
    let mut arrows: Vec<(usize, usize)> = ends
        .into_iter()
        .map(|(f, (from, to))| {
            assert!(from.len() == 1 && to.len() == 1, "flow {f}: from {from:?} to {to:?}");
            (from[0], to[0])
        })
        .collect();
    arrows.sort();
    arrows
}

/// Each cause of a directed group with `causes` causes and `effects` effects, spread over
/// two processes of two threads each, has one arrow to each effect; so do the causes and
/// effects of `others` more groups met in between.
fn directed(causes: usize, effects: usize, others: u64) {
    let mut items: Vec<Item> = Vec::new();
    for k in 0..causes.max(effects) {
        if k < causes {
            items.push((0, k % 2, 3, 77, Role::Cause, k as u64));
        }
        if k < effects {
            items.push((1, k % 2, 3, 77, Role::Effect, k as u64));
        }
        let other = 1000 + k as u64 % others.max(1);
        if others > 0 {
            items.push((0, 1, 3, other, Role::Cause, 0));
            items.push((1, 0, 3, other, Role::Effect, 0));
        }
    }
    // A group of causes only, and a key's group without the other key's.
    items.extend([(1, 0, 3, 78, Role::Cause, 0), (0, 1, 4, 77, Role::Effect, 0)]);
    items.sort_by_key(|it| it.0);
    let flows = flows(&[2, 2], &items);
    let group = |v: u64| move |(_, it): &(usize, &Item)| it.3 == v && it.2 == 3;
    let mut want = Vec::new();
    for v in [77].into_iter().chain((0..others).map(|o| 1000 + o)) {
        let members: Vec<(usize, &Item)> = items.iter().enumerate().filter(group(v)).collect();
        for (c, _) in members.iter().filter(|(_, it)| it.4 == Role::Cause) {
            want.extend(members.iter().filter(|(_, it)| it.4 == Role::Effect).map(|(e, _)| (*c, *e)));
        }
    }
    want.sort();
    assert_eq!(arrows(&flows), want);
    for (k, it) in items.iter().enumerate() {
        if it.3 == 78 || it.2 == 4 {
            assert_eq!(flows[k], (vec![], vec![]), "{it:?}");
        }
    }
}

#[test]
fn each_cause_has_one_arrow_to_each_effect() {
    directed(1, 1, 0);
    directed(3, 2, 0);
    directed(5, 4, 3);
}

#[test]
fn a_large_group_is_noted_only_up_to_its_limit() {
    let n = QUEUED as usize;
    directed(n / 2 + 3, n / 2 + 4, 2);
    directed(1, 2 * n, 0);
    directed(2 * n, 1, 1);
    // One thread's items of one group: QUEUED noted, the rest counted.
    let mut groups = Groups::default();
    groups.process();
    groups.thread();
    (0..3 * n).for_each(|id| groups.add(0, (0, 5), Role::Cause, id as u64, || 0));
    assert_eq!(groups.parts.iter().map(Vec::len).sum::<usize>(), n);
    let Correlations { queues, large } = groups.plan(&mut 1, &RANK, 2);
    // Every member of a large group is looked up: one run of them.
    assert_eq!(queues[0][0].entries, [Flows::large(n as u64)]);
    assert_eq!(large.len(), 1);
}

#[test]
fn many_small_groups_are_all_noted() {
    // More groups than the cache holds, each of a cause and an effect on two threads.
    let n = 4 * SETS as u64;
    let items: Vec<Item> = (0..n)
        .map(|v| (0, 0, 1, v.wrapping_mul(0x9e37_79b9_7f4a_7c15), Role::Cause, v))
        .chain((0..n).map(|v| (0, 1, 1, v.wrapping_mul(0x9e37_79b9_7f4a_7c15), Role::Effect, v)))
        .collect();
    let flows = flows(&[2], &items);
    let want: Vec<(usize, usize)> = (0..n as usize).map(|v| (v, n as usize + v)).collect();
    assert_eq!(arrows(&flows), want);
}

/// One flow through an undirected group's members in time order: the latest (by time,
/// process, thread, then record order), whether noted or counted, ends it; the others
/// start it.
fn undirected(times: &[u64]) {
    let items: Vec<Item> =
        times.iter().enumerate().map(|(k, &ns)| (k % 2, 0, 1, 9, Role::Member, ns)).collect();
    let mut items = items;
    items.sort_by_key(|it| it.0);
    let flows = flows(&[1, 1], &items);
    let last = (0..items.len()).max_by_key(|&k| (items[k].5, items[k].0, k)).unwrap();
    let flow = flows[last].1.clone();
    assert_eq!(flow.len(), 1);
    for (k, (out, into)) in flows.iter().enumerate() {
        if k == last {
            assert!(out.is_empty());
        } else {
            assert_eq!((out, into.is_empty()), (&flow, true), "member {k}");
        }
    }
}

#[test]
fn an_undirected_group_ends_at_its_latest_member() {
    undirected(&[5, 9, 7]);
    undirected(&[9, 9, 3]);
    let mut times: Vec<u64> = (0..3 * QUEUED as u64).map(|k| (k * 7919) % 1000).collect();
    undirected(&times);
    times.push(2000);
    undirected(&times);
    times.insert(3, 3000);
    undirected(&times);
    // A group of one: no flow.
    assert_eq!(flows(&[1], &[(0, 0, 1, 9, Role::Member, 0)]), vec![(vec![], vec![])]);
}

#[test]
fn flows_are_numbered_as_a_sorted_table_numbers_them() {
    // Keys of different names (0 and 3 directed, 1 undirected), values all over their range and
    // small ones, groups of every size: a few large, many more than the cache holds.
    let mut x = 0x5741_4646u64;
    let mut random = move |n: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    let mut items: Vec<Item> = Vec::new();
    for p in 0..2 {
        for _ in 0..12_000 {
            let key = [0, 1, 3][random(3) as usize];
            let value = match random(10) {
                0 => 0,
                1 => 40 + random(50),
                _ => random(6000).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            };
            let role = match (key, random(2)) {
                (1, _) => Role::Member,
                (_, 0) => Role::Cause,
                _ => Role::Effect,
            };
            items.push((p, random(3) as usize, key, value, role, random(1000)));
        }
    }
    let flows = flows(&[3, 3], &items);
    assert!(flows.iter().any(|(out, into)| out.len() > QUEUED as usize || into.len() > QUEUED as usize));
}
