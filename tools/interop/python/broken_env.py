"""Environments written with the Python reference SDK (ors-sdk 0.1.0) that make the mistakes
real ones make, so `ors check` can be shown to catch each of them (xtask interop step
"ors check vs the reference"):

- `broken`: splits `train` (num_tasks miscounts it) and `test` (task(i) is off by one);
  tools `lookup` (crashes on a key it does not know), `pick` (its schema lists the allowed
  colors, nothing checks them), `wait` (hangs on an empty query), `score` (a NaN reward, sent
  as `NaN` because the result is encoded with json.dumps, as hand-written servers do),
  `legacy` (an old result shape without `blocks`), `rate` (an input schema that is not valid
  JSON Schema) and `undocumented` (no description).
- `badsplits`: a split whose type is not train, validation or test.

Usage: python broken_env.py [--host 127.0.0.1] [--port N]   (port 0 picks a free port)
Prints `ors-reference listening on http://HOST:PORT` once the port accepts connections.
"""

import asyncio
import json

from pydantic import BaseModel, Field

from fixture_common import serve
from ors import Environment, Server, Split, TextBlock, ToolOutput, tool
from ors.types import RunToolSuccess

TASKS = {
    "train": [{"id": i, "note": f"note {i}"} for i in range(4)],
    "test": [{"id": 100 + i, "note": f"test note {i}"} for i in range(5)],
}
NOTES = {"apple": "a fruit", "pear": "another fruit"}


class LookupInput(BaseModel):
    key: str


class PickInput(BaseModel):
    # The schema promises two colors; pydantic does not enforce json_schema_extra.
    color: str = Field(json_schema_extra={"enum": ["red", "green"]})


class WaitInput(BaseModel):
    query: str


class ScoreInput(BaseModel):
    answer: str


class RateInput(BaseModel):
    stars: int = Field(json_schema_extra={"minimum": "zero"})


class JsonDumpsResult:
    """A result encoded with json.dumps, as a hand-written server encodes it: a NaN goes out
    as `NaN` (not JSON), and the dict's shape goes out unchecked."""

    def __init__(self, obj: dict) -> None:
        self.obj = obj

    def model_dump_json(self, indent=None) -> str:
        return json.dumps(self.obj)


class Broken(Environment):
    """An environment with one mistake per tool and split."""

    @classmethod
    def list_splits(cls):
        return [Split(name="train", type="train"), Split(name="test", type="test")]

    @classmethod
    def list_tasks(cls, split: str):
        return TASKS[split]

    @classmethod
    async def num_tasks(cls, split: str) -> int:
        # Counts the header line of the file the tasks came from.
        return len(TASKS[split]) + (1 if split == "train" else 0)

    @classmethod
    async def get_task(cls, split: str, index: int):
        tasks = TASKS[split]
        if split == "test":
            # 1-based by mistake.
            return tasks[min(index + 1, len(tasks) - 1)]
        return tasks[index]

    def get_prompt(self):
        return [TextBlock(text=str(self.task_spec.get("note", "")))]

    async def _call_tool(self, name, input):
        result = await super()._call_tool(name, input)
        if not isinstance(result.root, RunToolSuccess):
            return result
        out = result.root.output
        if name == "score":
            return JsonDumpsResult({
                "ok": True,
                "output": {
                    "blocks": [b.model_dump() for b in out.blocks],
                    "metadata": None,
                    "reward": out.reward,
                    "finished": out.finished,
                },
            })
        if name == "legacy":
            return JsonDumpsResult({"ok": True, "output": {"text": out.blocks[0].text}})
        return result

    @tool
    def lookup(self, params: LookupInput) -> ToolOutput:
        """Look a word up in the notes."""
        return ToolOutput(blocks=[TextBlock(text=NOTES[params.key])])

    @tool
    def pick(self, params: PickInput) -> ToolOutput:
        """Pick a color: red or green."""
        return ToolOutput(blocks=[TextBlock(text=f"picked {params.color}")])

    @tool
    async def wait(self, params: WaitInput) -> ToolOutput:
        """Wait for news about the query."""
        while not params.query:
            await asyncio.sleep(1)
        return ToolOutput(blocks=[TextBlock(text=f"no news about {params.query}")])

    @tool
    def score(self, params: ScoreInput) -> ToolOutput:
        """Score the answer."""
        words = params.answer.split()
        # The mean over no words is NaN.
        reward = sum(len(w) for w in words) / len(words) if words else float("nan")
        return ToolOutput(blocks=[TextBlock(text="scored")], reward=reward, finished=True)

    @tool
    def legacy(self) -> ToolOutput:
        """The old status tool."""
        return ToolOutput(blocks=[TextBlock(text="ok")])

    @tool
    def rate(self, params: RateInput) -> ToolOutput:
        """Rate the note."""
        return ToolOutput(blocks=[TextBlock(text=f"{params.stars} stars")])

    @tool
    def undocumented(self) -> ToolOutput:
        return ToolOutput(blocks=[TextBlock(text="?")])


class BadSplits(Environment):
    """A split of a type the protocol does not know."""

    @classmethod
    def list_splits(cls):
        return [Split.model_construct(name="dev", type="dev")]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"id": 0}]

    def get_prompt(self):
        return [TextBlock(text="dev")]

    @tool
    def noop(self) -> ToolOutput:
        """Do nothing."""
        return ToolOutput(blocks=[TextBlock(text="noop")])


if __name__ == "__main__":
    serve(lambda host, port: Server([Broken, BadSplits]).run(host=host, port=port), __doc__.splitlines()[0])
