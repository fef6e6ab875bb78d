//! Discovery: health, environments, tools and their schemas, splits, tasks, num_tasks, task
//! and task_range (slicing, negative indices), the aliases, the default environment, and
//! error bodies.

use ors_core::ErrorCode;
use serde_json::{json, Value};

use super::clause::{clause, Clause};
use crate::http::Request;
use crate::support::{
    check, ensure, expect_code, expect_error, expect_fields, expect_json, expect_ok_json,
    expect_status, task, tasks, Check, Ctx, SPLITS,
};

/// The discovery clauses.
pub const CLAUSES: &[Clause] = &[
    clause("discovery.health", "GET /health answers 200 {\"status\": \"ok\"}",
        |ctx| expect_json("health", &expect_ok_json(&ctx.get("/health")?)?, &json!({"status": "ok"}))),
    clause("discovery.health.json", "GET /health is served as application/json", health_json),
    clause("discovery.environments", "GET /list_environments is a JSON array of names that includes the fixture", environments),
    clause("discovery.tools.shape", "GET /{env}/tools is {\"tools\": [...]} with name, description and input_schema on every tool", tools_shape),
    clause("discovery.tools.shared-set", "GET /{env}/tools lists exactly the fixture's shared tools", tools_set),
    clause("discovery.tools.no-task-specific", "GET /{env}/tools does not list the task-specific tool hint", tools_no_hint),
    clause("discovery.tools.schema-object", "every non-null input_schema is a JSON Schema object with properties", tools_schema_objects),
    clause("discovery.tools.schema-echo", "echo's schema requires a string property text",
        |ctx| expect_property(ctx, "echo", "text", "string")),
    clause("discovery.tools.schema-big", "big's schema requires an integer property bytes",
        |ctx| expect_property(ctx, "big", "bytes", "integer")),
    clause("discovery.tools.schema-null", "tools without input (counter, image, panic) have input_schema null", schema_null),
    clause("discovery.tools.descriptions", "every tool has a non-empty description string", tools_descriptions),
    clause("discovery.tools.unknown-env-404", "GET /{unknown}/tools is 404 with a detail naming the environment", tools_unknown_env),
    clause("discovery.splits", "GET /{env}/splits lists train/train, test/test, hard/validation in order", splits),
    clause("discovery.splits.bare-name-validation", "a split declared by bare custom name has type validation (notes row `bare-split-names`)", splits_bare),
    clause("discovery.splits.unknown-env-404", "GET /{unknown}/splits is 404",
        |ctx| ctx.refused(Request::new("GET", &format!("/{UNKNOWN_ENV}/splits")), 404)),
    clause("discovery.tasks.train", "POST /{env}/tasks train lists the 25 train tasks and env_name",
        |ctx| list_tasks(ctx, "train", 0, 25)),
    clause("discovery.tasks.test", "POST /{env}/tasks test lists tasks 100..104",
        |ctx| list_tasks(ctx, "test", 100, 5)),
    clause("discovery.tasks.hard", "POST /{env}/tasks hard lists tasks 200..202",
        |ctx| list_tasks(ctx, "hard", 200, 3)),
    clause("discovery.tasks.invalid-split-400", "POST /{env}/tasks with an unknown split is 400",
        |ctx| bad_request(ctx, "/tasks", json!({"split": "nope"}))),
    clause("discovery.tasks.missing-split-400", "POST /{env}/tasks without split is 400, not 422 (notes row `bad-body-400`)",
        |ctx| bad_request(ctx, "/tasks", json!({}))),
    clause("discovery.tasks.unknown-env-404", "POST /{unknown}/tasks is 404",
        |ctx| unknown_env(ctx, "/tasks", json!({"split": "train"}))),
    clause("discovery.num_tasks", "POST /{env}/num_tasks gives 25, 5 and 3 for train, test and hard", num_tasks),
    clause("discovery.num_tasks.invalid-split-400", "POST /{env}/num_tasks with an unknown split is 400",
        |ctx| bad_request(ctx, "/num_tasks", json!({"split": "nope"}))),
    clause("discovery.num_tasks.unknown-env-404", "POST /{unknown}/num_tasks is 404",
        |ctx| unknown_env(ctx, "/num_tasks", json!({"split": "train"}))),
    clause("discovery.version", "GET /version answers {\"version\": string, \"build_sha\"} (notes row `version-route`)", version),
    clause("discovery.task.env-name", "POST /{env}/task and /{env}/task_range replies carry env_name (notes row `task-reply-env-name`)", task_env_name),
    clause("discovery.task.index", "POST /{env}/task returns {\"task\": ...} for a split and index",
        |ctx| expect_fields("task 7", &get_task(ctx, "/task", "train", 7)?, &json!({"task": task(7)}))),
    clause("discovery.task.bounds", "POST /{env}/task serves index 0 and the last index of every split", task_bounds),
    clause("discovery.task.out-of-range-400", "POST /{env}/task with index == num_tasks is 400",
        |ctx| bad_request(ctx, "/task", json!({"split": "train", "index": 25}))),
    clause("discovery.task.negative-400", "POST /{env}/task with a negative index is 400 Invalid index (notes row `negative-index`)",
        |ctx| bad_request(ctx, "/task", json!({"split": "train", "index": -1}))),
    clause("discovery.task.invalid-split-400", "POST /{env}/task with an unknown split is 400",
        |ctx| bad_request(ctx, "/task", json!({"split": "nope", "index": 0}))),
    clause("discovery.task.wrong-type-400", "POST /{env}/task with a string index is 400, not 422 (notes row `bad-body-400`)",
        |ctx| bad_request(ctx, "/task", json!({"split": "train", "index": "three"}))),
    clause("discovery.task.unknown-env-404", "POST /{unknown}/task is 404",
        |ctx| unknown_env(ctx, "/task", json!({"split": "train", "index": 0}))),
    clause("discovery.task_range.basic", "POST /{env}/task_range start 2 stop 5 gives tasks 2, 3, 4",
        |ctx| expect_ranges(ctx, &[(Some(2), Some(5), 2..5)])),
    clause("discovery.task_range.defaults", "task_range without start and stop gives the whole split",
        |ctx| expect_ranges(ctx, &[(None, None, 0..25), (Some(20), None, 20..25), (None, Some(3), 0..3)])),
    clause("discovery.task_range.negative", "task_range resolves negative start and stop from the end (notes row `task-range-slices`)",
        |ctx| expect_ranges(ctx, &[(Some(-3), None, 22..25), (None, Some(-22), 0..3), (Some(-5), Some(-3), 20..22)])),
    clause("discovery.task_range.clamped", "task_range clamps out-of-range bounds like a Python slice",
        |ctx| expect_ranges(ctx, &[(Some(20), Some(100), 20..25), (Some(-100), Some(2), 0..2), (Some(30), Some(40), 0..0)])),
    clause("discovery.task_range.empty", "task_range with start > stop gives [] (notes row `task-range-slices`)",
        |ctx| expect_ranges(ctx, &[(Some(5), Some(2), 0..0), (Some(3), Some(3), 0..0)])),
    clause("discovery.task_range.invalid-split-400", "task_range with an unknown split is 400",
        |ctx| bad_request(ctx, "/task_range", json!({"split": "nope", "start": 0, "stop": 1}))),
    clause("discovery.task_range.unknown-env-404", "POST /{unknown}/task_range is 404",
        |ctx| unknown_env(ctx, "/task_range", json!({"split": "train"}))),
    clause("discovery.alias.get_task", "POST /{env}/get_task is the same as /task (notes row `get-task-aliases`)",
        |ctx| expect_fields("get_task test[2]", &get_task(ctx, "/get_task", "test", 2)?, &json!({"task": task(102)}))),
    clause("discovery.alias.get_task_range", "POST /{env}/get_task_range is the same as /task_range (notes row `get-task-aliases`)", alias_get_task_range),
    clause("discovery.default-env.tools", "GET /tools answers the default environment's tools directly, no redirect (notes row `default-env-routes`)",
        |ctx| same_as_env_route(ctx, "/tools")),
    clause("discovery.default-env.splits", "GET /splits answers the default environment's splits directly (notes row `default-env-routes`)",
        |ctx| same_as_env_route(ctx, "/splits")),
    clause("discovery.default-env.num_tasks", "POST /num_tasks answers for the default environment directly (notes row `default-env-routes`)", default_num_tasks),
    clause("discovery.errors.json-detail", "error replies are application/json {\"detail\": \"...\"}", errors_json),
    clause("discovery.errors.unknown-route-404", "an unknown route under the environment is 404",
        |ctx| expect_status(&ctx.get(&ctx.path("/no_such_route"))?, 404)),
    clause("discovery.errors.codes", "error replies carry a machine-readable code: unknown_environment, invalid_request, no_route, method_not_allowed (notes row `error-codes`)", error_codes),
    clause("discovery.body.unknown-fields-ignored", "tasks, num_tasks, task and task_range bodies with extra fields answer as without them (notes row `unknown-fields-ignored`)", unknown_fields_ignored),
];

fn health_json(ctx: &Ctx) -> Check {
    let r = ctx.get("/health")?;
    let ct = r.header("content-type").unwrap_or_default();
    check!(ct.starts_with("application/json"), "content-type is {ct:?}")
}

fn environments(ctx: &Ctx) -> Check {
    let v = expect_ok_json(&ctx.get("/list_environments")?)?;
    let names = v.as_array().ok_or_else(|| format!("not an array: {v}"))?;
    ensure!(
        names.iter().all(Value::is_string),
        "not all names are strings: {v}"
    );
    check!(
        names.contains(&json!(ctx.env)),
        "{:?} is not listed: {v}",
        ctx.env
    )
}

fn tools(ctx: &Ctx) -> Result<Vec<Value>, String> {
    let v = expect_ok_json(&ctx.get(&ctx.path("/tools"))?)?;
    v.get("tools")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| format!("no \"tools\" array: {v}"))
}

fn tool<'a>(list: &'a [Value], name: &str) -> Result<&'a Value, String> {
    list.iter()
        .find(|t| t["name"] == json!(name))
        .ok_or_else(|| format!("tool {name:?} is not listed"))
}

/// The shared tools of the fixture.
pub const SHARED_TOOLS: [&str; 9] = [
    "big", "counter", "echo", "fail", "image", "panic", "secret", "sleep", "submit",
];

fn tools_shape(ctx: &Ctx) -> Check {
    for t in tools(ctx)? {
        let obj = t
            .as_object()
            .ok_or_else(|| format!("tool is not an object: {t}"))?;
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        ensure!(
            keys == ["description", "input_schema", "name"],
            "tool keys are {keys:?}: {t}"
        );
        ensure!(t["name"].is_string(), "name is not a string: {t}");
        ensure!(
            t["input_schema"].is_object() || t["input_schema"].is_null(),
            "input_schema is neither object nor null: {t}"
        );
    }
    Ok(())
}

fn tools_set(ctx: &Ctx) -> Check {
    let list = tools(ctx)?;
    let mut names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    check!(
        names == SHARED_TOOLS,
        "tools are {names:?}, expected {SHARED_TOOLS:?}"
    )
}

fn tools_no_hint(ctx: &Ctx) -> Check {
    check!(
        tool(&tools(ctx)?, "hint").is_err(),
        "the task-specific tool hint is listed by /tools"
    )
}

fn tools_schema_objects(ctx: &Ctx) -> Check {
    for t in tools(ctx)?.iter().filter(|t| !t["input_schema"].is_null()) {
        let s = &t["input_schema"];
        ensure!(
            s["type"] == json!("object"),
            "{}: schema type is not object: {s}",
            t["name"]
        );
        ensure!(
            s["properties"].is_object(),
            "{}: schema has no properties object: {s}",
            t["name"]
        );
    }
    Ok(())
}

fn expect_property(ctx: &Ctx, name: &str, prop: &str, ty: &str) -> Check {
    let list = tools(ctx)?;
    let s = &tool(&list, name)?["input_schema"];
    ensure!(
        s["properties"][prop]["type"] == json!(ty),
        "{name}.{prop} is not of type {ty}: {s}"
    );
    check!(
        crate::check::fuzz::required(s.get("required")).contains(&prop),
        "{name}.{prop} is not required: {s}"
    )
}

fn schema_null(ctx: &Ctx) -> Check {
    let list = tools(ctx)?;
    for name in ["counter", "image", "panic"] {
        let t = tool(&list, name)?;
        ensure!(
            t["input_schema"].is_null(),
            "{name}'s input_schema is not null: {t}"
        );
    }
    Ok(())
}

fn tools_descriptions(ctx: &Ctx) -> Check {
    for t in tools(ctx)? {
        let desc = t["description"].as_str().unwrap_or_default();
        ensure!(!desc.trim().is_empty(), "{} has no description", t["name"]);
    }
    Ok(())
}

const UNKNOWN_ENV: &str = "no-such-env-xyz";

fn tools_unknown_env(ctx: &Ctx) -> Check {
    let detail = expect_error(&ctx.get(&format!("/{UNKNOWN_ENV}/tools"))?, 404)?;
    check!(
        detail.contains(UNKNOWN_ENV),
        "detail does not name the environment: {detail:?}"
    )
}

fn splits(ctx: &Ctx) -> Check {
    let v = expect_ok_json(&ctx.get(&ctx.path("/splits"))?)?;
    let want: Vec<Value> = SPLITS
        .iter()
        .map(|(n, t, _, _)| json!({"name": n, "type": t}))
        .collect();
    expect_json("splits", &v, &Value::Array(want))
}

fn splits_bare(ctx: &Ctx) -> Check {
    let v = expect_ok_json(&ctx.get(&ctx.path("/splits"))?)?;
    let hard = v
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == json!("hard")))
        .ok_or_else(|| format!("no split hard: {v}"))?;
    expect_json(
        "split hard",
        hard,
        &json!({"name": "hard", "type": "validation"}),
    )
}

/// Fails unless `POST /{env}{route}` with `body` is a 400 JSON error.
fn bad_request(ctx: &Ctx, route: &str, body: Value) -> Check {
    ctx.refused(Request::new("POST", &ctx.path(route)).json(&body), 400)
}

/// Fails unless `POST /{UNKNOWN_ENV}{route}` with `body` is a 404 JSON error.
fn unknown_env(ctx: &Ctx, route: &str, body: Value) -> Check {
    ctx.refused(
        Request::new("POST", &format!("/{UNKNOWN_ENV}{route}")).json(&body),
        404,
    )
}

fn list_tasks(ctx: &Ctx, split: &str, first: i64, n: i64) -> Check {
    let v = post_ok(ctx, "/tasks", &json!({"split": split}))?;
    let want = json!({"tasks": tasks(first, n), "env_name": ctx.env});
    expect_json("tasks reply", &v, &want)
}

fn num_tasks(ctx: &Ctx) -> Check {
    for (split, _, _, n) in SPLITS {
        let v = post_ok(ctx, "/num_tasks", &json!({"split": split}))?;
        expect_json(split, &v, &json!({"num_tasks": n}))?;
    }
    Ok(())
}

/// The JSON of a 200 answer to `POST /{env}{route}` with `body`.
fn post_ok(ctx: &Ctx, route: &str, body: &Value) -> Result<Value, String> {
    expect_ok_json(&ctx.post_json(&ctx.path(route), body)?)
}

fn get_task(ctx: &Ctx, route: &str, split: &str, index: i64) -> Result<Value, String> {
    post_ok(ctx, route, &json!({"split": split, "index": index}))
}

fn version(ctx: &Ctx) -> Check {
    let v = expect_ok_json(&ctx.get("/version")?)?;
    ensure!(
        v.get("version").is_some_and(Value::is_string),
        "no version string in {v}"
    );
    check!(
        v.get("build_sha")
            .is_some_and(|s| s.is_string() || s.is_null()),
        "build_sha is neither a string nor null in {v}"
    )
}

fn task_env_name(ctx: &Ctx) -> Check {
    let one = get_task(ctx, "/task", "train", 0)?;
    let many = post_ok(
        ctx,
        "/task_range",
        &json!({"split": "train", "start": 0, "stop": 2}),
    )?;
    for (what, v) in [("task", one), ("task_range", many)] {
        ensure!(
            v.get("env_name").and_then(Value::as_str) == Some(ctx.env.as_str()),
            "{what} reply has no env_name {:?}: {v}",
            ctx.env
        );
    }
    Ok(())
}

fn task_bounds(ctx: &Ctx) -> Check {
    for (split, _, first, n) in SPLITS {
        for index in [0, n - 1] {
            let v = get_task(ctx, "/task", split, index)?;
            expect_fields(
                &format!("{split}[{index}]"),
                &v,
                &json!({"task": task(first + index)}),
            )?;
        }
    }
    Ok(())
}

/// Fails unless `task_range` on train with each `(start, stop)` gives the tasks of `ids`.
fn expect_ranges(ctx: &Ctx, cases: &[(Option<i64>, Option<i64>, std::ops::Range<i64>)]) -> Check {
    for (start, stop, ids) in cases {
        // An absent bound is left out, not sent as null.
        let mut body = json!({"split": "train", "start": start, "stop": stop});
        if let Some(fields) = body.as_object_mut() {
            fields.retain(|_, v| !v.is_null());
        }
        let v = post_ok(ctx, "/task_range", &body)?;
        let want = Value::Array(ids.clone().map(task).collect());
        expect_fields(&format!("task_range {body}"), &v, &json!({"tasks": want}))?;
    }
    Ok(())
}

fn alias_get_task_range(ctx: &Ctx) -> Check {
    let v = post_ok(
        ctx,
        "/get_task_range",
        &json!({"split": "train", "start": 1, "stop": 3}),
    )?;
    expect_fields("get_task_range", &v, &json!({"tasks": tasks(1, 2)}))
}

/// Fails unless `GET {route}` answers exactly what `GET /{env}{route}` does.
fn same_as_env_route(ctx: &Ctx, route: &str) -> Check {
    let got = expect_ok_json(&ctx.get(route)?)?;
    let want = expect_ok_json(&ctx.get(&ctx.path(route))?)?;
    expect_json(&format!("GET {route}"), &got, &want)
}

fn default_num_tasks(ctx: &Ctx) -> Check {
    let v = expect_ok_json(&ctx.post_json("/num_tasks", &json!({"split": "test"}))?)?;
    expect_json("POST /num_tasks", &v, &json!({"num_tasks": 5}))
}

fn errors_json(ctx: &Ctx) -> Check {
    let replies = [
        ctx.get(&format!("/{UNKNOWN_ENV}/tools"))?,
        ctx.post_json(&ctx.path("/tasks"), &json!({"split": "nope"}))?,
        ctx.post_json(&ctx.path("/task"), &json!({"split": "train", "index": 99}))?,
    ];
    for r in &replies {
        ensure!(r.status() >= 400, "expected an error, got {}", r.status());
        let ct = r.header("content-type").unwrap_or_default();
        ensure!(
            ct.starts_with("application/json"),
            "status {} has content-type {ct:?}",
            r.status()
        );
        expect_error(r, r.status())?;
    }
    Ok(())
}

fn error_codes(ctx: &Ctx) -> Check {
    let unknown_env = ctx.get(&format!("/{UNKNOWN_ENV}/tools"))?;
    expect_code(&unknown_env, 404, ErrorCode::UnknownEnvironment)?;
    let bad_split = ctx.post_json(&ctx.path("/tasks"), &json!({"split": "nope"}))?;
    expect_code(&bad_split, 400, ErrorCode::InvalidRequest)?;
    let bad_index = ctx.post_json(&ctx.path("/task"), &json!({"split": "train", "index": "1"}))?;
    expect_code(&bad_index, 400, ErrorCode::InvalidRequest)?;
    let no_route = ctx.get(&ctx.path("/no_such_route"))?;
    expect_code(&no_route, 404, ErrorCode::NoRoute)?;
    let wrong_method = ctx.post_json("/health", &json!({}))?;
    expect_code(&wrong_method, 405, ErrorCode::MethodNotAllowed)
}

fn unknown_fields_ignored(ctx: &Ctx) -> Check {
    let extra = |mut v: Value| {
        v["x_extension"] = json!({"from": "a newer client"});
        v
    };
    let cases = [
        ("/tasks", json!({"split": "hard"})),
        ("/num_tasks", json!({"split": "test"})),
        ("/task", json!({"split": "train", "index": 4})),
        (
            "/task_range",
            json!({"split": "train", "start": 1, "stop": 3}),
        ),
    ];
    for (route, body) in cases {
        let plain = post_ok(ctx, route, &body)?;
        let extended = post_ok(ctx, route, &extra(body))?;
        expect_json(&format!("{route} with an extra field"), &extended, &plain)?;
    }
    Ok(())
}
