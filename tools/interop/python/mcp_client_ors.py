"""The official Python MCP client (PyPI `mcp` 2.x) against `ors mcp`, which serves one episode of
our `conformance` fixture: over stdio (the client spawns `ors mcp`) and over streamable HTTP
(`ors mcp --http`, started by the caller). Tools are listed unchanged, `echo` and `image` answer
with their content, `fail` is an `isError` result, the `task` prompt and resource hold the
question, `submit` reports reward and finished (structured content and `_meta.ors`), a call
after that is the MCP error "episode finished", a secret reaches the environment, and when the
client disconnects the ORS session is deleted. Over HTTP the client sends `ors mcp`'s bearer
token, and without it (or from another origin) it is refused.

Usage:
  python mcp_client_ors.py stdio ORS_BINARY ORS_URL
  python mcp_client_ors.py http MCP_URL ORS_URL --token TOKEN
Exits non-zero if any check fails.
"""

import argparse
import asyncio
import sys
import urllib.error
import urllib.request

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from harness import Checks, expect, expect_eq, expect_raises

ENV = "conformance"
SPLIT, INDEX = "train", 3  # "What is 3+3?" -> "6"
SECRET = ("API_TOKEN", "s3cr3t-value")


def status_of_initialize(mcp_url: str, headers: dict[str, str]) -> int:
    """The HTTP status `ors mcp --http` answers an `initialize` with these headers."""
    body = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            b'"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}')
    req = urllib.request.Request(mcp_url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def ors_session_status(ors_url: str, sid: str) -> int:
    """The status of `POST /ping` for `sid` on the ORS server: 200 while the session lives."""
    req = urllib.request.Request(f"{ors_url}/ping", method="POST", headers={"X-Session-ID": sid})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


async def wait_gone(ors_url: str, sid: str) -> None:
    """The session is deleted soon after the MCP client leaves (bounded: a hang fails)."""
    for _ in range(200):
        status = await asyncio.to_thread(ors_session_status, ors_url, sid)
        if status in (404, 410):
            return
        await asyncio.sleep(0.05)
    expect(False, f"ORS session {sid} still answers /ping after the MCP client left")


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def episode(client: Client, ors_url: str) -> str:
    """Drive one episode through the MCP client; returns its ORS session id."""
    tools = (await client.list_tools()).tools
    by_name = {t.name: t for t in tools}
    for name in ["echo", "submit", "image", "fail", "secret", "hint"]:
        expect(name in by_name, f"tools/list lacks {name}: {sorted(by_name)}")
    echo_schema = by_name["echo"].input_schema
    expect_eq(echo_schema.get("required"), ["text"], "echo's input schema, unchanged")
    expect(by_name["echo"].output_schema is None, "no outputSchema is declared")

    prompts = (await client.list_prompts()).prompts
    expect_eq([p.name for p in prompts], ["task"], "prompts")
    prompt = await client.get_prompt("task")
    expect_eq(prompt.messages[0].content.text, "What is 3+3?", "the task prompt")
    resources = (await client.list_resources()).resources
    expect_eq(len(resources), 1, "resources")
    contents = (await client.read_resource(resources[0].uri)).contents
    expect_eq(contents[0].text, "What is 3+3?", "the task resource")

    echoed = await client.call_tool("echo", {"text": "hello mcp"})
    expect(not echoed.is_error, f"echo failed: {echoed}")
    expect_eq(text_of(echoed), "hello mcp", "echo's text")
    expect_eq(echoed.structured_content["finished"], False, "echo does not finish")
    expect_eq(echoed.structured_content["reward"], 0.0, "echo's reward")
    expect_eq(echoed.structured_content["metadata"], {"length": 9}, "echo's metadata")
    sid = echoed.meta["ors"]["session_id"]
    expect_eq(await asyncio.to_thread(ors_session_status, ors_url, sid), 200, "the session lives")

    image = await client.call_tool("image", {})
    expect_eq([c.type for c in image.content], ["text", "image"], "image's content")
    expect_eq(image.content[1].mime_type, "image/png", "image MIME type")

    failed = await client.call_tool("fail", {"message": "as asked"})
    expect(failed.is_error, "ok: false is isError")
    expect("as asked" in text_of(failed), f"the error text: {text_of(failed)!r}")

    secret = await client.call_tool("secret", {"name": SECRET[0]})
    expect_eq(text_of(secret), SECRET[1], "the secret reached the environment")

    submitted = await client.call_tool("submit", {"answer": "6"})
    expect_eq(text_of(submitted), "Correct!", "submit's text")
    expect_eq(submitted.structured_content["reward"], 1.0, "reward in structuredContent")
    expect_eq(submitted.structured_content["finished"], True, "finished in structuredContent")
    expect_eq(submitted.meta["ors"]["reward"], 1.0, "reward in _meta.ors")
    expect_eq(submitted.meta["ors"]["finished"], True, "finished in _meta.ors")

    await expect_raises(client.call_tool("echo", {"text": "again"}), MCPError, "episode finished")
    return sid


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["stdio", "http"])
    ap.add_argument("target", help="the ors binary (stdio) or the MCP URL (http)")
    ap.add_argument("ors_url")
    ap.add_argument("--token", help="the bearer token of `ors mcp --http`")
    args = ap.parse_args()
    checks = Checks(f"python MCP client vs ors mcp ({args.mode})")

    def connect(mode: str = "auto") -> Client:
        if args.mode == "http":
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
            return Client(streamable_http_client(args.target, http_client=http), mode=mode)
        # The stdio client passes only a few variables to the child: everything `ors mcp`
        # needs is on its command line, secrets included.
        params = StdioServerParameters(
            command=args.target,
            args=[
                "--url", args.ors_url, "mcp", ENV, "--split", SPLIT, "--index", str(INDEX),
                "--secret", f"{SECRET[0]}={SECRET[1]}",
            ],
        )
        return Client(params, mode=mode)

    async def one_episode(mode: str) -> None:
        async with connect(mode) as client:
            sid = await episode(client, args.ors_url)
        await wait_gone(args.ors_url, sid)

    # `auto` probes server/discover first; `legacy` is the initialize handshake.
    await checks.run("an episode, auto mode (discover probe), session deleted on disconnect",
                     lambda: one_episode("auto"))
    await checks.run("an episode, legacy initialize, session deleted on disconnect",
                     lambda: one_episode("legacy"))

    if args.mode == "http":
        async def refused() -> None:
            bearer = {"Authorization": f"Bearer {args.token}"}
            for headers, want in [({}, 401), ({"Authorization": "Bearer wrong"}, 401),
                                  ({**bearer, "Origin": "http://evil.example"}, 403),
                                  (bearer, 200)]:
                status = await asyncio.to_thread(status_of_initialize, args.target, headers)
                expect_eq(status, want, f"initialize with {sorted(headers)}")

        await checks.run("no token, a wrong one or a foreign Origin is refused", refused)

        async def two_sessions() -> None:
            async with connect() as a, connect() as b:
                ea = await a.call_tool("echo", {"text": "a"})
                eb = await b.call_tool("echo", {"text": "b"})
                sa, sb = ea.meta["ors"]["session_id"], eb.meta["ors"]["session_id"]
                expect(sa != sb, "two MCP sessions share an ORS session")
                done = await a.call_tool("submit", {"answer": "6"})
                expect_eq(done.structured_content["finished"], True, "a finished")
                still = await b.call_tool("echo", {"text": "b again"})
                expect(not still.is_error, "b goes on after a finished")
            await wait_gone(args.ors_url, sa)
            await wait_gone(args.ors_url, sb)

        await checks.run("two MCP sessions are two episodes", two_sessions)

    return checks.finish()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
