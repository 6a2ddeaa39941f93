//! Parsing of `key = value` field lists and the static type of a value where it can be seen.

use proc_macro2::Span;
use syn::{
    parse::{Parse, ParseStream},
    spanned::Spanned,
    Expr, ExprLit, Ident, Lit, LitStr, Token, Type, UnOp,
};

/// Most fields one callsite may carry.
pub const MAX_FIELDS: usize = 32;

/// A field's type as written in the callsite's schema.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ty {
    Dynamic,
    U64,
    I64,
    F64,
    Bool,
    Str,
}

impl Ty {
    /// The variant name of `waffle::__private::FieldType`.
    pub fn variant(self) -> &'static str {
        match self {
            Ty::Dynamic => "Dynamic",
            Ty::U64 => "U64",
            Ty::I64 => "I64",
            Ty::F64 => "F64",
            Ty::Bool => "Bool",
            Ty::Str => "Str",
        }
    }
}

/// One `key = value` pair.
pub struct FieldSpec {
    pub name: String,
    pub name_span: Span,
    pub value: Expr,
    pub ty: Ty,
}

/// A key: an identifier or a string literal (for keys that are not identifiers).
fn parse_key(input: ParseStream) -> syn::Result<(String, Span)> {
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        if lit.value().is_empty() {
            return Err(syn::Error::new(lit.span(), "a field name cannot be empty"));
        }
        Ok((lit.value(), lit.span()))
    } else {
        let ident: Ident = input.parse().map_err(|e| {
            syn::Error::new(e.span(), "expected a field: `key = value`, `key` or `\"key\" = value`")
        })?;
        Ok((ident.to_string(), ident.span()))
    }
}

impl Parse for FieldSpec {
    /// `key = expr`, `"key" = expr`, or `key` alone (a variable of that name).
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let is_ident = input.peek(Ident);
        let (name, name_span) = parse_key(input)?;
        let value: Expr = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            if input.is_empty() || input.peek(Token![,]) {
                return Err(input.error(format!("expected a value after `{name} =`")));
            }
            input.parse()?
        } else if is_ident {
            let ident = Ident::new(&name, name_span);
            syn::parse_quote!(#ident)
        } else {
            return Err(input.error("expected `=` and a value after a quoted field name"));
        };
        let ty = infer_expr(&value);
        Ok(FieldSpec { name, name_span, value, ty })
    }
}

/// Causal links and correlation given with a span or event.
#[derive(Default)]
pub struct Extras {
    /// Each expression implements `waffle::Causes` (an id, an `Option`, a slice, ...).
    pub causes: Vec<Expr>,
    /// `correlate = ("key", value)`; a key ending in `>` (a cause) or `<` (an effect) makes the
    /// group directed, which only the decoder reads.
    pub correlate: Option<(LitStr, Expr)>,
}

impl Extras {
    /// Takes `caused_by = ...` or `correlate = (...)`; returns `false` for any other key.
    pub fn take(&mut self, key: &str, key_span: Span, value: &Expr) -> syn::Result<bool> {
        match key {
            "caused_by" => {
                match value {
                    Expr::Array(a) => self.causes.extend(a.elems.iter().cloned()),
                    other => self.causes.push(other.clone()),
                }
                Ok(true)
            }
            "correlate" => {
                if self.correlate.is_some() {
                    return Err(syn::Error::new(key_span, "`correlate` is given twice"));
                }
                let err = || {
                    syn::Error::new(
                        value.span(),
                        "`correlate` takes a key and an integer value: `correlate = (\"allreduce\", seq)`",
                    )
                };
                let Expr::Tuple(t) = value else { return Err(err()) };
                let (Some(Expr::Lit(ExprLit { lit: Lit::Str(key), .. })), Some(v), 2) =
                    (t.elems.first(), t.elems.get(1), t.elems.len())
                else {
                    return Err(err());
                };
                if key.value().is_empty() {
                    return Err(syn::Error::new(key.span(), "the correlation key cannot be empty"));
                }
                self.correlate = Some((key.clone(), v.clone()));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Splits the special keys out of a parsed field list.
    pub fn split(fields: Vec<FieldSpec>) -> syn::Result<(Vec<FieldSpec>, Extras)> {
        let mut extras = Extras::default();
        let mut rest = Vec::new();
        for f in fields {
            if !extras.take(&f.name, f.name_span, &f.value)? {
                rest.push(f);
            }
        }
        Ok((rest, extras))
    }
}

/// Rejects duplicate keys and over-long lists.
pub fn check_fields(fields: &[FieldSpec]) -> syn::Result<()> {
    if fields.len() > MAX_FIELDS {
        return Err(syn::Error::new(
            fields[MAX_FIELDS].name_span,
            format!("a span or event takes at most {MAX_FIELDS} fields"),
        ));
    }
    for (i, f) in fields.iter().enumerate() {
        if fields[..i].iter().any(|g| g.name == f.name) {
            return Err(syn::Error::new(f.name_span, format!("field `{}` is given twice", f.name)));
        }
    }
    Ok(())
}

/// The type of an expression where the syntax alone fixes it: suffixed and plain literals
/// (plain integers fall back to `i32`, plain floats to `f64`, as in Rust) and `as` casts.
pub fn infer_expr(expr: &Expr) -> Ty {
    match expr {
        Expr::Lit(ExprLit { lit, .. }) => match lit {
            Lit::Int(i) => match i.suffix() {
                "" => Ty::I64,
                s => ty_of_name(s).unwrap_or(Ty::Dynamic),
            },
            Lit::Float(f) => match f.suffix() {
                "" | "f64" | "f32" => Ty::F64,
                _ => Ty::Dynamic,
            },
            Lit::Bool(_) => Ty::Bool,
            Lit::Str(_) => Ty::Str,
            _ => Ty::Dynamic,
        },
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match infer_expr(&u.expr) {
            t @ (Ty::I64 | Ty::F64) => t,
            _ => Ty::Dynamic,
        },
        Expr::Cast(c) => infer_type(&c.ty),
        Expr::Paren(p) => infer_expr(&p.expr),
        Expr::Group(g) => infer_expr(&g.expr),
        _ => Ty::Dynamic,
    }
}

/// The field type of a declared Rust type, where it is a primitive waffle knows.
pub fn infer_type(ty: &Type) -> Ty {
    match ty {
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            let seg = &p.path.segments[0];
            if !seg.arguments.is_empty() {
                return Ty::Dynamic;
            }
            ty_of_name(&seg.ident.to_string()).unwrap_or(Ty::Dynamic)
        }
        Type::Reference(r) => match infer_type(&r.elem) {
            Ty::Str => Ty::Str,
            other => other,
        },
        Type::Paren(p) => infer_type(&p.elem),
        Type::Group(g) => infer_type(&g.elem),
        _ => Ty::Dynamic,
    }
}

fn ty_of_name(name: &str) -> Option<Ty> {
    Some(match name {
        "u8" | "u16" | "u32" | "u64" | "usize" => Ty::U64,
        "i8" | "i16" | "i32" | "i64" | "isize" => Ty::I64,
        "f32" | "f64" => Ty::F64,
        "bool" => Ty::Bool,
        "str" | "String" => Ty::Str,
        _ => return None,
    })
}

/// A span for errors about a whole expression.
pub fn span_of(e: &impl Spanned) -> Span {
    e.span()
}
