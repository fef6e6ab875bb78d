//! `#[toolset]` on an inherent impl: the impl as written (minus `#[tool]`), plus
//! `impl Toolset` with the tool names (for compile-time collision checks) and the table.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{ImplItem, ItemImpl, Path};

use crate::args::{self, Errors};
use crate::table;
use crate::tool::{self, Tool};

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut krate: Path = args::default_crate();
    args::parse_args(
        attr,
        "#[toolset]",
        &[args::CRATE_KEY],
        &mut errors,
        |_, meta| {
            krate = args::crate_path(meta)?;
            Ok(())
        },
    );
    let imp = match crate::parse_impl(
        item,
        "#[toolset] goes on an inherent impl: `impl YourToolset { ... }`",
        &mut errors,
    ) {
        Ok(imp) => imp,
        Err(emitted) => return emitted,
    };
    expand_impl(&krate, imp, errors)
}

fn expand_impl(krate: &Path, mut imp: ItemImpl, mut errors: Errors) -> TokenStream {
    let mut valid = true;
    if let Some((_, path, _)) = &imp.trait_ {
        errors.spanned(
            path,
            "#[toolset] goes on an inherent impl `impl YourToolset { ... }`, not on a trait impl \
             (for an environment use #[environment])",
        );
        valid = false;
    }
    if !imp.generics.params.is_empty() {
        errors.spanned(
            &imp.generics,
            "#[toolset] does not support generic impls: the tool table is one `static` per type",
        );
        valid = false;
    }
    let mut tools: Vec<Tool> = Vec::new();
    for item in &mut imp.items {
        if let ImplItem::Fn(f) = item {
            if let Some(attr) = tool::take_tool_attr(f, &mut errors) {
                tools.extend(tool::parse(&attr, f, &mut errors));
            }
        }
    }
    if !valid {
        return quote!(#imp)
            .into_iter()
            .chain(errors.into_compile_errors())
            .collect();
    }
    let tools = table::dedup(tools, &mut errors);
    let self_ty = &*imp.self_ty;
    let p = quote!(#krate::__private);
    let names = tools.iter().map(|t| &t.name);
    let body = table::table_body(self_ty, krate, &tools, &[]);
    let lint_attrs = imp.attrs.iter().filter(|a| crate::is_cfg_or_lint(a));
    let errors = errors.into_compile_errors();
    quote! {
        #imp
        #(#lint_attrs)*
        impl #p::Toolset for #self_ty {
            const TOOL_NAMES: &'static [&'static str] = &[#(#names),*];
            fn tool_table() -> &'static #p::ToolTable<Self> {
                #body
            }
        }
        #errors
    }
}
