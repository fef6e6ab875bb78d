"""What the two Python fixtures (conformance_env.py with ors-sdk, openreward_conformance_env.py
with openreward) share and neither SDK provides: the fixture's tasks, image and tool inputs
(pydantic, which both SDKs use), and serving on a free port with the `listening on
http://HOST:PORT` line `cargo xtask` waits for."""

import argparse
import base64
import socket
import struct
import sys
import threading
import time
import zlib
from typing import Callable

from pydantic import BaseModel

SPLITS = {"train": (0, 25), "test": (100, 5), "hard": (200, 3)}


def make_task(i: int) -> dict:
    return {"id": i, "question": f"What is {i}+{i}?", "answer": str(2 * i)}


def tiny_png() -> str:
    """A valid 1x1 red PNG, base64-encoded (built here so the fixture has no binary file)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


PNG = tiny_png()


class ToolFailure(Exception):
    """Raised by a fixture tool for an `ok: false` result instead of an SSE `error` event."""


class EchoInput(BaseModel):
    text: str


class SubmitInput(BaseModel):
    answer: str


class BigInput(BaseModel):
    bytes: int


class FailInput(BaseModel):
    message: str


class SleepInput(BaseModel):
    ms: int


class SecretInput(BaseModel):
    name: str


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def announce_when_ready(host: str, port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                print(f"ors-reference listening on http://{host}:{port}", flush=True)
                return
        except OSError:
            time.sleep(0.05)
    print("ors-reference: server did not come up", file=sys.stderr, flush=True)


def serve(run: Callable[[str, int], None], description: str) -> None:
    """Call `run(host, port)` with --host/--port (0 picks a free port), announcing the URL."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    port = args.port or free_port(args.host)
    threading.Thread(target=announce_when_ready, args=(args.host, port), daemon=True).start()
    run(args.host, port)
