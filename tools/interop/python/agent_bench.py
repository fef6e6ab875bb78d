"""The reference client (ors-sdk 0.1.0) driving agent episodes, for `cargo xtask bench`:
the same episodes the Rust `Agent` runs, written as a user of the reference SDK would write the
agent loop (it ships none), against the same ORS server and the same scripted model server.

Each episode: get_task, a session from split+index, get_prompt, list_tools(openrouter: the
Chat Completions tool shape), then model calls (aiohttp, POST {base}/chat/completions) and the
tool calls they ask for until a call says finished; the trajectory is serialized with json.

Usage: python agent_bench.py ORS_URL MODEL_BASE [--sessions N] [--duration S] [--warmup S]
Prints one JSON object (the fields of the Rust workload report) on stdout.
"""

import argparse
import asyncio
import json
import math
import sys
import time

import aiohttp
from ors.client import AsyncORS

from harness import close_client

ENV = "conformance"
SPLIT = "train"
TASKS = 25
MAX_STEPS = 4


def text_of(blocks) -> str:
    return "".join(b.text for b in blocks if getattr(b, "text", None) is not None)


async def episode(env, http: aiohttp.ClientSession, model_url: str, index: int) -> float:
    """One episode; its total reward."""
    task = await env.get_task(SPLIT, index)
    reward = 0.0
    async with env.session(split=SPLIT, index=index) as s:
        prompt = await s.get_prompt()
        tools = await s.list_tools(format="openrouter")
        messages = [{"role": "user", "content": text_of(prompt)}]
        calls = []
        for step in range(MAX_STEPS):
            body = {"model": "scripted", "messages": messages, "tools": tools}
            async with http.post(model_url, json=body) as resp:
                resp.raise_for_status()
                answer = await resp.json()
            msg = answer["choices"][0]["message"]
            tool_calls = msg.get("tool_calls") or []
            messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": tool_calls})
            if not tool_calls:
                break
            finished = False
            for tc in tool_calls:
                args = json.loads(tc["function"]["arguments"] or "{}")
                t0 = time.perf_counter()
                out = await s.call_tool(tc["function"]["name"], args)
                reward += out.reward or 0.0
                calls.append({"name": tc["function"]["name"], "input": args, "reward": out.reward,
                              "finished": out.finished, "latency_ms": (time.perf_counter() - t0) * 1e3})
                messages.append({"role": "tool", "tool_call_id": tc["id"], "content": text_of(out.blocks)})
                if out.finished:
                    finished = True
                    break
            if finished:
                break
    json.dumps({"task": task.task_spec, "messages": messages, "tool_calls": calls, "total_reward": reward})
    return reward


def percentile(sorted_ns, p):
    if not sorted_ns:
        return 0
    rank = math.ceil(p * len(sorted_ns))
    return sorted_ns[min(max(rank, 1), len(sorted_ns)) - 1]


async def main(url: str, model_base: str, sessions: int, duration: float, warmup: float) -> dict:
    client = AsyncORS(base_url=url)
    env = client.environment(ENV)
    model_url = model_base.rstrip("/") + "/chat/completions"
    start = time.perf_counter()
    begin, end = start + warmup, start + warmup + duration
    latencies = []
    errors = {"count": 0, "by_kind": {}, "samples": []}
    counter = iter(range(10**12))

    def fail(kind: str, msg: str):
        errors["count"] += 1
        errors["by_kind"][kind] = errors["by_kind"].get(kind, 0) + 1
        if len(errors["samples"]) < 5 and msg not in errors["samples"]:
            errors["samples"].append(msg)

    async def worker(http):
        while time.perf_counter() < end:
            index = next(counter) % TASKS
            t0 = time.perf_counter()
            try:
                reward = await episode(env, http, model_url, index)
            except Exception as e:  # noqa: BLE001 - every failure is counted and quoted
                fail("check", f"episode {index}: {type(e).__name__}: {e}")
                await asyncio.sleep(0.05)
                continue
            t1 = time.perf_counter()
            if reward != 1.0:
                fail("check", f"episode {index}: reward {reward}")
            elif begin <= t1 < end:
                latencies.append(int((t1 - t0) * 1e9))

    connector = aiohttp.TCPConnector(limit=sessions * 2)
    async with aiohttp.ClientSession(connector=connector) as http:
        await asyncio.gather(*(worker(http) for _ in range(sessions)))
    await close_client(client)
    latencies.sort()
    return {
        "workload": "agent",
        "client": "reference",
        "sessions": sessions,
        "ops": len(latencies),
        "window_s": duration,
        "rate": len(latencies) / duration,
        "p50_ms": percentile(latencies, 0.50) / 1e6,
        "p90_ms": percentile(latencies, 0.90) / 1e6,
        "p99_ms": percentile(latencies, 0.99) / 1e6,
        "max_ms": percentile(latencies, 1.0) / 1e6,
        "bytes": 0,
        "mb_per_s": 0.0,
        "errors": errors,
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("model_base")
    p.add_argument("--sessions", type=int, default=16)
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--warmup", type=float, default=0.5)
    a = p.parse_args()
    report = asyncio.run(main(a.url, a.model_base, a.sessions, a.duration, a.warmup))
    print(json.dumps(report))
    sys.exit(0)
