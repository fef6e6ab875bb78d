//! The route table: which endpoint a method and path name.
//!
//! Two scopes: root routes (`/health`, `/create`, ...) and environment routes
//! (`/{env}/tools`, `/{env}/call`, ...). An environment route without the env segment
//! (`/tools`) goes to the default environment (PROTOCOL_NOTES row `default-env-routes`); whether a named
//! environment exists is decided by the caller, which knows the environments.

use ors_core::protocol::routes;

/// An HTTP method the table uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
}

impl Verb {
    fn of(method: &http::Method) -> Option<Self> {
        match *method {
            http::Method::GET => Some(Verb::Get),
            http::Method::POST => Some(Verb::Post),
            _ => None,
        }
    }

    fn allow(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
        }
    }
}

/// Every endpoint of the ORS HTTP API. (`pub` for the `fuzzing` feature only: this module is
/// private.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Health,
    ListEnvironments,
    CreateSession,
    Create,
    Ping,
    Delete,
    DeleteSession,
    Tools,
    Splits,
    Tasks,
    NumTasks,
    Task,
    TaskRange,
    TaskTools,
    Prompt,
    Call,
    /// `GET /version`: the server's version (open like `/health`).
    Version,
    /// `GET /{env}/messages`: the episode's opening messages.
    Messages,
    /// `POST /{env}/score_group`: score a group of candidate answers, over SSE.
    ScoreGroup,
    /// `GET /metrics`: Prometheus text (not an ORS route; ours, for operators).
    Metrics,
    /// `GET /ready`: whether this replica takes new sessions (ours, for load balancers).
    Ready,
}

impl Endpoint {
    /// Every endpoint, in declaration order (`e as usize` is its index).
    pub(crate) const ALL: [Endpoint; 21] = [
        Endpoint::Health,
        Endpoint::ListEnvironments,
        Endpoint::CreateSession,
        Endpoint::Create,
        Endpoint::Ping,
        Endpoint::Delete,
        Endpoint::DeleteSession,
        Endpoint::Tools,
        Endpoint::Splits,
        Endpoint::Tasks,
        Endpoint::NumTasks,
        Endpoint::Task,
        Endpoint::TaskRange,
        Endpoint::TaskTools,
        Endpoint::Prompt,
        Endpoint::Call,
        Endpoint::Version,
        Endpoint::Messages,
        Endpoint::ScoreGroup,
        Endpoint::Metrics,
        Endpoint::Ready,
    ];

    /// The endpoint's name, the `route` label of the request metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Endpoint::Health => "health",
            Endpoint::ListEnvironments => "list_environments",
            Endpoint::CreateSession => "create_session",
            Endpoint::Create => "create",
            Endpoint::Ping => "ping",
            Endpoint::Delete => "delete",
            Endpoint::DeleteSession => "delete_session",
            Endpoint::Tools => "tools",
            Endpoint::Splits => "splits",
            Endpoint::Tasks => "tasks",
            Endpoint::NumTasks => "num_tasks",
            Endpoint::Task => "task",
            Endpoint::TaskRange => "task_range",
            Endpoint::TaskTools => "task_tools",
            Endpoint::Prompt => "prompt",
            Endpoint::Call => "call",
            Endpoint::Version => "version",
            Endpoint::Messages => "messages",
            Endpoint::ScoreGroup => "score_group",
            Endpoint::Metrics => "metrics",
            Endpoint::Ready => "ready",
        }
    }
}

/// The operator routes: not part of ORS, so not among its route names in `ors_core`.
pub(crate) const METRICS: &str = "/metrics";
pub(crate) const READY: &str = "/ready";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Root,
    Env,
}

struct RouteDef {
    /// The path of a root route, or what follows `/{env}` for an environment route.
    path: &'static str,
    scope: Scope,
    verb: Verb,
    endpoint: Endpoint,
}

const fn r(path: &'static str, scope: Scope, verb: Verb, endpoint: Endpoint) -> RouteDef {
    RouteDef {
        path,
        scope,
        verb,
        endpoint,
    }
}

/// The whole API. `get_task` / `get_task_range` are the Tasks & Splits page's names for
/// `task` / `task_range` (PROTOCOL_NOTES row `get-task-aliases`).
const ROUTES: &[RouteDef] = &[
    r(routes::HEALTH, Scope::Root, Verb::Get, Endpoint::Health),
    r(
        routes::LIST_ENVIRONMENTS,
        Scope::Root,
        Verb::Get,
        Endpoint::ListEnvironments,
    ),
    r(
        routes::CREATE_SESSION,
        Scope::Root,
        Verb::Post,
        Endpoint::CreateSession,
    ),
    r(routes::CREATE, Scope::Root, Verb::Post, Endpoint::Create),
    r(routes::PING, Scope::Root, Verb::Post, Endpoint::Ping),
    r(routes::DELETE, Scope::Root, Verb::Post, Endpoint::Delete),
    r(
        routes::DELETE_SESSION,
        Scope::Root,
        Verb::Post,
        Endpoint::DeleteSession,
    ),
    r(routes::TOOLS, Scope::Env, Verb::Get, Endpoint::Tools),
    r(routes::SPLITS, Scope::Env, Verb::Get, Endpoint::Splits),
    r(routes::TASKS, Scope::Env, Verb::Post, Endpoint::Tasks),
    r(
        routes::NUM_TASKS,
        Scope::Env,
        Verb::Post,
        Endpoint::NumTasks,
    ),
    r(routes::TASK, Scope::Env, Verb::Post, Endpoint::Task),
    r(routes::GET_TASK, Scope::Env, Verb::Post, Endpoint::Task),
    r(
        routes::TASK_RANGE,
        Scope::Env,
        Verb::Post,
        Endpoint::TaskRange,
    ),
    r(
        routes::GET_TASK_RANGE,
        Scope::Env,
        Verb::Post,
        Endpoint::TaskRange,
    ),
    r(
        routes::TASK_TOOLS,
        Scope::Env,
        Verb::Get,
        Endpoint::TaskTools,
    ),
    r(routes::PROMPT, Scope::Env, Verb::Get, Endpoint::Prompt),
    r(routes::VERSION, Scope::Root, Verb::Get, Endpoint::Version),
    r(routes::MESSAGES, Scope::Env, Verb::Get, Endpoint::Messages),
    r(routes::CALL, Scope::Env, Verb::Post, Endpoint::Call),
    r(
        routes::SCORE_GROUP,
        Scope::Env,
        Verb::Post,
        Endpoint::ScoreGroup,
    ),
    r(METRICS, Scope::Root, Verb::Get, Endpoint::Metrics),
    r(READY, Scope::Root, Verb::Get, Endpoint::Ready),
];

/// What the table says about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteMatch<'p> {
    /// A known endpoint; `env` is the env path segment when one was given.
    Found {
        endpoint: Endpoint,
        env: Option<&'p str>,
    },
    /// The path exists, the method does not; `allow` is the value of the `Allow` header.
    MethodNotAllowed { allow: &'static str },
    /// No such path.
    NotFound,
}

fn lookup(scope: Scope, segment: &str) -> Option<&'static RouteDef> {
    ROUTES
        .iter()
        .find(|d| d.scope == scope && d.path.strip_prefix('/') == Some(segment))
}

fn check<'p>(def: &'static RouteDef, verb: Option<Verb>, env: Option<&'p str>) -> RouteMatch<'p> {
    if verb == Some(def.verb) {
        RouteMatch::Found {
            endpoint: def.endpoint,
            env,
        }
    } else {
        RouteMatch::MethodNotAllowed {
            allow: def.verb.allow(),
        }
    }
}

/// Route a request by method and path (the path without its query).
pub fn route<'p>(method: &http::Method, path: &'p str) -> RouteMatch<'p> {
    let verb = Verb::of(method);
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    let mut parts = trimmed.split('/');
    let (first, second, rest) = (parts.next(), parts.next(), parts.next());
    match (first, second, rest) {
        (Some(first), None, None) if !first.is_empty() => {
            if let Some(def) = lookup(Scope::Root, first) {
                check(def, verb, None)
            } else if let Some(def) = lookup(Scope::Env, first) {
                check(def, verb, None)
            } else {
                RouteMatch::NotFound
            }
        }
        (Some(env), Some(action), None) if !env.is_empty() => match lookup(Scope::Env, action) {
            Some(def) => check(def, verb, Some(env)),
            None => RouteMatch::NotFound,
        },
        _ => RouteMatch::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn found(endpoint: Endpoint, env: Option<&str>) -> RouteMatch<'_> {
        RouteMatch::Found { endpoint, env }
    }

    #[test]
    fn root_routes() {
        let cases = [
            (Method::GET, "/health", Endpoint::Health),
            (
                Method::GET,
                "/list_environments",
                Endpoint::ListEnvironments,
            ),
            (Method::POST, "/create_session", Endpoint::CreateSession),
            (Method::POST, "/create", Endpoint::Create),
            (Method::POST, "/ping", Endpoint::Ping),
            (Method::POST, "/delete", Endpoint::Delete),
            (Method::POST, "/delete_session", Endpoint::DeleteSession),
            (Method::GET, "/version", Endpoint::Version),
            (Method::GET, "/metrics", Endpoint::Metrics),
            (Method::GET, "/ready", Endpoint::Ready),
        ];
        for (m, p, e) in cases {
            assert_eq!(route(&m, p), found(e, None), "{m} {p}");
        }
    }

    #[test]
    fn env_routes_with_and_without_the_env_segment() {
        let cases = [
            (Method::GET, "tools", Endpoint::Tools),
            (Method::GET, "splits", Endpoint::Splits),
            (Method::POST, "tasks", Endpoint::Tasks),
            (Method::POST, "num_tasks", Endpoint::NumTasks),
            (Method::POST, "task", Endpoint::Task),
            (Method::POST, "get_task", Endpoint::Task),
            (Method::POST, "task_range", Endpoint::TaskRange),
            (Method::POST, "get_task_range", Endpoint::TaskRange),
            (Method::GET, "task_tools", Endpoint::TaskTools),
            (Method::GET, "prompt", Endpoint::Prompt),
            (Method::GET, "messages", Endpoint::Messages),
            (Method::POST, "call", Endpoint::Call),
            (Method::POST, "score_group", Endpoint::ScoreGroup),
        ];
        for (m, action, e) in cases {
            let with_env = format!("/math/{action}");
            assert_eq!(route(&m, &with_env), found(e, Some("math")), "{with_env}");
            let bare = format!("/{action}");
            assert_eq!(route(&m, &bare), found(e, None), "{bare}");
        }
    }

    #[test]
    fn all_lists_every_endpoint_at_its_index() {
        for (i, e) in Endpoint::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i, "{e:?}");
        }
    }

    #[test]
    fn a_trailing_slash_is_tolerated() {
        assert_eq!(
            route(&Method::GET, "/health/"),
            found(Endpoint::Health, None)
        );
        assert_eq!(
            route(&Method::GET, "/math/tools/"),
            found(Endpoint::Tools, Some("math"))
        );
    }

    #[test]
    fn wrong_method_is_405_with_the_allowed_one() {
        assert_eq!(
            route(&Method::POST, "/health"),
            RouteMatch::MethodNotAllowed { allow: "GET" }
        );
        assert_eq!(
            route(&Method::GET, "/math/call"),
            RouteMatch::MethodNotAllowed { allow: "POST" }
        );
        assert_eq!(
            route(&Method::DELETE, "/create"),
            RouteMatch::MethodNotAllowed { allow: "POST" }
        );
    }

    #[test]
    fn unknown_paths_are_not_found() {
        for p in [
            "/",
            "",
            "/nope",
            "/math/nope",
            "/a/b/c",
            "//tools",
            "/math/tools/x",
        ] {
            assert_eq!(route(&Method::GET, p), RouteMatch::NotFound, "{p}");
        }
    }

    #[test]
    fn root_names_win_over_env_names_in_one_segment_paths() {
        // `/create` is the root route even though an env route never uses that name.
        assert_eq!(
            route(&Method::POST, "/create"),
            found(Endpoint::Create, None)
        );
        // Root endpoints are not env-scoped.
        assert_eq!(route(&Method::GET, "/math/health"), RouteMatch::NotFound);
    }
}
