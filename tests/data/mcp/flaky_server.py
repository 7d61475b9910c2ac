"""A small MCP server (built on the official SDK's MCPServer) that misbehaves on request, for tests/test_mcp.py:
`echo` answers, `tick` appends to a file, `die` ends the process mid-call, `hang` never answers, `fail` raises inside
the tool."""

import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")


@server.tool(description="Return the text unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Append a label to the file $TICK_FILE names.")
def tick(label: str) -> str:
    with open(os.environ["TICK_FILE"], "a") as f:
        f.write(label + "\n")
        f.flush()
        os.fsync(f.fileno())
    return f"ticked {label}"


@server.tool(description="End the server process without answering.")
def die() -> str:
    print("flaky server: exiting on request", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(description="Never answer.")
def hang() -> str:
    time.sleep(3600)
    return "late"


@server.tool(description="Raise an error inside the tool.")
def fail(reason: str) -> str:
    raise ValueError(f"failing as asked: {reason}")


if __name__ == "__main__":
    if "--refuse" in sys.argv:  # a server that exits before its handshake
        sys.exit("flaky server: refusing to start")
    if "--mute" in sys.argv:  # a server that never answers its handshake
        print("flaky server: not answering", file=sys.stderr, flush=True)
        time.sleep(3600)
    anyio.run(server.run_stdio_async)
