//! A command as the sandbox's init reads it: the request header, a shell script that sets the
//! limits, the directory and the variables and then `exec`s the program, and the bytes of its
//! standard input. Everything the agent gave is single-quoted, so the script runs exactly the
//! program and arguments it names.

use std::os::unix::ffi::OsStrExt;

use super::{Exec, SandboxError, WORKSPACE};

/// Processes of the sandbox that are not the command's but count in its process limit: the
/// init.
const INIT_PROCESSES: u64 = 1;

/// `s` single-quoted for a POSIX shell: every byte stands for itself, newlines included.
pub(crate) fn quote(s: &[u8]) -> Vec<u8> {
    let parts: Vec<&[u8]> = s.split(|&b| b == b'\'').collect();
    [&b"'"[..], &parts.join(&b"'\\''"[..]), b"'"].concat()
}

/// Whether `name` can be an environment variable the shell exports.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && !name[0].is_ascii_digit()
        && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The shell script that runs `exec` inside the sandbox.
pub(crate) fn script(exec: &Exec) -> Result<Vec<u8>, SandboxError> {
    let refuse = |why: String| Err(SandboxError::Refused(why));
    let mut s: Vec<u8> = Vec::new();
    // What the command starts is what the kernel's out-of-memory killer takes first, before
    // the sandbox's init and long before the server (raising it needs no privilege).
    s.extend_from_slice(b"echo 1000 >/proc/self/oom_score_adj 2>/dev/null; ulimit -c 0; ");
    s.extend_from_slice(exec.limits.prelude(INIT_PROCESSES).as_bytes());
    let dir: &[u8] = match &exec.cwd {
        Some(d) => d.as_os_str().as_bytes(),
        None => WORKSPACE.as_bytes(),
    };
    if dir.contains(&0) {
        return refuse("the working directory contains a NUL byte".to_owned());
    }
    s.extend([b"cd -- ", &quote(dir)[..], b" || exit 126; "].concat());
    for (k, v) in &exec.env {
        let (k, v) = (k.as_bytes(), v.as_bytes());
        if !valid_name(k) {
            return refuse(format!(
                "the environment variable name {:?} is not a shell name (letters, digits and \
                 '_', not starting with a digit)",
                String::from_utf8_lossy(k)
            ));
        }
        if v.contains(&0) {
            return refuse(format!(
                "the value of {} contains a NUL byte",
                String::from_utf8_lossy(k)
            ));
        }
        s.extend([b"export ", k, b"=", &quote(v), b"; "].concat());
    }
    if exec.argv.iter().any(|a| a.as_bytes().contains(&0)) {
        return refuse("an argument contains a NUL byte".to_owned());
    }
    if let [sh, c, command] = exec.argv.as_slice() {
        if (sh == "/bin/sh" || sh == "sh") && c == "-c" {
            // A shell command (Program::shell) runs in the init's subshell, itself a POSIX
            // shell, instead of an exec'd second one: that exec cost as much CPU as a `sleep
            // 1` command itself. What differs from `sh -c`: `$$` and `$PPID` are the init's,
            // and the shell's messages name it (`ors-sandbox-init: 1: eval: x: not found`).
            s.extend([b"eval ", &quote(command.as_bytes())[..]].concat());
            return Ok(s);
        }
    }
    s.extend_from_slice(b"exec");
    for arg in &exec.argv {
        s.push(b' ');
        s.extend_from_slice(&quote(arg.as_bytes()));
    }
    Ok(s)
}

/// The whole request for the init: `<nonce> <lines> <input bytes>\n`, the script's lines, and
/// the standard input.
pub(crate) fn request(nonce: &str, exec: &Exec) -> Result<Vec<u8>, SandboxError> {
    let script = script(exec)?;
    let lines = script.iter().filter(|&&b| b == b'\n').count() + 1;
    let input = exec.stdin.as_deref().unwrap_or_default();
    let mut out = format!("{nonce} {lines} {}\n", input.len()).into_bytes();
    out.extend_from_slice(&script);
    out.push(b'\n');
    out.extend_from_slice(input);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Limits;
    use std::ffi::OsString;
    use std::time::Duration;

    fn exec(argv: &[&str]) -> Exec {
        Exec {
            argv: argv.iter().map(OsString::from).collect(),
            cwd: None,
            env: vec![(OsString::from("A_1"), OsString::from("it's"))],
            stdin: Some(b"in".to_vec()),
            timeout: Duration::from_secs(1),
            limits: Limits::default(),
            max_output: 10,
        }
    }

    #[test]
    fn quoting_keeps_every_byte() {
        assert_eq!(quote(b"a'b"), b"'a'\\''b'");
        assert_eq!(quote(b"x\ny $z"), b"'x\ny $z'");
    }

    #[test]
    fn the_request_counts_lines_and_input() {
        let r = request("n0", &exec(&["/bin/sh", "-c", "echo 1\necho 2"])).unwrap();
        let text = String::from_utf8(r).unwrap();
        assert!(text.starts_with("n0 2 2\n"), "{text}");
        assert!(
            text.ends_with(
                "cd -- '/workspace' || exit 126; export A_1='it'\\''s'; eval 'echo 1\necho 2'\nin"
            ),
            "{text}"
        );
    }

    #[test]
    fn only_a_bare_shell_command_runs_in_the_inits_shell() {
        let text = |argv: &[&str]| String::from_utf8(script(&exec(argv)).unwrap()).unwrap();
        assert!(text(&["sh", "-c", "ls"]).ends_with("; eval 'ls'"));
        // With $0 and arguments, or another program, it is exec'd as given.
        let named = text(&["/bin/sh", "-c", "echo $1", "name", "arg"]);
        assert!(
            named.ends_with("exec '/bin/sh' '-c' 'echo $1' 'name' 'arg'"),
            "{named}"
        );
        assert!(text(&["/bin/bash", "-c", "ls"]).ends_with("exec '/bin/bash' '-c' 'ls'"));
    }

    #[test]
    fn names_the_shell_cannot_export_are_refused() {
        let mut e = exec(&["true"]);
        e.env = vec![(OsString::from("A-B"), OsString::from("x"))];
        let err = script(&e).unwrap_err().to_string();
        assert!(err.contains("\"A-B\" is not a shell name"), "{err}");
    }
}
