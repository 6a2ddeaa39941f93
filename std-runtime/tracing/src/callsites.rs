//! One waffle callsite per `tracing` callsite and shape, found without a lock.
//!
//! A `tracing` callsite is a `&'static Metadata`: name, target, file, line and field names,
//! but no field types (a value's type is known only when it is visited). So every field of the
//! waffle callsite is [`FieldType::Dynamic`] (the record carries a one-byte type before each
//! value), and the waffle callsite is registered at run time through [`waffle_std::dynamic`],
//! as the C and Python bindings register theirs.
//!
//! A waffle record holds a value for every field of its schema, while a `tracing` span or
//! event may leave fields out (`field::Empty`, or values recorded later). The schema is
//! therefore the set of fields present, and the key is `(metadata, present fields, role)`:
//! a callsite whose fields are always given (the common case) has one waffle callsite per
//! role. Registration takes a lock once per key; later lookups hash the key into a fixed
//! table of atomics written once under that lock, so the recording path takes no lock.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering},
        Mutex,
    },
};
use tracing_core::Metadata;
use waffle::{callsite::Kind, wire::FieldType};

/// What a waffle callsite records for a `tracing` callsite.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A span's begin, with the fields given at creation.
    Span = 0,
    /// An event, with its level as first field.
    Event = 1,
    /// Values recorded into a span after its creation (`Span::record`): an event in the span.
    Record = 2,
}

/// Slots of the lock-free table; keys beyond it (a program with thousands of callsite
/// shapes) go to the locked overflow map.
const SLOTS: usize = 4096;
/// Slots probed before a key is looked for in the overflow map.
const PROBES: usize = 8;

struct Slot {
    /// The metadata's address; 0 while the slot is free. Written last, with `Release`.
    meta: AtomicUsize,
    key: AtomicU64,
    /// The waffle callsite id plus one (0: registration failed; nothing is recorded).
    id: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array below
const FREE: Slot = Slot { meta: AtomicUsize::new(0), key: AtomicU64::new(0), id: AtomicU32::new(0) };
static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// Serialises registration and holds what did not fit in the table.
static OVERFLOW: Mutex<Option<HashMap<(usize, u64), u32>>> = Mutex::new(None);

fn pack(present: u64, role: Role) -> u64 {
    // `tracing` callsites have at most 32 fields, so the mask leaves room for the role.
    (present & 0xFFFF_FFFF) | (role as u64) << 32
}

fn home(meta: usize, key: u64) -> usize {
    let h = (meta as u64 ^ key.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 52) as usize % SLOTS
}

/// The waffle callsite id for `meta` in `role` with the fields of mask `present` (bit `i`:
/// the field of index `i`), registered on first use; `None` if it could not be registered.
#[inline]
pub(crate) fn id(meta: &'static Metadata<'static>, present: u64, role: Role) -> Option<u32> {
    let m = meta as *const Metadata<'static> as usize;
    let key = pack(present, role);
    let start = home(m, key);
    for i in 0..PROBES {
        let slot = &TABLE[(start + i) % SLOTS];
        match slot.meta.load(Ordering::Acquire) {
            0 => break,
            found if found == m && slot.key.load(Ordering::Relaxed) == key => {
                return slot.id.load(Ordering::Relaxed).checked_sub(1);
            }
            _ => {}
        }
    }
    register(meta, m, key, present, role)
}

#[cold]
#[inline(never)]
fn register(meta: &'static Metadata<'static>, m: usize, key: u64, present: u64, role: Role) -> Option<u32> {
    let mut overflow = OVERFLOW.lock().unwrap_or_else(|e| e.into_inner());
    let start = home(m, key);
    let mut free = None;
    for i in 0..PROBES {
        let slot = &TABLE[(start + i) % SLOTS];
        match slot.meta.load(Ordering::Acquire) {
            0 => {
                free = Some(slot);
                break;
            }
            found if found == m && slot.key.load(Ordering::Relaxed) == key => {
                return slot.id.load(Ordering::Relaxed).checked_sub(1); // registered meanwhile
            }
            _ => {}
        }
    }
    let map = overflow.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&(m, key)) {
        return id.checked_sub(1);
    }
    let id = describe(meta, present, role);
    let stored = id.map_or(0, |id| id + 1);
    match free {
        Some(slot) => {
            slot.key.store(key, Ordering::Relaxed);
            slot.id.store(stored, Ordering::Relaxed);
            // Publishes `key` and `id` to readers that see this address.
            slot.meta.store(m, Ordering::Release);
        }
        None => {
            map.insert((m, key), stored);
        }
    }
    id
}

/// Registers the waffle callsite: the span's or event's name, its target as module, file and
/// line, and the present fields (events lead with `level`).
fn describe(meta: &'static Metadata<'static>, present: u64, role: Role) -> Option<u32> {
    let mut fields: Vec<(&str, FieldType)> = Vec::new();
    if role == Role::Event {
        fields.push(("level", FieldType::Str));
    }
    for (i, f) in meta.fields().iter().enumerate() {
        if i < 64 && present & (1 << i) != 0 {
            fields.push((f.name(), FieldType::Dynamic));
        }
    }
    let kind = if role == Role::Span { Kind::Span } else { Kind::Event };
    waffle_std::dynamic::register(
        kind,
        meta.name(),
        meta.target(),
        meta.file().unwrap_or(""),
        meta.line().unwrap_or(0),
        &fields,
        "",
    )
}

/// The event that carries a `follows_from` link when the span is no longer its thread's
/// latest record (see the crate docs).
pub(crate) fn follows_from_event() -> Option<u32> {
    static ID: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        waffle_std::dynamic::register(Kind::Event, "follows_from", "waffle_tracing", "", 0, &[], "")
    })
}
