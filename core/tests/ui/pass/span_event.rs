//! `span!` and `event!` with every accepted field form and value type.

use waffle::{EventId, Span, SpanId};

// Field values and keys handed in by a `macro_rules!` macro resolve in the caller's scope.
macro_rules! traced {
    ($key:ident) => {
        waffle::span!("from_macro", $key)
    };
    ($name:literal, $value:expr) => {
        waffle::event!($name, value = $value, typed = $value as u64)
    };
}

fn main() {
    // No fields.
    let bare: Span = waffle::span!("bare");

    // `key = expr` for each supported value type, typed and untyped (dynamic) alike.
    let count: u64 = 40;
    let label = String::from("grid");
    let s = waffle::span!(
        "typed",
        a = 7u64,
        b = count + 2,
        c = -3,
        d = 5i32,
        e = 0.5,
        f = 2.0f64 * 3.0,
        g = true,
        h = count > 3,
        i = "literal",
        j = label.as_str(),
        k = label.clone(),
        l = &label,
        m = String::from("temporary"),
        n = count as u32,
    );

    // The `key` shorthand: a variable of that name.
    let cells = 4096u64;
    let residual = 1e-9f64;
    let converged = false;
    let _short = waffle::span!("shorthand", cells, residual, converged, label);

    // A quoted key, for names that are not identifiers; a trailing comma.
    let _quoted = waffle::span!("quoted", "grid.cells" = cells, "with space" = 1.5,);

    // `event!` returns the event's id; `span.id()` the span's.
    let ev: EventId = waffle::event!("converged", residual = 1e-9, ok = true);
    let plain: EventId = waffle::event!("tick");
    let id: SpanId = s.id();

    let _m = traced!(cells);
    let _e: EventId = traced!("from_macro_event", cells + 1);

    // With no runtime installed nothing is recorded and every id is null.
    assert!(ev.is_null() && plain.is_null() && id.is_null() && bare.id().is_null());
    drop(s);
}
