"""The conformance fixture written with the Python reference SDK (ors-sdk 0.1.0).

It implements the same contract as the Rust `conformance` example (see the server issue):
env `conformance`; splits train (25), test (5), hard (bare name, 3); shared tools echo, submit,
counter, big, image, fail, panic, sleep, secret; task-specific tool hint. A second, trivial
environment `aux` is served after it (the fixture stays the default). `cargo xtask
conformance --url ...` run against it shows where the reference deviates from the protocol
(interop/reference-expected-failures.txt).

Usage: python conformance_env.py [--host 127.0.0.1] [--port N]   (port 0 picks a free port)
Prints `ors-reference listening on http://HOST:PORT` on stdout once the port accepts connections.
"""

import asyncio
from typing import Optional

from ors import Environment, ImageBlock, Server, Split, TextBlock, ToolOutput, tool
from ors.types import RunToolError, RunToolOutput

from fixture_common import (PNG, SPLITS, BigInput, EchoInput, FailInput, SecretInput, SleepInput,
                            SubmitInput, ToolFailure, make_task, serve)

class Conformance(Environment):
    """The conformance fixture."""

    def __init__(self, task_spec: dict = {}, secrets: dict = {}) -> None:
        super().__init__(task_spec=task_spec, secrets=secrets)
        self.secrets = dict(secrets or {})
        self.count = 0

    @classmethod
    def list_splits(cls):
        return [Split(name="train", type="train"), Split(name="test", type="test"), "hard"]

    @classmethod
    def list_tasks(cls, split: str):
        first, n = SPLITS[split]
        return [make_task(first + i) for i in range(n)]

    def get_prompt(self):
        return [TextBlock(text=str(self.task_spec.get("question", "")))]

    async def _call_tool(self, name, input):
        # The reference turns every exception into an SSE `error` event; the fixture's `fail`
        # tool must give an `ok: false` result, so it is mapped here.
        try:
            return await super()._call_tool(name, input)
        except ToolFailure as e:
            return RunToolOutput(RunToolError(error=str(e)))

    @tool
    def echo(self, params: EchoInput) -> ToolOutput:
        """Return the text unchanged."""
        return ToolOutput(
            blocks=[TextBlock(text=params.text)],
            metadata={"length": len(params.text)},
            reward=0.0,
            finished=False,
        )

    @tool
    def submit(self, params: SubmitInput) -> ToolOutput:
        """Submit an answer; ends the episode."""
        correct = params.answer.strip() == str(self.task_spec.get("answer", ""))
        return ToolOutput(
            blocks=[TextBlock(text="Correct!" if correct else "Incorrect")],
            reward=1.0 if correct else 0.0,
            finished=True,
        )

    @tool
    def counter(self) -> ToolOutput:
        """How many times counter ran in this session, including this call."""
        self.count += 1
        return ToolOutput(blocks=[TextBlock(text=str(self.count))])

    @tool
    def big(self, params: BigInput) -> ToolOutput:
        """One text block of that many 'x' characters."""
        return ToolOutput(blocks=[TextBlock(text="x" * params.bytes)])

    @tool
    def image(self) -> ToolOutput:
        """A text block and a PNG image block."""
        return ToolOutput(blocks=[TextBlock(text="image"), ImageBlock(data=PNG, mimeType="image/png")])

    @tool
    def fail(self, params: FailInput) -> ToolOutput:
        """Fail with the given message (ok: false)."""
        raise ToolFailure(params.message)

    @tool
    def panic(self) -> ToolOutput:
        """Crash."""
        raise RuntimeError("panic tool called")

    @tool
    async def sleep(self, params: SleepInput) -> ToolOutput:
        """Sleep that many milliseconds, then answer 'slept'."""
        await asyncio.sleep(params.ms / 1000)
        return ToolOutput(blocks=[TextBlock(text="slept")])

    @tool
    def secret(self, params: SecretInput) -> ToolOutput:
        """The value of the named secret."""
        value: Optional[str] = self.secrets.get(params.name)
        if value is None:
            raise ToolFailure(f"no secret named {params.name!r}")
        return ToolOutput(blocks=[TextBlock(text=value)])

    # Task-specific: the reference lists `shared=False` tools nowhere (its default
    # `list_task_tools` is empty), which is one of its documented deviations.
    @tool(shared=False)
    def hint(self) -> ToolOutput:
        """A hint for this task."""
        return ToolOutput(blocks=[TextBlock(text=f"The answer is {self.task_spec.get('answer', '')}")])


class Aux(Environment):
    """A second environment, served after the fixture, so clauses about several environments
    (an episode route naming another environment, notes row `path-env-not-validated`) have something to name."""

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"id": 0, "question": "aux"}]

    def get_prompt(self):
        return [TextBlock(text="aux")]

    @tool
    def noop(self) -> ToolOutput:
        """Do nothing."""
        return ToolOutput(blocks=[TextBlock(text="noop")])


def main() -> None:
    serve(lambda host, port: Server([Conformance, Aux]).run(host=host, port=port), __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
