//! `#[environment]` on `impl Environment for T`: move the `#[tool]` methods to an inherent
//! impl, add `NAME` and the tool table, and check toolset fields for name collisions.

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::{ImplItem, ItemImpl, LitStr, Member, Path, Type};

use crate::args::{self, Errors, Key};
use crate::table;
use crate::tool::{self, Tool};

const ENV_KEYS: &[Key] = &[
    Key {
        name: "name",
        usage: "name = \"...\"",
    },
    Key {
        name: "toolsets",
        usage: "toolsets(field, ...)",
    },
    args::CRATE_KEY,
];

/// Methods of the `Environment` trait, which must stay in the trait impl.
const TRAIT_METHODS: &[&str] = &[
    "splits",
    "tasks",
    "new",
    "prompt",
    "teardown",
    "task_tools",
    "call_task_tool",
    "__ors_tool_table",
];

struct EnvArgs {
    name: Option<LitStr>,
    toolsets: Vec<Member>,
    krate: Path,
}

fn parse_args(attr: TokenStream, errors: &mut Errors) -> EnvArgs {
    let mut out = EnvArgs {
        name: None,
        toolsets: Vec::new(),
        krate: args::default_crate(),
    };
    args::parse_args(attr, "#[environment]", ENV_KEYS, errors, |key, meta| {
        match key {
            "name" => out.name = Some(args::lit_str(meta, "name")?),
            "toolsets" => out.toolsets.extend(args::members(meta)?),
            _ => out.krate = args::crate_path(meta)?,
        }
        Ok(())
    });
    let mut seen: Vec<&Member> = Vec::new();
    for m in &out.toolsets {
        if seen.contains(&m) {
            errors.spanned(m, "this toolset field is listed twice");
        }
        seen.push(m);
    }
    out
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = parse_args(attr, &mut errors);
    let item = match crate::parse_impl(
        item,
        "#[environment] goes on `impl Environment for YourType { ... }`",
        &mut errors,
    ) {
        Ok(imp) => imp,
        Err(emitted) => return emitted,
    };
    expand_impl(args, item, errors)
}

fn expand_impl(args: EnvArgs, mut imp: ItemImpl, mut errors: Errors) -> TokenStream {
    let is_env_impl = match &imp.trait_ {
        Some((None, path, _))
            if path
                .segments
                .last()
                .is_some_and(|s| s.ident == "Environment") =>
        {
            true
        }
        Some((_, path, _)) => {
            errors.spanned(
                path,
                "#[environment] goes on `impl Environment for YourType { ... }`, not on an \
                 impl of another trait",
            );
            false
        }
        None => {
            errors.spanned(
                &imp.self_ty,
                "#[environment] goes on `impl Environment for YourType { ... }`; for an \
                 inherent impl of reusable tools use #[toolset]",
            );
            false
        }
    };
    if !imp.generics.params.is_empty() {
        errors.spanned(
            &imp.generics,
            "#[environment] does not support generic impls: the tool table is one `static` \
             per environment type",
        );
    }

    // Split the items: tools go to an inherent impl, the rest stays in the trait impl.
    let mut tools: Vec<Tool> = Vec::new();
    let mut methods: Vec<ImplItem> = Vec::new();
    let mut kept: Vec<ImplItem> = Vec::new();
    let mut has_name = false;
    for item in std::mem::take(&mut imp.items) {
        match item {
            ImplItem::Fn(mut f) => match tool::take_tool_attr(&mut f, &mut errors) {
                Some(_) if TRAIT_METHODS.contains(&f.sig.ident.to_string().as_str()) => {
                    errors.spanned(
                        &f.sig.ident,
                        format!(
                            "`{}` is a method of the Environment trait, so it cannot be a \
                             #[tool]; give the tool its own method (and, if you want this \
                             name, #[tool(name = \"{}\")])",
                            f.sig.ident, f.sig.ident
                        ),
                    );
                    kept.push(ImplItem::Fn(f));
                }
                Some(attr) => {
                    tools.extend(tool::parse(&attr, &f, &mut errors));
                    methods.push(ImplItem::Fn(f));
                }
                None => kept.push(ImplItem::Fn(f)),
            },
            ImplItem::Const(c) => {
                has_name |= c.ident == "NAME";
                kept.push(ImplItem::Const(c));
            }
            other => kept.push(other),
        }
    }
    imp.items = kept;
    if !is_env_impl {
        // Emit what the author wrote (minus #[tool], whose own macro would only add noise).
        imp.items.extend(methods);
        return quote!(#imp)
            .into_iter()
            .chain(errors.into_compile_errors())
            .collect();
    }

    let tools = table::dedup(tools, &mut errors);
    let self_ty = (*imp.self_ty).clone();
    let krate = &args.krate;
    let p = quote!(#krate::__private);

    if !has_name {
        let name = match &args.name {
            Some(lit) => Some(lit.clone()),
            None => default_name(&self_ty, &mut errors),
        };
        if let Some(name) = name {
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
            imp.items.push(syn::parse_quote! {
                const NAME: &'static str = #name;
            });
        }
    } else if let Some(lit) = &args.name {
        errors.spanned(
            lit,
            "the impl already defines `const NAME`; give the name in one place",
        );
    }

    let body = table::table_body(&self_ty, krate, &tools, &args.toolsets);
    imp.items.push(syn::parse_quote! {
        #[doc(hidden)]
        fn __ors_tool_table() -> &'static #p::ToolTable<Self> {
            #body
        }
    });

    let lint_attrs = imp.attrs.iter().filter(|a| crate::is_cfg_or_lint(a));
    let inherent = (!methods.is_empty()).then(|| {
        quote! {
            #(#lint_attrs)*
            impl #self_ty {
                #(#methods)*
            }
        }
    });
    let own: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let checks = table::collision_checks(&self_ty, krate, &own, &args.toolsets);
    let errors = errors.into_compile_errors();
    quote! {
        #imp
        #inherent
        #checks
        #errors
    }
}

/// The type name lower-cased (`Gsm8k` serves at `/gsm8k`).
fn default_name(self_ty: &Type, errors: &mut Errors) -> Option<LitStr> {
    match self_ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| {
            let name = s.ident.to_string();
            let name = name.strip_prefix("r#").unwrap_or(&name).to_lowercase();
            LitStr::new(&name, s.ident.span())
        }),
        other => {
            errors.spanned(
                other.to_token_stream(),
                "cannot name this environment from its type: add #[environment(name = \"...\")]",
            );
            Some(LitStr::new("environment", Span::call_site()))
        }
    }
}
