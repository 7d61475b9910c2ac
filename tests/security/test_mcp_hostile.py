"""MCP both ways against hostile peers. `toolpath mcp serve` over HTTP, driven by the official SDK client and by
raw requests: a bounded number of sessions, idle ones reaped with their sandboxes, a cancelled cell stopped
before the session's next call, and only loopback Host and Origin headers. toolpath's client against real
hostile stdio servers (tests/data/mcp/hostile_server.py): each is refused or bounded with one clear line."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'toolpath[mcp]')")

import anyio  # noqa: E402
from conftest import ROOT  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from toolpath.agents.episode import EpisodeError, run_episode  # noqa: E402
from toolpath.policies.scripted import ScriptedPolicy  # noqa: E402
from toolpath.sandboxes.process import bwrap_works  # noqa: E402
from toolpath.spec import parse_spec  # noqa: E402
from toolpath.tools.mcp_process import descendants  # noqa: E402

HOSTILE = ROOT / "tests" / "data" / "mcp" / "hostile_server.py"
BWRAP = bwrap_works()
needs_bwrap = pytest.mark.skipif(BWRAP is not None, reason=f"no bubblewrap sandbox here: {BWRAP}")


# ---- the server: toolpath mcp serve --http ------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`toolpath mcp serve --http 0 --max-sessions 2 --session-idle 1`; yields (url, port, process)."""
    home = tmp_path_factory.mktemp("home")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOOLPATH_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "mcp", "serve", "--http", "0", "--tools",
                             "calculator,python", "--max-sessions", "2", "--session-idle", "1"],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = proc.stderr.readline()
    found = re.search(r"(http://127\.0\.0\.1:(\d+)/mcp)", line)
    if not found:
        proc.kill()
        pytest.fail(f"the server did not announce its URL: {line}{proc.stderr.read()}")
    yield found.group(1), int(found.group(2)), proc
    proc.terminate()
    proc.wait(timeout=20)
    proc.stderr.close()


def raw(port: int, head: str, body: bytes = b"") -> tuple[int, dict, str]:
    """Send a request exactly as written; (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head.rstrip("\n").replace("\n", "\r\n").encode() + f"\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + body)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head_part, _, rest = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), headers, rest.decode(errors="replace")


INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode()
POST = "POST /mcp HTTP/1.1\nContent-Type: application/json\nAccept: application/json, text/event-stream\n"


@pytest.mark.parametrize("headers, status", [
    ("Host: 127.0.0.1:80@evil.com", 421),  # the SDK's `127.0.0.1:*` prefix match took this one
    ("Host: evil.com", 421),
    ("Host: 127.0.0.1.evil.com:80", 421),
    ("Host: 127.0.0.1:8x", 421),
    ("Host: 127.0.0.1:99999", 421),
    ("Host: 127.0.0.1\nHost: evil.com", 400),  # uvicorn refuses it before any app sees it
    ("Host: 127.0.0.1\nOrigin: http://evil.com", 403),
    ("Host: 127.0.0.1\nOrigin: http://127.0.0.1:80@evil.com", 403),
    ("Host: localhost:1\nOrigin: null", 403),
], ids=["userinfo", "other", "suffix", "port-letters", "port-range", "two-hosts", "origin", "origin-userinfo",
        "origin-null"])
def test_only_loopback_hosts_and_origins_reach_the_server(server, headers, status):
    url, port, _ = server
    got, head, body = raw(port, POST + headers, INIT)
    assert got == status, body
    assert "mcp-session-id" not in head  # nothing was opened
    if got != 400:
        assert json.loads(body)["error"]["message"].startswith("toolpath mcp: ")


def test_a_loopback_host_and_origin_are_served(server):
    url, port, _ = server
    host = f"Host: 127.0.0.1:{port}\nOrigin: http://localhost:{port}\n"
    ok, head, _ = raw(port, POST + host, INIT)
    assert ok == 200 and "mcp-session-id" in head
    gone, _, _ = raw(port, f"DELETE /mcp HTTP/1.1\n{host}Mcp-Session-Id: {head['mcp-session-id']}")
    assert gone == 200


def _texts(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def _sandboxes(proc) -> set[int]:
    return set(descendants(proc.pid))


@needs_bwrap
def test_sessions_are_bounded_and_a_cancelled_cell_is_stopped(server):
    """Two sessions at most: a third is refused (503) while they last. In one, a cell the client cancels is
    interrupted: the session's next call gets its own answer, the cancelled cell never finishes, and the kernel
    keeps the session's variables."""
    url, port, proc = server

    async def main():
        async with streamable_http_client(url) as (r1, w1), ClientSession(r1, w1) as one, \
                streamable_http_client(url) as (r2, w2), ClientSession(r2, w2) as two:
            await one.initialize()
            await two.initialize()
            await one.call_tool("python", {"code": "kept = 41"})
            refused = None
            try:
                async with streamable_http_client(url) as (r3, w3), ClientSession(r3, w3) as three:
                    with anyio.fail_after(20):
                        await three.initialize()
            except Exception as err:  # noqa: BLE001 — the SDK client's error for the 503
                refused = err
            with anyio.move_on_after(1.5):  # the client gives up: the SDK sends notifications/cancelled
                await one.call_tool("python", {"code": "import time\ntime.sleep(25)\ndone = True"})
            after = await one.call_tool("python", {"code": "print(kept + 1, globals().get('done'))"})
            return refused, after

    refused, after = anyio.run(main)
    assert refused is not None, "a third session was opened past --max-sessions 2"
    assert not after.is_error and "42 None" in _texts(after), _texts(after)


@needs_bwrap
def test_a_client_that_leaves_without_delete_has_its_sandbox_reaped(server):
    url, port, proc = server
    host = f"Host: 127.0.0.1:{port}\n"
    status, head, _ = raw(port, POST + host, INIT)
    sid = head["mcp-session-id"]
    session = POST + host + f"Mcp-Session-Id: {sid}\nMcp-Protocol-Version: 2025-06-18\n"
    raw(port, session, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    before = _sandboxes(proc)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "python",
                                                                           "arguments": {"code": "x = 1"}}}
    status, _, body = raw(port, session, json.dumps(call).encode())
    assert status == 200 and "isError" in body
    assert _sandboxes(proc) - before, "the call should have started a sandbox"
    for _ in range(200):  # idle for 1 s (--session-idle): the session ends and its sandbox closes
        if not _sandboxes(proc) - before:
            break
        time.sleep(0.05)
    assert not _sandboxes(proc) - before, "the idle session's sandbox was not closed"
    status, _, _ = raw(port, session, json.dumps(call).encode())
    assert status == 404  # the session is gone: the client must start a new one


def test_serve_refuses_bad_session_bounds(tmp_path):
    from conftest import toolpath_cli

    r = toolpath_cli("mcp", "serve", "--max-sessions", "0", home=tmp_path)
    assert r.returncode == 2 and "--max-sessions must be 1 to" in r.stderr and "Traceback" not in r.stderr
    r = toolpath_cli("mcp", "serve", "--session-idle", "nan", home=tmp_path)
    assert r.returncode == 2 and "--session-idle must be more than 0" in r.stderr and "Traceback" not in r.stderr


# ---- the client: a spec's mcp_servers against hostile servers -----------------------------------------------

def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def spec(mode: str, *extra: str):
    server = {"name": "hostile", "command": sys.executable, "args": [str(HOSTILE), mode, *extra], "timeout": 20,
              "start_timeout": 20}
    return parse_spec({"id": "t", "instruction": "echo", "model": "scripted:none.yaml", "mcp_servers": [server]})


def observations(store, run_id):
    return [o for s in store.steps(run_id) if s["node"] == "tools" for o in s["payload"]["observations"]]


@pytest.mark.parametrize("mode, message", [
    ("bad-name", r"'hostile' offers a tool named 'a\\nb', which is not a tool name"),
    ("ref-loop", r"'hostile': its tool 'echo' has an input schema whose \$ref refers back to itself"),
    ("not-json", r"'hostile' could not start: it wrote to stdout what is not JSON-RPC \('hello from a server"),
])
def test_a_broken_server_is_one_clear_line(store, capfd, mode, message):
    with pytest.raises(EpisodeError, match=message) as err:
        run_episode(spec(mode), store, policy=ScriptedPolicy([]))
    assert "\n" not in str(err.value)
    assert "Traceback" not in capfd.readouterr().err
    assert store.list_runs() == []


def test_a_flood_of_stderr_is_kept_as_a_tail(store):
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = run_episode(spec("stderr-flood"), store, policy=ScriptedPolicy([call("echo", text="hi"),
                                                                         call("final_answer", answer="ok")]))
    assert r.status == "finished"
    (echo, _) = observations(store, r.run_id)
    assert echo["content"] == "hi"
    # 40 MB went through the pipe; what stays is a tail of kilobytes (peak memory, not disk: nothing is written)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 30 * 1024


def test_a_huge_result_is_cut_with_a_note(store):
    from toolpath.tools.mcp_checks import MAX_RESULT_CHARS

    r = run_episode(spec("big-result"), store, policy=ScriptedPolicy([call("echo", text="x"),
                                                                       call("final_answer", answer="ok")]))
    (echo, _) = observations(store, r.run_id)
    assert len(echo["content"]) < MAX_RESULT_CHARS + 200
    assert echo["content"].endswith("characters not kept; a result keeps at most 1000000]")
    step = json.dumps(list(store.steps(r.run_id)))
    assert len(step) < 3 * MAX_RESULT_CHARS  # neither the text nor the structured copy is stored whole


def _tagged(tag: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and tag.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_child_that_left_the_servers_session_ends_with_the_run(store):
    tag = f"toolpath-test-{uuid.uuid4().hex}"
    seen = []

    class Watching(ScriptedPolicy):
        def respond(self, messages, tools, **gen):
            seen.append(_tagged(tag))
            return super().respond(messages, tools, **gen)

    r = run_episode(spec("setsid-child", tag), store, policy=Watching([call("echo", text="hi"),
                                                                       call("final_answer", answer="ok")]))
    assert r.status == "finished" and seen[-1], "the server's child should run while the run does"
    for _ in range(50):  # killed at close; gone from /proc once reaped
        if not _tagged(tag):
            break
        time.sleep(0.05)
    assert not _tagged(tag), "the server's setsid child outlived the run"
