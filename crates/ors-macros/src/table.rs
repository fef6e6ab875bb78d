//! The tool table shared by `#[environment]` and `#[toolset]`: duplicate-name checks at
//! expansion time, and the body of the table function (a builder chain, run once per served
//! environment).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemImpl, Member, Path, Type};

use crate::args::Errors;
use crate::tool::Tool;

/// Drop tools whose name an earlier tool of the same impl already has, with an error on the
/// later name.
pub(crate) fn dedup(tools: Vec<Tool>, errors: &mut Errors) -> Vec<Tool> {
    let mut kept: Vec<Tool> = Vec::with_capacity(tools.len());
    for tool in tools {
        if kept.iter().any(|t| t.name == tool.name) {
            errors.at(
                tool.name_span,
                format!(
                    "duplicate tool name `{}`: an earlier #[tool] in this impl has it; \
                     rename one with #[tool(name = \"...\")]",
                    tool.name
                ),
            );
        } else {
            kept.push(tool);
        }
    }
    kept
}

/// The body of the table function: adapters, then the builder chain, with `more` builder calls
/// before `.build()` (what an environment's table has beyond its methods); and the items beside
/// it: the tools' parameter `const`s (in an inherent impl of the type) and their compile-time
/// checks.
pub(crate) fn table(
    imp: &ItemImpl,
    krate: &Path,
    tools: &[Tool],
    more: TokenStream,
) -> (TokenStream, TokenStream) {
    let (self_ty, p) = (&imp.self_ty, quote!(#krate::__private));
    let adapters = tools.iter().map(|t| t.adapter(self_ty, krate));
    let calls = tools.iter().map(|t| t.builder_call(self_ty, krate));
    let consts: TokenStream = tools.iter().map(|t| t.arg_consts(krate)).collect();
    let cfgs = crate::cfgs(imp);
    let checks = tools.iter().map(|t| t.input_checks(self_ty, krate, &cfgs));
    let consts = (!consts.is_empty()).then(|| crate::impl_beside(imp, None, quote!(), consts));
    let body = quote! {
        #(#adapters)*
        #p::TableBuilder::<#self_ty>::new()
            #(#calls)*
            #more
            .build()
    };
    (body, quote!(#consts #(#checks)*))
}

/// `toolset_field(|env| &mut env.field)`, spanned on the field in `toolsets(...)`. The check
/// and the table emit this same call, so an error in it (no such field, not a toolset) is
/// reported once.
pub(crate) fn toolset_field(self_ty: &Type, krate: &Path, member: &Member) -> TokenStream {
    quote_spanned! {member.span()=>
        #krate::__private::toolset_field::<#self_ty, _>(|__ors_env| &mut __ors_env.#member)
    }
}

/// `const` checks that no toolset field shares a tool name with the environment or with an
/// earlier toolset field, and that no selectable toolset (`select_toolsets`) shares one with
/// the environment or a toolset every session has (two selectable toolsets may: a session has
/// one of them). The error points at the field.
pub(crate) fn collision_checks(
    cfgs: &TokenStream,
    self_ty: &Type,
    krate: &Path,
    tools: &[Tool],
    toolsets: &[Member],
    selectable: &[&Member],
) -> TokenStream {
    if toolsets.is_empty() && selectable.is_empty() {
        return TokenStream::new();
    }
    let p = quote!(#krate::__private);
    let own = tools.iter().map(|t| &t.name);
    let env_name = quote!(#self_ty).to_string().replace(' ', "");
    let names: Vec<_> = (0..toolsets.len())
        .map(|i| quote::format_ident!("__ORS_TOOLSET_{}", i))
        .collect();
    let fields: Vec<String> = toolsets.iter().map(|m| quote!(#m).to_string()).collect();
    let consts = toolsets.iter().zip(&names).map(|(m, n)| {
        let field = toolset_field(self_ty, krate, m);
        quote!(const #n: &[&str] = #field.names;)
    });
    // Each always-included field against the earlier ones; each selectable one against all.
    let always = toolsets.iter().enumerate().map(|(i, m)| (m, i));
    let chosen = selectable.iter().map(|m| (*m, toolsets.len()));
    let checks = always.chain(chosen).map(|(m, earlier)| {
        let field = toolset_field(self_ty, krate, m);
        let field_name = quote!(#m).to_string();
        let earlier_fields = &fields[..earlier];
        let earlier_names = &names[..earlier];
        quote_spanned! {m.span()=>
            if let #p::Option::Some(msg) = #p::toolset_collision(
                #env_name,
                __ORS_OWN,
                &[#((#earlier_fields, #earlier_names)),*],
                #field_name,
                #field.names,
            )
            .as_str()
            {
                ::core::panic!("{}", msg);
            }
        }
    });
    quote! {
        #cfgs
        const _: () = {
            const __ORS_OWN: &[&str] = &[#(#own),*];
            #(#consts)*
            #(#checks)*
        };
    }
}
