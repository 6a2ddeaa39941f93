//! Device tracks (`waffle::Track`) as device planes, the way xprof lays out a GPU or TPU
//! profile: a plane per device, named `/device:GPU:0`, and a line per track (queue, stream) of
//! that device, named by the track.
//!
//! The device is read from the track's name: its part before a ` / ` (`GPU 0 / stream 7` is a
//! stream of `GPU 0`), when that is a word and a number (`GPU 0`, `tpu:1`, `NPU-2`): the plane
//! `/device:<WORD>:<number>`, the word in capitals. Tracks named otherwise share the plane
//! `/device:CUSTOM:0`. A slice's stats are the host plane's, and its `correlation_id`, the
//! stat by which xprof ties a kernel to its launch, is set once every span is known
//! (`ties.rs`).

/// The plane of tracks whose name names no device.
pub(super) const CUSTOM_PLANE: &str = "/device:CUSTOM:0";

/// The stat that ties a device event to its launch (a host event with the same value).
pub(super) const CORRELATION_ID: &str = "correlation_id";

/// The device plane of the track named `track`.
pub(super) fn plane_name(track: &str) -> String {
    let device = track.split(" / ").next().unwrap_or(track).trim();
    let split = device.rfind(|c: char| !c.is_ascii_digit()).map(|i| device.split_at(i + 1));
    match split {
        Some((word, number)) if !number.is_empty() => {
            let word = word.trim_end_matches([' ', ':', '-', '_', '#']);
            if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric()) {
                return format!(
                    "/device:{}:{}",
                    word.to_ascii_uppercase(),
                    number.trim_start_matches('0').parse::<u64>().unwrap_or(0)
                );
            }
            CUSTOM_PLANE.to_owned()
        }
        _ => CUSTOM_PLANE.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_is_read_from_the_track_name() {
        assert_eq!(plane_name("GPU 0"), "/device:GPU:0");
        assert_eq!(plane_name("GPU 1 / stream 7"), "/device:GPU:1");
        assert_eq!(plane_name("tpu:3"), "/device:TPU:3");
        assert_eq!(plane_name("NPU-12"), "/device:NPU:12");
        assert_eq!(plane_name("gpu10"), "/device:GPU:10");
        assert_eq!(plane_name("copy engine"), CUSTOM_PLANE);
        assert_eq!(plane_name("7"), CUSTOM_PLANE);
        assert_eq!(plane_name("my gpu 2"), CUSTOM_PLANE);
    }
}
