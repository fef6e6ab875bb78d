"""The openreward SDK's client (openreward 0.1.167) against an ORS server hosting the gsm8k
environment: splits and tasks (with `env_name`), tools in every provider format, the terminal
tool a harness calls with the model's plain answer, episodes from a task object and from
split+index, grading, the prompt as messages, concurrent episodes, and group scoring reported
as unsupported (gsm8k does not implement it).

Usage: python openreward_client_gsm8k.py URL
Exits non-zero if any check fails.
"""

import argparse
import asyncio
import sys

from openreward import AsyncEnvironmentsAPI, GroupCandidate, Message
from openreward.api.environments.types import TextBlock
from openreward.api.errors import ScoreGroupUnsupported

from harness import Checks, expect, expect_eq, expect_raises

ENV = "gsm8k"
FORMATS = [None, "openai", "anthropic", "google", "openrouter"]


def final_answer(task_spec: dict) -> str:
    last = task_spec["answer"].strip().splitlines()[-1]
    expect(last.startswith("####"), f"answer does not end in '#### N': {last!r}")
    return last[4:].strip()


def names(fmt, tools) -> list:
    if fmt is None:
        return sorted(t.name for t in tools)
    if fmt == "openrouter":
        return sorted(t["function"]["name"] for t in tools)
    return sorted(t["name"] for t in tools)


async def main(url: str) -> int:
    api = AsyncEnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(ENV, variant=ENV)
    checks = Checks(f"openreward client vs {url} ({ENV})")

    async def discovery():
        expect_eq(await env.list_splits(), ["train", "test"], "splits")
        test = await env.num_tasks("test")
        got = await env.get_task_range("test", 0, test)
        expect_eq(len(got), test, "get_task_range(test)")
        for t in got:
            expect_eq(t.environment_name, ENV, "env_name")
            final_answer(t.task_spec)
        expect_eq((await env.get_task("train", 3)).task_spec, (await env.list_tasks("train"))[3].task_spec, "train[3]")

    async def tools():
        for fmt in FORMATS:
            expect_eq(names(fmt, await env.list_tools(format=fmt)), ["submit"], f"{fmt} tools (the terminal tool is hidden)")
        term = await env.terminal_tool()
        expect(term is not None, "no terminal tool")
        expect_eq((term.name, term.arg), ("final_answer", "message"), "terminal tool")
        expect(await env.is_assistant_message_final(), "a plain answer does not end the episode")

    async def terminal_episode():
        # What a harness does when the model answers without a tool call.
        t = await env.get_task("test", 0)
        answer = final_answer(t.task_spec)
        async with env.session(task=t) as s:
            expect(await s.is_assistant_message_final(), "session: no terminal tool")
            out = await s.call_terminal_tool(f"Working it out step by step, the answer is {answer}.")
            expect_eq((out.reward, out.finished), (1.0, True), "plain answer graded")
        async with env.session(split="test", index=1) as s:
            out = await s.call_terminal_tool("I think it is 0.123456")
            expect_eq((out.reward, out.finished), (0.0, True), "wrong plain answer")

    async def submit_episodes():
        tasks = await env.get_task_range("train", 0, 12)

        async def one(i: int, t):
            async with env.session(split="train", index=i) as s:
                msgs = await s.get_messages()
                expect_eq([m.role for m in msgs], ["user"], "messages")
                expect(t.task_spec["question"] in msgs[0].blocks[0].text, "the question is in the prompt")
                answer = final_answer(t.task_spec) if i % 2 == 0 else "-1.5"
                out = await s.call_tool("submit", {"answer": answer})
                expect_eq((out.reward, out.finished), (1.0 if i % 2 == 0 else 0.0, True), f"train[{i}]")

        await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))

    async def score_group_unsupported():
        expect(not await env.supports_score_group(), "gsm8k does not score groups")
        async with env.session(split="test", index=0) as s:
            only = GroupCandidate(messages=[Message(role="assistant", blocks=[TextBlock(text="4")])])
            await expect_raises(s.score_group([only]), ScoreGroupUnsupported)
            out = await s.call_tool("submit", {"answer": "-1.5"})
            expect(out.finished, "the session still works after the refusal")

    for name, check in [
        ("score-group.unsupported", score_group_unsupported),
        ("discovery", discovery),
        ("tools-and-terminal-tool", tools),
        ("episode.terminal-tool", terminal_episode),
        ("episode.submit-concurrent-12", submit_episodes),
    ]:
        await checks.run(name, check)

    await api.aclose()
    return checks.finish()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url.rstrip("/"))))
