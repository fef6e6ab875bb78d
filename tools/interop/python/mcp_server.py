"""An MCP server written with the official Python MCP SDK (PyPI `mcp` 2.x, `MCPServer`), whose
tools the `mcp_env` example serves as ORS tools (through `McpToolset`). It speaks MCP over
stdio (the default: `mcp_env --mcp-command "python mcp_server.py"`) or streamable HTTP
(`--http`: prints `mcp server listening on http://127.0.0.1:PORT/mcp` once it accepts).

The tools cover what the wrapping must carry: a typed input schema (`add`), structured
output (`add`), text (`shout`), an image (`pixel`), an error (`fail`), per-connection state
(`count`: each ORS episode on its own connection counts from 1), and with `--crash-tool` a
tool that kills the server (`crash`), to see a crash become `ok: false` and the next episode
get a fresh server.

Usage: python mcp_server.py [--http] [--crash-tool]
"""

import argparse
import asyncio
import base64
import os
import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

server = MCPServer("interop-tools")
counter = {"n": 0}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Repeat the text in capitals."""
    return text.upper()


@server.tool()
def count() -> str:
    """Count the calls of this tool on this connection: 1, 2, 3..."""
    counter["n"] += 1
    return str(counter["n"])


@server.tool()
def pixel() -> Image:
    """A one-pixel PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool()
def fail(message: str) -> str:
    """Fail with the given message."""
    raise ToolError(message)


def crash() -> str:
    """Kill this MCP server (exit code 3)."""
    sys.stdout.flush()
    os._exit(3)


async def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    uv = uvicorn.Server(config)

    async def announce() -> None:
        while not uv.started:
            await asyncio.sleep(0.02)
        print(f"mcp server listening on http://127.0.0.1:{port}/mcp", flush=True)

    await asyncio.gather(uv.serve(sockets=[sock]), announce())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    ap.add_argument("--crash-tool", action="store_true", help="add the `crash` tool")
    args = ap.parse_args()
    if args.crash_tool:
        server.tool()(crash)
    if args.http:
        asyncio.run(serve_http())
    else:
        server.run()


if __name__ == "__main__":
    main()
