//! `slice_bounds` (and `GetTaskRange::resolve` on a parsed body) against a model of Python's
//! `tasks[start:stop]`: the range holds exactly the indices the slice would.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use ors_core::types::{slice_bounds, GetTaskRange};

/// Whether Python's `range(len)[start:stop]` holds index `i`: it is at or after the start and
/// before the stop, a negative bound counting from the end (by definition, not by clamping).
fn in_slice(i: i128, start: Option<i64>, stop: Option<i64>, len: i128) -> bool {
    let (lo, hi) = unclamped(start, stop, len);
    0 <= i && i < len && lo <= i && i < hi
}

/// The slice's bounds with negative ones counted from the end, not clamped to the list.
fn unclamped(start: Option<i64>, stop: Option<i64>, len: i128) -> (i128, i128) {
    let from_end = |v: i64| {
        if v < 0 {
            len + i128::from(v)
        } else {
            i128::from(v)
        }
    };
    (start.map_or(0, from_end), stop.map_or(len, from_end))
}

fn bound(u: &mut Unstructured<'_>) -> Result<Option<i64>> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => None,
        1 => Some(u.arbitrary()?),
        2 => Some(*u.choose(&[i64::MIN, i64::MAX, i64::MIN + 1, i64::MAX - 1, 0, -1])?),
        _ => Some(u.int_in_range(-40i64..=40)?),
    })
}

fn check(mut u: Unstructured<'_>) -> Result<()> {
    let u = &mut u;
    let (start, stop) = if u.arbitrary()? {
        (bound(u)?, bound(u)?)
    } else {
        // The same bounds as they arrive in a request body.
        let body = u.bytes(u.len().min(200))?;
        let Ok(req) = serde_json::from_slice::<GetTaskRange>(body) else {
            return Ok(());
        };
        (req.start, req.stop)
    };
    // No list is longer than isize::MAX (Rust's bound on any allocation), so neither is a
    // split: past it `slice_bounds` would clamp to i64::MAX, which is no list's length.
    let len: usize = match u.int_in_range(0u8..=3)? {
        0 => u.int_in_range(0..=isize::MAX as usize)?,
        1 => isize::MAX as usize,
        _ => u.int_in_range(0usize..=40)?,
    };
    let range = slice_bounds(start, stop, len);
    assert!(
        range.start <= range.end && range.end <= len,
        "{range:?} of {len}"
    );
    let req = GetTaskRange {
        split: "train".into(),
        start,
        stop,
    };
    assert_eq!(req.resolve(len), range);
    let l = len as i128;
    if len <= 64 {
        let want: Vec<usize> = (0..len)
            .filter(|&i| in_slice(i as i128, start, stop, l))
            .collect();
        let got: Vec<usize> = range.clone().collect();
        assert_eq!(got, want, "[{start:?}:{stop:?}] of {len}");
    } else {
        // Too long to list: the range's ends are in the slice and just outside it are not.
        let (s, e) = (range.start as i128, range.end as i128);
        if s < e {
            assert!(in_slice(s, start, stop, l) && in_slice(e - 1, start, stop, l));
            assert!(!in_slice(s - 1, start, stop, l) && !in_slice(e, start, stop, l));
        } else {
            let (lo, hi) = unclamped(start, stop, l);
            assert!(
                lo.max(0) >= hi.min(l),
                "[{start:?}:{stop:?}] of {len} is not empty"
            );
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = check(Unstructured::new(data));
});
