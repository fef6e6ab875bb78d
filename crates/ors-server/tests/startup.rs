//! What a user sees when the server cannot start: a sentence naming the cause and the fix,
//! also through `main`'s `Debug` printing of the error.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_server::prelude::*;
use ors_server::{Server, ServerError};

#[wire]
struct T {
    q: String,
}

struct Tiny;

#[environment]
impl Environment for Tiny {
    type Task = T;
    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn tasks(_s: &str) -> Result<Vec<T>, EnvError> {
        Ok(vec![])
    }
    async fn new(_t: T, _s: Secrets) -> Result<Self, EnvError> {
        Ok(Tiny)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }
    /// Say hi.
    #[tool]
    fn hi(&self) -> String {
        "hi".into()
    }
}

#[tokio::test]
async fn a_port_in_use_names_the_port_and_ors_port() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = Server::new()
        .host("127.0.0.1")
        .port(port)
        .environment::<Tiny>()
        .bind()
        .await
        .expect_err("the port is taken");
    assert!(matches!(err, ServerError::Bind { .. }), "{err}");
    // `fn main() -> Result<(), ServerError>` prints `Error: {err:?}`.
    let shown = format!("{err:?}");
    assert_eq!(shown, err.to_string());
    assert!(
        shown.contains(&format!("port {port} is taken")) && shown.contains("ORS_PORT"),
        "{shown}"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert_eq!(format!("{boxed:?}"), shown);
}
