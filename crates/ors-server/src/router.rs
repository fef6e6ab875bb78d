//! The route table: every endpoint of the HTTP API declared once, and which endpoint a method
//! and path name.
//!
//! Two scopes: root routes (`/health`, `/create`, ...) and environment routes
//! (`/{env}/tools`, `/{env}/call`, ...). An environment route without the env segment
//! (`/tools`) goes to the default environment (PROTOCOL_NOTES row `default-env-routes`); whether a named
//! environment exists is decided by the caller, which knows the environments.

use http::Method;
use ors_core::protocol::routes;

/// The ORS HTTP API and our operator routes, one row an endpoint: its variant, method, scope,
/// whether it is open without the API key, its paths, and its handler (a method of `App` in
/// `handlers.rs`, whose name is also the endpoint's `route` label in the request metrics).
/// `endpoints!(then)` hands the rows to the macro `then`: this module declares the
/// [`Endpoint`]s and their routes from them, `handlers.rs` the dispatch.
macro_rules! endpoints {
    ($then:ident) => {
        $then! {
            Health:           GET  Root Open [routes::HEALTH]                             => health,
            ListEnvironments: GET  Root Key  [routes::LIST_ENVIRONMENTS]                  => list_environments,
            CreateSession:    POST Root Key  [routes::CREATE_SESSION]                     => create_session,
            Create:           POST Root Key  [routes::CREATE]                             => create,
            Ping:             POST Root Key  [routes::PING]                               => ping,
            Delete:           POST Root Key  [routes::DELETE]                             => delete,
            DeleteSession:    POST Root Key  [routes::DELETE_SESSION]                     => delete_session,
            // `/version` is open like `/health` (PROTOCOL_NOTES row `version-route`).
            Version:          GET  Root Open [routes::VERSION]                            => version,
            // Ours, for operators: Prometheus text, and whether this replica takes new
            // sessions (open: probes cannot carry a secret).
            Metrics:          GET  Root Key  [METRICS]                                    => metrics,
            Ready:            GET  Root Open [READY]                                      => ready,
            Tools:            GET  Env  Key  [routes::TOOLS]                              => tools,
            Splits:           GET  Env  Key  [routes::SPLITS]                             => splits,
            Tasks:            POST Env  Key  [routes::TASKS]                              => tasks,
            NumTasks:         POST Env  Key  [routes::NUM_TASKS]                          => num_tasks,
            // The Tasks & Splits page's names too (PROTOCOL_NOTES row `get-task-aliases`).
            Task:             POST Env  Key  [routes::TASK, routes::GET_TASK]             => task,
            TaskRange:        POST Env  Key  [routes::TASK_RANGE, routes::GET_TASK_RANGE] => task_range,
            TaskTools:        GET  Env  Key  [routes::TASK_TOOLS]                         => task_tools,
            Prompt:           GET  Env  Key  [routes::PROMPT]                             => prompt,
            Messages:         GET  Env  Key  [routes::MESSAGES]                           => messages,
            Call:             POST Env  Key  [routes::CALL]                               => call,
            ScoreGroup:       POST Env  Key  [routes::SCORE_GROUP]                        => score_group,
        }
    };
}
pub(crate) use endpoints;

/// The operator routes: not part of ORS, so not among its route names in `ors_core`.
pub(crate) const METRICS: &str = "/metrics";
pub(crate) const READY: &str = "/ready";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Root,
    Env,
}

/// Whether a route needs the API key (when the server has one).
enum Access {
    Open,
    Key,
}

macro_rules! declare {
    ($($endpoint:ident: $method:ident $scope:ident $access:ident [$($path:path),+] => $handler:ident,)*) => {
        /// Every endpoint of the HTTP API (`pub` for the `fuzzing` feature only: this module
        /// is private).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Endpoint {
            $($endpoint,)*
        }

        impl Endpoint {
            /// Every endpoint, in declaration order (`e as usize` is its index).
            pub(crate) const ALL: &[Endpoint] = &[$(Endpoint::$endpoint,)*];

            /// The endpoint's name, the `route` label of the request metrics.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Endpoint::$endpoint => stringify!($handler),)*
                }
            }

            /// Whether it answers without the API key.
            pub(crate) fn is_open(self) -> bool {
                match self {
                    $(Endpoint::$endpoint => matches!(Access::$access, Access::Open),)*
                }
            }

            /// The one method it answers, as the `Allow` header names it.
            fn method(self) -> &'static str {
                match self {
                    $(Endpoint::$endpoint => stringify!($method),)*
                }
            }

            fn answers(self, method: &Method) -> bool {
                match self {
                    $(Endpoint::$endpoint => *method == Method::$method,)*
                }
            }

            fn scope(self) -> Scope {
                match self {
                    $(Endpoint::$endpoint => Scope::$scope,)*
                }
            }

            /// The endpoint at `path`: a root route's path, or what follows `/{env}` (with
            /// its `/`) of an environment route. A `match`, which the compiler turns into a
            /// look at the length and one comparison, not a walk through the table.
            fn at(path: &str) -> Option<Endpoint> {
                match path {
                    $($($path)|+ => Some(Endpoint::$endpoint),)*
                    _ => None,
                }
            }
        }

        /// Every path of every endpoint, for the tests that walk them all.
        #[cfg(test)]
        static ROUTES: &[(&str, Endpoint)] = &[$($(($path, Endpoint::$endpoint),)+)*];
    };
}
endpoints!(declare);

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

/// Route a request by method and path (the path without its query; hyper's always starts
/// with `/`).
pub fn route<'p>(method: &Method, path: &'p str) -> RouteMatch<'p> {
    let Some(rest) = path.strip_prefix('/') else {
        return RouteMatch::NotFound;
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    // Byte loops rather than `split_once`: these strings are short, and memchr's set-up
    // costs more than the search.
    let (endpoint, env) = match rest.bytes().position(|b| b == b'/') {
        // `/{action}`: a root route, or an environment route of the default environment.
        None if !rest.is_empty() => (Endpoint::at(&path[..=rest.len()]), None),
        Some(at) => {
            let (env, action) = rest.split_at(at);
            let well_formed =
                !env.is_empty() && action.len() > 1 && !action.bytes().skip(1).any(|b| b == b'/');
            let endpoint = Endpoint::at(action).filter(|e| e.scope() == Scope::Env);
            (endpoint.filter(|_| well_formed), Some(env))
        }
        None => (None, None),
    };
    match endpoint {
        None => RouteMatch::NotFound,
        Some(endpoint) if endpoint.answers(method) => RouteMatch::Found { endpoint, env },
        Some(endpoint) => RouteMatch::MethodNotAllowed {
            allow: endpoint.method(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(endpoint: Endpoint, env: Option<&str>) -> RouteMatch<'_> {
        RouteMatch::Found { endpoint, env }
    }

    /// The method an endpoint answers, as a [`Method`].
    fn method_of(e: Endpoint) -> Method {
        Method::from_bytes(e.method().as_bytes()).unwrap()
    }

    #[test]
    fn every_route_answers_its_method_and_env_routes_take_an_env_segment() {
        for &(path, e) in ROUTES {
            let m = &method_of(e);
            assert_eq!(route(m, path), found(e, None), "{m} {path}");
            let slashed = format!("{path}/");
            assert_eq!(route(m, &slashed), found(e, None), "{slashed}");
            let with_env = format!("/math{path}");
            let want = match e.scope() {
                Scope::Env => found(e, Some("math")),
                Scope::Root => RouteMatch::NotFound,
            };
            assert_eq!(route(m, &with_env), want, "{m} {with_env}");
        }
    }

    #[test]
    fn a_wrong_method_is_405_naming_the_allowed_one() {
        for &(path, e) in ROUTES {
            for other in [Method::GET, Method::POST, Method::DELETE, Method::PUT] {
                if other != method_of(e) {
                    assert_eq!(
                        route(&other, path),
                        RouteMatch::MethodNotAllowed { allow: e.method() },
                        "{other} {path}"
                    );
                }
            }
        }
        assert_eq!(
            route(&Method::GET, "/math/call"),
            RouteMatch::MethodNotAllowed { allow: "POST" }
        );
    }

    #[test]
    fn both_names_of_the_single_task_routes_are_served() {
        for (path, e) in [
            ("/math/task", Endpoint::Task),
            ("/math/get_task", Endpoint::Task),
            ("/math/task_range", Endpoint::TaskRange),
            ("/math/get_task_range", Endpoint::TaskRange),
        ] {
            assert_eq!(route(&Method::POST, path), found(e, Some("math")), "{path}");
        }
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
            "/math/health",
            "/math/",
            "/math//",
            "math/tools",
            "*",
        ] {
            assert_eq!(route(&Method::GET, p), RouteMatch::NotFound, "{p}");
        }
    }

    #[test]
    fn probes_and_version_are_open_the_rest_needs_the_key() {
        let open: Vec<&str> = Endpoint::ALL
            .iter()
            .filter(|e| e.is_open())
            .map(|e| e.name())
            .collect();
        assert_eq!(open, ["health", "version", "ready"]);
    }
}
