//! Checks the generated code runs at compile time, in `const` items spanned on the offending
//! token: that `#[environment]` is on an `Environment` impl, tool name collisions between an
//! environment and its toolsets, and `#[tool]` on a method of the `Environment` trait.

use crate::env::{Environment, ENVIRONMENT_METHODS};

/// A type whose impl under `#[environment]` is an impl of [`Environment`]: the trait is
/// recognised by type, so however it is imported or renamed.
#[diagnostic::on_unimplemented(
    message = "#[environment] goes on `impl Environment for {Self} {{ ... }}`, not on an impl of \
               another trait",
    label = "this trait is not `Environment`"
)]
pub trait ImplementsEnvironment {}

#[diagnostic::do_not_recommend]
impl<T: Environment> ImplementsEnvironment for T {}

/// Compiles only when `T` implements [`Environment`].
pub const fn implements_environment<T: ImplementsEnvironment>() {}

/// Index in `a` of the first name that `b` also has.
pub const fn first_collision(a: &[&str], b: &[&str]) -> Option<usize> {
    let mut i = 0;
    while i < a.len() {
        let mut j = 0;
        while j < b.len() {
            if str_eq(a[i], b[j]) {
                return Some(i);
            }
            j += 1;
        }
        i += 1;
    }
    None
}

const fn str_eq(a: &str, b: &str) -> bool {
    // Byte by byte (`==` on slices is not `const`).
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    while let ([x, a_rest @ ..], [y, b_rest @ ..]) = (a, b) {
        if *x != *y {
            return false;
        }
        (a, b) = (a_rest, b_rest);
    }
    a.is_empty() && b.is_empty()
}

/// The message of a toolset collision, built at compile time (a `const` panic can only print
/// one `&str`).
pub struct CollisionMessage {
    buf: [u8; 512],
    len: usize,
}

impl CollisionMessage {
    const fn push(mut self, s: &str) -> Self {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < self.buf.len() {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// The message, or `None` when there is no collision.
    pub const fn as_str(&self) -> Option<&str> {
        if self.len == 0 {
            return None;
        }
        let bytes = self.buf.split_at(self.len).0;
        match std::str::from_utf8(bytes) {
            Ok(s) => Some(s),
            // Cut inside a character by the length limit: keep the whole characters.
            Err(e) => match std::str::from_utf8(bytes.split_at(e.valid_up_to()).0) {
                Ok(s) => Some(s),
                Err(_) => Some("tool name collision between an environment and its toolsets"),
            },
        }
    }
}

/// Check the toolset in field `field` (tools `names`) against the environment's own tools
/// and the toolsets included before it; the message says which name collides where.
pub const fn toolset_collision(
    env: &str,
    own: &[&str],
    earlier: &[(&str, &[&str])],
    field: &str,
    names: &[&str],
) -> CollisionMessage {
    let msg = CollisionMessage {
        buf: [0; 512],
        len: 0,
    };
    if let Some(i) = first_collision(names, own) {
        return msg
            .push("tool name collision: `")
            .push(names[i])
            .push("` is a tool of `")
            .push(env)
            .push("` and of its toolset field `")
            .push(field)
            .push("`; rename one of them with #[tool(name = \"...\")]");
    }
    let mut k = 0;
    while k < earlier.len() {
        if let Some(i) = first_collision(names, earlier[k].1) {
            return msg
                .push("tool name collision: `")
                .push(names[i])
                .push("` is a tool of both toolset fields `")
                .push(earlier[k].0)
                .push("` and `")
                .push(field)
                .push("` of `")
                .push(env)
                .push("`; rename one of them with #[tool(name = \"...\")]");
        }
        k += 1;
    }
    msg
}

/// Whether `method` is a method of the `Environment` trait (which must stay in the trait impl,
/// so it cannot be moved out as a `#[tool]`).
pub const fn is_environment_method(method: &str) -> bool {
    first_collision(&[method], ENVIRONMENT_METHODS).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collisions_name_the_tool_and_where_it_is_defined() {
        const OWN: &[&str] = &["submit", "add"];
        let msg = toolset_collision("Gsm8k", OWN, &[], "calc", &["mul", "add"]);
        assert_eq!(
            msg.as_str(),
            Some(
                "tool name collision: `add` is a tool of `Gsm8k` and of its toolset field \
                 `calc`; rename one of them with #[tool(name = \"...\")]"
            )
        );
        let msg = toolset_collision("E", &[], &[("a", &["x", "y"])], "b", &["y"]);
        assert_eq!(
            msg.as_str(),
            Some(
                "tool name collision: `y` is a tool of both toolset fields `a` and `b` of `E`; \
                 rename one of them with #[tool(name = \"...\")]"
            )
        );
        assert_eq!(
            toolset_collision("E", OWN, &[("a", &["x"])], "b", &["z"]).as_str(),
            None
        );
    }

    #[test]
    fn an_overlong_collision_message_is_cut_not_broken() {
        let long = "x".repeat(600);
        let msg = toolset_collision("E", &[long.as_str()], &[], "f", &[long.as_str()]);
        let text = msg.as_str().expect("a collision");
        assert_eq!(text.len(), 512);
        assert!(text.starts_with("tool name collision: `xxx"));
    }

    #[test]
    fn a_cut_inside_a_character_keeps_the_whole_characters() {
        let long = "é".repeat(300);
        let msg = toolset_collision(&long, &["t"], &[], "f", &["t"]);
        let text = msg.as_str().expect("a collision");
        assert_eq!(text.len(), 511);
        assert!(text.ends_with('é'));
    }
}
