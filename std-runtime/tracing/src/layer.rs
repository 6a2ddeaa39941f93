//! The layer: each `tracing` notification as waffle records (the mapping is in the crate docs).

use crate::{
    callsites::{self, Role},
    entered,
    fields::{with_values, Values},
    spans::{self, Recorded},
};
use std::sync::atomic::{AtomicU64, Ordering};
use tracing_core::{
    span::{Attributes, Id, Record},
    Event, Metadata, Subscriber,
};
use tracing_subscriber::{layer::Context, registry::LookupSpan, Layer};
use waffle::{
    local::{with_local, Local},
    runtime,
    wire::tag,
};

/// A `tracing_subscriber` layer that records spans and events through waffle; made by
/// [`layer`](crate::layer).
#[derive(Clone, Copy, Debug)]
pub struct WaffleLayer {
    /// Mixed into `tracing` span ids: two subscribers alive at once (a scoped one beside the
    /// global one) number their spans independently, and the table of live spans is shared.
    /// The first layer's is 0.
    salt: u64,
}

impl WaffleLayer {
    /// A layer.
    pub fn new() -> WaffleLayer {
        static LAYERS: AtomicU64 = AtomicU64::new(0);
        let n = LAYERS.fetch_add(1, Ordering::Relaxed);
        WaffleLayer { salt: n.wrapping_mul(0x9E37_79B9_7F4A_7C15) }
    }

    /// The key of span `id` in the table of live spans and the thread's entered spans.
    #[inline(always)]
    fn key(&self, id: &Id) -> u64 {
        id.into_u64() ^ self.salt
    }
}

impl Default for WaffleLayer {
    fn default() -> WaffleLayer {
        WaffleLayer::new()
    }
}

/// The waffle span `span` was recorded as, if it was: from the table of `spans`, or from
/// the registry's extensions for a span that did not fit there.
fn recorded<S>(key: u64, ctx: &Context<'_, S>, span: &Id) -> Option<Recorded>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    spans::get(key).or_else(|| in_extensions(ctx, span))
}

#[cold]
fn in_extensions<S>(ctx: &Context<'_, S>, span: &Id) -> Option<Recorded>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    if !spans::overflowed() {
        return None;
    }
    ctx.span(span)?.extensions().get::<Recorded>().copied()
}

/// The waffle id of `span` if it was recorded in session `state`.
fn recorded_in<S>(layer: &WaffleLayer, ctx: &Context<'_, S>, span: &Id, state: u32) -> Option<u64>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    recorded(layer.key(span), ctx, span).filter(|r| r.epoch == state).map(|r| r.id)
}

/// Runs `f` with `parent` (a waffle span id) entered on this thread, if there is one.
fn under<R>(l: &mut Local, state: u32, parent: Option<u64>, f: impl FnOnce(&mut Local) -> R) -> R {
    let prev = parent.and_then(|p| l.enter(state, p));
    let r = f(l);
    if let Some(prev) = prev {
        l.exit(state, prev);
    }
    r
}

/// Records an event of `meta` with the collected `values` under `parent` (or the thread's
/// current span); its level leads the fields of a [`Role::Event`].
fn record_event(
    state: u32,
    meta: &'static Metadata<'static>,
    role: Role,
    values: &mut Values,
    parent: Option<u64>,
) {
    let Some(cs) = callsites::id(meta, values.present(), role) else { return };
    let level = meta.level().as_str();
    let lead = role == Role::Event;
    with_local(|l| {
        under(l, state, parent, |l| {
            l.record(state, tag::EVENT, cs, &|w| {
                if lead {
                    waffle::FieldValue::encode(level, w);
                }
                values.write(w)
            })
        })
    });
}

impl<S> Layer<S> for WaffleLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    /// A span begins and is at once detached from the thread: `SPAN_BEGIN` then `DETACH`.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let state = runtime::state();
        if state == 0 {
            return;
        }
        let parent = attrs.parent().and_then(|p| recorded_in(self, &ctx, p, state));
        let meta = attrs.metadata();
        let wid = with_values(|values| {
            attrs.record(values);
            let cs = callsites::id(meta, values.present(), Role::Span)?;
            with_local(|l| {
                under(l, state, parent, |l| {
                    let (wid, prev) = l.begin(state, cs, &|w| values.write(w));
                    if wid != 0 {
                        l.detach(state, wid, prev);
                    }
                    wid
                })
            })
        })
        .flatten()
        .unwrap_or(0);
        if wid == 0 {
            return;
        }
        let r = Recorded { id: wid, epoch: state };
        if !spans::insert(self.key(id), r) {
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(r);
            }
        }
    }

    /// Values recorded after creation: an event named after the span, inside it.
    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let state = runtime::state();
        if state == 0 {
            return;
        }
        let Some(wid) = recorded_in(self, &ctx, span, state) else { return };
        let Some(meta) = ctx.metadata(span) else { return };
        with_values(|v| {
            values.record(v);
            if v.present() != 0 {
                record_event(state, meta, Role::Record, v, Some(wid));
            }
        });
    }

    /// `span` caused by `follows`: a link from `span` when it is still its thread's latest
    /// record, else an event `follows_from` inside `span` carrying the link.
    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        let state = runtime::state();
        if state == 0 {
            return;
        }
        let (Some(a), Some(b)) =
            (recorded_in(self, &ctx, span, state), recorded_in(self, &ctx, follows, state))
        else {
            return;
        };
        let carrier = callsites::follows_from_event();
        with_local(|l| {
            if l.latest() == a {
                l.link(state, b);
            } else if let Some(cs) = carrier {
                under(l, state, Some(a), |l| {
                    if l.record(state, tag::EVENT, cs, &|_| {}) != 0 {
                        l.link(state, b);
                    }
                });
            }
        });
    }

    /// An `EVENT` with the level and the fields, under the explicit parent if it has one.
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let state = runtime::state();
        if state == 0 {
            return;
        }
        let parent = event.parent().and_then(|p| recorded_in(self, &ctx, p, state));
        with_values(|v| {
            event.record(v);
            record_event(state, event.metadata(), Role::Event, v, parent);
        });
    }

    /// `ENTER`: the span is the parent of what this thread records until the exit.
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let state = runtime::state();
        if state == 0 {
            return;
        }
        if let Some(wid) = recorded_in(self, &ctx, id, state) {
            entered::enter(self.key(id), wid, state);
        }
    }

    /// `EXIT`, restoring what was current before the enter.
    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        entered::exit(self.key(id));
    }

    /// `ASYNC_END` of the span by id, from the thread that drops its last handle.
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(r) = spans::remove(self.key(&id)).or_else(|| in_extensions(&ctx, &id)) else { return };
        if let Some(state) = entered::state_for(r.epoch) {
            with_local(|l| l.async_end(state, r.id));
        }
    }
}
