//! Grading no solution can fool. The hidden tests are data (arguments and an expected value,
//! [`Case`]); they never enter the agent's sandbox. `submit` copies the agent's files into a
//! fresh sandbox and runs `grader.py` there with the arguments only; it prints each returned
//! value as JSON, and the verdict is computed here, outside any sandbox, by comparing those
//! values with the expected ones ([`verdict`]). So a solution that writes files, exits early,
//! prints fake results, patches builtins or returns an object that "equals everything" earns
//! nothing: all it can ever do is make the grader see values of its choosing for arguments it
//! is given, which is solving the exercise.

use serde_json::Value;

use ors_server::prelude::*;

/// One hidden test: the function is called with `args`, and must return `expected` (both
/// JSON; compared by [`same`]).
#[wire]
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The positional arguments.
    pub args: Vec<Value>,
    /// The value the function must return.
    pub expected: Value,
}

/// How a submission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grade {
    /// Hidden tests passed.
    pub passed: usize,
    /// Hidden tests.
    pub total: usize,
    /// Why some failed (the first few), without the tests' arguments or values.
    pub failures: Vec<String>,
}

/// At most this many failures are told.
const TOLD: usize = 3;
/// The relative tolerance of float comparisons.
const TOLERANCE: f64 = 1e-9;

/// Whether the returned `got` is the `expected` value: numbers as numbers (an integer equals
/// the same float; floats within 1e-9 relative), `true` is not `1`, lists and objects
/// element by element. Python's `==` without what a class could make of it.
pub fn same(got: &Value, expected: &Value) -> bool {
    match (got, expected) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (a.as_u64(), b.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => {
                        (x - y).abs() <= TOLERANCE * 1f64.max(x.abs()).max(y.abs())
                    }
                    _ => false,
                },
            },
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, x)| b.get(k).is_some_and(|y| same(x, y)))
        }
        (a, b) => a == b,
    }
}

/// What the grader's standard input is: the function's name, the mark of its lines, and the
/// arguments of each case (not the expected values).
pub fn request(function: &str, mark: &str, cases: &[Case]) -> Vec<u8> {
    let args: Vec<&Vec<Value>> = cases.iter().map(|c| &c.args).collect();
    serde_json::json!({"function": function, "mark": mark, "cases": args})
        .to_string()
        .into_bytes()
}

/// The verdict from the grader's standard output: a case passes when exactly one line
/// `<mark>{"case": i, "value": V}` names it and `V` is its expected value. Anything else the
/// graded code printed is ignored; two answers for one case fail it.
pub fn verdict(stdout: &str, mark: &str, cases: &[Case]) -> Grade {
    let mut answers: Vec<Vec<Result<Value, String>>> = vec![Vec::new(); cases.len()];
    let mut import_error = None;
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix(mark) else {
            continue;
        };
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(rest) else {
            continue;
        };
        match obj.get("case").and_then(Value::as_u64) {
            Some(i) => {
                let Some(slot) = usize::try_from(i).ok().and_then(|i| answers.get_mut(i)) else {
                    continue;
                };
                slot.push(match (obj.get("value"), obj.get("error")) {
                    (Some(v), None) => Ok(v.clone()),
                    (_, e) => Err(e.and_then(Value::as_str).unwrap_or("no value").to_owned()),
                });
            }
            None if import_error.is_none() => {
                import_error = obj.get("error").and_then(Value::as_str).map(str::to_owned);
            }
            None => {}
        }
    }
    let total = cases.len();
    let mut grade = Grade {
        passed: 0,
        total,
        failures: Vec::new(),
    };
    if let Some(e) = import_error {
        grade.failures.push(e);
    }
    for (i, (case, got)) in cases.iter().zip(&answers).enumerate() {
        let why = match got.as_slice() {
            [Ok(v)] if same(v, &case.expected) => {
                grade.passed += 1;
                continue;
            }
            [Ok(_)] => "a wrong value".to_owned(),
            [Err(e)] => format!("it raised {e}"),
            [] => "no result".to_owned(),
            _ => "more than one result".to_owned(),
        };
        if grade.failures.len() < TOLD {
            grade
                .failures
                .push(format!("hidden test {} of {total}: {why}", i + 1));
        }
    }
    grade
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cases() -> Vec<Case> {
        vec![
            Case {
                args: vec![json!(1), json!(2)],
                expected: json!(3),
            },
            Case {
                args: vec![json!(0)],
                expected: json!([1.5, true, null, {"a": "x"}]),
            },
        ]
    }

    #[test]
    fn values_compare_as_python_compares_plain_data() {
        assert!(same(&json!(4), &json!(4.0)));
        assert!(same(&json!(98.60000000000001), &json!(98.6)));
        assert!(!same(&json!(98.61), &json!(98.6)));
        assert!(!same(&json!(true), &json!(1)));
        assert!(!same(&json!(0), &json!(false)));
        assert!(!same(&json!(null), &json!(0)));
        assert!(same(&json!([1, [2]]), &json!([1.0, [2]])));
        assert!(!same(&json!([1, 2]), &json!([1, 2, 3])));
        assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(same(&json!(12586269025_u64), &json!(12586269025_i64)));
    }

    #[test]
    fn only_marked_single_answers_with_the_right_value_count() {
        let m = "M1";
        let out = "M1{\"case\": 0, \"value\": 3}\nM1{\"case\": 1, \"value\": [1.5, true, null, {\"a\": \"x\"}]}\n";
        assert_eq!(verdict(out, m, &cases()).passed, 2);
        // Printed without the mark, or with another: not the grader's.
        let fake = "{\"case\": 0, \"value\": 3}\nM2{\"case\": 1, \"value\": 3}\n";
        let g = verdict(fake, m, &cases());
        assert_eq!((g.passed, g.total), (0, 2));
        assert_eq!(
            g.failures,
            [
                "hidden test 1 of 2: no result",
                "hidden test 2 of 2: no result"
            ]
        );
        // Two answers for a case (a solution printing its own line first) fail it.
        let twice = "M1{\"case\": 0, \"value\": 3}\nM1{\"case\": 0, \"value\": 3}\n";
        assert_eq!(
            verdict(twice, m, &cases()).failures[0],
            "hidden test 1 of 2: more than one result"
        );
        let raised =
            "M1{\"error\": \"importing f failed\"}\nM1{\"case\": 0, \"error\": \"ValueError\"}\n";
        let g = verdict(raised, m, &cases());
        assert_eq!(g.failures[0], "importing f failed");
        assert_eq!(g.failures[1], "hidden test 1 of 2: it raised ValueError");
    }

    #[test]
    fn the_request_holds_the_arguments_and_never_the_expected_values() {
        let r = String::from_utf8(request("f", "M", &cases())).unwrap();
        assert_eq!(r, r#"{"cases":[[1,2],[0]],"function":"f","mark":"M"}"#);
    }
}
