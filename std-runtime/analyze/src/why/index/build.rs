//! Building the index: each file read once, in the order given, by the first reading's sink
//! (`pass.rs`), then what is known across files put in order: runs by id, correlation entries
//! by group, matching by order decided, the symptom picked.

use super::{
    pass::{ByName, Pass, Shared},
    FileIndex, Index,
};
use crate::{
    decode::run::{decode_checkpointed, final_calibration},
    matching::{Matching, Rank, Seen, Tally},
    reader::Warning,
    why::select::{closest, Selector, WhyError},
    Error,
};
use std::{collections::HashMap, path::Path};

/// What the first reading picks besides: the symptom.
pub(in crate::why) type Want = Selector;

/// What building found: the index, matching by order decided (nothing when `match_by_order`
/// is off), the keys of each matched name (file, order key), and the symptom's id.
pub(in crate::why) struct Built {
    pub(in crate::why) index: Index,
    pub(in crate::why) matching: Matching,
    pub(in crate::why) matched_keys: HashMap<String, Vec<(usize, u32)>>,
    pub(in crate::why) symptom: Result<u64, WhyError>,
    pub(in crate::why) warnings: Vec<Warning>,
}

/// Reads `paths` once each into an index, with a checkpoint every `every` bytes of frames,
/// picking the symptom `want` selects.
pub(in crate::why) fn build<P: AsRef<Path>>(
    paths: &[P],
    want: &Want,
    match_by_order: bool,
    every: u64,
) -> Result<Built, Error> {
    let mut shared = Shared::default();
    match want {
        Selector::Name { name, nth } => {
            shared.by_name = Some(ByName {
                name: name.clone(),
                nth: *nth,
                events: Default::default(),
                spans: Default::default(),
            })
        }
        Selector::FirstNan => shared.first_nan = Some(None),
        Selector::Id(_) => {}
    }
    let (mut files, mut earliest, mut window_base, mut warnings) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (number, path) in paths.iter().enumerate() {
        let path = path.as_ref();
        let (file, first, w) = read(path, number as u32, every, &mut shared)?;
        window_base.push(shared.windows);
        shared.windows += file.checkpoints.len() as u32;
        files.push(file);
        earliest.push(first);
        warnings.extend(w);
    }
    let mut runs = std::mem::take(&mut shared.runs);
    runs.sort_unstable_by_key(|r| (r.first, r.file, r.thread, r.ordinal));
    let overlapping = runs.windows(2).any(|w| {
        w[0].first.wrapping_add(w[0].len) > w[1].first || w[0].first.checked_add(w[0].len).is_none()
    });
    let mut corr = std::mem::take(&mut shared.corr);
    corr.sort_unstable();
    corr.dedup();
    corr.shrink_to_fit();
    let mut whole_ids = HashMap::new();
    for (f, file) in files.iter().enumerate() {
        for (i, w) in file.whole.iter().enumerate().filter(|(_, w)| w.id != 0) {
            whole_ids.insert(w.id, (f as u32, i as u32));
        }
    }
    let index = Index {
        files,
        runs,
        overlapping,
        whole_ids,
        names: std::mem::take(&mut shared.names),
        groups: std::mem::take(&mut shared.groups),
        corr,
        window_base,
        earliest,
    };
    let (matching, matched_keys) = if match_by_order { decide(&index) } else { Default::default() };
    let symptom = pick(&index, &shared, want);
    Ok(Built { index, matching, matched_keys, symptom, warnings })
}

/// Reads one file; redone in the rare case that its last calibration is not the one its
/// CLOCK frames were found to end with.
fn read(
    path: &Path,
    number: u32,
    every: u64,
    shared: &mut Shared,
) -> Result<(FileIndex, Option<u64>, Vec<Warning>), Error> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let stamp = (meta.len(), meta.modified().ok());
    let mut clock = final_calibration(path);
    loop {
        let (runs, corr) = (shared.runs.len(), shared.corr.len());
        let picks = (shared.by_name.as_ref().map(|b| (b.events.clone(), b.spans.clone())), shared.first_nan);
        let file = FileIndex {
            path: path.to_owned(),
            source: String::new(),
            header: Default::default(),
            cal: waffle_wire::Header::default().calibration,
            stamp,
            threads: Vec::new(),
            normal: usize::MAX,
            checkpoints: Vec::new(),
            sites: Vec::new(),
            keys: Vec::new(),
            key_of: HashMap::new(),
            whole: Vec::new(),
        };
        let mut pass = Pass::new(shared, file, number, clock);
        let warnings = decode_checkpointed(path, &mut pass, every, &mut |pass, cp| pass.checkpoint(cp))?;
        match pass.calibration() {
            Ok(cal) => {
                let earliest = pass.earliest;
                let mut file = pass.file;
                file.cal = cal;
                file.normal = file.normal.min(file.threads.len());
                return Ok((file, earliest, warnings));
            }
            Err(last) => {
                clock = Some(last);
                shared.runs.truncate(runs);
                shared.corr.truncate(corr);
                if let (Some(b), (Some((events, spans)), _)) = (shared.by_name.as_mut(), picks.clone()) {
                    (b.events, b.spans) = (events, spans);
                }
                shared.first_nan = picks.1;
            }
        }
    }
}

/// Matching by order decided from every file's counts, and each matched name's order keys.
fn decide(index: &Index) -> (Matching, HashMap<String, Vec<(usize, u32)>>) {
    let mut tally = Tally::default();
    for (process, file) in index.files.iter().enumerate() {
        for k in file.keys.iter().filter(|k| k.count > 0) {
            let rank = Rank { process, field: k.rank.clone() };
            tally.add(&index.names.all[k.name as usize], rank, Seen::on(k.thread as usize, k.count));
        }
    }
    let matching = tally.decide();
    let mut keys: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
    for (f, file) in index.files.iter().enumerate() {
        for (i, k) in file.keys.iter().enumerate().filter(|(_, k)| k.count > 0) {
            let name = &index.names.all[k.name as usize];
            if matching.matched.contains_key(name) {
                keys.entry(name.clone()).or_default().push((f, i as u32));
            }
        }
    }
    (matching, keys)
}

/// The symptom's id, or why there is none.
fn pick(index: &Index, shared: &Shared, want: &Want) -> Result<u64, WhyError> {
    match want {
        Selector::Id(id) => index.place(*id).map(|_| *id).ok_or(WhyError::NoSuchId { id: *id }),
        Selector::FirstNan => shared.first_nan.flatten().map(|c| c.4).ok_or(WhyError::NoNan),
        Selector::Name { name, nth } => {
            let by = shared.by_name.as_ref().expect("asked for");
            let (heap, count) = if by.events.1 > 0 { &by.events } else { &by.spans };
            if *count == 0 {
                let names = shared.present.iter().map(|&n| index.names.all[n as usize].as_str());
                return Err(WhyError::NoSuchName { name: name.clone(), closest: closest(name, names, 5) });
            }
            match heap.peek() {
                Some(c) if *count > *nth => Ok(c.4),
                _ => Err(WhyError::NthOutOfRange { name: name.clone(), nth: *nth, count: *count }),
            }
        }
    }
}
