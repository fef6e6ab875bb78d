//! `#[environment]` on `impl Environment for T`: move the `#[tool]` methods to an inherent
//! impl, implement `EnvironmentMeta` (the name, the state type, the tool table, and the
//! start-up functions written with the state) beside the trait impl, and check toolset fields
//! for name collisions.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    FnArg, ImplItem, ImplItemConst, ImplItemFn, ImplItemType, ItemImpl, LitStr, Member, Path, Type,
};

use crate::args::{self, Errors, Key};
use crate::table;
use crate::tool;

const ENV_KEYS: &[Key] = &[
    Key::new("name", "name = \"...\""),
    Key::new("toolsets", "toolsets(field, ...)"),
    Key::new("select_toolsets", "select_toolsets(field = \"name\", ...)"),
    Key::flag("reasoning"),
    Key::new("dynamic_tools", "dynamic_tools = path::to::fn"),
    Key::flag("calls_after_finished"),
    args::CRATE_KEY,
];

#[derive(Default)]
struct EnvArgs {
    name: Option<LitStr>,
    toolsets: Vec<Member>,
    /// Toolset fields a session selects by name at `/create` (PROTOCOL_NOTES row
    /// `toolset-name`).
    selectable: Vec<Selectable>,
    /// `crate = ...`, when given (else [`args::default_crate`]).
    krate: Option<Path>,
    /// Every tool takes an optional `reasoning` string.
    reasoning: bool,
    /// A `fn() -> Vec<DynamicTool>` whose tools join the table.
    dynamic_tools: Option<Path>,
    /// Calls go on after one returned `finished: true` (the latch is off).
    calls_after_finished: bool,
}

fn parse_args(attr: TokenStream, errors: &mut Errors) -> EnvArgs {
    let mut out = EnvArgs::default();
    args::parse_args(attr, "#[environment]", ENV_KEYS, errors, |key, meta| {
        match key {
            "name" => out.name = Some(args::lit_str(meta, key)?),
            "toolsets" => out.toolsets.extend(args::members(meta)?),
            "select_toolsets" => out.selectable.extend(selectables(meta)?),
            "reasoning" => out.reasoning = args::flag(meta, key)?,
            "dynamic_tools" => out.dynamic_tools = Some(args::path_value(meta, key)?),
            "calls_after_finished" => out.calls_after_finished = args::flag(meta, key)?,
            _ => out.krate = Some(args::crate_path(meta)?),
        }
        Ok(())
    });
    for (i, m) in out.toolsets.iter().enumerate() {
        if out.toolsets[..i].contains(m) {
            errors.spanned(m, "this toolset field is listed twice");
        }
    }
    check_selectable(&out, errors);
    out
}

/// A toolset field a session may select, and the name it is selected by.
struct Selectable {
    field: Member,
    name: LitStr,
}

/// `select_toolsets(field = "name", other)`: a bare field is selected by its own name.
fn selectables(meta: &syn::meta::ParseNestedMeta) -> syn::Result<Vec<Selectable>> {
    let mut out = Vec::new();
    meta.parse_nested_meta(|inner| {
        let Some(ident) = inner.path.get_ident() else {
            return Err(inner.error("expected a field name: `select_toolsets(field = \"name\")`"));
        };
        let name = if inner.input.peek(syn::Token![=]) {
            inner.value()?.parse::<LitStr>()?
        } else {
            LitStr::new(&ident.unraw().to_string(), ident.span())
        };
        out.push(Selectable {
            field: Member::Named(ident.clone()),
            name,
        });
        Ok(())
    })?;
    Ok(out)
}

/// Names are URL-safe and unique, a field is selectable once and not also always included.
fn check_selectable(args: &EnvArgs, errors: &mut Errors) {
    for (i, s) in args.selectable.iter().enumerate() {
        let name = s.name.value();
        if !args::valid_name(&name) {
            errors.spanned(
                &s.name,
                format!("invalid toolset name `{name}`: 1 to 64 characters from `A-Z a-z 0-9 _ -`"),
            );
        }
        let earlier = &args.selectable[..i];
        if let Some(first) = earlier.iter().find(|e| e.name.value() == name) {
            errors.spanned(
                &s.name,
                format!(
                    "toolset name `{name}` is given twice (also to field `{}`): a session selects \
                     a toolset by its name, so each name must be unique",
                    first.field.to_token_stream()
                ),
            );
        }
        if earlier.iter().any(|e| e.field == s.field) {
            errors.spanned(
                &s.field,
                "this toolset field is listed twice in select_toolsets",
            );
        }
        if args.toolsets.contains(&s.field) {
            errors.spanned(
                &s.field,
                "this field is in both `toolsets(...)` (tools of every session) and \
                 `select_toolsets(...)` (tools of the sessions that select it); keep one",
            );
        }
    }
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut args = parse_args(attr, &mut errors);
    let wrong_item = "#[environment] goes on `impl Environment for YourType { ... }`";
    let mut imp = match crate::parse_impl(item, wrong_item, &mut errors) {
        Ok(imp) => imp,
        Err(emitted) => return emitted,
    };
    // Split the items: tools go to an inherent impl, `const NAME` and `type State` to the
    // `EnvironmentMeta` impl, the rest stays in the trait impl.
    let found = tool::ToolMethods::take(&mut imp.items, &mut errors);
    let methods = found.split_off(&mut imp.items);
    let mut name_const: Option<ImplItemConst> = None;
    let mut state: Option<ImplItemType> = None;
    for item in std::mem::take(&mut imp.items) {
        match item {
            ImplItem::Const(c) if c.ident == "NAME" && name_const.is_none() => name_const = Some(c),
            ImplItem::Type(t) if t.ident == "State" && state.is_none() => state = Some(t),
            other => imp.items.push(other),
        }
    }

    let fatal = match &imp.trait_ {
        None => {
            errors.spanned(
                &imp.self_ty,
                "#[environment] goes on `impl Environment for YourType { ... }`; for an \
                 inherent impl of reusable tools use #[toolset]",
            );
            // Emit what the author wrote (minus #[tool], whose own macro would only add noise).
            imp.items.extend(methods);
            imp.items.extend(name_const.map(ImplItem::Const));
            imp.items.extend(state.map(ImplItem::Type));
            return errors.after(quote!(#imp));
        }
        Some((Some(bang), _, _)) => {
            errors.spanned(bang, "#[environment] cannot go on a negative impl");
            true
        }
        Some(_) if !imp.generics.params.is_empty() => {
            errors.spanned(
                &imp.generics,
                "#[environment] does not support generic impls: the tool table is built for one \
                 environment type",
            );
            true
        }
        Some(_) => false,
    };

    let self_ty = (*imp.self_ty).clone();
    let krate = &args.krate.clone().unwrap_or_else(args::default_crate);
    let p = quote!(#krate::__private);
    let (with_state, task_range_with) = take_stateful(&mut imp, &p);
    let state = state_type(state, &with_state, &mut errors);
    let inherent = (!methods.is_empty())
        .then(|| crate::impl_beside(&imp, None, quote!(), quote!(#(#methods)*)));

    if fatal {
        // The items the macro would have added, as a stub that cannot fail to compile, so the
        // error above is the only message (the idea of thiserror's fallback). The bound makes
        // the stub's own requirement a where-clause rather than a second error.
        let stub = crate::impl_beside(
            &imp,
            Some(quote!(#p::EnvironmentMeta)),
            quote!(#self_ty: 'static,),
            quote! {
                const NAME: &'static str = "";
                #state
                fn tool_table(_: &Self::State) -> #p::ToolTable<Self> {
                    ::core::unreachable!()
                }
            },
        );
        return errors.after(quote! {
            #imp
            #inherent
            #stub
        });
    }

    check_task_methods(&imp, &with_state, &mut errors);
    let tools = table::dedup(found.tools, &mut errors);
    let name = match (name_const, &args.name) {
        (Some(c), None) => c.into_token_stream(),
        (Some(c), Some(lit)) => {
            errors.spanned(
                lit,
                "the impl already defines `const NAME`; give the name in one place",
            );
            c.into_token_stream()
        }
        (None, given) => {
            let name = given
                .clone()
                .unwrap_or_else(|| default_name(&self_ty, &mut errors));
            if !args::valid_name(&name.value()) {
                errors.spanned(
                    &name,
                    format!(
                        "invalid environment name `{}`: it is a URL path segment, 1 to 64 \
                         characters from `A-Z a-z 0-9 _ -`",
                        name.value()
                    ),
                );
            }
            quote!(const NAME: &'static str = #name;)
        }
    };

    // A field also in `toolsets(...)` is reported above; checking it again would only repeat.
    args.selectable
        .retain(|s| !args.toolsets.contains(&s.field));
    let includes = args.toolsets.iter().map(|m| {
        let field = table::toolset_field(&self_ty, krate, m);
        quote!(.toolset(#field))
    });
    // Spanned on the path, so a function of the wrong type is reported there.
    let dynamic = args
        .dynamic_tools
        .as_ref()
        .map(|f| quote_spanned!(f.span()=> .dynamic_tools(#f(__ors_state))));
    let selects = args.selectable.iter().map(|s| {
        let field = table::toolset_field(&self_ty, krate, &s.field);
        let name = &s.name;
        quote!(.select_toolset(#name, #field))
    });
    let reasoning = args.reasoning.then(|| quote!(.reasoning()));
    let after_finished = args
        .calls_after_finished
        .then(|| quote!(.calls_after_finished()));
    let (body, tool_items) = table::table(
        &imp,
        krate,
        &tools,
        quote!(#(#includes)* #dynamic #(#selects)* #reasoning #after_finished),
    );
    let cfgs = crate::cfgs(&imp);
    let chosen: Vec<&Member> = args.selectable.iter().map(|s| &s.field).collect();
    let collisions =
        table::collision_checks(&cfgs, &self_ty, krate, &tools, &args.toolsets, &chosen);
    let trait_methods = tools.iter().map(|t| t.not_a_trait_method(krate, &cfgs));
    let attr_uses = tool::use_attr_paths(&found.attrs, &cfgs);
    // The trait is recognised by type, not by name (so `use ors_server::Environment as Env`
    // works): an impl of another trait fails this bound, on the trait's name.
    let is_environment = imp.trait_.as_ref().map(|(_, path, _)| {
        let p = crate::respan(p.clone(), path.span());
        let ty = crate::respan(self_ty.to_token_stream(), path.span());
        quote_spanned! {path.span()=>
            #cfgs
            const _: () = #p::implements_environment::<#ty>();
        }
    });
    // An optional capability is advertised only when the impl writes it (PROTOCOL_NOTES row
    // `score-group`): the trait's default cannot tell the server it was not overridden.
    let scores_groups = imp
        .items
        .iter()
        .any(|item| matches!(item, ImplItem::Fn(f) if f.sig.ident == "score_group"))
        .then(|| quote! { const SUPPORTS_SCORE_GROUP: bool = true; });
    let meta = crate::impl_beside(
        &imp,
        Some(quote!(#p::EnvironmentMeta)),
        quote!(),
        quote! {
            #name
            #state
            #scores_groups
            fn tool_table(__ors_state: &Self::State) -> #p::ToolTable<Self> {
                #body
            }
            #(#with_state)*
            #task_range_with
        },
    );
    errors.after(quote! {
        #imp
        #inherent
        #meta
        #tool_items
        #is_environment
        #collisions
        #(#trait_methods)*
        #attr_uses
    })
}

/// An environment has splits, builds its episodes (`new`) and serves tasks: `tasks` (a split
/// loaded whole), or `num_tasks` with `task` (a split read by index). Checked here, as the
/// trait's defaults would only fail at run time. `moved` are the functions written with the
/// state, already taken out of the impl.
fn check_task_methods(imp: &ItemImpl, moved: &[ImplItemFn], errors: &mut Errors) {
    // Items written by a macro call in the impl are invisible here: trust them. And an impl of
    // another trait (reported elsewhere), or of the trait renamed, is not checked.
    let names_environment = imp
        .trait_
        .as_ref()
        .and_then(|(_, path, _)| path.segments.last())
        .is_some_and(|s| s.ident == "Environment");
    let has_macro = imp
        .items
        .iter()
        .any(|item| matches!(item, ImplItem::Macro(_)));
    if !names_environment || has_macro {
        return;
    }
    let has = |name: &str| {
        let with = format!("{name}_with");
        let written = imp.items.iter().find_map(|item| match item {
            ImplItem::Fn(f) if f.sig.ident == name => Some(&f.sig.ident),
            _ => None,
        });
        written.or_else(|| moved.iter().map(|f| &f.sig.ident).find(|i| **i == with))
    };
    for (name, form) in [
        ("splits", "fn splits() -> Vec<Split>"),
        (
            "new",
            "async fn new(task: Task, secrets: Secrets) -> Result<Self, EnvError>",
        ),
    ] {
        if has(name).is_none() {
            errors.spanned(
                &imp.self_ty,
                format!("an environment needs `{name}`: write `{form}`"),
            );
        }
    }
    match (has("tasks"), has("num_tasks"), has("task")) {
        (None, None, _) => errors.spanned(
            &imp.self_ty,
            "an environment serves tasks: write `async fn tasks(split: &str) -> Result<Vec<Task>, \
             EnvError>`, or, for splits read on demand, `num_tasks` and `task`",
        ),
        (_, Some(num), None) => errors.spanned(
            num,
            "`num_tasks` serves splits by index, so `task(split, index)` is needed too",
        ),
        _ => {}
    }
}

/// The start-up functions of the trait, and how many parameters each has without the state.
const STARTUP: &[(&str, usize)] = &[
    ("splits", 0),
    ("tasks", 1),
    ("num_tasks", 1),
    ("task", 2),
    ("task_range", 3),
    ("new", 2),
];

/// Take out of the impl the start-up functions written with the state as their first
/// parameter, renamed to the `EnvironmentMeta` function that is given it (`tasks` becomes
/// `tasks_with`); and, for a `task_range` written without the state, a `task_range_with` that
/// calls it (that one's default reads task by task).
fn take_stateful(imp: &mut ItemImpl, p: &TokenStream) -> (Vec<ImplItemFn>, TokenStream) {
    let mut moved = Vec::new();
    let mut task_range = TokenStream::new();
    for item in std::mem::take(&mut imp.items) {
        let ImplItem::Fn(mut f) = item else {
            imp.items.push(item);
            continue;
        };
        let arity = STARTUP
            .iter()
            .find_map(|&(name, n)| (f.sig.ident == name).then_some(n))
            .filter(|_| f.sig.receiver().is_none());
        if arity == Some(f.sig.inputs.len()) && f.sig.ident == "task_range" {
            task_range = quote_spanned! {f.sig.ident.span()=>
                fn task_range_with(
                    _: &Self::State,
                    split: &str,
                    start: usize,
                    stop: usize,
                ) -> impl ::core::future::Future<
                    Output = #p::Result<#p::Vec<<Self as #p::Environment>::Task>, #p::EnvError>,
                > + ::core::marker::Send {
                    <Self as #p::Environment>::task_range(split, start, stop)
                }
            };
        }
        if arity.is_some_and(|n| f.sig.inputs.len() == n + 1) {
            f.sig.ident = quote::format_ident!("{}_with", f.sig.ident, span = f.sig.ident.span());
            moved.push(f);
        } else {
            imp.items.push(ImplItem::Fn(f));
        }
    }
    (moved, task_range)
}

/// `type State` as written, else `()`. Functions written with the state need the impl to say
/// what it is: without `type State`, the first one's parameter type is taken for it, so that
/// mistake is one error, here.
fn state_type(
    state: Option<ImplItemType>,
    with_state: &[ImplItemFn],
    errors: &mut Errors,
) -> TokenStream {
    if let Some(t) = state {
        return t.into_token_stream();
    }
    let first = with_state.iter().find_map(|f| match f.sig.inputs.first() {
        Some(FnArg::Typed(arg)) => Some((&f.sig.ident, &arg.ty)),
        _ => None,
    });
    let Some((ident, ty)) = first else {
        return quote! { type State = (); };
    };
    let name = ident.to_string();
    let name = name.strip_suffix("_with").unwrap_or(&name);
    errors.spanned(
        ty,
        format!(
            "`{name}` takes the environment's start-up state as its first parameter, so the \
             impl says what the state is: add `type State = YourState;`"
        ),
    );
    let elem = match &**ty {
        Type::Reference(r) => r.elem.to_token_stream(),
        _ => quote!(()),
    };
    quote!(type State = #elem;)
}

/// The type name lower-cased (`Gsm8k` serves at `/gsm8k`).
fn default_name(self_ty: &Type, errors: &mut Errors) -> LitStr {
    let ident = match self_ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| &s.ident),
        _ => None,
    };
    match ident {
        Some(ident) => LitStr::new(&ident.unraw().to_string().to_lowercase(), ident.span()),
        None => {
            errors.spanned(
                self_ty,
                "cannot name this environment from its type: add #[environment(name = \"...\")]",
            );
            LitStr::new("environment", Span::call_site())
        }
    }
}
