//! The endpoint handlers of the HTTP API page, one function each.

use std::sync::Arc;

use bytes::{BufMut as _, Bytes, BytesMut};
use http::header::CONTENT_LENGTH;
use http::request::Parts;
use hyper::body::Incoming;
use ors_core::sse;
use ors_core::types::{
    CreateSession, GetTask, GetTaskRange, GroupCandidate, ListTasks, Message, MessageBlock,
    NumTasks, NumTasksResponse, ScoreGroup, TaskRangeResponse, TaskResponse, TaskSource,
    VersionInfo,
};

use crate::app::{listing, note, App, HostedEnv};
use crate::body::{json_bytes, sse_full, Resp};
use crate::call;
use crate::error::{json, to_json, ApiError};
use crate::request::{self, parse_body};
use crate::request_body;
use crate::router::Endpoint;
use crate::session::{Ending, Session};
use crate::sid::Origin;
use crate::util::caught;

const HEALTH: &[u8] = b"{\"status\":\"ok\"}";

/// What a handler gets: the environment the path names (the default one for root routes and
/// env routes without the segment), the request's head and its body.
pub(crate) struct Req<'a> {
    env: &'a HostedEnv,
    parts: &'a Parts,
    body: Incoming,
}

/// `App::dispatch`, one arm an endpoint of the route table.
macro_rules! dispatch {
    ($($endpoint:ident: $method:ident $scope:ident $access:ident [$($path:expr),+] => $handler:ident,)*) => {
        impl App {
            /// Run the handler of an endpoint; an unknown environment in the path is a 404.
            pub(crate) async fn dispatch(
                &self,
                endpoint: Endpoint,
                env: Option<&str>,
                parts: &Parts,
                body: Incoming,
            ) -> Result<Resp, ApiError> {
                let req = Req { env: self.env(env)?.1, parts, body };
                match endpoint {
                    $(Endpoint::$endpoint => self.$handler(req).await,)*
                }
            }
        }
    };
}
crate::router::endpoints!(dispatch);

impl App {
    async fn health(&self, _: Req<'_>) -> Result<Resp, ApiError> {
        Ok(json_bytes(Bytes::from_static(HEALTH)))
    }

    async fn list_environments(&self, _: Req<'_>) -> Result<Resp, ApiError> {
        Ok(json_bytes(self.list_envs_json.clone()))
    }

    async fn ping(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        self.sessions.get(session_id(req.parts)?)?;
        Ok(json_bytes(Bytes::from_static(HEALTH)))
    }

    async fn tools(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        Ok(json_bytes(req.env.tools_json.clone()))
    }

    async fn splits(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        Ok(json_bytes(req.env.splits_json.clone()))
    }

    /// `{"tasks": [...], "env_name": "..."}` from the split's pre-rendered array.
    async fn tasks(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let body: ListTasks = parse_body(&self.body(req.parts, req.body).await?)?;
        let tasks = req.env.tasks_json(&body.split).await?;
        let name = to_json(&req.env.name)?;
        let mut out = BytesMut::with_capacity(tasks.len() + name.len() + 24);
        out.put_slice(b"{\"tasks\":");
        out.put_slice(&tasks);
        out.put_slice(b",\"env_name\":");
        out.put_slice(&name);
        out.put_u8(b'}');
        Ok(json_bytes(out.freeze()))
    }

    async fn num_tasks(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let body: NumTasks = parse_body(&self.body(req.parts, req.body).await?)?;
        json(&NumTasksResponse {
            num_tasks: req.env.env.num_tasks(&body.split).await? as u64,
        })
    }

    async fn task(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let body: GetTask = parse_body(&self.body(req.parts, req.body).await?)?;
        json(&TaskResponse {
            task: req.env.env.task(&body.split, body.index).await?,
            env_name: Some(req.env.name.clone()),
        })
    }

    async fn task_range(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let GetTaskRange { split, start, stop } =
            parse_body(&self.body(req.parts, req.body).await?)?;
        json(&TaskRangeResponse {
            tasks: req.env.env.task_range(&split, start, stop).await?,
            env_name: Some(req.env.name.clone()),
        })
    }

    async fn task_tools(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let (session, hosted) = self.ready_session(req.parts).await?;
        let slot = session.episode.lock().await;
        let episode = slot.as_ref().ok_or_else(|| session.gone())?;
        let tools = caught(async { episode.tools() })
            .await
            .map_err(|p| ApiError::Internal(format!("task_tools panicked: {p}")))?;
        json(&listing(&*hosted.env, tools))
    }

    async fn prompt(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let (session, _) = self.ready_session(req.parts).await?;
        let slot = session.episode.lock().await;
        let episode = slot.as_ref().ok_or_else(|| session.gone())?;
        let blocks = caught(episode.prompt())
            .await
            .map_err(|p| ApiError::Internal(format!("prompt panicked: {p}")))?
            .map_err(|e| ApiError::Internal(format!("prompt failed: {e}")))?;
        json(&blocks)
    }

    async fn version(&self, _: Req<'_>) -> Result<Resp, ApiError> {
        json(&VersionInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            build_sha: option_env!("ORS_BUILD_SHA").map(str::to_owned),
            protocol_notes: Some(PROTOCOL_NOTES_REVISION.to_string()),
        })
    }

    async fn messages(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        let (session, _) = self.ready_session(req.parts).await?;
        let slot = session.episode.lock().await;
        let episode = slot.as_ref().ok_or_else(|| session.gone())?;
        let messages = caught(episode.messages())
            .await
            .map_err(|p| ApiError::Internal(format!("messages panicked: {p}")))?
            .map_err(|e| ApiError::Internal(format!("messages failed: {e}")))?;
        if let Some(block) = messages.iter().find_map(Message::misplaced_block) {
            return Err(ApiError::Internal(format!(
                "the environment's messages put a '{}' block in the wrong role's turn \
                 (reasoning and tool_call belong in assistant turns, tool_result in user \
                 turns)",
                block.kind()
            )));
        }
        json(&messages)
    }

    async fn body(&self, parts: &Parts, body: Incoming) -> Result<Bytes, ApiError> {
        let length = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        request_body::read_body(body, length, &self.body_limits).await
    }

    /// The session of the request's `X-Session-ID`, once its setup has finished, and its
    /// environment.
    async fn ready_session(&self, parts: &Parts) -> Result<(Arc<Session>, &HostedEnv), ApiError> {
        let (session, hosted) = self.live_session(session_id(parts)?)?;
        session.ready_within(self.config.setup_wait).await?;
        Ok((session, hosted))
    }

    /// The live session `sid` names and its environment, which serves episode routes
    /// whatever the path says (PROTOCOL_NOTES row `path-env-not-validated`); the span shows
    /// that one.
    fn live_session(&self, sid: &str) -> Result<(Arc<Session>, &HostedEnv), ApiError> {
        let session = self.sessions.get(sid)?;
        let hosted = self.envs.get(session.env).ok_or_else(|| session.gone())?;
        note("env", hosted.name.as_str());
        Ok((session, hosted))
    }

    /// A fresh session id: JSON `{"sid"}`, or SSE `task_id` + empty `end` for clients that
    /// accept `text/event-stream` (PROTOCOL_NOTES row `create-session-reply`). Nothing is stored until `create`.
    async fn create_session(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        if self.is_closing() || self.is_draining() {
            return Err(ApiError::ShuttingDown);
        }
        if self.sessions.is_full() {
            return Err(ApiError::TooManySessions {
                max: self.config.max_sessions,
            });
        }
        let sid = self.sessions.ids.issue();
        if request::wants_sse(&req.parts.headers) {
            let mut events = sse::encode_task_id(&sid);
            events.extend_from_slice(&sse::encode_event(sse::EVENT_END, ""));
            Ok(sse_full(Bytes::from(events)))
        } else {
            sid_reply(&sid)
        }
    }

    /// Validate the body, resolve the task, register the session, and run the environment's
    /// setup in the background; requests on the session wait for it.
    async fn create(&self, Req { parts, body, .. }: Req<'_>) -> Result<Resp, ApiError> {
        if self.is_closing() {
            return Err(ApiError::ShuttingDown);
        }
        let sid = session_id(parts)?;
        // An episode starts only under an id this server issued, unless ids are not checked;
        // checked before the body: an id this server did not issue costs no more than its headers.
        if self.sessions.ids.origin(sid) == Origin::Foreign {
            return Err(ApiError::UnknownSessionId(sid.into()));
        }
        let header_secrets = request::header_secrets(&parts.headers)?;
        let body = self.body(parts, body).await?;
        let create: CreateSession = parse_body(&body)?;
        let source = create
            .task_source()
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let (index, env) = self.env(create.env_name.as_deref())?;
        note("env", env.name.as_str());
        if let Some(name) = &create.toolset_name {
            let known = env.env.toolset_names();
            if !known.contains(&name.as_str()) {
                return Err(unknown_toolset(&env.name, name, &known));
            }
        }
        // Checked before resolving the task so a duplicate is a cheap 400; `insert` re-checks.
        if self.sessions.contains(sid) {
            return Err(ApiError::SessionExists(sid.into()));
        }
        let task = match source {
            TaskSource::Spec(task) => task,
            TaskSource::Split { split, index } => env.env.task(&split, index).await?,
        };
        let mut secrets = create.secrets.unwrap_or_default();
        if let Some(from_header) = header_secrets {
            secrets.merge_missing(from_header);
        }
        let results = Arc::clone(&self.calls.results);
        let session = Arc::new(Session::new(sid.into(), index, results));
        self.sessions.insert(Arc::clone(&session))?;
        if self.is_closing() {
            // Shutdown drained the sessions while this request read its body: nothing would
            // ever tear this one down, so it is not started.
            if let Some(s) = self.sessions.remove(sid) {
                s.close(Ending::Shutdown, self.config.shutdown_grace).await;
            }
            return Err(ApiError::ShuttingDown);
        }
        let toolset = create.toolset_name.as_deref();
        let setup = env.env.create(task, secrets, toolset);
        session.start_setup(setup).await;
        self.count(|m| m.sessions_created.inc());
        tracing::debug!(session = sid, env = %env.name, "session created");
        sid_reply(sid)
    }

    /// `delete` tears the episode down (404 never seen or reaped, 410 already deleted:
    /// PROTOCOL_NOTES row `delete-unknown`); `delete_session` does the same when there is
    /// something to delete, else answers 200 anyway (it is optional cleanup).
    async fn delete(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        self.end_session(req.parts, false).await
    }

    async fn delete_session(&self, req: Req<'_>) -> Result<Resp, ApiError> {
        self.end_session(req.parts, true).await
    }

    async fn end_session(&self, parts: &Parts, lenient: bool) -> Result<Resp, ApiError> {
        let sid = session_id(parts)?;
        match self.sessions.remove(sid) {
            Some(session) => {
                let grace = self.config.shutdown_grace;
                session.close(Ending::Deleted, grace).await;
                tracing::debug!(session = sid, "session deleted");
                self.count(|m| m.sessions_deleted.inc());
            }
            None if lenient => {}
            None => return Err(self.sessions.missing(sid)),
        }
        sid_reply(sid)
    }

    /// Start a tool call (or reconnect to one by `task_id`) and stream its events.
    async fn call(&self, Req { parts, body, .. }: Req<'_>) -> Result<Resp, ApiError> {
        let sid = session_id(parts)?;
        let body = self.body(parts, body).await?;
        let tool = request::parse_call(&body)?;
        drop(body);
        note("tool", tool.name.as_str());
        let (session, hosted) = self.live_session(sid)?;
        let request = call::CallRequest {
            work: call::Work::tool(tool.input, hosted.env.is_concurrent(&tool.name)),
            name: tool.name,
            task_id: tool.task_id,
        };
        call::serve(session, request, &self.config, &self.calls).await
    }

    /// Score a group of candidate answers (or reconnect to a scoring by `task_id`), streamed
    /// like a call (PROTOCOL_NOTES row `score-group`). An environment without `score_group`
    /// is a 404 before any stream opens, so a client tells "unsupported" from a failure.
    async fn score_group(&self, Req { parts, body, .. }: Req<'_>) -> Result<Resp, ApiError> {
        let sid = session_id(parts)?;
        let body = self.body(parts, body).await?;
        let (session, hosted) = self.live_session(sid)?;
        if !hosted.env.supports_score_group() {
            return Err(ApiError::ScoreGroupUnsupported(hosted.name.clone()));
        }
        let group: ScoreGroup = parse_body(&body)?;
        misplaced_in_group(&group.candidates)?;
        // The candidates wait behind the session's gate: they, and the body they came from,
        // stay counted in the in-flight budget until the scoring runs.
        let parsed = parsed_bytes(&group.candidates, body.len());
        let limit = self.body_limits.max;
        if parsed > limit.saturating_mul(PARSED_PER_BODY_BYTE) {
            return Err(ApiError::GroupTooLarge { parsed, limit });
        }
        let reserved = request_body::Reserved::new(&self.body_limits.budget, body, parsed)?;
        note("tool", call::SCORE_GROUP);
        let request = call::CallRequest {
            name: call::SCORE_GROUP.to_owned(),
            work: call::Work::Exclusive(call::Exclusive::ScoreGroup(group.candidates, reserved)),
            task_id: group.task_id,
        };
        call::serve(session, request, &self.config, &self.calls).await
    }
}

/// The request's `X-Session-ID`, noted in its span.
fn session_id(parts: &Parts) -> Result<&str, ApiError> {
    let sid = request::session_id(&parts.headers)?;
    note("session", sid);
    Ok(sid)
}

/// The revision of PROTOCOL_NOTES this server follows, for `/version`: the number of its last
/// row, read when the crate compiles. The crate's `PROTOCOL_NOTES.md` is a link to
/// `docs/PROTOCOL_NOTES.md`; `cargo package` stores the file itself, so a crate built outside
/// the workspace reports the notes it was packaged with.
const PROTOCOL_NOTES_REVISION: u32 = last_row(include_str!("../PROTOCOL_NOTES.md"));

/// The number of the notes' last row (a line `| N` then the row's name in backticks); without
/// one the build fails.
const fn last_row(notes: &str) -> u32 {
    let b = notes.as_bytes();
    let (mut i, mut last) = (0, 0);
    while i < b.len() {
        if i + 2 < b.len() && b[i] == b'|' && b[i + 1] == b' ' && b[i + 2].is_ascii_digit() {
            let (mut j, mut n) = (i + 2, 0);
            while j < b.len() && b[j].is_ascii_digit() {
                n = n * 10 + (b[j] - b'0') as u32;
                j += 1;
            }
            if j + 1 < b.len() && b[j] == b' ' && b[j + 1] == b'`' {
                last = n;
            }
        }
        while i < b.len() && b[i] != b'\n' {
            i += 1;
        }
        i += 1;
    }
    assert!(last > 0, "PROTOCOL_NOTES.md has no numbered row");
    last
}

/// How many bytes of parsed candidates a body byte may become at most: text in few large
/// blocks parses to about its size; tens of thousands of one-letter blocks to a few times it.
const PARSED_PER_BODY_BYTE: usize = 4;

/// About what `candidates`, parsed from `body_len` bytes, take in memory: the strings (at most
/// the body's bytes) and, per parsed node (candidate, message, block, JSON value), its struct
/// and an allocation's overhead.
fn parsed_bytes(candidates: &[GroupCandidate], body_len: usize) -> usize {
    const NODE: usize = std::mem::size_of::<MessageBlock>() + 32;
    fn json_nodes(v: &serde_json::Value) -> usize {
        1 + match v {
            serde_json::Value::Array(a) => a.iter().map(json_nodes).sum(),
            serde_json::Value::Object(o) => o.values().map(json_nodes).sum(),
            _ => 0,
        }
    }
    fn object_nodes(o: Option<&ors_core::types::JsonObject>) -> usize {
        o.map_or(0, |o| o.values().map(json_nodes).sum())
    }
    let mut nodes = 0usize;
    for c in candidates {
        nodes += 1 + object_nodes(c.metadata.as_ref());
        for m in &c.messages {
            nodes += 1 + object_nodes(m.detail.as_ref());
            for b in &m.blocks {
                nodes += 1 + match b {
                    MessageBlock::Text(t) => object_nodes(t.detail.as_ref()),
                    MessageBlock::Image(_) => 1,
                    MessageBlock::Reasoning(r) => object_nodes(r.detail.as_ref()),
                    MessageBlock::ToolCall(t) => {
                        object_nodes(Some(&t.input)) + object_nodes(t.detail.as_ref())
                    }
                    MessageBlock::ToolResult(r) => r.blocks.len() + object_nodes(r.detail.as_ref()),
                };
            }
        }
    }
    body_len.saturating_add(nodes.saturating_mul(NODE))
}

/// The roles rule `/messages` holds an environment to, held to a trainer's candidates: a
/// judge reading a transcript can trust a tool call to be the assistant's. The first block out
/// of place is a 400 naming where it is.
fn misplaced_in_group(candidates: &[GroupCandidate]) -> Result<(), ApiError> {
    for (c, candidate) in candidates.iter().enumerate() {
        for (m, message) in candidate.messages.iter().enumerate() {
            if let Some(block) = message.misplaced_block() {
                return Err(ApiError::BadRequest(format!(
                    "invalid field 'candidates[{c}].messages[{m}]': a '{}' block in a '{}' \
                     turn (reasoning and tool_call belong in assistant turns, tool_result in \
                     user turns)",
                    block.kind(),
                    message.role
                )));
            }
        }
    }
    Ok(())
}

/// `/create` named a toolset the environment does not define (PROTOCOL_NOTES row
/// `toolset-name`): refused, naming the ones it has, rather than ignoring a name the client
/// relies on.
fn unknown_toolset(env: &str, name: &str, known: &[&str]) -> ApiError {
    let known = if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    };
    ApiError::BadRequest(format!(
        "unknown toolset '{}': environment '{env}' defines the toolsets: {known}",
        ors_core::text::Echo(name)
    ))
}

/// `{"sid": ...}`, written straight into a buffer of the answer's length (three of an
/// episode's five answers are this): `Bytes` takes over a full `Vec` without allocating.
fn sid_reply(sid: &str) -> Result<Resp, ApiError> {
    let mut out = Vec::with_capacity(sid.len() + 10);
    out.extend_from_slice(b"{\"sid\":");
    ors_core::types::push_json_str(&mut out, sid);
    out.push(b'}');
    Ok(json_bytes(Bytes::from(out)))
}

#[cfg(test)]
mod tests {
    use super::{last_row, sid_reply};
    use http_body_util::BodyExt as _;

    #[tokio::test]
    async fn a_session_id_reply_is_the_json_serde_writes_escapes_included() {
        for sid in [
            "00000007-3f2a-4c1b-8d9e-0123456789ab",
            "MyRun-42",
            "with \"quotes\" and \\ and \u{7}",
            "run 7/ünïcode\u{7f}",
            "tab\there",
        ] {
            let resp = sid_reply(sid).unwrap();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let expected = serde_json::to_vec(&serde_json::json!({ "sid": sid })).unwrap();
            assert_eq!(body, expected, "{sid:?}");
        }
    }

    #[test]
    fn the_notes_revision_is_the_number_of_the_last_row() {
        let notes = "| # `name` | topic |\n|---|---|\n| 9 `a` | x |\n| 10 `b` | y |\n\n| 2024 is not a row\nend\n";
        assert_eq!(last_row(notes), 10);
    }
}
