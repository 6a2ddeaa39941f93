//! `#[instrument]`: the function's body runs inside a span named after the function, with its
//! arguments as fields.
//!
//! Options: `name = "..."`, `skip(a, b)`, `skip_all`, `fields(key = expr, ...)`.

use crate::{
    args::{check_fields, infer_type, Extras, FieldSpec},
    codegen::{self, Kind},
};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{
    ext::IdentExt,
    parse::{Parse, ParseStream},
    punctuated::Punctuated,
    FnArg, Ident, ItemFn, LitStr, Pat, Token,
};

#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    skip: Vec<Ident>,
    skip_all: bool,
    fields: Vec<FieldSpec>,
    extras: Extras,
}

impl Parse for Options {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut o = Options::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            match key.to_string().as_str() {
                "name" if o.name.is_none() => {
                    input.parse::<Token![=]>()?;
                    let name: LitStr = input.parse()?;
                    if name.value().is_empty() {
                        return Err(syn::Error::new(name.span(), "the name cannot be empty"));
                    }
                    o.name = Some(name);
                }
                "skip" => {
                    let content;
                    syn::parenthesized!(content in input);
                    for s in Punctuated::<Ident, Token![,]>::parse_terminated_with(&content, Ident::parse_any)? {
                        if s == "self" {
                            return Err(syn::Error::new(
                                s.span(),
                                "`self` is never recorded as a field, so it needs no `skip`; remove it",
                            ));
                        }
                        o.skip.push(s);
                    }
                }
                "skip_all" => o.skip_all = true,
                "fields" => {
                    let content;
                    syn::parenthesized!(content in input);
                    o.fields.extend(Punctuated::<FieldSpec, Token![,]>::parse_terminated(&content)?);
                }
                "caused_by" | "correlate" => {
                    input.parse::<Token![=]>()?;
                    let value: syn::Expr = input.parse()?;
                    o.extras.take(&key.to_string(), key.span(), &value)?;
                }
                "name" => return Err(syn::Error::new(key.span(), "`name` is given twice")),
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown option `{other}`; expected `name = \"..\"`, `skip(..)`, `skip_all`, `fields(..)`, `caused_by = ..` or `correlate = (..)`"),
                    ))
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(o)
    }
}

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(attr, item.clone()) {
        Ok(t) => t,
        // Keep the item as written, so that the error is the only one: its callers still
        // find it.
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(item);
            out
        }
    }
}

fn try_expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let opts: Options = syn::parse2(attr)?;
    let mut func: ItemFn = syn::parse2(item)?;
    let mut arg_names = Vec::new();
    let mut fields = Vec::new();
    for arg in &func.sig.inputs {
        let FnArg::Typed(pt) = arg else { continue }; // `self` is never a field
        let Pat::Ident(pi) = &*pt.pat else { continue }; // destructuring patterns have no name
        let ident = pi.ident.clone();
        arg_names.push(ident.to_string());
        if opts.skip_all || opts.skip.contains(&ident) {
            continue;
        }
        let ty = infer_type(&pt.ty);
        fields.push(FieldSpec {
            name: ident.to_string(),
            name_span: ident.span(),
            value: syn::parse_quote!(#ident),
            ty,
        });
    }
    for s in &opts.skip {
        if !arg_names.iter().any(|a| s == a) {
            return Err(syn::Error::new(s.span(), format!("`skip({s})` names no argument of this function")));
        }
    }
    fields.extend(opts.fields);
    check_fields(&fields)?;
    let name = opts.name.as_ref().map_or_else(|| func.sig.ident.to_string(), LitStr::value);
    let line_span: Span = func.sig.ident.span();
    let begin = codegen::record(Kind::Span, &name, &fields, &opts.extras, line_span);
    let body = &func.block;
    if func.sig.asyncness.is_some() {
        // The span opens at the first poll and follows the body's future across `.await`s
        // and threads.
        func.block = syn::parse_quote!({
            let __waffle_span = #begin;
            ::waffle::__private::Instrument::instrument(async move #body, __waffle_span).await
        });
        return Ok(quote!(#func));
    }
    func.block = syn::parse_quote!({
        let __waffle_span = #begin;
        #body
    });
    Ok(quote!(#func))
}
