//! The shipped `deploy/nginx/ors.conf` rendered for local replicas, and a real nginx (Debian's
//! `nginx-light`, installed with apt-get when missing) running it in a scratch directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs::signal;

/// The markers around the part of `ors.conf` that lists the replicas.
const BEGIN: &str = "# --- replicas: begin\n";
const END: &str = "# --- replicas: end\n";

/// The shipped config, relative to the workspace root.
pub const ORS_CONF: &str = "deploy/nginx/ors.conf";

/// `ors.conf` split at its replica section: (before, section, after).
pub fn split_replicas(conf: &str) -> Result<(&str, &str, &str), String> {
    let begin = conf
        .find(BEGIN)
        .ok_or_else(|| format!("no `{}` marker", BEGIN.trim()))?;
    let end = conf
        .find(END)
        .filter(|e| *e > begin)
        .ok_or_else(|| format!("no `{}` marker after the first", END.trim()))?;
    Ok((
        &conf[..begin],
        &conf[begin + BEGIN.len()..end],
        &conf[end + END.len()..],
    ))
}

/// The replica section for replicas `(number, port)` on this machine, in the shipped file's
/// form: one upstream per replica, `ors_any` over all of them, and the map from an id's first
/// group to its replica's upstream.
fn replica_section(replicas: &[(u32, u16)]) -> String {
    let mut s = String::new();
    for (n, port) in replicas {
        s.push_str(&format!(
            "upstream ors_{n} {{ server 127.0.0.1:{port} max_fails=0; keepalive 16; \
             keepalive_timeout 20s; }}\n"
        ));
    }
    s.push_str("upstream ors_any {\n    least_conn;\n");
    for (_, port) in replicas {
        s.push_str(&format!(
            "    server 127.0.0.1:{port} max_fails=1 fail_timeout=5s;\n"
        ));
    }
    s.push_str("    keepalive 16;\n    keepalive_timeout 20s;\n}\n");
    s.push_str("map $http_x_session_id $ors_upstream {\n    default ors_any;\n");
    for (n, _) in replicas {
        s.push_str(&format!("    \"~^{n:08}-\" ors_{n};\n"));
    }
    s.push_str("    \"~^[0-9]{8}-\" gone;\n}\n");
    s.push_str("map $host $ors_new {\n    default ors_any;\n}\n");
    s
}

/// `ors.conf` for these replicas, listening on `127.0.0.1:listen`.
pub fn render(conf: &str, replicas: &[(u32, u16)], listen: u16) -> Result<String, String> {
    let (before, _, after) = split_replicas(conf)?;
    let after = after.replacen("listen 8000;", &format!("listen 127.0.0.1:{listen};"), 1);
    if !after.contains(&format!("listen 127.0.0.1:{listen};")) {
        return Err("ors.conf has no `listen 8000;` line".to_owned());
    }
    Ok(format!(
        "{before}{BEGIN}{}{END}{after}",
        replica_section(replicas)
    ))
}

/// `conf` without its comments, each run of whitespace one space (quoted strings kept whole).
fn normalized(conf: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut comment = false;
    for c in conf.chars() {
        match (quote, comment, c) {
            (_, true, '\n') => comment = false,
            (_, true, _) => continue,
            (None, false, '#') => {
                comment = true;
                continue;
            }
            (None, false, '\'' | '"') => quote = Some(c),
            (Some(q), false, _) if c == q => quote = None,
            _ => {}
        }
        if c.is_whitespace() && quote.is_none() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The inside of the block opened by `header {` in a normalized config (braces in quoted
/// strings skipped), or `None`.
fn block<'a>(conf: &'a str, header: &str) -> Option<&'a str> {
    let start = conf.find(&format!("{header} {{"))? + header.len() + 2;
    let mut depth = 1;
    let mut quote: Option<char> = None;
    for (i, c) in conf[start..].char_indices() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '{') => depth += 1,
            (None, '}') => {
                depth -= 1;
                if depth == 0 {
                    return Some(&conf[start..start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// What `ors.conf` (ours or the Kubernetes router's) must do with a request that names a
/// session; each problem as a sentence. Its replica alone may answer it: nginx must never
/// try another upstream (the default `proxy_next_upstream error timeout` would, given one),
/// and when the replica does not answer, the client must hear that (502), not that the
/// session does not exist (404 `session_not_found`).
pub fn session_routing_problems(conf: &str) -> Vec<String> {
    let conf = normalized(conf);
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_owned());
        }
    };
    let root = block(&conf, "location /").unwrap_or_default();
    check(
        root.contains("error_page 418 = @session;")
            && root.contains("if ($http_x_session_id) { return 418; }"),
        "`location /` does not hand requests with an X-Session-ID to @session",
    );
    match block(&conf, "location @session") {
        Some(session) => {
            check(
                session.contains("proxy_pass http://$ors_upstream;"),
                "@session does not proxy to the session's replica ($ors_upstream)",
            );
            check(
                session.matches("proxy_next_upstream").count() == 1
                    && session.contains("proxy_next_upstream off;"),
                "@session does not say `proxy_next_upstream off;`: a session's request could \
                 reach another replica, or be sent twice",
            );
            check(
                session.contains("error_page 502 @unreachable;"),
                "@session does not answer its own 502 with @unreachable",
            );
        }
        None => check(false, "no `location @session` block"),
    }
    match block(&conf, "location @unreachable") {
        Some(down) => check(
            down.trim_start().starts_with("return 502 ") && !down.contains("session_not_found"),
            "@unreachable does not answer 502: a replica that does not answer is not a \
             session that does not exist",
        ),
        None => check(false, "no `location @unreachable` block"),
    }
    problems
}

/// The nginx binary: on the PATH or in /usr/sbin, else Debian's nginx-light installed.
pub fn ensure_nginx() -> Result<PathBuf, String> {
    crate::debian::ensure("scale", "nginx", "nginx-light")
}

/// The main config around `ors.conf`: everything nginx writes stays in `dir`.
fn main_conf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n    access_log off;\n    client_body_temp_path {d}/body;\n    \
         proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi;\n    \
         uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n    \
         include {d}/ors.conf;\n}}\n"
    )
}

/// `nginx -t` on a config; the error is nginx's own output.
pub fn check(nginx: &Path, dir: &Path) -> Result<(), String> {
    let out = Command::new(nginx)
        .args(["-t", "-q", "-p"])
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .output()
        .map_err(|e| format!("could not run nginx -t: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nginx -t failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Write `ors.conf` and the main config into `dir` and check them with `nginx -t`.
pub fn write_config(nginx: &Path, dir: &Path, ors_conf: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("ors.conf"), ors_conf).map_err(|e| format!("ors.conf: {e}"))?;
    std::fs::write(dir.join("nginx.conf"), main_conf(dir))
        .map_err(|e| format!("nginx.conf: {e}"))?;
    check(nginx, dir)
}

/// A running nginx (its master process, in the foreground); stopped on drop.
pub struct Nginx {
    child: Child,
    nginx: PathBuf,
    dir: PathBuf,
}

impl Nginx {
    /// Start nginx on `ors_conf` (which listens on `port`) and wait until it accepts.
    pub fn start(nginx: &Path, dir: &Path, ors_conf: &str, port: u16) -> Result<Self, String> {
        write_config(nginx, dir, ors_conf)?;
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start nginx: {e}"))?;
        let me = Self {
            child,
            nginx: nginx.to_owned(),
            dir: dir.to_owned(),
        };
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "nginx did not listen on {port} within 10 s (see {}/error.log)",
                    dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(me)
    }

    /// Swap in a new `ors.conf` and reload (SIGHUP): new workers take the new config, old ones
    /// finish the requests they hold, streams included.
    pub fn reload(&self, ors_conf: &str) -> Result<(), String> {
        write_config(&self.nginx, &self.dir, ors_conf)?;
        signal(self.child.id(), "HUP")?;
        // The new workers start within milliseconds; a little margin for a loaded machine.
        std::thread::sleep(Duration::from_millis(500));
        Ok(())
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // TERM: the master stops its workers too (a KILL would leave them behind).
        let _ = signal(self.child.id(), "TERM");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
