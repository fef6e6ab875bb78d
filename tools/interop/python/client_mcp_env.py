"""The reference Python client (ors-sdk 0.1.0) against our `mcp_env` example wrapping the
Python MCP server of `mcp_server.py` (official `mcp` SDK) and the webhooks of
`webhook_server.py`: the MCP tools are listed with their schemas, results carry text, images
and structured content, an MCP error and an invalid input are `ok: false`, the prompt is the
task's, the webhooks answer (secret checked by the endpoint, an ORS output with reward and
finished, a non-2xx status as `ok: false`).

Per episode (`--per-episode`, the MCP server started by command for each episode): episodes
do not share the server's state, and a crashed server fails that episode's calls with a clear
message while the next episode gets a fresh one.

Usage: python client_mcp_env.py URL [--prefix PREFIX] [--per-episode]
Exits non-zero if any check fails.
"""

import argparse
import asyncio
import sys

from ors.client import AsyncORS, ImageBlock, ToolCallError

from harness import Checks, close_client, expect, expect_eq, expect_raises

ENV = "mcp"
SPLIT = "default"
MCP_TOOLS = ["add", "shout", "count", "pixel", "fail"]
HOOKS = ["lookup_order", "grade", "teapot"]
PROMPTS = ["Add 2 and 3 with the add tool.", "Look up order 7."]


def text_of(out) -> str:
    return "".join(getattr(b, "text", "") for b in out.blocks)


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--per-episode", action="store_true")
    args = ap.parse_args()
    p = args.prefix
    client = AsyncORS(base_url=args.url)
    env = client.environment(ENV)
    checks = Checks(f"python client vs mcp_env at {args.url} (prefix {p!r})")

    async def tools():
        specs = {s.name: s for s in await env.list_tools()}
        want = [p + t for t in MCP_TOOLS] + HOOKS
        if args.per_episode:
            want.append(p + "crash")
        expect_eq(sorted(specs), sorted(want), "tools")
        add = specs[p + "add"].input_schema
        expect_eq(add["properties"]["a"]["type"], "integer", "add's schema, passed through")
        expect_eq(sorted(add["required"]), ["a", "b"], "add's required fields")
        expect_eq(specs[p + "add"].description, "Add two integers.", "add's description")
        lookup = specs["lookup_order"].input_schema
        expect_eq(lookup["required"], ["orderId"], "the webhook's schema")

    async def tasks_and_prompts():
        tasks = await env.list_tasks(SPLIT)
        expect_eq([t.task_spec["prompt"] for t in tasks], PROMPTS, "tasks from the file")
        for i, want in enumerate(PROMPTS):
            async with env.session(split=SPLIT, index=i) as s:
                expect_eq((await s.get_prompt())[0].text, want, f"prompt of task {i}")

    async def mcp_results():
        async with env.session(split=SPLIT, index=0) as s:
            out = await s.call_tool(p + "add", {"a": 2, "b": 3})
            expect_eq(text_of(out), "5", "add's text")
            expect_eq((out.reward, out.finished), (None, False), "add neither rewards nor finishes")
            expect_eq(text_of(await s.call_tool(p + "shout", {"text": "hi"})), "HI", "shout")
            img = (await s.call_tool(p + "pixel", {})).blocks[0]
            expect(isinstance(img, ImageBlock), f"pixel gave {img!r}")
            expect_eq(img.mimeType, "image/png", "pixel's MIME type")

    async def mcp_errors():
        async with env.session(split=SPLIT, index=0) as s:
            await expect_raises(s.call_tool(p + "fail", {"message": "boom 42"}), ToolCallError, "boom 42")
            # Refused before the MCP server sees it, naming the field.
            await expect_raises(s.call_tool(p + "add", {"a": "two", "b": 3}), ToolCallError, "'a'")
            await expect_raises(s.call_tool(p + "add", {"a": 2}), ToolCallError, "b")
            expect_eq(text_of(await s.call_tool(p + "add", {"a": 1, "b": 1})), "2", "the episode goes on")

    async def webhooks():
        async with env.session(split=SPLIT, index=1) as s:
            out = await s.call_tool("lookup_order", {"orderId": "7"})
            expect('"status": "shipped"' in text_of(out), f"lookup_order: {text_of(out)!r}")
            await expect_raises(s.call_tool("teapot", {}), ToolCallError, "418")
            out = await s.call_tool("grade", {"answer": "41"})
            expect_eq((text_of(out), out.reward, out.finished), ("wrong", 0.0, False), "a wrong answer")
            out = await s.call_tool("grade", {"answer": "42"})
            expect_eq((text_of(out), out.reward, out.finished), ("right", 1.0, True), "the right answer")

    async def isolation():
        async with env.session(split=SPLIT, index=0) as a, env.session(split=SPLIT, index=0) as b:
            expect_eq(text_of(await a.call_tool(p + "count", {})), "1", "a's first count")
            expect_eq(text_of(await a.call_tool(p + "count", {})), "2", "a's second count")
            expect_eq(text_of(await b.call_tool(p + "count", {})), "1", "b counts on its own server")

    async def crash_and_restart():
        async with env.session(split=SPLIT, index=0) as s:
            await expect_raises(s.call_tool(p + "crash", {}), ToolCallError, "not running")
            await expect_raises(s.call_tool(p + "count", {}), ToolCallError, "a new episode starts it again")
        async with env.session(split=SPLIT, index=0) as s:
            expect_eq(text_of(await s.call_tool(p + "count", {})), "1", "a fresh server next episode")

    try:
        await checks.run("tools: MCP schemas passed through, webhooks", tools)
        await checks.run("tasks from the file, prompts from their `prompt`", tasks_and_prompts)
        await checks.run("MCP results: text, image", mcp_results)
        await checks.run("MCP errors and invalid inputs are ok: false", mcp_errors)
        await checks.run("webhooks: JSON, ToolOutput with reward, non-2xx", webhooks)
        if args.per_episode:
            await checks.run("each episode has its own MCP server", isolation)
            await checks.run("a crashed MCP server: ok: false, then a fresh one", crash_and_restart)
    finally:
        await close_client(client)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
