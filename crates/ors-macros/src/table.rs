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

/// What an environment's table has beyond its methods and toolsets (a toolset has none).
#[derive(Default)]
pub(crate) struct EnvExtras<'a> {
    /// `#[environment(reasoning)]`.
    pub(crate) reasoning: bool,
    /// `#[environment(dynamic_tools = path)]`.
    pub(crate) dynamic_tools: Option<&'a Path>,
    /// `#[environment(calls_after_finished)]`.
    pub(crate) calls_after_finished: bool,
    /// `#[environment(select_toolsets(field = "name"))]`.
    pub(crate) selectable: &'a [(Member, syn::LitStr)],
}

/// The body of the table function: adapters, then the builder chain. An environment's reads
/// its state as `__ors_state`.
pub(crate) fn table_body(
    self_ty: &Type,
    krate: &Path,
    tools: &[Tool],
    toolsets: &[Member],
    extras: &EnvExtras<'_>,
) -> TokenStream {
    let p = quote!(#krate::__private);
    let adapters = tools.iter().map(|t| t.adapter(self_ty, krate));
    let calls = tools.iter().map(|t| t.builder_call(self_ty, krate));
    let includes = toolsets.iter().map(|m| {
        let field = toolset_field(self_ty, krate, m);
        quote!(.toolset(#field))
    });
    // Spanned on the path, so a function of the wrong type is reported there.
    let dynamic = extras
        .dynamic_tools
        .map(|f| quote_spanned!(f.span()=> .dynamic_tools(#f(__ors_state))));
    let selectable = extras.selectable.iter().map(|(m, name)| {
        let field = toolset_field(self_ty, krate, m);
        quote!(.select_toolset(#name, #field))
    });
    let reasoning = extras.reasoning.then(|| quote!(.reasoning()));
    let after_finished = extras
        .calls_after_finished
        .then(|| quote!(.calls_after_finished()));
    quote! {
        #(#adapters)*
        #p::TableBuilder::<#self_ty>::new()
            #(#calls)*
            #(#includes)*
            #dynamic
            #(#selectable)*
            #reasoning
            #after_finished
            .build()
    }
}

/// The items beside the table: the tools' parameter `const`s (in an inherent impl of the type)
/// and their compile-time checks.
pub(crate) fn tool_items(imp: &ItemImpl, krate: &Path, tools: &[Tool]) -> TokenStream {
    let consts: TokenStream = tools.iter().map(|t| t.arg_consts(krate)).collect();
    let cfgs = crate::cfgs(imp);
    let checks = tools
        .iter()
        .map(|t| t.input_checks(&imp.self_ty, krate, &cfgs));
    let consts = (!consts.is_empty()).then(|| crate::impl_beside(imp, None, quote!(), consts));
    quote! {
        #consts
        #(#checks)*
    }
}

/// `toolset_field(|env| &mut env.field)`, spanned on the field in `toolsets(...)`. The check
/// and the table emit this same call, so an error in it (no such field, not a toolset) is
/// reported once.
fn toolset_field(self_ty: &Type, krate: &Path, member: &Member) -> TokenStream {
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
    own: &[String],
    toolsets: &[Member],
    selectable: &[&Member],
) -> TokenStream {
    if toolsets.is_empty() && selectable.is_empty() {
        return TokenStream::new();
    }
    let p = quote!(#krate::__private);
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
