//! `wire_enum!`: a unit enum whose variants are declared with their wire names, so each name is
//! written once and `as_str`, `Display`, `ALL` (and, with a leading `serde`, the serde names)
//! all come from it. A leaf module, so the modules using it do not point back at the crate root.

/// Declare a unit enum as `Variant = "wire_name",` rows: it gets `ALL` (declaration order),
/// `as_str` and `Display`; `wire_enum! { serde ... }` also derives `Serialize`/`Deserialize`
/// with the same names (the calling crate depends on `serde` then). Exported for the client's
/// trajectory enums, which are wire names too.
#[macro_export]
macro_rules! wire_enum {
    (serde $(#[$meta:meta])* pub enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $wire:literal,)*
    }) => {
        $crate::wire_enum! {
            $(#[$meta])*
            #[derive(serde::Serialize, serde::Deserialize)]
            pub enum $name {
                $($(#[$vmeta])* #[serde(rename = $wire)] $variant = $wire,)*
            }
        }
    };
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $wire:literal,)*
    }) => {
        $(#[$meta])*
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every variant, in a stable order.
            pub const ALL: [$name; [$($wire),*].len()] = [$($name::$variant,)*];

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)*
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
