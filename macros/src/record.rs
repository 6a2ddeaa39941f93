//! `span!("name", key = value, ...)` and `event!(...)`.

use crate::{
    args::{check_fields, Extras, FieldSpec},
    codegen::{self, Kind},
};
use proc_macro2::TokenStream;
use syn::{
    parse::{Parse, ParseStream},
    punctuated::Punctuated,
    LitStr, Token,
};

struct Input {
    name: LitStr,
    fields: Vec<FieldSpec>,
    extras: Extras,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: LitStr = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected the name as a string literal, e.g. `span!(\"solve\", n = 4u64)`",
            )
        })?;
        if name.value().is_empty() {
            return Err(syn::Error::new(name.span(), "the name cannot be empty"));
        }
        let fields = if input.is_empty() {
            Vec::new()
        } else {
            input.parse::<Token![,]>()?;
            Punctuated::<FieldSpec, Token![,]>::parse_terminated(input)?.into_iter().collect()
        };
        let (fields, extras) = Extras::split(fields)?;
        check_fields(&fields)?;
        Ok(Input { name, fields, extras })
    }
}

pub fn expand(input: TokenStream, kind: Kind) -> TokenStream {
    match syn::parse2::<Input>(input) {
        Ok(i) => codegen::record(kind, &i.name.value(), &i.fields, &i.extras, i.name.span()),
        Err(e) => e.to_compile_error(),
    }
}
