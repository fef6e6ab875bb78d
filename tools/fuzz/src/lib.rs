//! What the fuzz targets share: reading a test case's shape (bounds, cut points) from the
//! fuzzer's bytes, and cutting a stream where it says.

use libfuzzer_sys::arbitrary::{Result, Unstructured};

/// What a decoder line may add to its data and still fit (`data: ` and some): the decoders'
/// documented slack over [`ors_core::sse::DecodeLimits::max_event_bytes`] and
/// `max_result_bytes`.
pub const FIELD_ROOM: usize = 64;

/// A byte bound the fuzzer can reach: mostly small (so bounds are hit all the time), sometimes
/// around the SSE chunk size, sometimes unbounded.
pub fn bound(u: &mut Unstructured<'_>) -> Result<usize> {
    Ok(match u.int_in_range(0u8..=9)? {
        0 => usize::MAX,
        1 => u.int_in_range(4000usize..=4200)?,
        _ => u.int_in_range(0usize..=300)?,
    })
}

/// Decoder bounds, each one [`bound`].
pub fn limits(u: &mut Unstructured<'_>) -> Result<ors_core::sse::DecodeLimits> {
    Ok(ors_core::sse::DecodeLimits {
        max_line_bytes: bound(u)?,
        max_event_bytes: bound(u)?,
        max_result_bytes: bound(u)?,
    })
}

/// Up to 16 cut points, as offsets into a stream of any length.
pub fn cuts(u: &mut Unstructured<'_>) -> Result<Vec<usize>> {
    let n = u.int_in_range(0u8..=16)?;
    (0..n)
        .map(|_| u.arbitrary::<u16>().map(usize::from))
        .collect()
}

/// `bytes` cut into pieces at `cuts` (taken modulo its length, in order), covering it all.
pub fn pieces<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| if bytes.is_empty() { 0 } else { c % bytes.len() })
        .collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

pub mod env;
