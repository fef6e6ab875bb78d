"""A tiny check runner for the interop scripts: named async checks, PASS/FAIL lines, a
summary, and a non-zero exit status when anything failed."""

import asyncio
import sys
import time
import traceback
from typing import Any, Awaitable, Callable


class CheckFailed(Exception):
    """A check's expectation did not hold."""


def expect(cond: bool, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


def expect_eq(got: Any, want: Any, what: str) -> None:
    if got != want:
        raise CheckFailed(f"{what}: expected {want!r}, got {got!r}")


async def expect_raises(coro: Awaitable[Any], exc_type: type, contains: str = "") -> BaseException:
    try:
        result = await coro
    except exc_type as e:
        if contains and contains not in str(e):
            raise CheckFailed(f"{exc_type.__name__} does not mention {contains!r}: {e}")
        return e
    raise CheckFailed(f"expected {exc_type.__name__}, got a result: {result!r}")


class Checks:
    """Runs checks one after another and remembers which failed."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.passed: list[str] = []
        self.failed: list[str] = []
        self.started = time.monotonic()

    async def run(self, name: str, check: Callable[[], Awaitable[None]], timeout: float = 120) -> None:
        try:
            await asyncio.wait_for(check(), timeout=timeout)
        except CheckFailed as e:
            self.failed.append(name)
            print(f"FAIL {name}: {e}", flush=True)
        except Exception as e:  # any client error is a failed check, not a crash
            self.failed.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(file=sys.stderr)
        else:
            self.passed.append(name)
            print(f"PASS {name}", flush=True)

    def finish(self) -> int:
        took = time.monotonic() - self.started
        print(f"{self.title}: {len(self.passed)} passed, {len(self.failed)} failed in {took:.1f} s", flush=True)
        if self.failed:
            print(f"failed: {', '.join(self.failed)}", flush=True)
        return 1 if self.failed else 0


async def close_client(client: Any) -> None:
    """Close the aiohttp sessions an AsyncORS client opened (it has no close of its own)."""
    api = getattr(client, "_environments_api", None)
    if api is None:
        return
    for session in list(getattr(api, "_clients", {}).values()):
        if not session.closed:
            await session.close()
