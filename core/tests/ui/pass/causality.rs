// Causal links, correlation, contexts and async spans, as users write them.
use waffle::{Context, EventId, Instrument, SpanId};

#[waffle::instrument(caused_by = cause, correlate = ("step", i))]
fn linked(i: u64, cause: EventId) {}

#[waffle::instrument(caused_by = [a, b])]
fn two_causes(a: SpanId, b: EventId) {}

#[waffle::instrument(skip_all)]
async fn fetch(shard: u64) -> u64 {
    shard + 1
}

fn main() {
    let cause: EventId = waffle::event!("input has NaN", rank = 1u64);
    let span = waffle::span!("allreduce", caused_by = [cause], correlate = ("allreduce", 7u32), count = 3u64);
    let sid: SpanId = span.id();
    let maybe: Option<EventId> = None;
    let many = vec![cause, cause];
    let _e = waffle::event!("symptom", caused_by = [sid, maybe], caused_by = many.as_slice());
    linked(1, cause);
    two_causes(sid, cause);

    let ctx = Context::current();
    std::thread::spawn(move || {
        let _g = ctx.enter();
        let _w = waffle::span!("worker");
    })
    .join()
    .unwrap();
    let header: String = Context::current().to_traceparent();
    let _remote = Context::from_traceparent(&header).map(|c| c.enter());

    let fut = async { 1 }.instrument(waffle::span!("task"));
    let _ = (fut, fetch(3));
}
