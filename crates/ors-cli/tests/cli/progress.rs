//! Progress events in `ors call` and `ors play`, and how `ors tools` shows enums and defaults,
//! with an environment made for it.

use ors_server::Server;
use serde_json::Value;

use super::support::{ok, ors};

/// An environment whose tool reports progress, with an enum parameter and defaults.
mod ticker {
    use ors_server::prelude::*;

    /// A task of [`Ticker`].
    #[wire]
    pub struct Tick {
        n: u32,
    }

    #[wire]
    #[derive(Default)]
    #[serde(rename_all = "lowercase")]
    pub enum Speed {
        #[default]
        Fast,
        Slow,
    }

    fn three() -> u32 {
        3
    }

    #[wire]
    pub struct Count {
        /// How far to count.
        #[serde(default = "three")]
        to: u32,
        /// How fast.
        #[serde(default)]
        speed: Speed,
    }

    pub struct Ticker;

    #[environment]
    impl Environment for Ticker {
        type Task = Tick;

        fn splits() -> Vec<Split> {
            vec![Split::train("train")]
        }

        async fn tasks(_split: &str) -> Result<Vec<Tick>, EnvError> {
            Ok(vec![Tick { n: 0 }])
        }

        async fn new(_task: Tick, _secrets: Secrets) -> Result<Self, EnvError> {
            Ok(Ticker)
        }

        async fn prompt(&self) -> Result<Blocks, EnvError> {
            Ok(vec![Block::text("Count.")])
        }

        /// Count to `to`, reporting each step as progress.
        #[tool]
        fn count(&self, ctx: &ToolContext, input: Count) -> String {
            let _ = input.speed;
            for i in 1..=input.to {
                ctx.progress(serde_json::json!({"step": i}));
            }
            format!("counted to {}", input.to)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_and_play_show_progress_and_tools_show_enums_and_defaults() {
    let srv = Server::new()
        .host("127.0.0.1")
        .port(0)
        .environment::<ticker::Ticker>()
        .bind()
        .await
        .unwrap();
    let url = srv.url().to_string();

    let out = ok(&ors(&["tools", "ticker", "--url", &url], "").await);
    assert!(
        out.contains(r#"speed?: "fast"|"slow" = "fast", to?: integer = 3"#),
        "{out}"
    );

    // No input after the tool: it gets `{}`, so the defaults apply.
    let out = ok(&ors(
        &[
            "call", "ticker", "--split", "train", "--index", "0", "count", "--url", &url,
        ],
        "",
    )
    .await);
    assert!(
        out.contains(
            "> count {}\nprogress {\"step\":1}\nprogress {\"step\":2}\nprogress {\"step\":3}\ncounted to 3"
        ),
        "{out}"
    );
    let out = ok(&ors(
        &[
            "call",
            "ticker",
            "--split",
            "train",
            "--index",
            "0",
            "count",
            r#"{"to": 2}"#,
            "--json",
            "--url",
            &url,
        ],
        "",
    )
    .await);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["calls"][0]["progress"],
        serde_json::json!([{"step": 1}, {"step": 2}])
    );

    let out = ok(&ors(
        &[
            "play", "ticker", "--split", "train", "--index", "0", "--url", &url,
        ],
        "count {\"to\": 1}\n",
    )
    .await);
    assert!(out.contains("progress {\"step\":1}\ncounted to 1"), "{out}");
    srv.shutdown().await;
}
