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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Open,
    Key,
}

struct Route {
    /// The path of a root route, or what follows `/{env}` for an environment route.
    path: &'static str,
    scope: Scope,
    method: Method,
    endpoint: Endpoint,
}

macro_rules! declare {
    ($($endpoint:ident: $method:ident $scope:ident $access:ident [$($path:expr),+] => $handler:ident,)*) => {
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
                    $(Endpoint::$endpoint => Access::$access == Access::Open,)*
                }
            }
        }

        /// Every path of every endpoint.
        static ROUTES: &[Route] = &[$($(Route {
            path: $path,
            scope: Scope::$scope,
            method: Method::$method,
            endpoint: Endpoint::$endpoint,
        },)+)*];
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

/// The route at `segment` (a path segment without its `/`) in `scope`; a path has one method.
fn lookup(scope: Scope, segment: &str) -> Option<&'static Route> {
    // The length first: it rules out nearly every row for one comparison (an episode's
    // routes come late in the table).
    ROUTES.iter().find(|r| {
        r.path.len() == segment.len() + 1
            && r.scope == scope
            && r.path.strip_prefix('/') == Some(segment)
    })
}

fn check<'p>(route: &'static Route, method: &Method, env: Option<&'p str>) -> RouteMatch<'p> {
    if *method == route.method {
        RouteMatch::Found {
            endpoint: route.endpoint,
            env,
        }
    } else {
        RouteMatch::MethodNotAllowed {
            allow: route.method.as_str(),
        }
    }
}

/// Route a request by method and path (the path without its query).
pub fn route<'p>(method: &Method, path: &'p str) -> RouteMatch<'p> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    let (route, env) = match trimmed.split_once('/') {
        None if !trimmed.is_empty() => (
            lookup(Scope::Root, trimmed).or_else(|| lookup(Scope::Env, trimmed)),
            None,
        ),
        Some((env, action)) if !env.is_empty() && !action.contains('/') => {
            (lookup(Scope::Env, action), Some(env))
        }
        _ => (None, None),
    };
    route.map_or(RouteMatch::NotFound, |r| check(r, method, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(endpoint: Endpoint, env: Option<&str>) -> RouteMatch<'_> {
        RouteMatch::Found { endpoint, env }
    }

    #[test]
    fn every_route_answers_its_method_and_env_routes_take_an_env_segment() {
        for r in ROUTES {
            let m = &r.method;
            assert_eq!(route(m, r.path), found(r.endpoint, None), "{m} {}", r.path);
            let slashed = format!("{}/", r.path);
            assert_eq!(route(m, &slashed), found(r.endpoint, None), "{slashed}");
            let with_env = format!("/math{}", r.path);
            let want = match r.scope {
                Scope::Env => found(r.endpoint, Some("math")),
                Scope::Root => RouteMatch::NotFound,
            };
            assert_eq!(route(m, &with_env), want, "{m} {with_env}");
        }
    }

    #[test]
    fn a_wrong_method_is_405_naming_the_allowed_one() {
        for r in ROUTES {
            for other in [Method::GET, Method::POST, Method::DELETE, Method::PUT] {
                if other != r.method {
                    assert_eq!(
                        route(&other, r.path),
                        RouteMatch::MethodNotAllowed {
                            allow: r.method.as_str()
                        },
                        "{other} {}",
                        r.path
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
