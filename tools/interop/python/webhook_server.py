"""A webhook endpoint for the `mcp_env` example's webhook tools (standard library only): it
answers a POST only when `X-Agent-Secret` holds the secret and the body has the shape ORS
webhook tools send (`{"tool", "input", "session_id", "call_id"}`), else 401 / 400.

- `/lookup`: plain JSON about an order (`{"orderId": ..., "status": ...}`), which the tool
  serves as a text block with the value in `metadata.structured`;
- `/grade`: an ORS `ToolOutput` (`{"blocks", "reward", "finished"}`): reward 1.0 and finished
  when `input.answer` is "42";
- `/teapot`: HTTP 418, which the tool serves as `ok: false` naming the status.

Prints `webhook server listening on http://127.0.0.1:PORT` when ready.

Usage: python webhook_server.py --secret SECRET
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = ""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - keep the test output clean
        pass

    def answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.headers.get("X-Agent-Secret") != SECRET:
            return self.answer(401, {"error": "wrong or missing X-Agent-Secret"})
        try:
            call = json.loads(raw)
        except ValueError:
            return self.answer(400, {"error": "the body is not JSON"})
        fields = ("tool", "input", "session_id", "call_id")
        if not isinstance(call, dict) or sorted(call) != sorted(fields):
            return self.answer(400, {"error": f"want exactly the fields {fields}, got {call!r}"})
        if not (isinstance(call["session_id"], str) and call["session_id"]):
            return self.answer(400, {"error": "no session_id"})
        if self.path == "/lookup":
            order = call["input"].get("orderId", "")
            return self.answer(200, {"orderId": order, "status": "shipped", "tool": call["tool"]})
        if self.path == "/grade":
            right = call["input"].get("answer") == "42"
            return self.answer(200, {
                "blocks": [{"type": "text", "text": "right" if right else "wrong"}],
                "reward": 1.0 if right else 0.0,
                "finished": right,
            })
        if self.path == "/teapot":
            return self.answer(418, {"error": "I am a teapot"})
        return self.answer(404, {"error": f"no endpoint {self.path}"})


def main() -> None:
    global SECRET
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret", required=True)
    SECRET = ap.parse_args().secret
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"webhook server listening on http://127.0.0.1:{httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
