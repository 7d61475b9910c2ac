"""MCP both ways, through the official `mcp` SDK: its own client against `toolpath mcp serve` (stdio and
streamable HTTP), and toolpath's client (spec `mcp_servers`) against the reference `mcp-server-time` from PyPI,
against our own server, and against a server that dies, hangs or refuses to start."""

import base64
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'toolpath[mcp]')")

import anyio  # noqa: E402
from conftest import ROOT  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from toolpath.agents.episode import EpisodeError, run_episode  # noqa: E402
from toolpath.policies.scripted import ScriptedPolicy  # noqa: E402
from toolpath.sandboxes.process import bwrap_works  # noqa: E402
from toolpath.spec import SpecError, parse_spec  # noqa: E402

FLAKY = ROOT / "tests" / "data" / "mcp" / "flaky_server.py"
BWRAP = bwrap_works()
needs_bwrap = pytest.mark.skipif(BWRAP is not None, reason=f"no bubblewrap sandbox here: {BWRAP}")


def _env(home: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TOOLPATH_HOME"] = str(home)
    env["HF_HUB_OFFLINE"] = "1"
    return env


@pytest.fixture(scope="module")
def picture(tmp_path_factory) -> Path:
    from PIL import Image

    path = tmp_path_factory.mktemp("inputs") / "red.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(path)
    return path


_SERVERS: list = []


def http_server_process():
    return _SERVERS[-1]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory, picture):
    """`toolpath mcp serve --http 0` in a subprocess; yields its URL (the process: http_server_process())."""
    home = tmp_path_factory.mktemp("home")
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "mcp", "serve", "--http", "0", "--tools",
                             "calculator,crop,python", "--input", str(picture)], stderr=subprocess.PIPE, text=True,
                            env=_env(home), cwd=ROOT)
    line = proc.stderr.readline()
    found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
    if not found:
        proc.kill()
        pytest.fail(f"the server did not announce its URL: {line}{proc.stderr.read()}")
    _SERVERS.append(proc)
    yield found.group(1)
    proc.terminate()
    proc.wait(timeout=20)
    proc.stderr.close()


def _texts(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def _exercise(session: ClientSession) -> dict:
    """What every transport must do: list, call, an image back, a bad argument, an unknown tool, still alive."""
    await session.initialize()
    listing = await session.list_tools()
    tools = {t.name: t for t in listing.tools}
    out = {"tools": tools}
    out["sum"] = await session.call_tool("calculator", {"expression": "(17 + 4) * 2"})
    out["crop"] = await session.call_tool("crop", {"image": "image_1", "box": [0, 0, 10, 8]})
    out["bad"] = await session.call_tool("calculator", {"expr": "1"})
    out["bad_box"] = await session.call_tool("crop", {"image": "image_1", "box": [0, 0, 999, 8]})
    out["unknown"] = await session.call_tool("teleport", {})
    out["after"] = await session.call_tool("calculator", {"expression": "1+1"})
    return out


def _check(out: dict) -> None:
    tools = out["tools"]
    assert {"calculator", "crop"} <= set(tools) and "final_answer" not in tools
    assert tools["calculator"].input_schema["required"] == ["expression"]
    assert tools["calculator"].meta["toolpath/timeout_s"] == 5.0 and tools["crop"].meta["toolpath/quality"] == 0.95
    assert tools["crop"].description.startswith("Cut out a rectangle")
    assert not out["sum"].is_error and _texts(out["sum"]) == "42"
    crop = out["crop"]
    assert not crop.is_error and "crop_1" in _texts(crop)
    images = [c for c in crop.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    from PIL import Image

    im = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
    assert im.size == (10, 8) and im.getpixel((0, 0)) == (200, 30, 30)
    assert out["bad"].is_error and "expression: Field required" in _texts(out["bad"])
    assert "expr: unknown argument" in _texts(out["bad"])
    assert out["bad_box"].is_error and "not inside the 64x48 image" in _texts(out["bad_box"])
    assert out["unknown"].is_error and "unknown tool 'teleport'" in _texts(out["unknown"])
    assert not out["after"].is_error and _texts(out["after"]) == "2"


def test_sdk_client_over_stdio(tmp_path, picture):
    env = _env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(FLAKY.parent)
    env["TOOLPATH_PLUGINS"] = "noisy_tools"  # a tool that prints to stdout, the wire of a stdio server
    params = StdioServerParameters(command=sys.executable, args=["-m", "toolpath.cli", "mcp", "serve", "--tools",
                                                                 "calculator,crop,noisy", "--input", str(picture)],
                                   env=env, cwd=str(ROOT))
    garbled = []

    async def on_message(message):
        if isinstance(message, Exception):
            garbled.append(message)

    async def main():
        with open(tmp_path / "stderr.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), \
                    ClientSession(r, w, message_handler=on_message) as session:
                out = await _exercise(session)
                out["noisy"] = await session.call_tool("noisy", {"text": "hi"})
                return out

    out = anyio.run(main)
    _check(out)
    assert set(out["tools"]) == {"calculator", "crop", "noisy"}
    assert _texts(out["noisy"]) == "quiet hi" and not garbled
    assert "noise on stdout: hi" in (tmp_path / "stderr.txt").read_text()


def test_sdk_client_over_http(http_server):
    async def main():
        async with streamable_http_client(http_server) as (r, w), ClientSession(r, w) as session:
            return await _exercise(session)

    _check(anyio.run(main))


@needs_bwrap
def test_each_http_session_has_its_own_sandbox(http_server):
    async def session_run(code: str) -> str:
        async with streamable_http_client(http_server) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            first = await session.call_tool("python", {"code": code})
            again = await session.call_tool("python", {"code": "print(globals().get('secret'), image_1.size)"})
            assert not first.is_error and not again.is_error
            return _texts(again)

    async def main():
        return await session_run("secret = 41 + 1"), await session_run("pass")

    first, second = anyio.run(main)
    assert "42 (64, 48)" in first  # kept between the calls of one session, with the served image loaded
    assert "None (64, 48)" in second  # never seen by the next session


@needs_bwrap
def test_a_stdio_server_keeps_one_session_for_its_client_on_either_protocol(tmp_path):
    """The SDK's high-level Client speaks the sessionless 2026-07-28 protocol; over stdio there is one client all
    the same, so its kernel keeps its variables between calls."""
    from mcp import Client

    params = StdioServerParameters(command=sys.executable, args=["-m", "toolpath.cli", "mcp", "serve", "--tools",
                                                                 "python"], env=_env(tmp_path), cwd=str(ROOT))

    async def main():
        async with Client(params) as client:
            await client.call_tool("python", {"code": "kept = 6 * 7"})
            return await client.call_tool("python", {"code": "print(kept)"})

    result = anyio.run(main)
    assert not result.is_error and "stdout:\n42" in _texts(result)


def _descendants(pid: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@needs_bwrap
def test_a_session_that_ends_closes_its_sandbox(http_server):
    server = http_server_process()
    before = _descendants(server.pid)

    async def main():
        async with streamable_http_client(http_server) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            await session.call_tool("python", {"code": "x = 1"})
            during = _descendants(server.pid)
        for _ in range(50):  # the server unwinds the session after the client's DELETE
            if _descendants(server.pid) <= before:
                break
            await anyio.sleep(0.1)
        return during, _descendants(server.pid)

    during, after = anyio.run(main)
    assert during - before, "the session's sandbox should run as a child of the server"
    assert not (during - before) & after, "the sandbox outlived its session"


# ---- toolpath's client: mcp_servers in a spec ------------------------------------------------------------

def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


class SeeingPolicy(ScriptedPolicy):
    """A scripted policy that keeps the tool schemas it was offered."""

    offered: list = []

    def respond(self, messages, tools, **gen):
        SeeingPolicy.offered = tools
        return super().respond(messages, tools, **gen)


def spec(servers, **kw):
    return parse_spec({"id": "t", "instruction": "What time is it in Paris?", "model": "scripted:none.yaml",
                       "mcp_servers": servers, **kw})


def observations(store, run_id):
    return [o for s in store.steps(run_id) if s["node"] == "tools" for o in s["payload"]["observations"]]


TIME_SERVER = {"name": "time", "command": sys.executable, "args": ["-m", "mcp_server_time"], "timeout": 30}


def test_react_run_with_the_reference_time_server(store):
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is not installed (pip install mcp-server-time)")
    script = [call("get_current_time", timezone="Europe/Paris"), call("get_current_time", zone="Paris"),
              call("convert_time", source_timezone="Europe/Paris", time="12:00", target_timezone="Asia/Tokyo"),
              call("final_answer", answer="done")]
    policy = SeeingPolicy(script)
    r = run_episode(spec([{**TIME_SERVER, "tools": ["get_current_time", "convert_time"]}]), store, policy=policy)
    assert (r.status, r.answer) == ("finished", "done")
    offered = {t["name"]: t for t in policy.offered}
    assert {"get_current_time", "convert_time", "final_answer"} <= set(offered)
    assert offered["get_current_time"]["parameters"]["required"] == ["timezone"]
    now, bad, converted, _ = observations(store, r.run_id)
    assert not now.get("error") and '"timezone": "Europe/Paris"' in now["content"] and "datetime" in now["content"]
    assert bad["error"] and "'timezone' is a required property" in bad["content"]
    assert not converted.get("error") and "Asia/Tokyo" in converted["content"] and "20:00" in converted["content"]


def test_a_server_that_hangs_or_dies_is_an_error_observation(store):
    script = [call("hang"), call("echo", text="still here"), call("fail", reason="asked"), call("die"),
              call("echo", text="after"), call("final_answer", answer="went on")]
    servers = [{"name": "flaky", "command": sys.executable, "args": [str(FLAKY)], "timeout": 2}]
    r = run_episode(spec(servers), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "went on")
    hang, echo, fail, die, after, _ = observations(store, r.run_id)
    assert hang["error"] and "'flaky' did not answer within 2 s" in hang["content"]
    assert not echo.get("error") and echo["content"] == "still here"
    assert fail["error"] and fail["content"].startswith("fail: ")
    assert die["error"] and "'flaky' is gone" in die["content"] and "exiting on request" in die["content"]
    assert after["error"] and "flaky" in after["content"]


def test_our_client_against_our_server_over_http(store, http_server):
    script = [call("remote_crop", image="image_1", box=[0, 0, 4, 4]), call("remote_calculator", expression="6*7"),
              call("final_answer", answer="42")]
    servers = [{"name": "ours", "url": http_server, "prefix": "remote_", "tools": ["crop", "calculator"]}]
    r = run_episode(spec(servers), store, policy=ScriptedPolicy(script))
    assert r.status == "finished"
    crop, calc, _ = observations(store, r.run_id)
    assert "crop_1: 4x4 image" in crop["content"] and "[image remote_crop_1" in crop["content"]
    assert crop["artifacts"][0]["mime"] == "image/png" and Path(crop["artifacts"][0]["path"]).is_file()
    assert calc["content"] == "42"


def test_servers_that_cannot_start_stop_the_episode_before_it_starts(store):
    refuse = {"name": "refuser", "command": sys.executable, "args": [str(FLAKY), "--refuse"], "timeout": 20}
    with pytest.raises(EpisodeError, match=r"'refuser' could not start.*refusing to start"):
        run_episode(spec([refuse]), store, policy=ScriptedPolicy([]))
    missing = {"name": "flaky", "command": sys.executable, "args": [str(FLAKY)], "tools": ["echo", "teleport"]}
    with pytest.raises(EpisodeError, match=r"'flaky' has no tool 'teleport'; it offers: echo, tick, die, hang, fail"):
        run_episode(spec([missing]), store, policy=ScriptedPolicy([]))
    mute = {"name": "mute", "command": sys.executable, "args": [str(FLAKY), "--mute"], "start_timeout": 1}
    with pytest.raises(EpisodeError, match=r"'mute' did not answer initialize and tools/list within 1 s"):
        run_episode(spec([mute]), store, policy=ScriptedPolicy([]))
    closed = {"url": "http://127.0.0.1:9/mcp"}  # the discard port: nothing listens there
    with pytest.raises(EpisodeError, match=r"'http://127.0.0.1:9/mcp' could not start: ConnectError"):
        run_episode(spec([closed]), store, policy=ScriptedPolicy([]))
    nothing = {"name": "ghost", "command": "/nonexistent/mcp-server"}
    with pytest.raises(EpisodeError, match="'ghost' could not start"):
        run_episode(spec([nothing]), store, policy=ScriptedPolicy([]))
    twice = [{"name": n, "command": sys.executable, "args": [str(FLAKY)], "tools": ["echo"]} for n in ("a", "b")]
    with pytest.raises(EpisodeError, match="offers a tool named 'echo', which this episode already has; set"):
        run_episode(spec(twice), store, policy=ScriptedPolicy([]))
    assert store.list_runs() == []  # nothing was stored: none of them started


@pytest.mark.parametrize("server, field, message", [
    ({"command": "x", "url": "http://127.0.0.1:1/mcp"}, "mcp_servers[0]", "not both"),
    ({"name": "x"}, "mcp_servers[0]", "not neither"),
    ({"url": "ftp://127.0.0.1/mcp"}, "mcp_servers[0].url", "should match pattern"),
    ({"command": ""}, "mcp_servers[0].command", "at least 1 character"),
    ({"url": "http://127.0.0.1:1/mcp", "args": ["-v"]}, "mcp_servers[0]", "a `url` server takes neither"),
    ({"command": "x", "tools": []}, "mcp_servers[0].tools", "at least 1 item"),
    ({"command": "x", "timeout": 0}, "mcp_servers[0].timeout", "greater than 0"),
    ({"command": "x", "prefix": "a b"}, "mcp_servers[0].prefix", "should match pattern"),
    ({"command": "x", "port": 3}, "mcp_servers[0].port", "unknown field"),
    ({"command": "x", "env": {"API_KEY": "sk-live-1234567890abcdef"}}, "mcp_servers[0].env.API_KEY", "secret"),
])
def test_bad_mcp_servers_are_named_errors(server, field, message):
    with pytest.raises(SpecError) as err:
        spec([server])
    assert any(path == field and message in msg for path, msg in err.value.problems), err.value.problems


def test_serve_names_an_unknown_tool_a_bad_sandbox_or_a_taken_port(tmp_path):
    import socket

    from conftest import toolpath_cli

    r = toolpath_cli("mcp", "serve", "--tools", "calculator,teleport", home=tmp_path)
    assert r.returncode == 2 and "unknown tool 'teleport'" in r.stderr
    r = toolpath_cli("mcp", "serve", "--sandbox", "spaceship", home=tmp_path)
    assert r.returncode == 2 and "--sandbox 'spaceship' is not a sandbox kind" in r.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = toolpath_cli("mcp", "serve", "--http", port, "--tools", "calculator", home=tmp_path)
    assert r.returncode == 2 and f"cannot listen on 127.0.0.1:{port}: Address already in use" in r.stderr


def _processes_running(path: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(path).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_kill_9_then_resume_starts_the_servers_again(tmp_path, home):
    import json
    import signal
    import time

    from conftest import toolpath_cli, write

    ticks, n = tmp_path / "ticks.txt", 6
    responses = "".join(f"- {{delay: 0.4, tool_calls: [{{name: tick, arguments: {{label: t{i}}}}}]}}\n"
                        for i in range(1, n + 1))
    write(tmp_path / "r.yaml", responses + "- {tool_calls: [{name: final_answer, arguments: {answer: ticked}}]}\n")
    server = {"name": "flaky", "command": sys.executable, "args": [str(FLAKY)], "env": {"TICK_FILE": str(ticks)},
              "tools": ["tick"]}
    task = write(tmp_path / "task.json", json.dumps({
        "id": "mcp-ticker", "instruction": f"tick {n} times", "model": f"scripted:{tmp_path / 'r.yaml'}",
        "tools": ["final_answer"], "mcp_servers": [server], "limits": {"max_steps": 20}}))
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(task), "--json"], env=_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (ticks.exists() and len(ticks.read_text().split()) >= 2):
        if time.time() > deadline:
            proc.kill()
            pytest.fail("the run never reached its second tick: " + proc.communicate()[1])
        time.sleep(0.02)
    time.sleep(0.1)  # past the checkpoint write, into the next policy call's 0.4 s
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    for _ in range(50):  # the server reads the end of its stdin and exits with its client
        if not _processes_running(FLAKY):
            break
        time.sleep(0.1)
    assert not _processes_running(FLAKY), "the MCP server outlived the killed run"
    before = ticks.read_text().split()
    assert 2 <= len(before) < n

    from toolpath.runs import Store

    (run,) = Store(home).list_runs()
    r = toolpath_cli("resume", run["id"], "--json", home=home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["answer"], out["steps"]) == ("finished", "ticked", n + 1)
    assert ticks.read_text().split() == [f"t{i}" for i in range(1, n + 1)]  # none lost, none repeated
    assert not _processes_running(FLAKY)
