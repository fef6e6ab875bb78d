//! The checks every tool result passes before it is sent: the size limit
//! ([`crate::ServerConfig::max_result_bytes`], `ORS_MAX_RESULT_BYTES`) and, in debug builds,
//! an output with no blocks (PROTOCOL_NOTES row `additions`).

use ors_core::types::RunToolOutput;

/// The result to send for what a tool returned: unchanged, or `ok: false` saying which limit
/// it broke.
pub(crate) fn check_result(tool: &str, out: RunToolOutput, max_bytes: usize) -> RunToolOutput {
    // Many clients read `blocks[0]`; an empty list is almost always a bug in the tool. Release
    // builds send it as it is, so a working deployment never starts failing over it.
    if cfg!(debug_assertions) {
        if let RunToolOutput::Success(o) = &out {
            if o.blocks.is_empty() {
                return RunToolOutput::error(format!(
                    "tool '{tool}' returned an output with no blocks; give it at least one (a \
                     text block saying what happened), as clients read blocks[0] (this check \
                     runs in debug builds only)"
                ));
            }
        }
    }
    let size = json_size(&out);
    if size > max_bytes {
        tracing::warn!(
            tool,
            size,
            limit = max_bytes,
            "tool result over the size limit"
        );
        return RunToolOutput::error(format!(
            "tool '{tool}' returned a result of {size} bytes, more than this server's limit of \
             {max_bytes} bytes (ORS_MAX_RESULT_BYTES)"
        ));
    }
    out
}

/// The length of a result's JSON text, counted without building it.
fn json_size(out: &RunToolOutput) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a result that cannot be serialized is sent as the
    // error `to_json` makes of it, which is small.
    let _ = serde_json::to_writer(&mut count, out);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_core::types::ToolOutput;

    #[test]
    fn results_over_the_limit_become_errors_with_size_and_limit() {
        let out = RunToolOutput::Success(ToolOutput::text("x".repeat(100)));
        let size = out.to_json().len();
        assert_eq!(json_size(&out), size);
        assert_eq!(check_result("t", out.clone(), size), out);
        let RunToolOutput::Error(msg) = check_result("t", out, size - 1) else {
            panic!("over the limit");
        };
        assert_eq!(
            msg.error,
            format!(
                "tool 't' returned a result of {size} bytes, more than this server's limit of {} \
                 bytes (ORS_MAX_RESULT_BYTES)",
                size - 1
            )
        );
    }

    #[test]
    #[cfg(debug_assertions)]
    fn an_output_without_blocks_is_an_error_in_debug_builds() {
        let out = RunToolOutput::Success(ToolOutput::blocks(vec![]));
        let RunToolOutput::Error(msg) = check_result("t", out, usize::MAX) else {
            panic!("no blocks");
        };
        assert!(
            msg.error
                .starts_with("tool 't' returned an output with no blocks"),
            "{msg}"
        );
    }
}
