//! `tensor!(name, data, shape = [..], key = value, ...)` and `step!(n, key = value, ...)`: an
//! event and a span whose leading fields are the reserved ones of `waffle::wire::reserved`
//! (kept in step with that module by hand: this crate does not depend on `waffle`).

use crate::{
    args::{check_fields, Extras, FieldSpec, Ty},
    codegen::{self, Guard, Kind},
};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{
    parse::{Parse, ParseStream},
    punctuated::Punctuated,
    spanned::Spanned,
    Expr, ExprLit, Lit, Token,
};

/// The reserved fields every tensor event leads with, their types, and the value each is written
/// from (expressions over the fingerprint `__waffle_fp`); `tensor.name` comes first, from the
/// macro's name argument.
const TENSOR_FIELDS: [(&str, Ty, &str); 10] = [
    ("tensor.dtype", Ty::Str, "__waffle_fp.dtype"),
    ("tensor.shape", Ty::Str, "__waffle_shape"),
    ("tensor.count", Ty::U64, "__waffle_fp.count"),
    ("tensor.hash", Ty::U64, "__waffle_fp.hash"),
    ("tensor.rms", Ty::F64, "__waffle_fp.rms"),
    ("tensor.min", Ty::F64, "__waffle_fp.min"),
    ("tensor.max", Ty::F64, "__waffle_fp.max"),
    ("tensor.nan", Ty::U64, "__waffle_fp.nan"),
    ("tensor.pinf", Ty::U64, "__waffle_fp.pos_inf"),
    ("tensor.ninf", Ty::U64, "__waffle_fp.neg_inf"),
];

/// The field names callers may not give themselves.
fn reserved(name: &str) -> bool {
    name == "tensor.name" || TENSOR_FIELDS.iter().any(|(n, _, _)| *n == name)
}

/// Parses the optional `, key = value, ...` tail.
fn tail(input: ParseStream) -> syn::Result<Vec<FieldSpec>> {
    if input.is_empty() {
        return Ok(Vec::new());
    }
    input.parse::<Token![,]>()?;
    Ok(Punctuated::<FieldSpec, Token![,]>::parse_terminated(input)?.into_iter().collect())
}

fn spec(name: &str, ty: Ty, value: Expr, span: Span) -> FieldSpec {
    FieldSpec { name: name.to_owned(), name_span: span, value, ty }
}

struct TensorInput {
    name: Expr,
    data: Expr,
    shape: Option<Expr>,
    fields: Vec<FieldSpec>,
    extras: Extras,
}

impl Parse for TensorInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let usage = "expected `tensor!(\"name\", &data)`, `tensor!(name, &data, shape = [..])` and fields";
        let name: Expr = input.parse().map_err(|e| syn::Error::new(e.span(), usage))?;
        input.parse::<Token![,]>().map_err(|e| syn::Error::new(e.span(), usage))?;
        let data: Expr = input.parse()?;
        let (fields, extras) = Extras::split(tail(input)?)?;
        let mut shape = None;
        let mut rest = Vec::new();
        for f in fields {
            if f.name == "shape" {
                if shape.replace(f.value).is_some() {
                    return Err(syn::Error::new(f.name_span, "`shape` is given twice"));
                }
            } else if reserved(&f.name) {
                return Err(syn::Error::new(
                    f.name_span,
                    format!("`{}` is written by `tensor!` itself", f.name),
                ));
            } else {
                rest.push(f);
            }
        }
        Ok(TensorInput { name, data, shape, fields: rest, extras })
    }
}

/// `tensor!`: an event named after the tensor when its name is a literal, else `tensor`.
pub fn expand_tensor(input: TokenStream) -> TokenStream {
    let i = match syn::parse2::<TensorInput>(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let site_name = match &i.name {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) if s.value().is_empty() => {
            return syn::Error::new(s.span(), "the name cannot be empty").to_compile_error()
        }
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => s.value(),
        _ => "tensor".to_owned(),
    };
    let span = i.name.span();
    let mut fields = vec![spec("tensor.name", Ty::Str, i.name.clone(), span)];
    for (name, ty, value) in TENSOR_FIELDS {
        fields.push(spec(name, ty, syn::parse_str(value).expect("a valid expression"), span));
    }
    fields.extend(i.fields);
    if let Err(e) = check_fields(&fields) {
        return e.to_compile_error();
    }
    let data = &i.data;
    let shape = match &i.shape {
        None => quote!(::waffle::__private::Shape::Count(__waffle_fp.count)),
        // An array literal: each dimension cast, so `[1, n]` works for any integer `n`.
        Some(Expr::Array(a)) => {
            let dims = a.elems.iter();
            quote!(::waffle::__private::Shape::Dims(&[#((#dims) as u64),*]))
        }
        // Bound first, so that a temporary (`vec![..]`) lives as long as the record.
        Some(_) => quote!(::waffle::__private::Shape::from(&__waffle_dims[..])),
    };
    let dims = match &i.shape {
        Some(Expr::Array(_)) | None => quote!(),
        Some(other) => quote!(let __waffle_dims = &(#other);),
    };
    let guard = Guard {
        condition: Some(quote!(::waffle::__private::tensors())),
        prelude: quote! {
            let __waffle_data: &[_] = &(#data)[..];
            let __waffle_fp = ::waffle::__private::Fingerprint::of(__waffle_data);
            #dims
            let __waffle_shape: ::waffle::__private::Shape<'_> = #shape;
        },
    };
    codegen::record_when(Kind::Event, &site_name, &fields, &i.extras, span, &guard)
}

struct StepInput {
    number: Expr,
    fields: Vec<FieldSpec>,
    extras: Extras,
}

impl Parse for StepInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let number: Expr =
            input.parse().map_err(|e| syn::Error::new(e.span(), "expected the step number: `step!(n)`"))?;
        let (fields, extras) = Extras::split(tail(input)?)?;
        Ok(StepInput { number, fields, extras })
    }
}

/// `step!`: a span named `step` whose first field is `step`, the number as a `u64`.
pub fn expand_step(input: TokenStream) -> TokenStream {
    let i = match syn::parse2::<StepInput>(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let n = &i.number;
    let span = n.span();
    let value: Expr = syn::parse_quote!(::waffle::__private::step_number(#n));
    let mut fields = vec![spec("step", Ty::U64, value, span)];
    fields.extend(i.fields);
    if let Err(e) = check_fields(&fields) {
        return e.to_compile_error();
    }
    codegen::record(Kind::Span, "step", &fields, &i.extras, span)
}
