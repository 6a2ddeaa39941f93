//! What a callsite is to `diff` (a kernel, a step marker, a tensor fingerprint, or nothing),
//! worked out once per callsite from its schema, and the field values read by index.

use super::names::Names;
use crate::{decode::Fields, model::Callsite};
use waffle_wire::{reserved, FieldType, Kind};

/// What a callsite is to the diff, worked out the first time it is met.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Role {
    /// Not met yet.
    Unknown,
    /// A span: a kernel, and a step marker when it has a `step` field (its index); where its
    /// launching host operation's name is (`reserved::LAUNCH_OP`).
    Kernel { name: u32, step_field: Option<u16>, op_field: Option<u16> },
    /// A tensor fingerprint: where its fields are.
    Tensor(TensorFields),
    /// Any other event.
    Other,
}

/// Where a tensor fingerprint's reserved fields are in its schema.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TensorFields {
    pub(crate) event_name: u32,
    pub(crate) name: Option<u16>,
    pub(crate) hash: u16,
    pub(crate) rms: Option<u16>,
    pub(crate) nan: Option<u16>,
    pub(crate) pinf: Option<u16>,
    pub(crate) ninf: Option<u16>,
}

/// What callsite `c` is (names interned in `names`).
pub(crate) fn role_of(c: &Callsite, names: &mut Names) -> Role {
    // A schema holds at most a few hundred fields (a callsite frame is bounded); beyond
    // u16::MAX a field is not looked for.
    let find = |key: &str| c.field_index(key).and_then(|i| u16::try_from(i).ok());
    match c.kind {
        Kind::Span => {
            let step_field = find(reserved::STEP).filter(|&i| {
                matches!(c.fields[usize::from(i)].ty, FieldType::U64 | FieldType::I64 | FieldType::Dynamic)
            });
            Role::Kernel { name: names.intern(&c.name), step_field, op_field: find(reserved::LAUNCH_OP) }
        }
        _ => match find(reserved::tensor::HASH) {
            Some(hash) => Role::Tensor(TensorFields {
                event_name: names.intern(&c.name),
                name: find(reserved::tensor::NAME),
                hash,
                rms: find(reserved::tensor::RMS),
                nan: find(reserved::tensor::NAN),
                pinf: find(reserved::tensor::POS_INF),
                ninf: find(reserved::tensor::NEG_INF),
            }),
            None => Role::Other,
        },
    }
}

/// Field `i` as an integer (a u64 above `i64::MAX` saturates).
pub(crate) fn int(fields: &Fields, i: Option<u16>) -> Option<i64> {
    let (types, words, _) = fields.raw();
    let i = usize::from(i?);
    match (types.get(i)?, words.get(i)?) {
        (FieldType::U64, &w) => Some(i64::try_from(w).unwrap_or(i64::MAX)),
        (FieldType::I64, &w) => Some(w as i64),
        _ => None,
    }
}

pub(crate) fn float(fields: &Fields, i: Option<u16>) -> f64 {
    let (types, words, _) = fields.raw();
    let i = i.map(usize::from);
    match (i.and_then(|i| types.get(i)), i.and_then(|i| words.get(i))) {
        (Some(FieldType::F64), Some(&w)) => f64::from_bits(w),
        _ => f64::NAN,
    }
}

pub(crate) fn text(fields: &Fields, i: Option<u16>) -> Option<&str> {
    let (types, words, text) = fields.raw();
    let i = usize::from(i?);
    let (ty, w) = (types.get(i)?, *words.get(i)?);
    (*ty == FieldType::Str).then(|| text.get((w >> 32) as usize..w as u32 as usize)).flatten()
}
