//! The track a thread's sequence writes on: a thread track for an OS thread, and for a device
//! track (`waffle::Track`, a GPU queue) a plain track named after it under its process track,
//! since it is no thread of the process: Perfetto's UI lists it under the process, by name.
//!
//! A device track's slices come as the spans of that thread (`decode/track.rs`), already on the
//! host's clock and nested, so the writer treats them as any thread's; their launchers are
//! their first links, which become flows like any link.

use super::proto;
use crate::process::ThreadInfo;

/// The descriptor of `thread`'s track `uuid` under the process track `process`, given the pid
/// and tid written for it.
pub(super) fn thread_track(
    thread: &ThreadInfo,
    uuid: u64,
    process: u64,
    (pid, tid): (i32, i64),
) -> proto::TrackDescriptor {
    if thread.device {
        return proto::TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(process),
            name: Some(thread.name.clone()),
            ..Default::default()
        };
    }
    proto::TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: Some(process),
        thread: Some(proto::ThreadDescriptor {
            pid: Some(pid),
            tid: Some(tid),
            thread_name: (!thread.name.is_empty()).then(|| thread.name.clone()),
        }),
        ..Default::default()
    }
}
