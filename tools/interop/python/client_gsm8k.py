"""The reference Python client (ors-sdk 0.1.0) against an ORS server hosting the gsm8k
environment: splits, tasks in GSM8K's format, tools in every provider format, episodes from a
task and from split+index, grading (right, wrong, and tolerant of `$`, commas and spaces), and
concurrent episodes.

Usage: python client_gsm8k.py URL
Exits non-zero if any check fails.
"""

import argparse
import asyncio
import sys

from ors.client import AsyncORS, Task

from harness import Checks, close_client, expect, expect_eq

ENV = "gsm8k"
FORMATS = ["openai", "anthropic", "google", "openrouter"]


def final_answer(task_spec: dict) -> str:
    last = task_spec["answer"].strip().splitlines()[-1]
    expect(last.startswith("####"), f"answer does not end in '#### N': {last!r}")
    return last[4:].strip()


def decorated(n: str) -> str:
    """The answer as a person might type it: dollar sign, thousands separators, spaces."""
    whole, dot, frac = n.partition(".")
    sign = "-" if whole.startswith("-") else ""
    digits = whole.lstrip("-")
    grouped = f"{int(digits):,}" if digits.isdigit() else digits
    return f"  ${sign}{grouped}{dot}{frac} "


async def main(url: str) -> int:
    client = AsyncORS(base_url=url)
    env = client.environment(ENV)
    checks = Checks(f"python client vs {url} ({ENV})")

    async def splits():
        expect_eq(await env.list_splits(), ["train", "test"], "splits")

    async def sizes():
        train, test = await env.num_tasks("train"), await env.num_tasks("test")
        expect(train + test >= 200, f"only {train} + {test} problems")
        expect_eq(len(await env.list_tasks("test")), test, "list_tasks(test) length")

    async def task_format():
        for t in await env.list_tasks("test"):
            expect(isinstance(t.task_spec.get("question"), str) and t.task_spec["question"], f"no question: {t}")
            final_answer(t.task_spec)

    async def task_access():
        listed = [t.task_spec for t in await env.list_tasks("train")]
        expect_eq((await env.get_task("train", 3)).task_spec, listed[3], "get_task(train, 3)")
        got = [t.task_spec for t in await env.get_task_range("train", 0, 5)]
        expect_eq(got, listed[:5], "get_task_range(train, 0, 5)")
        got = [t.task_spec for t in await env.get_task_range("train", -2)]
        expect_eq(got, listed[-2:], "get_task_range(train, -2)")

    async def tools():
        specs = await env.list_tools()
        expect_eq([s.name for s in specs], ["submit"], "tools")
        expect_eq(specs[0].input_schema["properties"]["answer"]["type"], "string", "submit.answer")
        for fmt in FORMATS:
            formatted = await env.list_tools(format=fmt)
            expect_eq(len(formatted), 1, f"{fmt} tool count")
            tool = formatted[0]
            name = tool["function"]["name"] if fmt == "openrouter" else tool["name"]
            expect_eq(name, "submit", f"{fmt} name")
            schema = tool["input_schema"] if fmt == "anthropic" else tool["parameters"]
            expect_eq(schema["properties"]["answer"]["type"], "string", f"{fmt} schema")

    async def episode_from_task():
        t = await env.get_task("test", 0)
        async with env.session(task=t) as s:
            prompt = await s.get_prompt()
            expect(t.task_spec["question"] in prompt[0].text, "the prompt does not contain the question")
            expect_eq([x.name for x in await s.list_tools()], ["submit"], "session tools")
            out = await s.call_tool("submit", {"answer": final_answer(t.task_spec)})
            expect_eq((out.blocks[0].text, out.reward, out.finished), ("Correct!", 1.0, True), "submit")

    async def episode_from_split_index():
        async with env.session(split="train", index=1) as s:
            out = await s.call_tool("submit", {"answer": "-987654321"})
            expect_eq((out.blocks[0].text, out.reward, out.finished), ("Incorrect", 0.0, True), "wrong answer")

    async def tolerant_grading():
        tasks = await env.list_tasks("train")
        # Prefer a problem whose answer has thousands, so the commas matter.
        t = next((t for t in tasks if len(final_answer(t.task_spec).lstrip("-")) >= 4), tasks[2])
        async with env.session(split="train", index=tasks.index(t)) as s:
            answer = decorated(final_answer(t.task_spec))
            out = await s.call_tool("submit", {"answer": answer})
            expect_eq(out.reward, 1.0, f"reward for {answer!r}")

    async def inline_task():
        spec = {"question": "What is 6 times 7?", "answer": "6 * 7 = 42\n#### 42"}
        async with env.session(task=Task(environment_name=ENV, task_spec=spec)) as s:
            expect("6 times 7" in (await s.get_prompt())[0].text, "inline task prompt")
            out = await s.call_tool("submit", {"answer": "42"})
            expect_eq(out.reward, 1.0, "inline task reward")

    async def concurrent_episodes():
        tasks = await env.list_tasks("test")

        async def one(i: int):
            async with env.session(split="test", index=i) as s:
                out = await s.call_tool("submit", {"answer": final_answer(tasks[i].task_spec)})
                expect_eq(out.reward, 1.0, f"test[{i}] reward")

        await asyncio.gather(*(one(i) for i in range(min(8, len(tasks)))))

    for name, check in [
        ("discovery.splits", splits),
        ("discovery.sizes", sizes),
        ("discovery.task-format", task_format),
        ("discovery.task-access", task_access),
        ("discovery.provider-formats", tools),
        ("episode.from-task", episode_from_task),
        ("episode.from-split-index", episode_from_split_index),
        ("episode.tolerant-grading", tolerant_grading),
        ("episode.inline-task", inline_task),
        ("episode.concurrent", concurrent_episodes),
    ]:
        await checks.run(name, check)

    await close_client(client)
    return checks.finish()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url.rstrip("/"))))
