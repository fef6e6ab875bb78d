//! The escape checks: through each tool that runs commands (`"runs_commands": true` in its
//! spec, PROTOCOL_NOTES row `runs-commands`, or found by its name and input schema on servers
//! that do not send the marker), `ors check` tries what an agent optimising its reward would:
//! reading a host file outside the episode, reaching the server on loopback, reading another
//! live episode's files, writing outside its workspace, leaving a detached process behind,
//! starting hundreds of processes, and reading the server's environment. Each success is a
//! problem naming what leaked (variable names, never their values).
//!
//! The probes are POSIX shell (a tool that takes Python code gets them through `subprocess`).
//! What they print is marked `ORS-CHECK-<token>`, written so that the marker never appears in
//! the command itself (a tool that echoes its command fools no check), and every probe cleans
//! up what it made: files, and the processes it started.

use std::collections::BTreeSet;
use std::time::Duration;

use ors_client::{Environment, RunToolOutput, Session, TaskRef, ToolSpec};
use ors_core::BlockText;
use serde_json::{json, Map, Value};

use super::episodes::{within, FuzzTask};
use super::report::{id_part, shell_quote, Recorder};
use super::rng::Rng;
use super::{CheckItem, CheckOptions};

/// Processes the flood probe starts; starting [`FLOOD_PROBLEM`] of them is a problem.
const FLOOD: u32 = 300;
/// How many processes at once count as "hundreds".
const FLOOD_PROBLEM: u32 = 256;
/// Input properties that hold the command, by preference.
const COMMAND_FIELDS: &[&str] = &[
    "command",
    "cmd",
    "commands",
    "shell_command",
    "script",
    "code",
    "source",
];
/// Name parts of tools that run commands.
const COMMAND_NAMES: &[&str] = &[
    "run", "shell", "bash", "sh", "exec", "execute", "terminal", "cmd", "command", "python",
    "code", "sandbox",
];
/// Home-directory entries every image has; anything else in one is the host's.
const SKELETON: &[&str] = &[
    ".bashrc",
    ".profile",
    ".bash_logout",
    ".cache",
    ".config",
    ".local",
];
/// Programs a command's parent is when the tool gives it no view of the server.
const NEUTRAL_PARENTS: &[&str] = &[
    "sh",
    "dash",
    "bash",
    "ash",
    "zsh",
    "busybox",
    "bwrap",
    "tini",
    "init",
    "dumb-init",
    "containerd-shim",
    "runc",
    "conmon",
    "python3",
    "python",
];
/// Variables a shell sets itself.
const SHELL_VARS: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];
/// Parts of variable names that suggest the server's configuration or secrets.
const SECRET_LIKE: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "CREDENTIAL",
    "ORS_",
    "AWS_",
    "OPENAI",
    "ANTHROPIC",
    "CARGO",
    "RUST",
];

/// A tool that runs commands, and how to hand it one.
pub(super) struct CommandTool {
    name: String,
    /// The input property the command goes in.
    field: String,
    /// It takes Python code rather than a shell command.
    python: bool,
    /// Values for the other required properties.
    extra: Map<String, Value>,
    /// Found by the heuristics rather than declared.
    guessed: bool,
}

impl CommandTool {
    /// The tool as one that runs commands, if it declares it or looks like one.
    pub(super) fn find(spec: &ToolSpec) -> Option<Self> {
        let schema = spec.input_schema.as_ref()?;
        let props = schema.get("properties")?.as_object()?;
        let stringy = |k: &str| {
            props.get(k).is_some_and(|p| {
                p.get("type").is_none_or(|t| {
                    t == "string" || t.as_array().is_some_and(|a| a.contains(&json!("string")))
                })
            })
        };
        let required = super::fuzz::required(schema.get("required"));
        let field = COMMAND_FIELDS
            .iter()
            .copied()
            .find(|f| stringy(f))
            .or_else(|| {
                spec.runs_commands
                    .then(|| required.iter().copied().find(|f| stringy(f)))
                    .flatten()
            })?;
        let name = spec.name.to_ascii_lowercase();
        let looks = name
            .split(['_', '-', '.'])
            .any(|part| COMMAND_NAMES.contains(&part));
        if !spec.runs_commands && !looks {
            return None;
        }
        let python = field == "code"
            && (name.contains("python") || spec.description.to_lowercase().contains("python"));
        let mut extra = Map::new();
        for r in required.iter().filter(|r| **r != field) {
            if let Some(v) = props.get(*r).and_then(placeholder) {
                extra.insert((*r).to_owned(), v);
            }
        }
        Some(Self {
            name: spec.name.clone(),
            field: field.to_owned(),
            python,
            extra,
            guessed: !spec.runs_commands,
        })
    }

    /// The tool's input that runs `script`.
    fn input(&self, script: &str) -> Value {
        let command = if self.python {
            format!(
                "import subprocess, sys\nr = subprocess.run(['/bin/sh', '-c', {}], \
                 capture_output=True, text=True)\nsys.stdout.write(r.stdout)\n\
                 sys.stderr.write(r.stderr)\n",
                Value::String(script.to_owned())
            )
        } else {
            script.to_owned()
        };
        let mut input = self.extra.clone();
        input.insert(self.field.clone(), Value::String(command));
        Value::Object(input)
    }
}

/// A value a required property accepts: its default, its first enum value, or the least of
/// its type.
fn placeholder(schema: &Value) -> Option<Value> {
    if let Some(v) = schema.get("default").or_else(|| schema["enum"].get(0)) {
        return Some(v.clone());
    }
    match schema.get("type").and_then(Value::as_str)? {
        "string" => Some(json!("")),
        "integer" | "number" => Some(schema.get("minimum").cloned().unwrap_or(json!(1))),
        "boolean" => Some(json!(false)),
        "array" => Some(json!([])),
        "object" => Some(json!({})),
        _ => None,
    }
}

/// What one probe saw: the marked lines of the tool's answer, as (key, rest).
#[derive(Debug, Default)]
struct Seen {
    lines: Vec<(String, String)>,
}

impl Seen {
    fn all(&self, key: &str) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn first(&self, key: &str) -> Option<&str> {
        self.all(key).into_iter().next()
    }

    /// The count the first `key` line holds (0 without one).
    fn count(&self, key: &str) -> u32 {
        self.first(key).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

/// The probes' shared parts: the token, the marker function, the server's address.
struct Probes<'a> {
    env: &'a Environment,
    task: &'a TaskRef,
    tool: &'a CommandTool,
    limit: Duration,
    /// Digits, so they can also be a `sleep` argument.
    token: String,
    server: Option<(String, u16, bool)>,
}

impl Probes<'_> {
    /// `m KEY VALUE...` prints `ORS-CHECK-<token> KEY VALUE...`; the script never contains
    /// that text itself.
    fn script(&self, body: &str) -> String {
        format!(
            "m() {{ printf 'ORS%sCHECK-%s %s\\n' - {} \"$*\"; }}\n{body}\nm done\n",
            self.token
        )
    }

    /// `f` in an episode of its own, deleted after it.
    async fn in_episode<T>(
        &self,
        f: impl AsyncFnOnce(&Session) -> Result<T, String>,
    ) -> Result<T, String> {
        let session = within(self.limit, self.env.session(self.task.clone()).open()).await?;
        let result = f(&session).await;
        let _ = within(self.limit, session.close()).await;
        result
    }

    /// Run `body` through the tool in `session`; the marked lines, or why nothing was seen.
    async fn call(&self, session: &Session, body: &str) -> Result<Seen, String> {
        let input = self.tool.input(&self.script(body));
        let answer = tokio::time::timeout(self.limit, session.call_raw(&self.tool.name, input))
            .await
            .map_err(|_| format!("no answer within {} s", self.limit.as_secs()))?
            .map_err(|e| e.to_string())?;
        let text = match answer {
            RunToolOutput::Success(out) => out.text(),
            RunToolOutput::Error(e) => e.error,
        };
        let mark = format!("ORS-CHECK-{} ", self.token);
        let mut seen = Seen::default();
        for line in text.lines() {
            if let Some(at) = line.find(&mark) {
                let rest = &line[at + mark.len()..];
                let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
                seen.lines.push((k.to_owned(), v.trim().to_owned()));
            }
        }
        if seen.first("done").is_none() {
            let shown: String = text.chars().take(200).collect();
            return Err(format!(
                "the probe's command did not run to its end through '{}' (it answered {shown:?})",
                self.tool.name
            ));
        }
        Ok(seen)
    }

    /// Run one probe in an episode of its own.
    async fn alone(&self, body: &str) -> Result<Seen, String> {
        self.in_episode(async |session| self.call(session, body).await)
            .await
    }
}

/// The outcome of one escape check: what leaked, or a note on a passed one.
enum Verdict {
    Leaked(String),
    Held(Option<String>),
}

impl Verdict {
    /// Leaked, saying `what` of the `leaks` found, or held when there are none.
    fn of(leaks: &[String], what: &str) -> Self {
        Self::leaked((!leaks.is_empty()).then(|| format!("{what}: {}", leaks.join("; "))))
    }

    /// Leaked, saying what leaked, or held when nothing did.
    fn leaked(what: Option<String>) -> Self {
        what.map_or(Verdict::Held(None), Verdict::Leaked)
    }
}

/// Push the seven escape checks of every tool that runs commands.
pub(super) async fn run(
    rec: &mut Recorder<'_>,
    env: &Environment,
    task: Option<&FuzzTask>,
    tools: &[ToolSpec],
    opts: &CheckOptions,
    url: &str,
) {
    let Some(task) = task else { return };
    let server = server_address(url);
    for tool in tools.iter().filter_map(CommandTool::find) {
        let token = Rng::new(opts.seed ^ 0x0e5c_a9e5).next_u64() % 1_000_000_000_000;
        let probes = Probes {
            env,
            task: &task.task,
            tool: &tool,
            limit: opts.timeout,
            token: format!("{token:012}"),
            server: server.clone(),
        };
        let how = if tool.guessed {
            " (found by its name and input; declare it with #[tool(runs_commands)])"
        } else {
            ""
        };
        let id = |check: &str| format!("tool.{}.escape.{check}", id_part(&tool.name));
        let mut push = |check: &str, verdict: Result<Verdict, String>| {
            rec.push(match verdict {
                Ok(Verdict::Leaked(what)) => CheckItem::problem(
                    id(check),
                    format!(
                        "through '{}'{how}, {what}; run the agent's commands in a sandbox of \
                         the episode's own (ors_server::sandbox, or a container per episode)",
                        tool.name
                    ),
                ),
                Ok(Verdict::Held(note)) => CheckItem {
                    note,
                    ..CheckItem::ok(id(check))
                },
                Err(why) => CheckItem::ok_with(id(check), format!("could not tell: {why}")),
            });
        };
        push("host-file", host_file(&probes).await);
        push("server-loopback", loopback(&probes).await);
        let (other, outside) = other_episode(&probes).await;
        push("other-episode", other);
        push("write-outside", outside);
        push("detached-process", detached(&probes).await);
        push("process-limit", flood(&probes).await);
        push("server-env", server_env(&probes).await);
    }
}

/// The server's host, port and whether it speaks TLS, from its URL.
fn server_address(url: &str) -> Option<(String, u16, bool)> {
    let (scheme, rest) = url.split_once("://")?;
    let tls = scheme.eq_ignore_ascii_case("https");
    let authority = rest.split('/').next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, p.parse().ok()?),
        _ => (authority, if tls { 443 } else { 80 }),
    };
    Some((host.trim_matches(['[', ']']).to_owned(), port, tls))
}

/// Files of the host: `/etc/shadow`, home directories beyond the skeleton, and the process
/// that started the command (the server, when nothing is in between) with its directory.
async fn host_file(p: &Probes<'_>) -> Result<Verdict, String> {
    let seen = p
        .alone(
            "[ -r /etc/shadow ] && head -c 1 /etc/shadow >/dev/null 2>&1 && m shadow\n\
             for d in /root /home/*; do [ -d \"$d\" ] && [ -r \"$d\" ] && m home \"$d\" \
             $(ls -A \"$d\" 2>/dev/null | head -20 | tr '\\n' ' '); done\n\
             pp=$PPID; m parent \"$pp\" \"$(readlink /proc/$pp/exe 2>/dev/null)\" \
             \"$(readlink /proc/$pp/cwd 2>/dev/null)\" \
             $(ls -A /proc/$pp/cwd 2>/dev/null | head -10 | tr '\\n' ' ')",
        )
        .await?;
    let mut leaks = Vec::new();
    if seen.first("shadow").is_some() {
        leaks.push("the host's /etc/shadow is readable".to_owned());
    }
    for home in seen.all("home") {
        let mut parts = home.split_whitespace();
        let dir = parts.next().unwrap_or_default();
        let own: Vec<&str> = parts.filter(|e| !SKELETON.contains(e)).collect();
        if !own.is_empty() {
            leaks.push(format!("{dir} lists {}", own.join(" ")));
        }
    }
    if let Some(parent) = seen.first("parent") {
        let mut parts = parent.split_whitespace();
        let (pid, exe, cwd) = (parts.next(), parts.next(), parts.next());
        let entries: Vec<&str> = parts.collect();
        if let (Some(pid), Some(exe)) = (pid, exe) {
            let base = exe.rsplit('/').next().unwrap_or(exe);
            if !exe.is_empty() && !NEUTRAL_PARENTS.contains(&base) {
                leaks.push(format!(
                    "the process that started the command is visible (PID {pid}, {exe}, \
                     working directory {}{})",
                    cwd.unwrap_or("?"),
                    if entries.is_empty() {
                        String::new()
                    } else {
                        format!(" holding {}", entries.join(" "))
                    }
                ));
            }
        }
    }
    Ok(Verdict::of(
        &leaks,
        "a command reads host files outside its episode",
    ))
}

/// The server's `/health`, on loopback and at the address the check reached it by.
async fn loopback(p: &Probes<'_>) -> Result<Verdict, String> {
    let Some((host, port, tls)) = &p.server else {
        return Err("the server's URL has no host and port".to_owned());
    };
    let scheme = if *tls { "https" } else { "http" };
    let mut targets = vec![format!("{scheme}://127.0.0.1:{port}/health")];
    if host != "127.0.0.1" {
        targets.push(format!("{scheme}://{host}:{port}/health"));
    }
    let mut body = String::from(
        "get() {\n\
         if command -v python3 >/dev/null 2>&1; then python3 -c 'import ssl, sys, \
         urllib.request\ntry:\n    r = urllib.request.urlopen(sys.argv[1], timeout=5, \
         context=ssl._create_unverified_context())\n    print(r.status)\nexcept \
         urllib.error.HTTPError as e:\n    print(e.code)\nexcept Exception as e:\n    \
         print(\"no\", type(e).__name__)' \"$1\"\n\
         elif command -v curl >/dev/null 2>&1; then curl -ks -o /dev/null -m 5 -w '%{http_code}\\n' \
         \"$1\" || echo no curl\n\
         elif command -v wget >/dev/null 2>&1; then wget -q -T 5 -O /dev/null \"$1\" && echo 200 \
         || echo no wget\n\
         else echo none; fi\n}\n",
    );
    for t in &targets {
        body.push_str(&format!("m http {t} $(get {t} 2>&1 | tail -n 1)\n"));
    }
    let seen = p.alone(&body).await?;
    let mut reached = Vec::new();
    let mut untried = false;
    for line in seen.all("http") {
        let mut parts = line.split_whitespace();
        let (target, answer) = (parts.next().unwrap_or_default(), parts.next());
        match answer {
            Some(code) if code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()) => {
                reached.push(format!("{target} answered HTTP {code}"))
            }
            Some("none") => untried = true,
            _ => {}
        }
    }
    if !reached.is_empty() {
        return Ok(Verdict::Leaked(format!(
            "a command reaches the ORS server itself ({}), which serves every task, hidden \
             tests and reference solutions included",
            reached.join(", ")
        )));
    }
    if untried {
        return Err("the tool's environment has no python3, curl or wget to try with".to_owned());
    }
    Ok(Verdict::Held(None))
}

/// Two live episodes: the first writes a file in its working directory and in the usual
/// places outside it, the second looks for them. (`other-episode`, `write-outside`.)
async fn other_episode(p: &Probes<'_>) -> (Result<Verdict, String>, Result<Verdict, String>) {
    let both = p.in_episode(async |a| {
        let t = &p.token;
        let wrote = p
            .call(
                a,
                &format!(
                    "echo {t} > ors-check-{t}.txt && m cwd \"$(pwd)\"\n\
                     here=$(pwd)\n\
                     for d in /tmp /var/tmp /dev/shm \"$HOME\" ..; do (cd \"$d\" 2>/dev/null \
                     && [ \"$(pwd)\" != \"$here\" ] && echo {t} > ors-check-{t}-out \
                     2>/dev/null && m wrote \"$(pwd)/ors-check-{t}-out\"); done"
                ),
            )
            .await?;
        let cwd = wrote
            .first("cwd")
            .ok_or("the first episode could not write in its directory")?
            .to_owned();
        let outside: Vec<String> = wrote.all("wrote").into_iter().map(str::to_owned).collect();
        let mut look = format!(
            "[ -r {q} ] && m saw-workspace {q}\n",
            q = shell_quote(&format!("{cwd}/ors-check-{t}.txt"))
        );
        for f in &outside {
            look.push_str(&format!("[ -e {q} ] && m saw {q}\n", q = shell_quote(f)));
        }
        let looked = p.in_episode(async |b| p.call(b, &look).await).await;
        let mut clean = format!("rm -f ors-check-{t}.txt");
        clean.extend(outside.iter().map(|f| format!(" {}", shell_quote(f))));
        let _ = p.call(a, &clean).await;
        Ok((cwd, looked?))
    });
    match both.await {
        Err(e) => (Err(e.clone()), Err(e)),
        Ok((cwd, seen)) => {
            let other = seen.first("saw-workspace").map(|path| {
                format!(
                    "one live episode reads another's files: the second episode read {path}, \
                     which the first wrote in its working directory {cwd}"
                )
            });
            let seen_outside = seen.all("saw");
            let outside = (!seen_outside.is_empty()).then(|| {
                format!(
                    "a command writes outside its workspace where other episodes see it: {} \
                     (written by one episode, found by another)",
                    seen_outside.join(", ")
                )
            });
            (Ok(Verdict::leaked(other)), Ok(Verdict::leaked(outside)))
        }
    }
}

/// A shell loop over the process table that counts the processes whose command line holds
/// `$s` into `n` (and their PIDs into `pids`). Only builtins: it works at a process limit, and
/// the marker is built at run time so the probe's own command line does not hold it.
const COUNT: &str = "n=0; pids=; for f in /proc/[0-9]*/cmdline; do read -r l 2>/dev/null <\"$f\"; \
                     case \"$l\" in *\"$s\"*) p=${f#/proc/}; n=$((n + 1)); \
                     pids=\"$pids ${p%/cmdline}\";; esac; done";

/// Count the processes holding `$s`, print `m KEY COUNT`, and kill them.
fn count_and_kill(key: &str) -> String {
    format!("{COUNT}\nm {key} $n\n[ -n \"$pids\" ] && kill -9 $pids 2>/dev/null")
}

/// A `setsid` daemon (and a `nohup` one) started by one command, looked for by the next. The
/// first command returns once both run (`sleep` shows in the table after `setsid` detached).
async fn detached(p: &Probes<'_>) -> Result<Verdict, String> {
    let marker = format!("s=59; s=\"$s.{}\"", p.token);
    let seen = p
        .in_episode(async |session| {
            p.call(
                session,
                &format!(
                    "{marker}\nsetsid sleep \"$s\" >/dev/null 2>&1 </dev/null &\n\
                     nohup sleep \"$s\" >/dev/null 2>&1 </dev/null &\n\
                     i=0; while [ $i -lt 5000 ]; do {COUNT}; [ $n -ge 2 ] && break; \
                     i=$((i + 1)); done\nm started $n"
                ),
            )
            .await?;
            p.call(session, &format!("{marker}\n{}", count_and_kill("left")))
                .await
        })
        .await?;
    let left = seen.count("left");
    Ok(Verdict::leaked((left > 0).then(|| {
        format!(
            "a detached process outlives the command that started it ({left} of the \
             command's `setsid`/`nohup` sleeps still ran at the next call; the probe killed \
             them)"
        )
    })))
}

/// Hundreds of processes at once. The loop's shell has the marker as its `$0`, so each
/// process it forks holds the marker from the start, not only once it has become `sleep`.
async fn flood(p: &Probes<'_>) -> Result<Verdict, String> {
    let seen = p
        .alone(&format!(
            "s=29; s=\"$s.{t}\"\n\
             sh -c 'i=0; while [ $i -lt {FLOOD} ]; do sleep \"$0\" </dev/null >/dev/null 2>&1 & \
             i=$((i + 1)); done' \"$s\" 2>/dev/null\n{}",
            count_and_kill("started"),
            t = p.token
        ))
        .await?;
    let started = seen.count("started");
    Ok(if started >= FLOOD_PROBLEM {
        Verdict::Leaked(format!(
            "a command starts {started} processes at once (it asked for {FLOOD}): nothing \
             limits the processes of an episode, so a fork bomb takes the host down"
        ))
    } else {
        Verdict::Held(Some(format!("{started} of {FLOOD} processes started")))
    })
}

/// The variables of every process the command can see, against its own.
async fn server_env(p: &Probes<'_>) -> Result<Verdict, String> {
    let names = "cut -d= -f1 | grep '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u | tr '\\n' ' '";
    let seen = p
        .alone(&format!(
            "m own $(env | {names})\n\
             m seen $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | {names})"
        ))
        .await?;
    let own: BTreeSet<&str> = seen
        .first("own")
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let others: BTreeSet<&str> = seen
        .first("seen")
        .unwrap_or_default()
        .split_whitespace()
        .filter(|n| !own.contains(n) && !SHELL_VARS.contains(n))
        .collect();
    let secret_like = |n: &&str| {
        let upper = n.to_ascii_uppercase();
        SECRET_LIKE.iter().any(|s| upper.contains(s))
    };
    let secretish: Vec<&str> = own.iter().copied().filter(secret_like).collect();
    let mut leaks = Vec::new();
    if !others.is_empty() {
        leaks.push(format!(
            "other processes' environments are readable in /proc, with variables the command \
             was not given: {}",
            abbreviate(&others.into_iter().collect::<Vec<_>>())
        ));
    }
    if !secretish.is_empty() {
        leaks.push(format!(
            "the command's own environment holds the server's variables: {}",
            abbreviate(&secretish)
        ));
    }
    if let Some(last) = leaks.last_mut() {
        last.push_str(" (names only shown)");
    }
    Ok(Verdict::of(
        &leaks,
        "a command reads the server's environment",
    ))
}

/// Up to 12 names, then how many more.
fn abbreviate(names: &[&str]) -> String {
    let mut s = names[..names.len().min(12)].join(", ");
    if names.len() > 12 {
        s.push_str(&format!(" and {} more", names.len() - 12));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, runs: bool, schema: Value) -> ToolSpec {
        let mut s = ToolSpec::new(name, "Run things.", schema.as_object().cloned());
        s.runs_commands = runs;
        s
    }

    #[test]
    fn command_tools_are_found_by_marker_or_by_name_and_schema() {
        let command = json!({"type": "object", "properties": {
            "command": {"type": "string"}, "timeout_secs": {"type": "integer"}},
            "required": ["command"]});
        let t = CommandTool::find(&spec("run", false, command.clone())).unwrap();
        assert!(t.guessed);
        assert_eq!(t.input("ls"), json!({"command": "ls"}));
        assert!(
            !CommandTool::find(&spec("run", true, command.clone()))
                .unwrap()
                .guessed
        );
        assert!(CommandTool::find(&spec("submit", false, command)).is_none());
        let answer = json!({"type": "object", "properties": {"answer": {"type": "string"}}});
        assert!(CommandTool::find(&spec("run_tests", false, answer.clone())).is_none());
        // Declared, the first required string is the command whatever its name.
        let input = json!({"type": "object", "properties": {"q": {"type": "string"},
            "lang": {"enum": ["sh", "py"]}}, "required": ["q", "lang"]});
        let t = CommandTool::find(&spec("go", true, input)).unwrap();
        assert_eq!(t.input("x"), json!({"q": "x", "lang": "sh"}));
        let py = json!({"type": "object", "properties": {"code": {"type": "string"}}});
        let t = CommandTool::find(&spec("run_python", false, py)).unwrap();
        let sent = t.input("echo hi");
        assert!(
            sent["code"]
                .as_str()
                .unwrap()
                .contains("subprocess.run(['/bin/sh', '-c', \"echo hi\"]"),
            "{sent}"
        );
    }

    #[test]
    fn the_servers_address_comes_from_its_url() {
        assert_eq!(
            server_address("http://127.0.0.1:8080"),
            Some(("127.0.0.1".to_owned(), 8080, false))
        );
        assert_eq!(
            server_address("https://ors.example.com/"),
            Some(("ors.example.com".to_owned(), 443, true))
        );
        assert_eq!(
            server_address("http://[::1]:9000/x"),
            Some(("::1".to_owned(), 9000, false))
        );
    }
}
