//! `#[wire]`: derive `Serialize`, `Deserialize` and `JsonSchema` through the SDK's
//! re-exports, so an author needs no direct `serde` or `schemars` dependency.

use proc_macro2::TokenStream;
use quote::quote;

use crate::args::{self, Errors};

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let krate = args::crate_only(attr, "#[wire]", &mut errors);
    let derive = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(_) | syn::Item::Enum(_)) => true,
        Ok(other) => {
            errors.spanned(
                crate::item_head(&other),
                "#[wire] goes on a struct or an enum",
            );
            false
        }
        Err(e) => {
            errors.push(e);
            false
        }
    };
    if !derive {
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
