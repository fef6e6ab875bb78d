//! `#[wire]`: derive `Serialize`, `Deserialize` and `JsonSchema` through the SDK's
//! re-exports, so an author needs no direct `serde` or `schemars` dependency.

use proc_macro2::TokenStream;
use quote::quote;

use crate::args::{self, Errors};

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let krate = args::crate_only(attr, "#[wire]", &mut errors);
    let wrong = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(_) | syn::Item::Enum(_)) => None,
        Ok(other) => Some(syn::Error::new_spanned(
            crate::item_head(&other),
            "#[wire] goes on a struct or an enum",
        )),
        Err(e) => Some(e),
    };
    if let Some(e) = wrong {
        errors.push(e);
        return errors.after(item);
    }
    let serde = quote!(#krate::__private::serde);
    let schemars = quote!(#krate::__private::schemars);
    let serde_str = serde.to_string().replace(' ', "");
    let schemars_str = schemars.to_string().replace(' ', "");
    errors.after(quote! {
        #[derive(#serde::Serialize, #serde::Deserialize, #schemars::JsonSchema)]
        #[serde(crate = #serde_str)]
        #[schemars(crate = #schemars_str)]
        #item
    })
}
