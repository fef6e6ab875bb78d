"""The reference Python client (ors-sdk 0.1.0) against an ORS server hosting the conformance
fixture: discovery, tools in every provider format, episodes from a task and from split+index,
secrets through the client's X-Secrets header, chunked results, images, ok:false errors,
crashes, task-specific tools, parallel sessions, and a call that only survives thanks to
keep-alives.

Usage: python client_conformance.py URL [--keepalive-secs N]
(N is the server's keep-alive interval, ORS_KEEPALIVE_SECS; default 10.)
Exits non-zero if any check fails.
"""

import argparse
import asyncio
import base64
import json
import sys

from ors.client import AsyncORS, ImageBlock, TextBlock, ToolCallError
from ors.client._http import resumable_sse

from harness import Checks, close_client, expect, expect_eq, expect_raises

ENV = "conformance"
SHARED = ["big", "counter", "echo", "fail", "image", "panic", "secret", "sleep", "submit"]
FORMATS = ["openai", "anthropic", "google", "openrouter"]


def task(i: int) -> dict:
    return {"id": i, "question": f"What is {i}+{i}?", "answer": str(2 * i)}


def has_key(value, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(has_key(v, key) for v in value)
    return False


def text_of(output) -> str:
    block = output.blocks[0]
    expect(isinstance(block, TextBlock), f"first block is not text: {block!r}")
    return block.text


def check_format(fmt: str, tools: list) -> None:
    by_name = {}
    for t in tools:
        name = t["function"]["name"] if fmt == "openrouter" else t["name"]
        by_name[name] = t
    expect_eq(sorted(by_name), SHARED, f"{fmt} tool names")
    expect(not has_key(tools, "title"), f"{fmt}: a schema still has a title")
    echo, counter = by_name["echo"], by_name["counter"]
    if fmt == "anthropic":
        expect_eq(echo["type"], "custom", "anthropic type")
        expect_eq(echo["input_schema"]["properties"]["text"]["type"], "string", "anthropic echo.text")
        expect_eq(counter["input_schema"], {"type": "object", "properties": {}}, "anthropic counter schema")
        return
    params = echo["parameters"]
    expect_eq(params["properties"]["text"]["type"], "string", f"{fmt} echo.text")
    expect_eq(params["required"], ["text"], f"{fmt} echo required")
    expect(counter["parameters"] is None, f"{fmt}: counter has parameters {counter['parameters']!r}")
    if fmt in ("openai", "openrouter"):
        expect_eq(echo["type"], "function", f"{fmt} type")
    if fmt == "openrouter":
        expect(echo["function"]["description"], "openrouter: no description")
    if fmt == "google":
        expect(not has_key(tools, "additionalProperties"), "google: additionalProperties left")


async def main(url: str, keepalive: float) -> int:
    client = AsyncORS(base_url=url)
    env = client.environment(ENV)
    checks = Checks(f"python client vs {url} ({ENV})")

    async def splits():
        expect_eq(await env.list_splits(), ["train", "test", "hard"], "splits")

    async def tasks():
        got = await env.list_tasks("train")
        expect_eq(len(got), 25, "train size")
        expect_eq(got[3].task_spec, task(3), "train[3]")
        expect_eq(got[0].environment_name, ENV, "environment_name")
        expect_eq([t.task_spec for t in await env.list_tasks("hard")], [task(200 + i) for i in range(3)], "hard")

    async def num_tasks():
        expect_eq(await env.num_tasks("test"), 5, "num_tasks test")
        expect_eq(await env.num_tasks("hard"), 3, "num_tasks hard")

    async def get_task():
        expect_eq((await env.get_task("test", 2)).task_spec, task(102), "test[2]")

    async def get_task_range():
        got = await env.get_task_range("train", -3)
        expect_eq([t.task_spec["id"] for t in got], [22, 23, 24], "train[-3:]")
        got = await env.get_task_range("train", 2, 5)
        expect_eq([t.task_spec["id"] for t in got], [2, 3, 4], "train[2:5]")

    async def list_tools():
        specs = await env.list_tools()
        expect_eq(sorted(s.name for s in specs), SHARED, "tool names")
        echo = next(s for s in specs if s.name == "echo")
        expect_eq(echo.input_schema["properties"]["text"]["type"], "string", "echo schema")
        counter = next(s for s in specs if s.name == "counter")
        expect(counter.input_schema is None, "counter has an input schema")

    async def provider_formats():
        for fmt in FORMATS:
            check_format(fmt, await env.list_tools(format=fmt))

    for name, check in [
        ("discovery.splits", splits),
        ("discovery.tasks", tasks),
        ("discovery.num_tasks", num_tasks),
        ("discovery.get_task", get_task),
        ("discovery.get_task_range", get_task_range),
        ("discovery.list_tools", list_tools),
        ("discovery.provider-formats", provider_formats),
    ]:
        await checks.run(name, check)

    async def episode_from_task():
        t = await env.get_task("train", 7)
        async with env.session(task=t, secrets={"API_KEY": "sk-interop-1"}) as s:
            prompt = await s.get_prompt()
            expect_eq([(type(b).__name__, b.text) for b in prompt], [("TextBlock", "What is 7+7?")], "prompt")

            # Session tools come from task_tools: shared tools plus the task-specific hint.
            names = sorted(t.name for t in await s.list_tools())
            expect_eq(names, sorted(SHARED + ["hint"]), "session tools")
            for fmt in FORMATS:
                tools = await s.list_tools(format=fmt)
                flat = json.dumps(tools)
                expect('"hint"' in flat, f"{fmt}: hint missing from the session's tools")
            expect_eq(text_of(await s.call_tool("hint")), "The answer is 14", "hint")

            # The client sends secrets only in the X-Secrets header.
            expect_eq(text_of(await s.call_tool("secret", {"name": "API_KEY"})), "sk-interop-1", "secret")

            out = await s.call_tool("echo", {"text": "héllo ✓"})
            expect_eq(text_of(out), "héllo ✓", "echo text")
            expect_eq(out.metadata, {"length": 7}, "echo metadata")
            expect_eq((out.reward, out.finished), (0.0, False), "echo reward/finished")

            expect_eq(text_of(await s.call_tool("counter")), "1", "counter 1")
            expect_eq(text_of(await s.call_tool("counter")), "2", "counter 2")

            out = await s.call_tool("submit", {"answer": "14"})
            expect_eq((text_of(out), out.reward, out.finished), ("Correct!", 1.0, True), "submit")

    async def episode_from_split_index():
        async with env.session(split="test", index=2) as s:
            prompt = await s.get_prompt()
            expect_eq(prompt[0].text, "What is 102+102?", "prompt")
            out = await s.call_tool("submit", {"answer": "205"})
            expect_eq((text_of(out), out.reward, out.finished), ("Incorrect", 0.0, True), "submit")

    async def chunked_results():
        async with env.session(split="train", index=1) as s:
            for n in (4000, 4097, 100_000, 1_000_000):
                text = text_of(await s.call_tool("big", {"bytes": n}))
                expect(len(text) == n and set(text) <= {"x"}, f"big {n} gave {len(text)} characters")
            text = "é€🎉" * 3000
            expect_eq(text_of(await s.call_tool("echo", {"text": text})), text, "multi-byte echo")

    async def images():
        async with env.session(split="train", index=1) as s:
            out = await s.call_tool("image")
            expect_eq(len(out.blocks), 2, "block count")
            expect_eq(text_of(out), "image", "text block")
            img = out.blocks[1]
            expect(isinstance(img, ImageBlock), f"second block is {img!r}")
            expect_eq(img.mimeType, "image/png", "mimeType")
            expect(base64.b64decode(img.data).startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG")

    async def errors():
        async with env.session(split="train", index=1) as s:
            await expect_raises(s.call_tool("fail", {"message": "boom 42"}), ToolCallError, "boom 42")
            await expect_raises(s.call_tool("no_such_tool", {}), ToolCallError, "no_such_tool")
            await expect_raises(s.call_tool("echo", {"text": 5}), ToolCallError)
            await expect_raises(s.call_tool("secret", {"name": "MISSING"}), ToolCallError)
            # A crash is an SSE error event, which this client raises as RuntimeError...
            await expect_raises(s.call_tool("panic"), RuntimeError)
            # ...and the session lives on.
            expect_eq(text_of(await s.call_tool("counter")), "1", "counter after the errors")

    async def keepalive_long_call():
        # The client's SSE reader gives up after `heartbeat_timeout` seconds without a byte, so
        # this call only completes if the server sends keep-alives while the tool sleeps.
        heartbeat = max(2.0, keepalive * 2.5)
        sleep_ms = int((heartbeat + 2) * 1000)
        async with env.session(split="train", index=1) as s:
            result = await resumable_sse(
                s.client,
                f"/{ENV}/call",
                token=s.api_key,
                sid=s.sid,
                json={"name": "sleep", "input": {"ms": sleep_ms}},
                heartbeat_timeout=heartbeat,
                max_retries=0,
            )
            expect_eq(result["ok"], True, "long call ok")
            expect_eq(result["output"]["blocks"][0]["text"], "slept", "long call result")

    async def parallel_sessions():
        async def one(i: int):
            async with env.session(split="train", index=i) as s:
                expect_eq(text_of(await s.call_tool("counter")), "1", f"session {i} counter")
                out = await s.call_tool("submit", {"answer": str(2 * i)})
                expect_eq(out.reward, 1.0, f"session {i} reward")

        await asyncio.gather(*(one(i) for i in range(16)))

    for name, check in [
        ("episode.from-task-with-secrets", episode_from_task),
        ("episode.from-split-index", episode_from_split_index),
        ("calls.chunked", chunked_results),
        ("calls.images", images),
        ("calls.errors", errors),
        ("calls.keepalive-long-call", keepalive_long_call),
        ("sessions.parallel-16", parallel_sessions),
    ]:
        await checks.run(name, check)

    await close_client(client)
    return checks.finish()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--keepalive-secs", type=float, default=10.0)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url.rstrip("/"), args.keepalive_secs)))
