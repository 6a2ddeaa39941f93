//! Procedural macros of [waffle](https://docs.rs/waffle): `span!`, `event!` and
//! `#[instrument]`. Use them through the `waffle` crate, which re-exports them; the generated
//! code refers to `::waffle::__private` only.
//!
//! Each expansion defines one `static` callsite (name, module, file, line, kind, field names and
//! types) in waffle's linker-section table and a few lines that encode the field values. The
//! parsing and checks live in [`args`], the emitted code in [`codegen`], one file per macro.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod codegen;
mod instrument;
mod record;
mod tensor;

use proc_macro::TokenStream;

/// Opens a span that ends when the returned guard is dropped. See `waffle::span!`.
#[proc_macro]
pub fn span(input: TokenStream) -> TokenStream {
    record::expand(input.into(), codegen::Kind::Span).into()
}

/// Records an event and returns its `EventId`. See `waffle::event!`.
#[proc_macro]
pub fn event(input: TokenStream) -> TokenStream {
    record::expand(input.into(), codegen::Kind::Event).into()
}

/// Wraps a function's body in a span named after it. See `waffle::instrument`.
#[proc_macro_attribute]
pub fn instrument(attr: TokenStream, item: TokenStream) -> TokenStream {
    instrument::expand(attr.into(), item.into()).into()
}

/// Records a tensor's fingerprint as an event and returns its `EventId`. See `waffle::tensor!`.
#[proc_macro]
pub fn tensor(input: TokenStream) -> TokenStream {
    tensor::expand_tensor(input.into()).into()
}

/// Opens a step span (`step`, with the step number as its first field). See `waffle::step!`.
#[proc_macro]
pub fn step(input: TokenStream) -> TokenStream {
    tensor::expand_step(input.into()).into()
}
