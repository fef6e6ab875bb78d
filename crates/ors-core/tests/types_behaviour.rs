//! Behaviour of the wire types beyond the page examples: round trips, lenient inputs, split
//! normalisation, task-source validation, slice bounds, secret redaction.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

mod common;

use ors_core::{
    slice_bounds, Block, CreateSession, ErrorBody, ErrorCode, GetTask, GetTaskRange, ImageBlock,
    ListToolsOutput, RunToolOutput, Secrets, Split, SplitType, TaskRangeResponse, TaskResponse,
    TaskSource, TaskSourceError, TextBlock, ToolCall, ToolErrorReason, ToolOutput, ToolSpec,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn reparse<T: serde::Serialize + serde::de::DeserializeOwned>(v: &T) -> T {
    serde_json::from_str(&serde_json::to_string(v).unwrap()).unwrap()
}

proptest! {
    #[test]
    fn run_tool_output_round_trips(result in common::run_tool_output()) {
        prop_assert_eq!(reparse(&result), result.clone());
        // `to_json` is the same text the serializer gives.
        prop_assert_eq!(result.to_json(), serde_json::to_string(&result).unwrap());
    }

    #[test]
    fn tool_output_always_emits_every_key(out in common::tool_output(common::tricky_text(10))) {
        let v = serde_json::to_value(&out).unwrap();
        for key in ["blocks", "metadata", "reward", "finished"] {
            prop_assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        for block in v["blocks"].as_array().unwrap() {
            prop_assert!(block.get("detail").is_some(), "missing detail in {block}");
            prop_assert!(block.get("type").is_some(), "missing type in {block}");
        }
    }

    #[test]
    fn create_session_round_trips(
        env in prop::option::of("[a-z]{1,8}"),
        spec in prop::option::of(Just(json!({"q": "2+2", "n": [1, 2]}))),
        split in prop::option::of("[a-z]{1,8}"),
        index in prop::option::of(any::<i64>()),
        secrets in prop::option::of(prop::collection::btree_map("[A-Z_]{1,6}", ".{0,12}", 0..3)),
        domains in prop::collection::vec("[a-z.]{1,10}", 0..3),
        toolset_name in prop::option::of("[a-z-]{1,8}"),
    ) {
        // Every other secret carries allowed domains, so both wire forms round-trip.
        let secrets = secrets.map(|m| {
            let mut s = Secrets::default();
            for (i, (k, v)) in m.into_iter().enumerate() {
                if i % 2 == 0 {
                    s.insert(k, v);
                } else {
                    s.insert_with_domains(k, v, domains.clone());
                }
            }
            s
        });
        let body = CreateSession {
            env_name: env,
            task_spec: spec,
            split,
            index,
            secrets,
            toolset_name,
        };
        prop_assert_eq!(reparse(&body), body);
    }

    #[test]
    fn split_round_trips_and_bare_names_normalise(name in ".{0,12}") {
        for ty in [SplitType::Train, SplitType::Validation, SplitType::Test] {
            let split = Split::new(name.clone(), ty);
            prop_assert_eq!(reparse(&split), split);
        }
        let bare: Split = serde_json::from_value(Value::String(name.clone())).unwrap();
        let expected = match name.as_str() {
            "train" => SplitType::Train,
            "test" => SplitType::Test,
            _ => SplitType::Validation,
        };
        prop_assert_eq!(bare, Split::new(name, expected));
    }
}

#[test]
fn split_bare_names_follow_notes_row_14() {
    let cases = [
        ("train", SplitType::Train),
        ("validation", SplitType::Validation),
        ("test", SplitType::Test),
        ("hard", SplitType::Validation),
        ("easy", SplitType::Validation),
        ("Train", SplitType::Validation), // exact names only, as the reference does
    ];
    for (name, ty) in cases {
        assert_eq!(Split::named(name).split_type, ty, "{name}");
        assert_eq!(Split::from(name), Split::new(name, ty));
        let parsed: Split = serde_json::from_str(&format!("\"{name}\"")).unwrap();
        assert_eq!(parsed, Split::new(name, ty));
        // A bare name is re-emitted in the full form.
        assert_eq!(
            serde_json::to_value(&parsed).unwrap(),
            json!({"name": name, "type": ty.to_string()})
        );
    }
    // A list of splits may mix both forms.
    let splits: Vec<Split> =
        serde_json::from_str(r#"["train", {"name": "hard", "type": "test"}, "dev"]"#).unwrap();
    assert_eq!(
        splits,
        vec![
            Split::train("train"),
            Split::test("hard"),
            Split::validation("dev")
        ]
    );
}

#[test]
fn split_object_without_type_is_typed_by_name_and_bad_forms_are_rejected() {
    let s: Split = serde_json::from_str(r#"{"name": "test"}"#).unwrap();
    assert_eq!(s, Split::test("test"));
    let err = serde_json::from_str::<Split>(r#"{"name": "x", "type": "holdout"}"#).unwrap_err();
    assert!(err.to_string().contains("holdout"), "{err}");
    let err = serde_json::from_str::<Split>(r#"{"type": "train"}"#).unwrap_err();
    assert!(err.to_string().contains("name"), "{err}");
    let err = serde_json::from_str::<Split>("42").unwrap_err();
    assert!(err.to_string().contains("split name"), "{err}");
}

#[test]
fn inputs_may_omit_optional_keys() {
    let out: ToolOutput =
        serde_json::from_str(r#"{"blocks": [{"type": "text", "text": "hi"}]}"#).unwrap();
    assert_eq!(out, ToolOutput::text("hi"));
    assert_eq!(
        serde_json::to_value(&out).unwrap(),
        json!({
            "blocks": [{"type": "text", "text": "hi", "detail": null}],
            "metadata": null,
            "reward": null,
            "finished": false
        })
    );

    let img: Block =
        serde_json::from_str(r#"{"type": "image", "data": "AAA=", "mimeType": "image/png"}"#)
            .unwrap();
    assert_eq!(img, Block::image("AAA=", "image/png"));

    let spec: ToolSpec = serde_json::from_str(r#"{"name": "t", "description": "d"}"#).unwrap();
    assert_eq!(spec.input_schema, None);
    assert_eq!(
        serde_json::to_value(&spec).unwrap(),
        json!({"name": "t", "description": "d", "input_schema": null})
    );

    let call: ToolCall = serde_json::from_str(r#"{"name": "hint"}"#).unwrap();
    assert_eq!(call.input, json!({}));
    assert_eq!(call.task_id, None);
    assert_eq!(
        serde_json::to_value(&call).unwrap(),
        json!({"name": "hint", "input": {}})
    );

    let range: GetTaskRange = serde_json::from_str(r#"{"split": "train"}"#).unwrap();
    assert_eq!((range.start, range.stop), (None, None));
    let range: GetTaskRange =
        serde_json::from_str(r#"{"split": "train", "start": null, "stop": -1}"#).unwrap();
    assert_eq!((range.start, range.stop), (None, Some(-1)));

    let body: CreateSession = serde_json::from_str(r#"{"split": "train", "index": 0}"#).unwrap();
    assert_eq!(body.env_name, None);
    assert_eq!(body.secrets, None);
    assert_eq!(
        serde_json::to_value(&body).unwrap(),
        json!({"split": "train", "index": 0})
    );

    let tools: ListToolsOutput = serde_json::from_str(r#"{"tools": []}"#).unwrap();
    assert!(tools.tools.is_empty());
}

#[test]
fn blocks_without_type_are_typed_from_their_keys() {
    // The reference models default `type`, so a peer may leave it out.
    let b: Block = serde_json::from_str(r#"{"text": "hi", "detail": null}"#).unwrap();
    assert_eq!(b, Block::text("hi"));
    let b: Block = serde_json::from_str(r#"{"data": "AAA=", "mimeType": "image/gif"}"#).unwrap();
    assert_eq!(b, Block::image("AAA=", "image/gif"));
    let b: Block = serde_json::from_str(r#"{"type": null, "text": "x"}"#).unwrap();
    assert_eq!(b, Block::text("x"));
}

#[test]
fn malformed_blocks_and_results_name_the_problem() {
    let err = serde_json::from_str::<Block>(r#"{"type": "video", "url": "x"}"#).unwrap_err();
    assert!(err.to_string().contains("video"), "{err}");
    let err = serde_json::from_str::<Block>(r#"{"detail": {}}"#).unwrap_err();
    assert!(err.to_string().contains("type"), "{err}");
    let err = serde_json::from_str::<Block>(r#"{"type": "text"}"#).unwrap_err();
    assert!(err.to_string().contains("text"), "{err}");
    let err = serde_json::from_str::<Block>(r#"{"type": "image", "data": "A"}"#).unwrap_err();
    assert!(err.to_string().contains("mimeType"), "{err}");
    let err = serde_json::from_str::<Block>(r#"{"type": 3, "text": "x"}"#).unwrap_err();
    assert!(err.to_string().contains("type"), "{err}");

    let err = serde_json::from_str::<RunToolOutput>(r#"{"ok": true}"#).unwrap_err();
    assert!(err.to_string().contains("output"), "{err}");
    let err = serde_json::from_str::<RunToolOutput>(r#"{"ok": false}"#).unwrap_err();
    assert!(err.to_string().contains("error"), "{err}");
    let err = serde_json::from_str::<RunToolOutput>(r#"{"output": {"blocks": []}}"#).unwrap_err();
    assert!(err.to_string().contains("ok"), "{err}");
}

#[test]
fn request_bodies_ignore_unknown_fields_but_not_misspelt_required_ones() {
    // PROTOCOL_NOTES row `unknown-fields-ignored`: a newer or extended peer keeps working.
    let call: ToolCall =
        serde_json::from_str(r#"{"name": "a", "input": {"x": 1}, "trace": {"id": 7}}"#).unwrap();
    assert_eq!(call.name, "a");
    assert_eq!(call.input, json!({"x": 1}));
    let create: CreateSession =
        serde_json::from_str(r#"{"split": "a", "index": 1, "extensions": {"x": 1}}"#).unwrap();
    assert_eq!(create, CreateSession::from_split("a", 1));
    let task: GetTask =
        serde_json::from_str(r#"{"split": "train", "index": 0, "extra": true}"#).unwrap();
    assert_eq!(task.index, 0);
    // A misspelt required field is the required field missing.
    let err = serde_json::from_str::<ToolCall>(r#"{"nmae": "a"}"#).unwrap_err();
    assert!(err.to_string().contains("missing field `name`"), "{err}");
    let err = serde_json::from_str::<GetTask>(r#"{"split": "a", "idx": 1}"#).unwrap_err();
    assert!(err.to_string().contains("missing field `index`"), "{err}");
}

#[test]
fn call_input_is_an_object_and_null_means_none() {
    let call: ToolCall = serde_json::from_str(r#"{"name": "a", "input": null}"#).unwrap();
    assert_eq!(call.input, json!({}));
    let call: ToolCall = serde_json::from_str(r#"{"name": "a"}"#).unwrap();
    assert_eq!(call.input, json!({}));
    let err = serde_json::from_str::<ToolCall>(r#"{"name": "a", "input": [1]}"#).unwrap_err();
    assert!(
        err.to_string().contains("an array, expected a JSON object"),
        "{err}"
    );
}

#[test]
fn error_bodies_carry_a_code_and_read_without_one() {
    let body = ErrorBody::new(ErrorCode::SessionDeleted, "session 's' was deleted");
    assert_eq!(
        serde_json::to_value(&body).unwrap(),
        json!({"detail": "session 's' was deleted", "code": "session_deleted"})
    );
    assert_eq!(body.error_code(), Some(ErrorCode::SessionDeleted));
    // The Python reference sends no code; a newer server may send one we do not know.
    let reference: ErrorBody = serde_json::from_str(r#"{"detail": "Session deleted"}"#).unwrap();
    assert_eq!(reference.code, None);
    let newer: ErrorBody = serde_json::from_str(r#"{"detail": "d", "code": "brand_new"}"#).unwrap();
    assert_eq!(newer.code.as_deref(), Some("brand_new"));
    assert_eq!(newer.error_code(), None);
}

#[test]
fn blocks_serialize_in_the_reference_shape() {
    let text = Block::Text(TextBlock {
        text: "t".into(),
        detail: Some(json!({"k": 1}).as_object().unwrap().clone()),
    });
    assert_eq!(
        serde_json::to_value(&text).unwrap(),
        json!({"type": "text", "text": "t", "detail": {"k": 1}})
    );
    let image = Block::Image(ImageBlock {
        data: "AAA=".into(),
        mime_type: "image/png".into(),
        detail: None,
    });
    assert_eq!(
        serde_json::to_value(&image).unwrap(),
        json!({"type": "image", "data": "AAA=", "mimeType": "image/png", "detail": null})
    );
}

#[test]
fn tool_output_builders_read_well() {
    let out = ToolOutput::text("Correct!")
        .with_reward(1.0)
        .finish()
        .with_metadata(json!({"steps": 3}).as_object().unwrap().clone())
        .with_block(Block::image("AAA=", "image/png"));
    assert_eq!(
        serde_json::to_value(&out).unwrap(),
        json!({
            "blocks": [
                {"type": "text", "text": "Correct!", "detail": null},
                {"type": "image", "data": "AAA=", "mimeType": "image/png", "detail": null}
            ],
            "metadata": {"steps": 3},
            "reward": 1.0,
            "finished": true
        })
    );
    assert!(!out.clone().with_finished(false).finished);
    assert_eq!(ToolOutput::from("x"), ToolOutput::text("x"));
    assert_eq!(ToolOutput::from(String::from("x")), ToolOutput::text("x"));
    assert_eq!(
        ToolOutput::from(Block::text("x")),
        ToolOutput::blocks(vec![Block::text("x")])
    );
}

#[test]
fn task_source_accepts_exactly_one_form() {
    let spec = json!({"question": "1+1"});
    assert_eq!(
        CreateSession::from_task(spec.clone()).task_source(),
        Ok(TaskSource::Spec(spec))
    );
    assert_eq!(
        CreateSession::from_split("train", 3).task_source(),
        Ok(TaskSource::Split {
            split: "train".into(),
            index: 3
        })
    );
    // An explicit `"task_spec": null` counts as absent, as in the reference.
    let body: CreateSession =
        serde_json::from_str(r#"{"task_spec": null, "split": "train", "index": 0}"#).unwrap();
    assert!(matches!(body.task_source(), Ok(TaskSource::Split { .. })));
}

#[test]
fn each_wrong_task_source_has_its_own_error() {
    let with = |body: Value| -> TaskSourceError {
        serde_json::from_value::<CreateSession>(body)
            .unwrap()
            .task_source()
            .unwrap_err()
    };
    let spec = json!({"q": 1});
    let cases = [
        (json!({}), TaskSourceError::Neither),
        (json!({"env_name": "math"}), TaskSourceError::Neither),
        (
            json!({"task_spec": spec, "split": "train", "index": 1}),
            TaskSourceError::Both,
        ),
        (
            json!({"task_spec": spec, "split": "train"}),
            TaskSourceError::SpecWithSplit,
        ),
        (
            json!({"task_spec": spec, "index": 1}),
            TaskSourceError::SpecWithIndex,
        ),
        (
            json!({"split": "train"}),
            TaskSourceError::SplitWithoutIndex,
        ),
        (json!({"index": 1}), TaskSourceError::IndexWithoutSplit),
        (json!({"task_spec": "q"}), TaskSourceError::SpecNotObject),
        (json!({"task_spec": [1]}), TaskSourceError::SpecNotObject),
    ];
    let mut messages = std::collections::BTreeSet::new();
    for (body, expected) in cases {
        let err = with(body.clone());
        assert_eq!(err, expected, "{body}");
        let msg = err.to_string();
        // Every message names the fields at fault.
        assert!(msg.contains("task_spec") || msg.contains("split"), "{msg}");
        messages.insert(msg);
    }
    assert_eq!(
        messages.len(),
        7,
        "each wrong combination reads differently"
    );
}

/// `(start, stop, len, expected)`.
type SliceCase = (Option<i64>, Option<i64>, usize, &'static [usize]);

/// `list(range(len))[start:stop]` computed with python3, for each `(start, stop, len)`.
const SLICE_CASES: &[SliceCase] = &[
    (None, None, 0, &[]),
    (None, None, 5, &[0, 1, 2, 3, 4]),
    (Some(0), None, 5, &[0, 1, 2, 3, 4]),
    (Some(2), None, 5, &[2, 3, 4]),
    (None, Some(3), 5, &[0, 1, 2]),
    (Some(1), Some(4), 5, &[1, 2, 3]),
    (Some(-1), None, 5, &[4]),
    (Some(-2), None, 5, &[3, 4]),
    (None, Some(-1), 5, &[0, 1, 2, 3]),
    (Some(-3), Some(-1), 5, &[2, 3]),
    (Some(-10), None, 5, &[0, 1, 2, 3, 4]),
    (None, Some(-10), 5, &[]),
    (Some(-10), Some(2), 5, &[0, 1]),
    (Some(3), Some(1), 5, &[]),
    (Some(4), Some(4), 5, &[]),
    (Some(-1), Some(-3), 5, &[]),
    (Some(3), Some(-3), 5, &[]),
    (Some(2), Some(-3), 5, &[]),
    (Some(5), None, 5, &[]),
    (Some(6), None, 5, &[]),
    (Some(0), Some(100), 5, &[0, 1, 2, 3, 4]),
    (Some(1 << 62), None, 5, &[]),
    (None, Some(1 << 62), 5, &[0, 1, 2, 3, 4]),
    (Some(-(1 << 62)), Some(1 << 62), 5, &[0, 1, 2, 3, 4]),
    (Some(i64::MAX), Some(i64::MAX), 5, &[]),
    (Some(i64::MIN), Some(i64::MIN), 5, &[]),
    (Some(i64::MIN), Some(i64::MAX), 5, &[0, 1, 2, 3, 4]),
    (None, None, 1, &[0]),
    (Some(-1), None, 1, &[0]),
    (Some(0), Some(-1), 1, &[]),
    (Some(1), Some(2), 1, &[]),
    (Some(0), Some(1), 0, &[]),
    (Some(-1), Some(1), 0, &[]),
    (Some(7), Some(9), 10, &[7, 8]),
    (Some(-4), Some(-2), 10, &[6, 7]),
    (Some(-4), None, 10, &[6, 7, 8, 9]),
    (None, Some(-7), 10, &[0, 1, 2]),
];

#[test]
fn slice_bounds_match_python_slices() {
    for &(start, stop, len, expected) in SLICE_CASES {
        let items: Vec<usize> = (0..len).collect();
        let range = slice_bounds(start, stop, len);
        assert!(
            range.end <= len,
            "{start:?}:{stop:?} of {len} gave {range:?}"
        );
        assert_eq!(&items[range], expected, "[{start:?}:{stop:?}] of {len}");
        let body = GetTaskRange {
            split: "s".into(),
            start,
            stop,
        };
        assert_eq!(body.resolve(len), slice_bounds(start, stop, len));
    }
}

#[test]
fn secrets_debug_never_shows_values() {
    let secrets: Secrets = [("OPENAI_API_KEY", "sk-very-secret"), ("TOKEN", "hunter2")]
        .into_iter()
        .collect();
    for shown in [
        format!("{secrets:?}"),
        format!("{secrets:#?}"),
        format!(
            "{:?}",
            CreateSession::from_split("train", 0).secrets(secrets.clone())
        ),
    ] {
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("OPENAI_API_KEY"), "{shown}");
    }
    assert_eq!(secrets.get("TOKEN"), Some("hunter2"));
    assert_eq!(
        secrets.keys().collect::<Vec<_>>(),
        vec!["OPENAI_API_KEY", "TOKEN"]
    );
    // On the wire (the request body) the values are sent: that is their purpose.
    assert_eq!(
        serde_json::to_value(&secrets).unwrap(),
        json!({"OPENAI_API_KEY": "sk-very-secret", "TOKEN": "hunter2"})
    );
}

#[test]
fn secrets_merge_keeps_existing_values() {
    let mut body: Secrets = [("A", "from-body")].into_iter().collect();
    body.merge_missing([("A", "from-header"), ("B", "b")].into_iter().collect());
    assert_eq!(body.get("A"), Some("from-body"));
    assert_eq!(body.get("B"), Some("b"));
    assert!(!body.is_empty());
    assert!(Secrets::default().is_empty());
}

#[test]
fn tool_errors_carry_a_reason_only_when_one_applies() {
    // PROTOCOL_NOTES row `error-reason`: the openreward client branches on `reason`.
    let refused = RunToolOutput::refused(ToolErrorReason::InputValidation, "bad");
    assert_eq!(
        serde_json::to_value(&refused).unwrap(),
        json!({"ok": false, "error": "bad", "reason": "input_validation"})
    );
    assert_eq!(
        serde_json::to_value(RunToolOutput::error("mine")).unwrap(),
        json!({"ok": false, "error": "mine"})
    );
    let back: RunToolOutput =
        serde_json::from_value(json!({"ok": false, "error": "x", "reason": "episode_finished"}))
            .unwrap();
    assert_eq!(
        back.error_info().and_then(|e| e.reason),
        Some(ToolErrorReason::EpisodeFinished)
    );
    // A reason this version does not know is no reason, not a broken result.
    let odd: RunToolOutput =
        serde_json::from_value(json!({"ok": false, "error": "x", "reason": "bad_input_shape"}))
            .unwrap();
    assert_eq!(odd, RunToolOutput::error("x"));
}

#[test]
fn wire_enums_name_each_variant_once_for_serde_and_display() {
    // The wire names are the protocol's: serde, `as_str` and `Display` all give them.
    let reasons = ToolErrorReason::ALL.map(ToolErrorReason::as_str);
    assert_eq!(
        reasons,
        [
            "not_found",
            "name_collision",
            "input_validation",
            "episode_finished"
        ]
    );
    let splits = SplitType::ALL.map(SplitType::as_str);
    assert_eq!(splits, ["train", "validation", "test"]);
    for r in ToolErrorReason::ALL {
        assert_eq!(serde_json::to_value(r).unwrap(), json!(r.to_string()));
        assert_eq!(
            serde_json::from_value::<ToolErrorReason>(json!(r.as_str())).unwrap(),
            r
        );
    }
    for t in SplitType::ALL {
        assert_eq!(serde_json::to_value(t).unwrap(), json!(t.to_string()));
        assert_eq!(
            serde_json::from_value::<SplitType>(json!(t.as_str())).unwrap(),
            t
        );
    }
}

#[test]
fn a_full_split_is_read_like_before() {
    let read = |json: Value| serde_json::from_value::<Split>(json).map_err(|e| e.to_string());
    assert_eq!(
        read(json!({"name": "x", "type": "test", "other": 1})),
        Ok(Split::test("x"))
    );
    assert_eq!(
        read(json!({"name": "train", "type": null})),
        Ok(Split::train("train"))
    );
    assert!(read(json!({"type": "test"}))
        .unwrap_err()
        .contains("missing field `name`"));
    assert!(read(json!({"name": "x", "type": "hard"}))
        .unwrap_err()
        .contains("unknown variant `hard`"));
    let dup = serde_json::from_str::<Split>(r#"{"name": "a", "name": "b"}"#).unwrap_err();
    assert!(dup.to_string().contains("duplicate field `name`"), "{dup}");
}

#[test]
fn task_replies_read_with_or_without_env_name() {
    // PROTOCOL_NOTES row `task-reply-env-name`: sent, never required.
    let with: TaskResponse =
        serde_json::from_value(json!({"task": {"q": 1}, "env_name": "math"})).unwrap();
    assert_eq!(with.env_name.as_deref(), Some("math"));
    let without: TaskRangeResponse = serde_json::from_value(json!({"tasks": []})).unwrap();
    assert_eq!(without.env_name, None);
}

#[test]
fn secrets_keep_empty_values_and_allowed_domains() {
    // PROTOCOL_NOTES row `secrets-forms`: the openreward client sends `api_key` in the entry form.
    let s: Secrets = serde_json::from_value(json!({
        "api_key": {"value": "", "allowed_domains": ["a.example", "b.example"]},
        "PLAIN": {"value": "v"},
        "BARE": "w",
    }))
    .unwrap();
    assert_eq!(s.get("api_key"), Some(""));
    assert_eq!(s.allowed_domains("api_key").map(<[String]>::len), Some(2));
    assert_eq!(s.get("PLAIN"), Some("v"));
    assert_eq!(s.allowed_domains("PLAIN"), None);
    assert_eq!(s.get("BARE"), Some("w"));
    assert!(serde_json::from_value::<Secrets>(json!({"X": 1})).is_err());
}

#[test]
fn json_errors_quote_names_as_every_error_text_does() {
    use ors_core::types::json_error_text;
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)] // read only to fail
    struct Point {
        x: i32,
        kind: Kind,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Flat,
        Round,
    }
    let text = |json: &str| json_error_text(&serde_json::from_str::<Point>(json).unwrap_err());
    assert_eq!(text(r#"{"kind": "flat"}"#), "missing field 'x'");
    assert_eq!(
        text(r#"{"x": 1, "kind": "odd"}"#),
        "unknown variant 'odd', expected 'flat' or 'round'"
    );
    // What the sender wrote is echoed as written, backticks and escaped quotes too.
    assert_eq!(
        text(r#"{"x": "a`b\"`", "kind": "flat"}"#),
        r#"invalid type: string "a`b\"`", expected i32"#
    );
}
