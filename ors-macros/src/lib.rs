//! Attribute macros of ors-rs (placeholder; implemented by the macro work).
use proc_macro::TokenStream;

/// Turns `impl Environment for T { ... }` into an ORS environment.
#[proc_macro_attribute]
pub fn environment(_attr: TokenStream, item: TokenStream) -> TokenStream { item }
/// Marks a tool method.
#[proc_macro_attribute]
pub fn tool(_attr: TokenStream, item: TokenStream) -> TokenStream { item }
/// Turns an inherent impl into a reusable toolset.
#[proc_macro_attribute]
pub fn toolset(_attr: TokenStream, item: TokenStream) -> TokenStream { item }
/// Derives serde and schemars traits through ors-server's re-exports.
#[proc_macro_attribute]
pub fn wire(_attr: TokenStream, item: TokenStream) -> TokenStream { item }
