//! One `#[tool]` method: read its attribute and signature, check them, and generate its
//! adapter (JSON in, typed call, wire result out) and its spec expression.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, FnArg, GenericParam, Ident, ImplItemFn, LitStr, Meta, Path, ReturnType, Type,
};

use crate::args::{self, Errors, Key};

const TOOL_KEYS: &[Key] = &[
    Key {
        name: "name",
        usage: "name = \"...\"",
    },
    Key {
        name: "description",
        usage: "description = \"...\"",
    },
    Key {
        name: "shared",
        usage: "shared = false",
    },
];

/// How the method takes the [`ToolContext`].
enum Ctx {
    Ref,
    Owned,
}

/// A tool method, checked, ready for code generation.
pub(crate) struct Tool {
    method: Ident,
    /// The wire name.
    pub(crate) name: String,
    /// Where a problem with the name is reported: the `name = "..."` literal or the method.
    pub(crate) name_span: Span,
    description: Option<LitStr>,
    doc: Vec<Expr>,
    shared: bool,
    mutable: bool,
    ctx: Option<Ctx>,
    input: Option<Type>,
    asyncness: bool,
    output_span: Span,
}

/// Whether an attribute is `#[tool]` (or a path ending in `::tool`).
pub(crate) fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "tool")
}

/// Remove the `#[tool]` attributes of a method; `Some` when it had one.
pub(crate) fn take_tool_attr(method: &mut ImplItemFn, errors: &mut Errors) -> Option<Attribute> {
    let mut found: Option<Attribute> = None;
    let mut kept = Vec::with_capacity(method.attrs.len());
    for attr in method.attrs.drain(..) {
        if !is_tool_attr(&attr) {
            kept.push(attr);
        } else if found.is_some() {
            errors.spanned(&attr, "this method already has a #[tool] attribute");
        } else {
            found = Some(attr);
        }
    }
    method.attrs = kept;
    found
}

/// Read a tool from its method (with the `#[tool]` attribute already taken off). `None` when
/// the method cannot be called as a tool; every problem is recorded in `errors`.
pub(crate) fn parse(attr: &Attribute, method: &ImplItemFn, errors: &mut Errors) -> Option<Tool> {
    let mut name_lit: Option<LitStr> = None;
    let mut description: Option<LitStr> = None;
    let mut shared = true;
    match &attr.meta {
        Meta::Path(_) => {}
        Meta::List(list) => {
            args::parse_args(
                list.tokens.clone(),
                "#[tool]",
                TOOL_KEYS,
                errors,
                |key, meta| {
                    match key {
                        "name" => name_lit = Some(args::lit_str(meta, "name")?),
                        "description" => description = Some(args::lit_str(meta, "description")?),
                        _ => shared = args::lit_bool(meta, "shared")?.value,
                    }
                    Ok(())
                },
            );
        }
        Meta::NameValue(nv) => errors.spanned(
            nv,
            "write `#[tool]` or `#[tool(name = \"...\", description = \"...\", shared = false)]`",
        ),
    }

    let sig = &method.sig;
    let (name, name_span) = match &name_lit {
        Some(lit) => (lit.value(), lit.span()),
        None => (unraw(&sig.ident), sig.ident.span()),
    };
    if !args::valid_name(&name) {
        errors.at(
            name_span,
            format!(
                "invalid tool name `{name}`: a tool name is 1 to 64 characters from \
                 `A-Z a-z 0-9 _ -`{}",
                if name_lit.is_none() {
                    "; name the tool with #[tool(name = \"...\")]"
                } else {
                    ""
                }
            ),
        );
    }

    // A problem that makes the method impossible to call from the adapter: report it and
    // leave the tool out of the table, so no second error follows from the generated call.
    let mut callable = true;
    for param in &sig.generics.params {
        if !matches!(param, GenericParam::Lifetime(_)) {
            errors.spanned(
                param,
                "a #[tool] method cannot be generic: the adapter must know the input type",
            );
            callable = false;
        }
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.spanned(unsafety, "a #[tool] method cannot be `unsafe`");
        callable = false;
    }

    let mut inputs = sig.inputs.iter();
    let mutable = match inputs.next() {
        Some(FnArg::Receiver(r)) => match receiver_mutability(r) {
            Some(m) => m,
            None => {
                errors.spanned(
                    r,
                    "a #[tool] method borrows the environment: take `&self` or `&mut self`",
                );
                callable = false;
                false
            }
        },
        _ => {
            errors.spanned(
                &sig.ident,
                format!(
                    "#[tool] `{}` is not a method: a tool takes `&self` or `&mut self` \
                     as its first parameter",
                    sig.ident
                ),
            );
            return None;
        }
    };

    let mut ctx = None;
    let mut input: Option<Type> = None;
    for (position, arg) in inputs.enumerate() {
        let FnArg::Typed(arg) = arg else { continue };
        let ty = &*arg.ty;
        if let Some(kind) = context_kind(ty, &mut callable, errors) {
            if position == 0 {
                ctx = Some(kind);
            } else {
                errors.spanned(
                    ty,
                    "the `&ToolContext` parameter comes first, right after `self`",
                );
                callable = false;
            }
            continue;
        }
        if let Type::Reference(r) = ty {
            errors.spanned(
                r,
                "a tool input is taken by value (it is deserialized from the call's JSON): \
                 drop the `&`",
            );
            callable = false;
        }
        if input.is_some() {
            errors.spanned(
                arg,
                "a #[tool] method takes at most one input: make the arguments fields of one \
                 #[wire] struct and take that",
            );
            callable = false;
        } else {
            input = Some(ty.clone());
        }
    }

    let output_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => sig.ident.span(),
    };

    let doc = method
        .attrs
        .iter()
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) if nv.path.is_ident("doc") => Some(nv.value.clone()),
            _ => None,
        })
        .collect();
    if !callable {
        return None;
    }
    Some(Tool {
        method: sig.ident.clone(),
        name,
        name_span,
        description,
        doc,
        shared,
        mutable,
        ctx,
        input,
        asyncness: sig.asyncness.is_some(),
        output_span,
    })
}

/// `tokens` with every span set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(g) = &tt {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tt = TokenTree::Group(group);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
}

/// `Some(true)` for `&mut self`, `Some(false)` for `&self`, `None` for `self` by value.
fn receiver_mutability(r: &syn::Receiver) -> Option<bool> {
    if r.reference.is_some() {
        return Some(r.mutability.is_some());
    }
    match &*r.ty {
        Type::Reference(t) if is_self(&t.elem) => Some(t.mutability.is_some()),
        _ => None,
    }
}

fn is_self(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
}

fn ends_with(path: &Path, name: &str) -> bool {
    path.segments.last().is_some_and(|s| s.ident == name)
}

/// Whether a parameter type is the tool context (`&ToolContext` or `ToolContext`).
fn context_kind(ty: &Type, callable: &mut bool, errors: &mut Errors) -> Option<Ctx> {
    match ty {
        Type::Reference(r) => match &*r.elem {
            Type::Path(p) if ends_with(&p.path, "ToolContext") => {
                if let Some(m) = &r.mutability {
                    errors.spanned(m, "take the tool context as `&ToolContext`");
                    *callable = false;
                }
                Some(Ctx::Ref)
            }
            _ => None,
        },
        Type::Path(p) if ends_with(&p.path, "ToolContext") => Some(Ctx::Owned),
        _ => None,
    }
}

impl Tool {
    fn adapter_ident(&self) -> Ident {
        format_ident!("__ors_tool_{}", unraw(&self.method))
    }

    fn input_ops_ident(&self) -> Ident {
        format_ident!("__ors_input_{}", unraw(&self.method))
    }

    /// For a typed input, the `const` of its [`InputOps`]: the one use of the input type
    /// with a trait bound, spanned on the type so a bad type gives one error, there.
    pub(crate) fn input_ops(&self, krate: &Path) -> TokenStream {
        let Some(ty) = &self.input else {
            return TokenStream::new();
        };
        let ident = self.input_ops_ident();
        quote_spanned! {ty.span()=>
            #[allow(non_upper_case_globals)]
            const #ident: #krate::__private::InputOps<#ty> = #krate::__private::input_ops::<#ty>();
        }
    }

    /// The adapter: `fn(&mut Env, ToolContext, Value) -> ToolFuture` that parses the input,
    /// calls the method and turns its return value into a wire result.
    pub(crate) fn adapter(&self, self_ty: &Type, krate: &Path) -> TokenStream {
        // The SDK path too carries the method's span: rustc reports an error about an
        // expression (`Box::pin(...)`) at the span of its first token.
        let p = respan(quote!(#krate::__private), self.method.span());
        let adapter = self.adapter_ident();
        let method = &self.method;
        let name = &self.name;
        let receiver = if self.mutable {
            quote!(__ors_env)
        } else {
            quote!(&*__ors_env)
        };
        let (ctx_param, ctx_arg) = match self.ctx {
            None => (quote!(_), quote!()),
            Some(Ctx::Ref) => (quote!(__ors_ctx), quote!(&__ors_ctx,)),
            Some(Ctx::Owned) => (quote!(__ors_ctx), quote!(__ors_ctx,)),
        };
        let (read_input, input_arg) = match &self.input {
            Some(_) => {
                let ops = self.input_ops_ident();
                (
                    quote! {
                        let __ors_arg = match (#ops.parse)(#name, __ors_input) {
                            #p::Result::Ok(v) => v,
                            #p::Result::Err(e) => return e,
                        };
                    },
                    quote!(__ors_arg),
                )
            }
            None => (
                quote! {
                    if let #p::Result::Err(e) = #p::no_input(#name, &__ors_input) {
                        return e;
                    }
                },
                quote!(),
            ),
        };
        let call = quote!(<#self_ty>::#method(#receiver, #ctx_arg #input_arg));
        let call = if self.asyncness {
            quote!(#call.await)
        } else {
            call
        };
        let wrap = quote_spanned! {self.output_span=>
            #p::IntoToolResult::into_tool_result(__ors_out)
        };
        // Spanned on the method name, so a future that is not `Send` is reported there.
        let future = quote_spanned! {method.span()=>
            #p::Box::pin(async move {
                #read_input
                let __ors_out = #call;
                #wrap
            })
        };
        quote_spanned! {method.span()=>
            #[allow(clippy::needless_lifetimes)]
            fn #adapter<'a>(
                __ors_env: &'a mut #self_ty,
                #ctx_param: #p::ToolContext,
                __ors_input: #p::Value,
            ) -> #p::ToolFuture<'a> {
                #future
            }
        }
    }

    /// `.tool(spec, shared, adapter)` for the table builder.
    pub(crate) fn builder_call(&self, krate: &Path) -> TokenStream {
        let p = quote!(#krate::__private);
        let name = &self.name;
        let description = match &self.description {
            Some(lit) => quote!(#lit),
            None => {
                let doc = &self.doc;
                quote!(&#p::doc_description(&[#(#doc),*]))
            }
        };
        let spec = match &self.input {
            Some(_) => {
                let ops = self.input_ops_ident();
                quote!((#ops.spec)(#name, #description))
            }
            None => quote!(#p::Result::Ok(#p::spec_without_input(#name, #description))),
        };
        let shared = self.shared;
        let adapter = self.adapter_ident();
        quote!(.tool(#spec, #shared, #adapter))
    }
}
