//! The client's side of the openreward SDK's additions (PROTOCOL_NOTES rows `openreward-sdk`
//! onwards), against whichever server the library checks run on: `reason` of refused calls,
//! the finished latch, `/messages` (with the `/prompt` fallback), `/version`, the terminal
//! tool, `toolset_name` and group scoring. ors-sdk 0.1.0 predates them all; the checks expect
//! what each server does.

use ors_client::{
    Block, Client, Error, GroupCandidate, JsonObject, Message, Role, ToolErrorReason,
};
use serde_json::json;

use super::checks::{ensure, eq, Ctx, Expect, Report};

/// Run the checks.
pub(super) async fn run(r: &mut Report, client: &Client, expect: Expect) {
    let env = client.environment("conformance");
    let newer = expect != Expect::Reference;
    let note = if newer {
        "reason sent"
    } else {
        "no reason: ors-sdk predates it"
    };
    r.record("extensions.reason", note, async {
        let s = env.session_at("train", 1).await.ctx("create")?;
        let got = match s.call("no_such_tool", json!({})).await {
            Err(Error::ToolError { reason, .. }) => reason,
            other => return Err(format!("unknown tool: {other:?}")),
        };
        s.close().await.ctx("close")?;
        eq("reason", got, newer.then_some(ToolErrorReason::NotFound))
    })
    .await;
    let note = if newer {
        "latched"
    } else {
        "no latch: ors-sdk predates it"
    };
    r.record("extensions.finished-latch", note, async {
        let s = env.session_at("train", 3).await.ctx("create")?;
        let wrong = s
            .call("submit", json!({"answer": "5"}))
            .await
            .ctx("submit")?;
        eq("finished", wrong.finished, true)?;
        let again = s.call("submit", json!({"answer": "6"})).await;
        s.close().await.ctx("close")?;
        match (newer, again) {
            (true, Err(Error::ToolError { reason, .. })) => {
                eq("reason", reason, Some(ToolErrorReason::EpisodeFinished))
            }
            (false, Ok(out)) => eq("reward after finished", out.reward, Some(1.0)),
            (_, other) => Err(format!("second submit: {other:?}")),
        }
    })
    .await;
    r.run("extensions.messages", async {
        // ors-sdk has no /messages: the client falls back to the prompt.
        let s = env.session_at("train", 4).await.ctx("create")?;
        let messages = s.messages().await.ctx("messages")?;
        let prompt = s.prompt().await.ctx("prompt")?;
        s.close().await.ctx("close")?;
        eq("messages", messages, vec![Message::user(prompt)])
    })
    .await;
    r.run("extensions.version", async {
        match (newer, client.version().await) {
            (true, Ok(v)) => ensure(!v.version.is_empty(), || "empty version".into()),
            (false, Err(e)) => eq("status", e.status(), Some(404)),
            (_, other) => Err(format!("version: {other:?}")),
        }
    })
    .await;
    r.run("extensions.terminal-tool", async {
        let listing = env.listing().await.ctx("tools")?;
        eq("terminal tool", listing.terminal_tool, None)?;
        let s = env.session_at("train", 1).await.ctx("create")?;
        let err = s.call_terminal("4").await;
        s.close().await.ctx("close")?;
        match err {
            Err(Error::InvalidArgument(m)) => ensure(m.contains("no terminal tool"), || m),
            other => Err(format!("call_terminal without one: {other:?}")),
        }
    })
    .await;
    r.run("extensions.unknown-toolset", async {
        let got = env
            .session(ors_client::TaskRef::at("train", 1))
            .toolset("no-such-toolset")
            .await;
        // ors-sdk does not know the field (422); the others refuse the name (400).
        let want = if newer { 400 } else { 422 };
        match got {
            Err(e) => eq("status", e.status(), Some(want)),
            Ok(s) => {
                s.close().await.ctx("close")?;
                Err("an unknown toolset opened a session".into())
            }
        }
    })
    .await;
    let note = if newer {
        "scored"
    } else {
        "unsupported: ors-sdk predates it"
    };
    r.record("extensions.score-group", note, async {
        let listed = env.listing().await.ctx("tools")?.supports_score_group;
        eq("supports_score_group", listed == Some(true), newer)?;
        // Task 1 of train: the answer is "2"; the fixture scores a right final answer 1.0.
        let s = env.session_at("train", 1).await.ctx("create")?;
        let got = s
            .score_group(vec![candidate("3", None), candidate(" 2 ", None)])
            .await;
        if !newer {
            s.close().await.ctx("close")?;
            return match got {
                Err(Error::Unsupported { .. }) => Ok(()),
                other => Err(format!("score_group on ors-sdk: {other:?}")),
            };
        }
        let rewards: Vec<f64> = got.ctx("score_group")?.iter().map(|s| s.reward).collect();
        eq("rewards", rewards, vec![0.0, 1.0])?;
        let mut omit = JsonObject::new();
        omit.insert("score".into(), "omit".into());
        let miscounted = s
            .score_group(vec![candidate("2", None), candidate("2", Some(omit))])
            .await;
        s.close().await.ctx("close")?;
        match miscounted {
            Err(Error::ToolCrashed { message }) => {
                ensure(message.contains("1 scores for 2 candidates"), || message)
            }
            other => Err(format!("a miscounting judge: {other:?}")),
        }
    })
    .await;
}

/// A candidate whose final answer is `answer`.
fn candidate(answer: &str, metadata: Option<JsonObject>) -> GroupCandidate {
    let turn = Message {
        role: Role::Assistant,
        blocks: vec![Block::text(answer).into()],
        detail: None,
    };
    GroupCandidate {
        messages: vec![turn],
        metadata,
    }
}
