//! C callsites: registered once at run time, then recorded by their cached id.
//!
//! A `WAFFLE_SPAN` or `WAFFLE_EVENT` expands to a `static waffle_callsite_t` holding the name,
//! function, file and line. Its first call registers it with
//! [`waffle_std::dynamic::register`], with the keys and value types of that call's key-values
//! as the schema, and stores the id (plus one) in the struct's `cached_id`. Every later call
//! loads that id, checks the call's key-value kinds against the layout of the first call kept
//! here (a byte compare per key-value: a call whose kinds differ — possible through the plain
//! function API, never through the macros — would otherwise write values the decoder reads with
//! the wrong types; it is recorded under a registration of its own) and encodes values. Nothing
//! on that path hashes, locks, allocates or copies a name.
//!
//! The schemas live in an append-only table indexed by callsite id, so that a `cached_id` that
//! is garbage (a struct that was not zeroed) is recognised as unregistered rather than trusted.

use crate::{
    cstr,
    status::waffle_status_t::{self, *},
    types::{waffle_callsite_t, waffle_kv_kind_t as K, waffle_kv_t},
};
use std::{
    borrow::Cow,
    ptr,
    sync::{
        atomic::{AtomicPtr, AtomicU32, Ordering},
        OnceLock,
    },
};
use waffle::{callsite::Kind, wire::FieldType};
use waffle_std::dynamic::MAX_DYNAMIC;

/// The schema a callsite id was registered with.
pub(crate) struct Registered {
    kind: Kind,
    /// Field type codes, in order.
    kinds: Box<[u8]>,
    /// Whether it has a correlation key.
    correlated: bool,
    /// The kind of every key-value of the call that registered it, causes and correlations
    /// included: the fast path compares a call with this, one byte per key-value.
    layout: Box<[u8]>,
    /// Whether that call had causes and strings, and where its first correlation was.
    causes: bool,
    strings: bool,
    correlate_at: Option<usize>,
}

const PAGE_BITS: usize = 10;
const PAGE: usize = 1 << PAGE_BITS;
type Page = [OnceLock<Registered>; PAGE];

/// Schemas by callsite id, in pages allocated on first use and never freed. Run-time ids follow
/// the image's linked callsites and number at most `MAX_DYNAMIC`; the table covers twice that,
/// and an id beyond it only ever takes the slow path.
static PAGES: [AtomicPtr<Page>; 2 * MAX_DYNAMIC / PAGE] =
    [const { AtomicPtr::new(ptr::null_mut()) }; 2 * MAX_DYNAMIC / PAGE];

#[inline(always)]
fn lookup(id: u32) -> Option<&'static Registered> {
    let i = id as usize;
    let page = PAGES.get(i >> PAGE_BITS)?.load(Ordering::Acquire);
    // SAFETY: a non-null page pointer comes from `Box::into_raw` in `insert` and is never freed
    // or written through except by `OnceLock`'s own synchronised `set`.
    let page = unsafe { page.as_ref() }?;
    page[i & (PAGE - 1)].get()
}

fn insert(id: u32, registered: Registered) {
    let i = id as usize;
    let Some(slot) = PAGES.get(i >> PAGE_BITS) else { return };
    let mut page = slot.load(Ordering::Acquire);
    if page.is_null() {
        // Built on the heap: a page is tens of KiB, too much for a small thread stack.
        let fresh: Box<Page> = match (0..PAGE).map(|_| OnceLock::new()).collect::<Box<[_]>>().try_into() {
            Ok(b) => b,
            Err(_) => return,
        };
        let fresh = Box::into_raw(fresh);
        page = match slot.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(existing) => {
                // SAFETY: `fresh` came from `Box::into_raw` above and was never published.
                drop(unsafe { Box::from_raw(fresh) });
                existing
            }
        };
    }
    // SAFETY: as in `lookup`: published pages live forever.
    let page = unsafe { &*page };
    // A second registration of the same id has the same description, hence the same field
    // kinds; the first call's layout is kept (a call laid out otherwise takes the slow path).
    let _ = page[i & (PAGE - 1)].set(registered);
}

/// What a call's key-values carry besides field values.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Extras {
    /// Some key-value is a cause.
    pub causes: bool,
    /// The value of the first correlation key-value.
    pub correlation: Option<u64>,
    /// Some key-value is a string field.
    pub strings: bool,
}

/// Checks every kind of `kvs` and, given a schema, whether the call fits it.
pub(crate) fn scan(
    kvs: &[waffle_kv_t],
    schema: Option<&Registered>,
) -> Result<(Extras, bool), waffle_status_t> {
    let mut extras = Extras::default();
    let expected: &[u8] = schema.map_or(&[], |r| &r.kinds);
    let mut fields = 0;
    let mut fits = true;
    for kv in kvs {
        match kv.kind {
            1..=5 => {
                fits &= expected.get(fields) == Some(&(kv.kind as u8));
                fields += 1;
                extras.strings |= kv.kind == K::WAFFLE_KV_KIND_STR as u32;
            }
            k if k == K::WAFFLE_KV_KIND_CAUSE as u32 => extras.causes = true,
            k if k == K::WAFFLE_KV_KIND_CORRELATE as u32 => {
                if extras.correlation.is_none() {
                    // SAFETY: a correlation's value is `u64`; every member of the union is
                    // plain data of which any bit pattern is a valid `u64`.
                    extras.correlation = Some(unsafe { kv.value.u64 });
                }
            }
            _ => return Err(WAFFLE_ERR_INVALID_ARGUMENT),
        }
    }
    let correlated = schema.is_some_and(|r| r.correlated);
    Ok((extras, fits && fields == expected.len() && correlated == extras.correlation.is_some()))
}

/// Name, function, file and line of a callsite.
pub(crate) struct Desc<'a> {
    pub name: Cow<'a, str>,
    pub function: Cow<'a, str>,
    pub file: Cow<'a, str>,
    pub line: u32,
}

/// The id to record a call of `kind` with `kvs` at `cs` under, and the call's extras.
///
/// The fast path — a registered callsite called as it was first called — is a load of the
/// cached id, a load of its schema and a compare of each key-value's kind; everything else
/// (first call, garbage cache, a call unlike the first, bad arguments) is [`resolve_slow`].
///
/// # Safety
/// `cs` is NULL or points to a `waffle_callsite_t` that is valid for the call, whose
/// `cached_id` nothing but this library writes after it was zeroed, and whose strings are NULL
/// or readable up to their NUL (bounded by [`cstr::MAX_TEXT`]). The keys of `kvs` likewise.
#[inline(always)]
pub(crate) unsafe fn resolve(
    cs: *mut waffle_callsite_t,
    kind: Kind,
    kvs: &[waffle_kv_t],
) -> Result<(u32, Extras), waffle_status_t> {
    if !cs.is_null() && cs.is_aligned() {
        // SAFETY: `cs` is non-null, aligned and valid (the caller's promise), so its
        // `cached_id` is an aligned `u32` that lives for the call, and the library only ever
        // accesses it atomically after the C program zeroed it.
        let cached =
            unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*cs).cached_id)) }.load(Ordering::Relaxed);
        let id = cached.wrapping_sub(1); // 0 (unregistered) becomes u32::MAX, never an id
        if let Some(extras) = lookup(id).filter(|r| r.kind == kind).and_then(|r| r.fits(kvs)) {
            return Ok((id, extras));
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { resolve_slow(cs, kind, kvs) }
}

impl Registered {
    /// The extras of `kvs` if it has the layout of the call that registered this schema.
    #[inline(always)]
    fn fits(&self, kvs: &[waffle_kv_t]) -> Option<Extras> {
        if kvs.len() != self.layout.len()
            || kvs.iter().zip(&*self.layout).any(|(kv, &k)| kv.kind != u32::from(k))
        {
            return None;
        }
        // SAFETY: a correlation's value is `u64`; every member of the union is plain data of
        // which any bit pattern is a valid `u64`.
        let correlation = self.correlate_at.and_then(|i| kvs.get(i)).map(|kv| unsafe { kv.value.u64 });
        Some(Extras { causes: self.causes, correlation, strings: self.strings })
    }
}

/// [`resolve`] when the fast path does not apply: checks the arguments and registers.
///
/// # Safety
/// As [`resolve`].
#[cold]
#[inline(never)]
unsafe fn resolve_slow(
    cs: *mut waffle_callsite_t,
    kind: Kind,
    kvs: &[waffle_kv_t],
) -> Result<(u32, Extras), waffle_status_t> {
    if cs.is_null() {
        return Err(WAFFLE_ERR_NULL);
    }
    if !cs.is_aligned() {
        return Err(WAFFLE_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: as in `resolve`.
    let cache = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*cs).cached_id)) };
    let cached = cache.load(Ordering::Acquire).wrapping_sub(1);
    let schema = lookup(cached);
    let (extras, fits) = scan(kvs, schema)?;
    if fits && schema.is_some_and(|r| r.kind == kind) {
        return Ok((cached, extras));
    }
    // SAFETY: `cs` is valid for reads (the caller's promise); its strings are NULL or readable.
    let desc = unsafe {
        Desc {
            name: cstr::text((*cs).name).ok_or(WAFFLE_ERR_NULL)?,
            function: cstr::text_or_empty((*cs).function),
            file: cstr::text_or_empty((*cs).file),
            line: (*cs).line,
        }
    };
    // SAFETY: the keys of `kvs` are NULL or readable (the caller's promise).
    let id = unsafe { register(&desc, kind, kvs, extras) }?;
    if schema.is_none() {
        // The first call (or a garbage cache) sets the schema; a later call that differs is
        // recorded under its own registration without replacing it.
        cache.store(id + 1, Ordering::Release);
    }
    Ok((id, extras))
}

/// Registers a callsite with the schema of `kvs` (whose kinds [`scan`] checked).
///
/// # Safety
/// The keys of `kvs` are NULL or readable up to their NUL (bounded by [`cstr::MAX_TEXT`]).
#[cold]
#[inline(never)]
pub(crate) unsafe fn register(
    desc: &Desc<'_>,
    kind: Kind,
    kvs: &[waffle_kv_t],
    extras: Extras,
) -> Result<u32, waffle_status_t> {
    let mut fields: Vec<(Cow<'_, str>, FieldType)> = Vec::with_capacity(kvs.len());
    let mut correlate = None;
    for kv in kvs {
        let value_type = if (1..=5).contains(&kv.kind) { FieldType::from_code(kv.kind as u8) } else { None };
        if let Some(ty) = value_type {
            // SAFETY: forwarded from the caller.
            fields.push((unsafe { cstr::text(kv.key) }.ok_or(WAFFLE_ERR_NULL)?, ty));
        } else if kv.kind == K::WAFFLE_KV_KIND_CORRELATE as u32 && correlate.is_none() {
            // SAFETY: forwarded from the caller.
            correlate = Some(unsafe { cstr::text(kv.key) }.ok_or(WAFFLE_ERR_NULL)?);
        }
    }
    let schema: Vec<(&str, FieldType)> = fields.iter().map(|(k, t)| (k.as_ref(), *t)).collect();
    let id = waffle_std::dynamic::register(
        kind,
        &desc.name,
        &desc.function,
        &desc.file,
        desc.line,
        &schema,
        correlate.as_deref().unwrap_or(""),
    )
    .ok_or(WAFFLE_ERR_CALLSITES_FULL)?;
    if lookup(id).is_none() {
        let kinds = fields.iter().map(|(_, t)| *t as u8).collect();
        // `scan` accepted every kind, so each fits a byte.
        let layout = kvs.iter().map(|kv| kv.kind as u8).collect();
        let correlate_at = kvs.iter().position(|kv| kv.kind == K::WAFFLE_KV_KIND_CORRELATE as u32);
        insert(
            id,
            Registered {
                kind,
                kinds,
                correlated: extras.correlation.is_some(),
                layout,
                causes: extras.causes,
                strings: extras.strings,
                correlate_at,
            },
        );
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::waffle_kv_value_t;

    fn kv(key: &'static std::ffi::CStr, kind: u32, v: u64) -> waffle_kv_t {
        waffle_kv_t { key: key.as_ptr(), kind, len: 0, value: waffle_kv_value_t { u64: v } }
    }

    #[test]
    fn the_first_call_sets_the_schema_and_a_different_call_gets_its_own_id() {
        let mut cs = waffle_callsite_t {
            name: c"unit-callsite".as_ptr(),
            function: c"f".as_ptr(),
            file: ptr::null(),
            line: 7,
            cached_id: 0,
        };
        let a = [kv(c"n", 1, 3), kv(c"", 16, 99), kv(c"grp", 17, 5)];
        // SAFETY: `cs` and the keys are valid.
        let (id, extras) = unsafe { resolve(&mut cs, Kind::Span, &a) }.unwrap();
        assert_eq!(cs.cached_id, id + 1);
        assert!(extras.causes);
        assert_eq!(extras.correlation, Some(5));
        // SAFETY: as above.
        assert_eq!(unsafe { resolve(&mut cs, Kind::Span, &a) }.unwrap().0, id);
        // Another value kind, or an event at the same callsite: another id, cache unchanged.
        let b = [kv(c"n", 2, 3), kv(c"grp", 17, 5)];
        // SAFETY: as above.
        let (other, _) = unsafe { resolve(&mut cs, Kind::Span, &b) }.unwrap();
        assert_ne!(other, id);
        // SAFETY: as above.
        let (event, _) = unsafe { resolve(&mut cs, Kind::Event, &a) }.unwrap();
        assert_ne!(event, id);
        assert_eq!(cs.cached_id, id + 1);
        // An unknown kind, and a garbage cache.
        let unknown = [kv(c"x", 9, 0)];
        // SAFETY: as above.
        let r = unsafe { resolve(&mut cs, Kind::Span, &unknown) };
        assert_eq!(r.err(), Some(WAFFLE_ERR_INVALID_ARGUMENT));
        cs.cached_id = 0xdead_beef;
        // SAFETY: as above.
        assert_eq!(unsafe { resolve(&mut cs, Kind::Span, &a) }.unwrap().0, id);
        assert_eq!(cs.cached_id, id + 1);
        // Every fresh callsite gets its own cached id, whatever was registered before it.
        let mut fresh = waffle_callsite_t { name: c"unit-fresh".as_ptr(), ..cs };
        fresh.cached_id = 0;
        // SAFETY: as above.
        let (fresh_id, _) = unsafe { resolve(&mut fresh, Kind::Event, &b) }.unwrap();
        assert_eq!(fresh.cached_id, fresh_id + 1);
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { resolve(ptr::null_mut(), Kind::Span, &a) }.err(), Some(WAFFLE_ERR_NULL));
    }
}
