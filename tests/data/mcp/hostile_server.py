"""A hostile stdio MCP server, speaking raw JSON-RPC lines, for tests/security/test_mcp_hostile.py.

    hostile_server.py MODE [ARG]
      stderr-flood     writes 20 MB to stderr before answering, and as much again on each call
      big-result       `echo` answers 3 MB of text (and the same as structured content)
      bad-name         offers a tool whose name holds a newline
      ref-loop         `echo`'s input schema refers to itself ($defs a -> allOf -> a)
      not-json         writes a line that is not JSON-RPC to stdout before answering
      setsid-child ARG starts a 300 s sleeper in a session of its own (setsid), its argv tagged with ARG
"""

import json
import os
import subprocess
import sys

MODE = sys.argv[1]
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
FLOOD = b"x" * 1023 + b"\n"


def send(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def flood() -> None:
    for _ in range(20 * 1024):
        os.write(2, FLOOD)


def tools() -> list:
    name = "a\nb" if MODE == "bad-name" else "echo"
    loop = {"type": "object", "$ref": "#/$defs/a", "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}}
    schema = loop if MODE == "ref-loop" else ECHO_SCHEMA
    return [{"name": name, "description": "Echo the text.", "inputSchema": schema}]


def result(arguments: dict) -> dict:
    if MODE == "big-result":
        big = "y" * 3_000_000
        return {"content": [{"type": "text", "text": big}], "structuredContent": {"big": big}}
    if MODE == "stderr-flood":
        flood()
    return {"content": [{"type": "text", "text": arguments.get("text", "")}]}


if MODE == "stderr-flood":
    flood()
if MODE == "not-json":
    print("hello from a server that forgot stdout is the wire", flush=True)
if MODE == "setsid-child":
    subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(300)", sys.argv[2]],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue  # a notification
    method, rid = msg.get("method"), msg["id"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools()}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": rid, "result": result(msg["params"].get("arguments") or {})})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
