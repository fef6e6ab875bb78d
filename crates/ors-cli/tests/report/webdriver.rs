//! Just enough of a W3C WebDriver client to drive Debian's Chromium through its ChromeDriver:
//! a dozen JSON requests over HTTP/1.1 (hyper, which the workspace has), no crate of its own.
//!
//! Why not fantoccini: it brings about thirty crates into every `cargo test` build (the
//! `webdriver` protocol crate with an old `http` 0.2, `thiserror` 1 and ICU's segmenter data)
//! for the same dozen requests. Why not Playwright: Node.js and a second test language, and
//! its own protocol client pinned to Chromium versions; ChromeDriver comes from the same Debian
//! source package as Chromium, so the two always match.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

/// The W3C name of an element reference in a JSON answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Chromium's flags for a headless run as root on a machine without network: no sandbox (root),
/// no GPU, and none of the background fetches (updates, sync, safe browsing) that would try
/// the closed network at every start.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--force-device-scale-factor=1",
    "--window-size=1280,900",
];

/// A running ChromeDriver; ended when dropped.
pub struct Driver {
    child: Child,
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A WebDriver error answer, or a transport failure.
#[derive(Debug)]
pub struct WdError(pub String);

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, WdError>;

impl Driver {
    /// Start `chromedriver` on a free port (it prints the one it took).
    pub fn start(chromedriver: &Path) -> Result<Self> {
        let mut child = Command::new(chromedriver)
            .args(["--port=0", "--log-level=WARNING"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| WdError(format!("cannot run {}: {e}", chromedriver.display())))?;
        let stdout = child.stdout.take().expect("piped");
        let port = read_port(stdout)?;
        Ok(Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    async fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .map_err(|e| WdError(e.to_string()))?;
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| WdError(format!("{method} {path}: {e}")))?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| WdError(e.to_string()))?
            .to_bytes();
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| WdError(format!("{method} {path}: not JSON ({e})")))?;
        if !status.is_success() {
            return Err(WdError(format!(
                "{method} {path}: {status}: {} {}",
                v["value"]["error"],
                v["value"]["message"].as_str().unwrap_or("")
            )));
        }
        Ok(v["value"].clone())
    }

    /// A new headless Chromium (`binary`) with a fresh profile in `profile`, logging the
    /// page's console (errors included) for [`Session::console`].
    pub async fn session(&self, binary: &Path, profile: &Path) -> Result<Session<'_>> {
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({
            "capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": binary, "args": args},
                "goog:loggingPrefs": {"browser": "ALL"},
                "timeouts": {"script": 60_000, "pageLoad": 60_000, "implicit": 0},
            }}
        });
        let v = self.request("POST", "/session", Some(caps)).await?;
        let id = v["sessionId"]
            .as_str()
            .ok_or_else(|| WdError(format!("no session id in {v}")))?
            .to_owned();
        Ok(Session {
            driver: self,
            id,
            closed: false,
        })
    }

    /// `DELETE /session/{id}` without a runtime: what a session dropped by a failing test
    /// does, so its Chromium never outlives the test (ChromeDriver would leave it running).
    fn delete_now(&self, id: &str) {
        use std::io::{Read, Write};
        let Some(addr) = self.base.strip_prefix("http://") else {
            return;
        };
        let Ok(mut conn) = std::net::TcpStream::connect(addr) else {
            return;
        };
        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(30)));
        let request = format!(
            "DELETE /session/{id} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n"
        );
        if conn.write_all(request.as_bytes()).is_ok() {
            // The answer comes once the browser has quit.
            let _ = conn.read_to_end(&mut Vec::new());
        }
    }
}

/// Read ChromeDriver's "started successfully on port N" line.
fn read_port(stdout: std::process::ChildStdout) -> Result<u16> {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.map_err(|e| WdError(e.to_string()))?;
        if let Some(rest) = line.split("on port ").nth(1) {
            if let Ok(port) = rest.trim_end_matches('.').trim().parse::<u16>() {
                if port != 0 {
                    // Keep draining its output so it never blocks on a full pipe.
                    std::thread::spawn(move || for _ in lines {});
                    return Ok(port);
                }
            }
        }
        seen.push(line);
    }
    Err(WdError(format!(
        "chromedriver printed no port: {}",
        seen.join("\n")
    )))
}

/// A browser session; its browser quits when it is closed or dropped.
pub struct Session<'d> {
    driver: &'d Driver,
    id: String,
    closed: bool,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if !self.closed {
            self.driver.delete_now(&self.id);
        }
    }
}

/// An element of the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Session<'_> {
    async fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        self.driver
            .request(method, &format!("/session/{}{path}", self.id), body)
            .await
    }

    /// Open `url` and wait for its load event.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.cmd("POST", "/url", Some(json!({ "url": url })))
            .await
            .map(drop)
    }

    /// Run `script` (a function body; `arguments` are `args`) and return its value.
    pub async fn eval(&self, script: &str, args: Value) -> Result<Value> {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// Wait until the expression `condition` is true in the page, checked at each animation
    /// frame in the page itself (the script timeout of the session turns a hang into a
    /// failure).
    pub async fn wait_for(&self, condition: &str) -> Result<()> {
        let script = format!(
            "const done = arguments[arguments.length - 1];
             const check = () => {{
               let ok = false;
               try {{ ok = !!({condition}); }} catch (e) {{}}
               if (ok) done(true); else requestAnimationFrame(check);
             }};
             check();"
        );
        self.cmd(
            "POST",
            "/execute/async",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
        .map(drop)
        .map_err(|e| WdError(format!("waiting for `{condition}`: {e}")))
    }

    /// The first element matching the CSS `selector`.
    pub async fn find(&self, selector: &str) -> Result<Element> {
        let v = self
            .cmd(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": selector})),
            )
            .await?;
        element(&v).ok_or_else(|| WdError(format!("no element {selector}")))
    }

    /// Every element matching `selector`.
    pub async fn find_all(&self, selector: &str) -> Result<Vec<Element>> {
        let v = self
            .cmd(
                "POST",
                "/elements",
                Some(json!({"using": "css selector", "value": selector})),
            )
            .await?;
        Ok(v.as_array()
            .map(|a| a.iter().filter_map(element).collect())
            .unwrap_or_default())
    }

    /// Click `e` as a user does (scrolled into view, at its centre).
    pub async fn click(&self, e: &Element) -> Result<()> {
        self.cmd("POST", &format!("/element/{}/click", e.0), Some(json!({})))
            .await
            .map(drop)
    }

    /// Type `text` into `e`.
    pub async fn type_into(&self, e: &Element, text: &str) -> Result<()> {
        self.cmd(
            "POST",
            &format!("/element/{}/value", e.0),
            Some(json!({ "text": text })),
        )
        .await
        .map(drop)
    }

    /// The rendered text of `e`.
    pub async fn text(&self, e: &Element) -> Result<String> {
        let v = self
            .cmd("GET", &format!("/element/{}/text", e.0), None)
            .await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let v = self.cmd("GET", "/screenshot", None).await?;
        decode_png(&v)
    }

    /// The console messages logged since the last call: `(level, message)`; uncaught
    /// exceptions and failed loads come as `SEVERE`.
    pub async fn console(&self) -> Result<Vec<(String, String)>> {
        let v = self
            .cmd("POST", "/se/log", Some(json!({ "type": "browser" })))
            .await?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        (
                            m["level"].as_str().unwrap_or("").to_owned(),
                            m["message"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// End the session (and its browser).
    pub async fn close(mut self) -> Result<()> {
        self.closed = true;
        self.cmd("DELETE", "", None).await.map(drop)
    }
}

fn element(v: &Value) -> Option<Element> {
    v[ELEMENT].as_str().map(|s| Element(s.to_owned()))
}

fn decode_png(v: &Value) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_default())
        .map_err(|e| WdError(format!("a screenshot that is not base64: {e}")))
}
