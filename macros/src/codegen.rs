//! The code every macro emits: one static callsite, then the guarded record.

use crate::args::{Extras, FieldSpec, Ty};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// Span or event.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Span,
    Event,
}

/// Emits the callsite static named `__WAFFLE_CALLSITE`; `line_span` decides which line
/// `line!()` reports.
pub fn callsite(
    kind: Kind,
    name: &str,
    fields: &[FieldSpec],
    correlate: &str,
    line_span: Span,
) -> TokenStream {
    let kind = match kind {
        Kind::Span => quote!(::waffle::__private::Kind::Span),
        Kind::Event => quote!(::waffle::__private::Kind::Event),
    };
    let field_descs = fields.iter().map(|f| {
        let fname = &f.name;
        let ty = format_ident!("{}", f.ty.variant());
        quote!(::waffle::__private::Field::new(#fname, ::waffle::__private::FieldType::#ty))
    });
    let line = quote_spanned!(line_span=> ::core::line!());
    quote! {
        #[::waffle::__private::linkme::distributed_slice(::waffle::__private::CALLSITES)]
        #[linkme(crate = ::waffle::__private::linkme)]
        static __WAFFLE_CALLSITE: ::waffle::__private::Callsite = ::waffle::__private::Callsite::new(
            #kind,
            #name,
            ::core::module_path!(),
            ::core::file!(),
            #line,
            &[#(#field_descs),*],
            #correlate,
        );
    }
}

/// Emits an expression that records the span begin (a `waffle::Span` guard) or the event (a
/// `waffle::EventId`). Field values are evaluated once, and only when recording is on.
pub fn record(kind: Kind, name: &str, fields: &[FieldSpec], extras: &Extras, line_span: Span) -> TokenStream {
    record_when(kind, name, fields, extras, line_span, &Guard::default())
}

/// What a record needs besides recording being on: a further condition (`tensor!` asks that
/// tensors be on) and statements run once it holds, before the field values.
#[derive(Default)]
pub struct Guard {
    pub condition: Option<TokenStream>,
    pub prelude: TokenStream,
}

/// [`record`], also requiring `guard`.
pub fn record_when(
    kind: Kind,
    name: &str,
    fields: &[FieldSpec],
    extras: &Extras,
    line_span: Span,
    guard: &Guard,
) -> TokenStream {
    let key = extras.correlate.as_ref().map_or(String::new(), |(k, _)| k.value());
    let callsite = callsite(kind, name, fields, &key, line_span);
    // Spans that point at each value (so a type error names the value, not the whole macro)
    // but keep the macro's own hygiene, so that the temporaries and `__waffle_w` resolve even
    // when the value's tokens come from another macro (`macro_rules! m { ($k:ident) => {
    // span!("s", $k) } }`).
    let spans: Vec<Span> =
        fields.iter().map(|f| Span::call_site().located_at(crate::args::span_of(&f.value))).collect();
    let temps: Vec<_> =
        spans.iter().enumerate().map(|(i, &span)| format_ident!("__waffle_f{}", i, span = span)).collect();
    let values = fields.iter().map(|f| &f.value);
    let encoders = fields.iter().zip(&temps).zip(&spans).map(|((f, t), &span)| {
        match f.ty {
            Ty::Dynamic => quote_spanned!(span=> ::waffle::__private::FieldValue::encode_dynamic(#t, __waffle_w);),
            ty => {
                let ty = format_ident!("{}", ty.variant());
                quote_spanned!(span=> ::waffle::__private::encode_typed::<{ ::waffle::__private::FieldType::#ty as u8 }, _>(#t, __waffle_w);)
            }
        }
    });
    let (begin, disabled, recorded) = match kind {
        Kind::Span => (
            quote!(::waffle::__private::span_begin),
            quote!(::waffle::Span::disabled()),
            quote!(!__waffle_r.id().is_null()),
        ),
        Kind::Event => (
            quote!(::waffle::__private::event),
            quote!(::waffle::EventId::NULL),
            quote!(!__waffle_r.is_null()),
        ),
    };
    let record = quote! {
        #begin(__waffle_state, &__WAFFLE_CALLSITE, &|__waffle_w: &mut ::waffle::__private::Writer<'_>| {
            let _ = &__waffle_w;
            #(#encoders)*
        })
    };
    let body = if extras.causes.is_empty() && extras.correlate.is_none() {
        record
    } else {
        // Causes and the correlation value are evaluated before the record, and written right
        // after it (they attach to the latest span or event of the thread).
        let causes = extras.causes.iter().map(|c| {
            let span = Span::call_site().located_at(crate::args::span_of(c));
            quote_spanned!(span=> &(#c) as &dyn ::waffle::__private::Causes)
        });
        let cause_temps: Vec<_> =
            (0..extras.causes.len()).map(|i| format_ident!("__waffle_c{}", i)).collect();
        // A root that names causes is kept or dropped by sampling as they were.
        let follow = if cause_temps.is_empty() {
            quote!()
        } else {
            quote!(::waffle::__private::follow(__waffle_state, &[#(#cause_temps),*]);)
        };
        let (corr_let, corr_write) = match &extras.correlate {
            Some((_, v)) => (
                quote!(let __waffle_corr: u64 = (#v) as u64;),
                quote!(::waffle::__private::correlate(__waffle_state, __waffle_corr);),
            ),
            None => (quote!(), quote!()),
        };
        quote! {
            #(let #cause_temps = #causes;)*
            #corr_let
            #follow
            let __waffle_r = #record;
            if #recorded {
                #(::waffle::__private::link(__waffle_state, #cause_temps);)*
                #corr_write
            }
            __waffle_r
        }
    };
    let condition = guard.condition.as_ref().map(|c| quote!(&& #c));
    let prelude = &guard.prelude;
    quote! {{
        #callsite
        let __waffle_state = ::waffle::__private::state();
        if ::waffle::__private::COMPILED_IN && __waffle_state != 0 #condition {
            #prelude
            #(let #temps = &(#values);)*
            #body
        } else {
            #disabled
        }
    }}
}
