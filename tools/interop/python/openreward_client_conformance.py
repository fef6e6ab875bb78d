"""The openreward SDK's client (openreward 0.1.167) against an ORS server hosting the
conformance fixture: discovery in every provider format (default environment and named),
get_task/get_task_range (which read `env_name`), episodes from a task object and from
split+index, secrets with allowed_domains and the `api_key` secret the client adds itself,
chunked results, images, refused calls and their `reason`, the finished latch, a crash,
task-specific tools, /messages, /version, 24 parallel sessions, a call longer than the client's
30 s read timeout, the API key on and off, `toolset_name` (the fixture's `codex`, and an unknown
one), and group scoring
(`score_group`: scores in candidate order, a miscounting judge as ScoreGroupFailed).

Usage: python openreward_client_conformance.py URL
The server must require the API key in ORS_API_KEY (the client sends it) and send keep-alives
more often than every 30 s. Exits non-zero if any check fails.
"""

import argparse
import asyncio
import base64
import json
import os
import sys

import aiohttp
from openreward import AsyncEnvironmentsAPI, GroupCandidate, Message
from openreward.api.environments.types import TextBlock
from openreward.api.errors import ScoreGroupFailed, ToolCallError, ToolFailed

from harness import Checks, expect, expect_eq, expect_raises

ENV = "conformance"
SHARED = ["big", "counter", "echo", "fail", "image", "panic", "secret", "sleep", "submit"]
FORMATS = ["openai", "anthropic", "google", "openrouter"]


def task(i: int) -> dict:
    return {"id": i, "question": f"What is {i}+{i}?", "answer": str(2 * i)}


def text_of(output) -> str:
    block = output.blocks[0]
    expect(getattr(block, "type", None) == "text", f"first block is not text: {block!r}")
    return block.text


def tool_names(fmt, tools) -> list:
    if fmt is None:
        return sorted(t.name for t in tools)
    if fmt == "openrouter":
        return sorted(t["function"]["name"] for t in tools)
    return sorted(t["name"] for t in tools)


async def reason_of(coro) -> str:
    err = await expect_raises(coro, ToolCallError)
    return err.reason


async def main(url: str, key: str) -> int:
    api = AsyncEnvironmentsAPI(base_url=url, api_key=key)
    default_env = api.get(ENV)  # bare paths: the server's default environment
    env = api.get(ENV, variant=ENV)  # /conformance/... paths
    checks = Checks(f"openreward client vs {url} ({ENV})")

    async def splits():
        for e in (default_env, env):
            expect_eq(await e.list_splits(), ["train", "test", "hard"], "splits")

    async def tasks():
        got = await env.list_tasks("train")
        expect_eq(len(got), 25, "train size")
        expect_eq(got[3].task_spec, task(3), "train[3]")
        expect_eq(got[0].environment_name, ENV, "environment_name")

    async def num_tasks():
        expect_eq(await env.num_tasks("test"), 5, "num_tasks test")
        expect_eq(await default_env.num_tasks("hard"), 3, "num_tasks hard")

    async def get_task():
        t = await env.get_task("test", 2)
        expect_eq((t.task_spec, t.environment_name), (task(102), ENV), "test[2]")
        t = await default_env.get_task("train", 1)
        expect_eq(t.environment_name, ENV, "default env's env_name")

    async def get_task_range():
        got = await env.get_task_range("train", -3)
        expect_eq([t.task_spec["id"] for t in got], [22, 23, 24], "train[-3:]")
        got = await env.get_task_range("train", 2, 5)
        expect_eq([t.task_spec["id"] for t in got], [2, 3, 4], "train[2:5]")
        expect(all(t.environment_name == ENV for t in got), "env_name of the range")

    async def list_tools():
        for fmt in [None] + FORMATS:
            expect_eq(tool_names(fmt, await env.list_tools(format=fmt)), SHARED, f"{fmt} tool names")
        expect(await env.terminal_tool() is None, "the fixture has no terminal tool")
        expect(await env.supports_score_group(), "the fixture scores groups")

    for name, check in [
        ("discovery.splits", splits),
        ("discovery.tasks", tasks),
        ("discovery.num_tasks", num_tasks),
        ("discovery.get_task", get_task),
        ("discovery.get_task_range", get_task_range),
        ("discovery.list_tools", list_tools),
    ]:
        await checks.run(name, check)

    async def episode_from_task():
        t = await env.get_task("train", 7)
        secrets = {"MY_TOKEN": ("tok-1", ["api.example.com", "b.example.com"]), "EMPTY": ("", ["x.example"])}
        async with env.session(task=t, secrets=secrets) as s:
            prompt = await s.get_prompt()
            expect_eq([(b.type, b.text) for b in prompt], [("text", "What is 7+7?")], "prompt")
            for fmt in [None] + FORMATS:
                expect_eq(tool_names(fmt, await s.list_tools(format=fmt)), sorted(SHARED + ["hint"]), f"{fmt} session tools")
            expect_eq(text_of(await s.call_tool("hint")), "The answer is 14", "hint")

            out = await s.call_tool("secret", {"name": "MY_TOKEN"})
            expect_eq(text_of(out), "tok-1", "secret value")
            expect_eq(out.metadata, {"allowed_domains": ["api.example.com", "b.example.com"]}, "allowed_domains")
            expect_eq(text_of(await s.call_tool("secret", {"name": "EMPTY"})), "", "an empty secret exists")
            # The client adds its API key as the `api_key` secret, with the domains it may reach.
            out = await s.call_tool("secret", {"name": "api_key"})
            expect_eq(text_of(out), key, "api_key secret")
            expect("127.0.0.1" in out.metadata["allowed_domains"], f"api_key domains {out.metadata}")

            out = await s.call_tool("echo", {"text": "héllo ✓"})
            expect_eq((text_of(out), out.metadata, out.reward, out.finished), ("héllo ✓", {"length": 7}, 0.0, False), "echo")
            expect_eq(text_of(await s.call_tool("counter")), "1", "counter 1")
            out = await s.call_tool("submit", {"answer": "14"})
            expect_eq((text_of(out), out.reward, out.finished), ("Correct!", 1.0, True), "submit")

    async def episode_from_split_index():
        async with default_env.session(split="test", index=2) as s:
            expect_eq((await s.get_prompt())[0].text, "What is 102+102?", "prompt")
            out = await s.call_tool("submit", {"answer": "205"})
            expect_eq((text_of(out), out.reward, out.finished), ("Incorrect", 0.0, True), "submit")

    async def finished_latch():
        # A harness that keeps calling after `finished` must not turn a wrong answer into 1.0.
        async with env.session(split="train", index=3) as s:
            out = await s.call_tool("submit", {"answer": "5"})
            expect_eq((out.reward, out.finished), (0.0, True), "wrong submit")
            reason = await reason_of(s.call_tool("submit", {"answer": "6"}))
            expect_eq(reason, "episode_finished", "second submit")
            expect_eq((await s.get_prompt())[0].text, "What is 3+3?", "prompt after finished")

    async def messages():
        async with env.session(split="train", index=4) as s:
            msgs = await s.get_messages()
            expect_eq([(m.role, [b.text for b in m.blocks]) for m in msgs], [("user", ["What is 4+4?"])], "messages")
            openai = await s.get_messages(format="openai")
            expect_eq(openai[0]["role"], "user", "openai message role")
            expect("What is 4+4?" in json.dumps(openai), f"openai messages {openai}")
            anthropic = await s.get_messages(format="anthropic")
            expect_eq(anthropic["messages"][0]["role"], "user", "anthropic message role")

    async def version():
        async with env.session(split="train", index=1) as s:
            v = await s.version()
            expect(isinstance(v.get("version"), str) and v["version"], f"version {v}")

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
            expect_eq([b.type for b in out.blocks], ["text", "image"], "block types")
            img = out.blocks[1]
            expect_eq(img.mimeType, "image/png", "mimeType")
            expect(base64.b64decode(img.data).startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG")

    async def refused_calls():
        async with env.session(split="train", index=1) as s:
            expect_eq(await reason_of(s.call_tool("no_such_tool", {})), "not_found", "unknown tool")
            expect_eq(await reason_of(s.call_tool("echo", {"text": 5})), "input_validation", "bad input")
            expect_eq(await reason_of(s.call_tool("submit", {})), "input_validation", "missing input")
            err = await expect_raises(s.call_tool("fail", {"message": "boom 42"}), ToolCallError, "boom 42")
            expect("boom 42" in err.detail, f"fail detail {err.detail!r}")
            expect_eq(text_of(await s.call_tool("counter")), "1", "counter after the refusals")

    async def crash():
        async with env.session(split="train", index=1) as s:
            # A crash is an SSE error event: the client raises ToolFailed and ends its session.
            await expect_raises(s.call_tool("panic"), ToolFailed)
        async with env.session(split="train", index=1) as s:
            expect_eq(text_of(await s.call_tool("counter")), "1", "a new session after the crash")

    async def long_call():
        # The client's read timeout is 30 s without a byte: only keep-alives carry this call.
        async with env.session(split="train", index=1) as s:
            expect_eq(text_of(await s.call_tool("sleep", {"ms": 32_000})), "slept", "32 s call")

    async def parallel_sessions():
        async def one(i: int):
            async with env.session(split="train", index=i) as s:
                expect_eq(text_of(await s.call_tool("counter")), "1", f"session {i} counter")
                out = await s.call_tool("submit", {"answer": str(2 * i)})
                expect_eq(out.reward, 1.0, f"session {i} reward")

        await asyncio.gather(*(one(i) for i in range(24)))

    async def api_key_off_and_wrong():
        for label, bad in (("no key", None), ("wrong key", key + "-wrong")):
            other = AsyncEnvironmentsAPI(base_url=url, api_key=bad)
            try:
                err = await expect_raises(other.get(ENV, variant=ENV).list_splits(), Exception)
                expect("401" in str(err) or "Authentication Failed" in str(err), f"{label}: {err!r}")
            finally:
                await other.aclose()

    async def unknown_toolset():
        err = await expect_raises(env.session(split="train", index=1, toolset="claude-code").__aenter__(), aiohttp.ClientResponseError)
        expect_eq(err.status, 400, "unknown toolset status")
        expect("claude-code" in str(err), f"the error does not name the toolset: {err}")

    async def selected_toolset():
        # The fixture's toolset is named codex, one of the names this client accepts.
        async with env.session(split="train", index=1, toolset="codex") as s:
            expect_eq(tool_names(None, await s.list_tools()), sorted(SHARED + ["hint", "shout"]), "tools with codex")
            expect_eq(text_of(await s.call_tool("shout", {"text": "hi"})), "HI", "shout")
        async with env.session(split="train", index=1) as s:
            expect("shout" not in tool_names(None, await s.list_tools()), "shout without the toolset")

    def candidate(answer: str, metadata=None) -> GroupCandidate:
        turns = [Message(role="user", blocks=[TextBlock(text="What is 1+1?")]),
                 Message(role="assistant", blocks=[TextBlock(text=answer)])]
        return GroupCandidate(messages=turns, metadata=metadata)

    async def score_group():
        # Task 1 of train: the answer is "2"; the fixture scores a right final answer 1.0.
        async with env.session(split="train", index=1) as s:
            expect(await s.supports_score_group(), "session: supports_score_group")
            scores = await s.score_group([candidate("3"), candidate(" 2 "), [Message(role="assistant", blocks=[TextBlock(text="2")])]])
            expect_eq([sc.reward for sc in scores], [0.0, 1.0, 1.0], "group rewards in candidate order")
            # The fixture gives no score to a candidate marked so: the server reports the count.
            err = await expect_raises(s.score_group([candidate("2"), candidate("2", {"score": "omit"})]), ScoreGroupFailed)
            expect("1 scores for 2 candidates" in str(err), f"mismatch error {err}")
            # Neither marks the session dead.
            expect_eq(text_of(await s.call_tool("counter")), "1", "counter after scoring")

    for name, check in [
        ("calls.score-group", score_group),
        ("episode.from-task-with-secrets", episode_from_task),
        ("episode.from-split-index", episode_from_split_index),
        ("episode.finished-latch", finished_latch),
        ("sessions.messages", messages),
        ("sessions.version", version),
        ("calls.chunked", chunked_results),
        ("calls.images", images),
        ("calls.refused-reasons", refused_calls),
        ("calls.crash", crash),
        ("calls.longer-than-read-timeout", long_call),
        ("sessions.parallel-24", parallel_sessions),
        ("auth.api-key-off-and-wrong", api_key_off_and_wrong),
        ("sessions.unknown-toolset", unknown_toolset),
        ("sessions.selected-toolset", selected_toolset),
    ]:
        await checks.run(name, check)

    await api.aclose()
    return checks.finish()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    args = parser.parse_args()
    key = os.environ.get("ORS_API_KEY", "")
    if not key:
        sys.exit("set ORS_API_KEY to the server's API key")
    sys.exit(asyncio.run(main(args.url.rstrip("/"), key)))
