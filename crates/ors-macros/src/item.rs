//! The author's item, for every macro: reading it as the `impl` a macro expects (naming its
//! head when it is something else), and the code emitted beside it, spanned and `cfg`-ed as
//! the author's own.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

use crate::args::Errors;

/// Parse the item under `#[environment]` / `#[toolset]` as an `impl` block. Anything else is
/// emitted unchanged beside the collected errors (plus `wrong_item` on its head), so one
/// mistake gives one message.
pub(crate) fn parse_impl(
    item: TokenStream,
    wrong_item: &str,
    errors: &mut Errors,
) -> Result<syn::ItemImpl, TokenStream> {
    let e = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Impl(imp)) => return Ok(imp),
        Ok(other) => syn::Error::new_spanned(item_head(&other), wrong_item),
        Err(e) => e,
    };
    errors.push(e);
    Err(std::mem::take(errors).after(item))
}

/// The head of an item (`struct Foo`, `fn foo`), so an error about the item as a whole
/// underlines one line rather than the whole body.
pub(crate) fn item_head(item: &syn::Item) -> TokenStream {
    use syn::Item;
    let (keyword, name): (&dyn ToTokens, &dyn ToTokens) = match item {
        Item::Struct(s) => (&s.struct_token, &s.ident),
        Item::Enum(e) => (&e.enum_token, &e.ident),
        Item::Fn(f) => (&f.sig.fn_token, &f.sig.ident),
        Item::Trait(t) => (&t.trait_token, &t.ident),
        Item::Mod(m) => (&m.mod_token, &m.ident),
        Item::Impl(i) => (&i.impl_token, &i.self_ty),
        other => return other.to_token_stream(),
    };
    quote::quote!(#keyword #name)
}

/// `tokens` with every span set to `span`: generated code that names the SDK carries the span
/// of the author's token it is about, so an error in it is reported there.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    use proc_macro2::{Group, TokenTree};
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(g) = &tt {
                tt = TokenTree::Group(Group::new(g.delimiter(), respan(g.stream(), span)));
            }
            tt.set_span(span);
            tt
        })
        .collect()
}

/// The `cfg` attributes of the author's impl, for the items the macros add beside it: what is
/// compiled out with the impl is compiled out with them.
pub(crate) fn cfgs(imp: &syn::ItemImpl) -> TokenStream {
    imp.attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .map(quote::ToTokens::to_token_stream)
        .collect()
}

/// An impl the macros add beside the author's `imp`, for the same type with the same generics
/// and `cfg` / lint attributes: `impl #trait_ for Type` (or inherent, without a trait), with
/// `bounds` added to its where-clause.
pub(crate) fn impl_beside(
    imp: &syn::ItemImpl,
    trait_: Option<TokenStream>,
    bounds: TokenStream,
    body: TokenStream,
) -> TokenStream {
    let attrs = imp.attrs.iter().filter(|attr| {
        ["cfg", "allow", "expect", "warn", "deny"]
            .iter()
            .any(|name| attr.path().is_ident(name))
    });
    let (impl_generics, _, where_clause) = imp.generics.split_for_impl();
    let predicates = where_clause.map(|w| &w.predicates);
    let self_ty = &imp.self_ty;
    let trait_ = trait_.map(|t| quote::quote!(#t for));
    quote::quote! {
        #(#attrs)*
        impl #impl_generics #trait_ #self_ty where #bounds #predicates {
            #body
        }
    }
}
