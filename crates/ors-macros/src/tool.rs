//! One `#[tool]` method: read its attribute and signature, check them, and generate its
//! adapter (JSON in, typed call, wire result out) and its spec expression.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{
    Attribute, Expr, FnArg, GenericParam, Ident, ImplItem, ImplItemFn, Lifetime, LitStr, Meta,
    Path, ReturnType, Type,
};

use crate::args::{self, Errors};

mod attr;

use attr::{SchemaSource, ToolArgs};

/// A parameter after `self`. Its role is decided by its type, through traits, in the
/// generated code: the macro knows only whether it is taken by value or by reference.
enum Param {
    /// By value: the tool context or the input (`ToolArg`). The type has its lifetimes made
    /// `'static`, so it can be named in a `const` outside the method.
    Value(Type),
    /// By reference: must be the tool context (`ContextRef`). The referent has its lifetimes
    /// made `'_`, so it can be named in the adapter's body.
    Ref(Type),
}

/// Where a tool's description comes from.
enum Description {
    /// `#[tool(description = "...")]`.
    Given(LitStr),
    /// The doc comment's lines (any expression: `#[doc = include_str!(...)]` works too).
    Doc(Vec<Expr>),
}

/// A tool method, checked, ready for code generation.
pub(crate) struct Tool {
    method: Ident,
    /// The wire name.
    pub(crate) name: String,
    /// Where a problem with the name is reported: the `name = "..."` literal or the method.
    pub(crate) name_span: Span,
    description: Description,
    shared: bool,
    mutable: bool,
    params: Vec<Param>,
    asyncness: bool,
    output_span: Span,
    /// The return type with its lifetimes made `'static`, to find a `Json<T>`'s schema (`None`
    /// for `impl Trait`, which cannot be named outside the method).
    output_ty: Option<Type>,
    blocking: bool,
    /// Whether calls may run beside other calls of the session (checked: a `&self` tool).
    concurrent: bool,
    schema: Option<SchemaSource>,
    /// `validate`: where it was written.
    validate: Option<Span>,
    detail_url: Option<LitStr>,
    terminal: bool,
    runs_commands: bool,
}

/// The `#[tool]` methods of an impl, read as tools, their attributes taken off.
pub(crate) struct ToolMethods {
    pub(crate) tools: Vec<Tool>,
    /// The `#[tool]` attributes taken off (see [`use_attr_paths`]).
    pub(crate) attrs: Vec<Attribute>,
    /// Per item of the impl, whether it is a `#[tool]` method.
    is_tool: Vec<bool>,
}

impl ToolMethods {
    /// Take the `#[tool]` attribute (or a path ending in `::tool`) off each method of `items`
    /// that has one (a second one is an error) and read the method as a tool.
    pub(crate) fn take(items: &mut [ImplItem], errors: &mut Errors) -> Self {
        let (mut tools, mut attrs) = (Vec::new(), Vec::new());
        let take = |item: &mut ImplItem| {
            let ImplItem::Fn(f) = item else { return false };
            let (found, kept): (Vec<_>, _) = f.attrs.drain(..).partition(|attr| {
                let last = attr.path().segments.last();
                last.is_some_and(|s| s.ident == "tool")
            });
            f.attrs = kept;
            let mut found = found.into_iter();
            let Some(attr) = found.next() else {
                return false;
            };
            for extra in found {
                errors.spanned(&extra, "this method already has a #[tool] attribute");
            }
            tools.extend(parse(&attr, f, errors));
            attrs.push(attr);
            true
        };
        let is_tool = items.iter_mut().map(take).collect();
        ToolMethods {
            tools,
            attrs,
            is_tool,
        }
    }

    /// Move the tool methods out of `items` (the items [`ToolMethods::take`] read), in order.
    pub(crate) fn split_off(&self, items: &mut Vec<ImplItem>) -> Vec<ImplItem> {
        // `partition` sees the items in order, so each meets its own flag.
        let mut is_tool = self.is_tool.iter();
        let (methods, rest) = std::mem::take(items)
            .into_iter()
            .partition(|_| is_tool.next() == Some(&true));
        *items = rest;
        methods
    }
}

/// A `use` of each `#[tool]` attribute's path. The impl's macro takes these attributes off, so
/// rustc never resolves them and would call an explicit `use ors_server::tool;` unused.
pub(crate) fn use_attr_paths(attrs: &[Attribute], cfgs: &TokenStream) -> TokenStream {
    let mut paths: Vec<&Path> = Vec::new();
    for attr in attrs {
        if !paths.contains(&attr.path()) {
            paths.push(attr.path());
        }
    }
    if paths.is_empty() {
        return TokenStream::new();
    }
    quote! {
        #cfgs
        const _: () = {
            #(
                #[allow(unused_imports)]
                use #paths as _;
            )*
        };
    }
}

/// Read a tool from its method (with the `#[tool]` attribute already taken off). `None` when
/// the method cannot be called as a tool; every problem is recorded in `errors`.
fn parse(attr: &Attribute, method: &ImplItemFn, errors: &mut Errors) -> Option<Tool> {
    let args = ToolArgs::parse(attr, errors);
    let receiver = borrowed_receiver(&method.sig);
    let concurrent = attr::concurrent(&args, receiver, errors);
    let schema = args.schema.map(|lit| SchemaSource::parse(lit, errors));
    if let Some(url) = &args.detail_url {
        let v = url.value();
        if !(v.starts_with("https://") || v.starts_with("http://")) {
            errors.spanned(
                url,
                "`detail_url` is a URL: it starts with https:// or http://",
            );
        }
    }
    if let (Some(_), Some(asyncness)) = (args.blocking, &method.sig.asyncness) {
        errors.at(
            asyncness.span,
            "a #[tool(blocking)] method is a plain `fn`: it runs on a thread of tokio's blocking \
             pool, where there is nothing to `.await`; drop `async` (or drop `blocking`)",
        );
    }

    let sig = &method.sig;
    let (name, name_span) = match &args.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (unraw(&sig.ident), sig.ident.span()),
    };
    if !args::valid_name(&name) {
        errors.at(
            name_span,
            format!(
                "invalid tool name `{name}`: a tool name is 1 to 64 characters from \
                 `A-Z a-z 0-9 _ -`{}",
                args.name
                    .as_ref()
                    .map_or("; name the tool with #[tool(name = \"...\")]", |_| ""),
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

    let mutable = match (receiver, sig.receiver()) {
        (Some((mutable, _)), _) => mutable,
        (None, Some(r)) => {
            errors.spanned(
                r,
                "a #[tool] method borrows the environment: take `&self` or `&mut self`",
            );
            callable = false;
            false
        }
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

    let mut params = Vec::new();
    for arg in sig.inputs.iter().skip(1) {
        let FnArg::Typed(arg) = arg else { continue };
        match peel(&arg.ty) {
            Type::Reference(r) if r.mutability.is_some() => {
                errors.spanned(
                    r,
                    "a #[tool] method takes the tool context as `&ToolContext` and its input by \
                     value, never `&mut`",
                );
                callable = false;
            }
            Type::Reference(r) => params.push(Param::Ref(with_lifetimes(&r.elem, "_"))),
            Type::ImplTrait(t) => {
                errors.spanned(
                    t,
                    "a #[tool] parameter cannot be `impl Trait`: the adapter must know its type",
                );
                callable = false;
            }
            _ => params.push(Param::Value(with_lifetimes(&arg.ty, "static"))),
        }
    }

    let (output_span, output_ty) = match &sig.output {
        ReturnType::Type(_, ty) => {
            let named = !contains_impl_trait(ty);
            (ty.span(), named.then(|| with_lifetimes(ty, "static")))
        }
        ReturnType::Default => (sig.ident.span(), None),
    };

    let description = match args.description {
        Some(lit) if lit.value().trim().is_empty() => {
            errors.spanned(
                &lit,
                "a tool description cannot be empty: the model reads it to decide when to call \
                 the tool",
            );
            Description::Given(lit)
        }
        Some(lit) => Description::Given(lit),
        None => {
            let doc: Vec<Expr> = method
                .attrs
                .iter()
                .filter_map(|a| match &a.meta {
                    Meta::NameValue(nv) if nv.path.is_ident("doc") => Some(nv.value.clone()),
                    _ => None,
                })
                .collect();
            if doc.iter().all(is_blank_literal) {
                errors.spanned(
                    &sig.ident,
                    format!(
                        "#[tool] `{}` has no description, and the model reads it to decide when \
                         to call the tool: add a doc comment (`/// ...`) or \
                         #[tool(description = \"...\")]",
                        unraw(&sig.ident)
                    ),
                );
            }
            Description::Doc(doc)
        }
    };
    callable.then(|| Tool {
        method: sig.ident.clone(),
        name,
        name_span,
        description,
        shared: args.shared.unwrap_or(true),
        mutable,
        params,
        asyncness: sig.asyncness.is_some(),
        output_span,
        output_ty,
        // An `async` blocking tool is reported above; generated as async, it adds no second error.
        blocking: args.blocking.is_some() && sig.asyncness.is_none(),
        concurrent,
        schema,
        validate: args.validate,
        detail_url: args.detail_url,
        terminal: args.terminal.is_some(),
        runs_commands: args.runs_commands,
    })
}

/// Whether a type mentions `impl Trait` anywhere.
fn contains_impl_trait(ty: &Type) -> bool {
    struct Find(bool);
    impl<'ast> syn::visit::Visit<'ast> for Find {
        fn visit_type_impl_trait(&mut self, _: &'ast syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut find = Find(false);
    syn::visit::Visit::visit_type(&mut find, ty);
    find.0
}

/// A doc line that is a string literal with nothing but whitespace (`///` alone).
fn is_blank_literal(doc: &Expr) -> bool {
    match doc {
        Expr::Lit(e) => matches!(&e.lit, syn::Lit::Str(s) if s.value().trim().is_empty()),
        _ => false,
    }
}

/// A type without the invisible groups and parentheses a `macro_rules!` or a reader may wrap it
/// in.
fn peel(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => peel(&g.elem),
        Type::Paren(p) => peel(&p.elem),
        other => other,
    }
}

/// `ty` with every lifetime, written or elided in a reference, replaced by `'name`.
fn with_lifetimes(ty: &Type, name: &str) -> Type {
    struct Replace<'a>(&'a str);
    impl VisitMut for Replace<'_> {
        fn visit_lifetime_mut(&mut self, lt: &mut Lifetime) {
            *lt = Lifetime::new(&format!("'{}", self.0), lt.span());
        }
        fn visit_type_reference_mut(&mut self, r: &mut syn::TypeReference) {
            if r.lifetime.is_none() {
                r.lifetime = Some(Lifetime::new(&format!("'{}", self.0), r.and_token.span));
            }
            visit_mut::visit_type_reference_mut(self, r);
        }
    }
    let mut ty = ty.clone();
    Replace(name).visit_type_mut(&mut ty);
    ty
}

fn unraw(ident: &Ident) -> String {
    syn::ext::IdentExt::unraw(ident).to_string()
}

/// The receiver when it borrows `Self`, with `true` for `&mut self` and `false` for `&self`;
/// `None` for `self` by value or no receiver. (syn gives `&self` the type `&Self`, so the
/// written and the shorthand forms are one case.)
fn borrowed_receiver(sig: &syn::Signature) -> Option<(bool, &syn::Receiver)> {
    let r = sig.receiver()?;
    match &*r.ty {
        Type::Reference(t) if is_self(&t.elem) => Some((t.mutability.is_some(), r)),
        _ => None,
    }
}

fn is_self(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
}

impl Tool {
    fn adapter_ident(&self) -> Ident {
        format_ident!("__ors_tool_{}", unraw(&self.method))
    }

    fn arg_ops_ident(&self, index: usize) -> Ident {
        format_ident!("__ors_arg_{}_{}", unraw(&self.method), index)
    }

    /// The by-value parameters, with the name of the `const` holding their `ArgOps`.
    fn value_params(&self) -> impl Iterator<Item = (Ident, &Type)> + '_ {
        self.params.iter().enumerate().filter_map(|(i, p)| match p {
            Param::Value(ty) => Some((self.arg_ops_ident(i), ty)),
            Param::Ref(_) => None,
        })
    }

    /// Per by-value parameter, an associated `const` (of `impl Self`, so nothing is added to
    /// the author's module) holding its `ArgOps`: the one use of the parameter's type with the
    /// `ToolArg` bound, spanned on it, so a type that is neither the context nor an input gives
    /// one error, there.
    pub(crate) fn arg_consts(&self, krate: &Path) -> TokenStream {
        self.value_params()
            .map(|(ops, ty)| {
                let p = crate::respan(quote!(#krate::__private), ty.span());
                // With a hand-written schema the input is raw JSON, so a typed input is an
                // error there, on its type.
                let raw = if self.schema.is_some() { "raw_" } else { "" };
                let get_ops = format_ident!("{raw}arg_ops", span = ty.span());
                quote_spanned! {ty.span()=>
                    #[doc(hidden)]
                    #[allow(non_upper_case_globals)]
                    const #ops: #p::ArgOps<#ty> = #p::#get_ops::<#ty>();
                }
            })
            .collect()
    }

    /// For each by-value parameter after the first: a `const` check, spanned on it, that it is
    /// not a second input.
    pub(crate) fn input_checks(
        &self,
        self_ty: &Type,
        krate: &Path,
        cfgs: &TokenStream,
    ) -> TokenStream {
        let params: Vec<_> = self.value_params().collect();
        let checks = params.iter().enumerate().skip(1).map(|(i, (ops, ty))| {
            let earlier = params[..i].iter().map(|(earlier, _)| earlier);
            let p = crate::respan(quote!(#krate::__private), ty.span());
            quote_spanned! {ty.span()=>
                #cfgs
                const _: () = if #p::second_input(
                    &[#(<#self_ty>::#earlier.kind),*],
                    <#self_ty>::#ops.kind,
                ) {
                    ::core::panic!(
                        "a #[tool] method takes at most one input, and this is a second \
                         one: make the values fields of one #[wire] struct and take that"
                    )
                };
            }
        });
        quote!(#(#checks)*)
    }

    /// For a tool of an `impl Environment`: a check that the method is not one of the trait's,
    /// which must stay in the trait impl (the list is the runtime's, beside the trait).
    pub(crate) fn not_a_trait_method(&self, krate: &Path, cfgs: &TokenStream) -> TokenStream {
        let p = crate::respan(quote!(#krate::__private), self.method.span());
        let method = unraw(&self.method);
        let msg = format!(
            "`{method}` is a method of the Environment trait, so it cannot be a #[tool]; give the \
             tool its own method (and, if you want this name, #[tool(name = \"{method}\")])"
        );
        quote_spanned! {self.method.span()=>
            #cfgs
            const _: () = if #p::is_environment_method(#method) {
                ::core::panic!(#msg)
            };
        }
    }

    /// The adapter: `fn(&mut Env, ToolContext, CallInput) -> ToolFuture` that gets each parameter
    /// (the context, or the input parsed from the call's JSON), calls the method and turns its
    /// return value into a wire result.
    pub(crate) fn adapter(&self, self_ty: &Type, krate: &Path) -> TokenStream {
        // The SDK path too carries the method's span: rustc reports an error about an
        // expression (`Box::pin(...)`) at the span of its first token.
        let p = crate::respan(quote!(#krate::__private), self.method.span());
        let adapter = self.adapter_ident();
        let method = &self.method;
        let name = &self.name;
        let reborrow = (!self.mutable).then(|| quote!(&*));
        let ctx_param = if self.params.is_empty() {
            quote!(_)
        } else {
            quote!(__ors_ctx)
        };
        // `mut` only when a by-value parameter may take the input, or it is an unused `mut`
        // reported in the author's code.
        let input_mut = self.value_params().next().map(|_| quote!(mut));
        let args: Vec<Ident> = (0..self.params.len())
            .map(|i| format_ident!("__ors_a{}", i))
            .collect();
        let gets = self.params.iter().zip(&args).enumerate().map(|(i, (param, arg))| match param {
            Param::Value(_) => {
                let ops = self.arg_ops_ident(i);
                quote! {
                    let #arg = match (<#self_ty>::#ops.extract)(&__ors_ctx, &mut __ors_input, #name) {
                        #p::Result::Ok(v) => v,
                        #p::Result::Err(e) => return e,
                    };
                }
            }
            // Spanned on the referent, so `&Input` is reported there.
            Param::Ref(elem) => {
                let rp = crate::respan(quote!(#krate::__private), elem.span());
                quote_spanned! {elem.span()=>
                    let #arg = <#elem as #rp::ContextRef>::from_context(&__ors_ctx);
                }
            }
        });
        let await_ = self.asyncness.then(|| quote!(.await));
        let wrap = quote_spanned! {self.output_span=>
            #p::IntoToolResult::into_tool_result(__ors_out)
        };
        // The body both kinds share: get the parameters, call, wrap the result.
        let body = quote! {
            let #input_mut __ors_input = #p::Option::Some(__ors_input);
            #(#gets)*
            if let #p::Result::Err(e) = #p::no_input(#name, __ors_input) {
                return e;
            }
            let __ors_out = <#self_ty>::#method(#reborrow __ors_env, #(#args),*) #await_;
            #wrap
        };
        if self.blocking {
            // Synchronous: the runtime calls it on a blocking-pool thread.
            return quote_spanned! {method.span()=>
                fn #adapter(
                    __ors_env: &mut #self_ty,
                    #ctx_param: #p::ToolContext,
                    __ors_input: #p::CallInput,
                ) -> #p::RunToolOutput {
                    #body
                }
            };
        }
        // Spanned on the method name, so a future that is not `Send` is reported there.
        let future = quote_spanned! {method.span()=>
            #p::Box::pin(async move { #body })
        };
        // A concurrent tool's adapter borrows the environment shared, so it can run beside
        // other calls; everything else gets it `&mut`.
        let mutability = (!self.concurrent).then(|| quote!(mut));
        let env_ref = quote!(&'a #mutability #self_ty);
        quote_spanned! {method.span()=>
            #[allow(clippy::needless_lifetimes)]
            fn #adapter<'a>(
                __ors_env: #env_ref,
                #ctx_param: #p::ToolContext,
                __ors_input: #p::CallInput,
            ) -> #p::ToolFuture<'a> {
                #future
            }
        }
    }

    /// `.tool(decl, adapter)` (or `.blocking_tool`, `.concurrent_tool`) for the table builder: the declaration
    /// is a chain of `ToolDecl` builder calls, one per attribute given.
    pub(crate) fn builder_call(&self, self_ty: &Type, krate: &Path) -> TokenStream {
        let p = quote!(#krate::__private);
        let name = &self.name;
        let description = match &self.description {
            Description::Given(lit) => quote!(#lit),
            Description::Doc(doc) => quote!(&#p::doc_description(&[#(#doc),*])),
        };
        let schemas = self
            .value_params()
            .map(|(ops, _)| quote!(<#self_ty>::#ops.schema));
        let mut decl = quote!(#p::ToolDecl::new(#name, #description, &[#(#schemas),*]));
        decl.extend((!self.shared).then(|| quote!(.shared(false))));
        if let Some(url) = &self.detail_url {
            decl.extend(quote!(.detail_url(#url)));
        }
        match &self.schema {
            Some(SchemaSource::Inline(lit)) => decl.extend(quote!(.raw_schema(#lit))),
            Some(SchemaSource::File(lit)) => {
                decl.extend(quote_spanned!(lit.span()=> .raw_schema(::core::include_str!(#lit))))
            }
            None => {}
        }
        // The witness carries the attribute's span throughout (the crate path too), so a build
        // without a validator reports one error there, not at `#[environment]`.
        let needs_validator = |span: Span| {
            let witness = crate::respan(quote!(#p::Validation), span);
            quote_spanned!(span=> .needs_validator(#witness))
        };
        if let Some(span) = self.validate {
            decl.extend(quote!(.validate()));
            decl.extend(needs_validator(span));
        } else if let Some(SchemaSource::Inline(lit) | SchemaSource::File(lit)) = &self.schema {
            decl.extend(needs_validator(lit.span()));
        }
        decl.extend(self.terminal.then(|| quote!(.terminal())));
        decl.extend(self.runs_commands.then(|| quote!(.runs_commands())));
        if let Some(ty) = &self.output_ty {
            decl.extend(quote! {
                .output({
                    #[allow(unused_imports)]
                    use #p::{JsonOutputSchema as _, NoOutputSchema as _};
                    (&#p::OutputProbe::<#ty>::new()).output_schema()
                })
            });
        }
        let adapter = self.adapter_ident();
        if self.blocking {
            quote!(.blocking_tool(#decl, #adapter))
        } else if self.concurrent {
            quote!(.concurrent_tool(#decl, #adapter))
        } else {
            quote!(.tool(#decl, #adapter))
        }
    }
}
