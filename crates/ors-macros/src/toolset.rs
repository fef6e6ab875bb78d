//! `#[toolset]` on an inherent impl: the impl as written (minus `#[tool]`), plus
//! `impl Toolset` with the tool names (for compile-time collision checks) and the table.

use proc_macro2::TokenStream;
use quote::quote;

use crate::args::{self, Errors};
use crate::table;
use crate::tool;

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let krate = &args::crate_only(attr, "#[toolset]", &mut errors);
    let wrong_item = "#[toolset] goes on an inherent impl: `impl YourToolset { ... }`";
    let mut imp = match crate::parse_impl(item, wrong_item, &mut errors) {
        Ok(imp) => imp,
        Err(emitted) => return emitted,
    };
    let fatal = imp.trait_.is_some() || !imp.generics.params.is_empty();
    if let Some((_, path, _)) = &imp.trait_ {
        errors.spanned(
            path,
            "#[toolset] goes on an inherent impl `impl YourToolset { ... }`, not on a trait impl \
             (for an environment use #[environment])",
        );
    }
    if !imp.generics.params.is_empty() {
        errors.spanned(
            &imp.generics,
            "#[toolset] does not support generic impls: the tool table is built for one type",
        );
    }
    let found = tool::ToolMethods::take(&mut imp.items, &mut errors);
    let self_ty = &*imp.self_ty;
    let p = quote!(#krate::__private);

    if fatal {
        // The tools go to an inherent impl (a trait impl cannot hold them), and `Toolset` is
        // implemented by a stub that cannot fail, so the error above is the only message:
        // neither the methods nor an environment including this toolset add one. For a generic
        // impl, the stub's requirements are where-clauses rather than second errors.
        let bounds = (!imp.generics.params.is_empty())
            .then(|| quote!(#self_ty: ::core::marker::Send + ::core::marker::Sync + 'static,));
        let stub = crate::impl_beside(
            &imp,
            Some(quote!(#p::Toolset)),
            quote!(#bounds),
            quote! {
                const TOOL_NAMES: &'static [&'static str] = &[];
                fn tool_table() -> #p::ToolTable<Self> {
                    ::core::unreachable!()
                }
            },
        );
        let methods = match imp.trait_ {
            Some(_) => found.split_off(&mut imp.items),
            None => Vec::new(),
        };
        let inherent = (!methods.is_empty())
            .then(|| crate::impl_beside(&imp, None, quote!(), quote!(#(#methods)*)));
        return errors.after(quote! {
            #imp
            #inherent
            #stub
        });
    }

    let tools = table::dedup(found.tools, &mut errors);
    let names = tools.iter().map(|t| &t.name);
    let (body, tool_items) = table::table(&imp, krate, &tools, quote!());
    let toolset = crate::impl_beside(
        &imp,
        Some(quote!(#p::Toolset)),
        quote!(),
        quote! {
            const TOOL_NAMES: &'static [&'static str] = &[#(#names),*];
            fn tool_table() -> #p::ToolTable<Self> {
                #body
            }
        },
    );
    let attr_uses = tool::use_attr_paths(&found.attrs, &crate::cfgs(&imp));
    errors.after(quote! {
        #imp
        #toolset
        #tool_items
        #attr_uses
    })
}
