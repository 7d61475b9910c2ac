"""The viewer against hostile requests and a store written by older versions: every answer is a clean HTTP reply
(never a dropped connection), strict JSON, and only for a request addressed to this machine's loopback."""

import json
import re
import secrets
import socket
import sqlite3
import time

import pytest

from toolpath.runs import Store

OLD_PAYLOAD = '{"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"id": "c1", "name": "click", ' \
              '"arguments": {"x": NaN, "y": Infinity, "z": -Infinity}}]}], "text": "half a pair: \\ud800"}'


def write_old_run(home, payload: str = OLD_PAYLOAD) -> str:
    """A run whose step was written the way stores did before they kept JSON strict: bare NaN and Infinity,
    and a lone surrogate escape. Put in with SQL, as today's store would clean it on the way in."""
    store = Store(home)
    run_id = store.create_run(json.dumps({"id": "old"}), "old", "put:old", "react")
    store.put_step(run_id, 0, "task", {"messages": [{"role": "user", "content": "click"}]}, time.time(), 0.0)
    store.put_step(run_id, 1, "policy", {"messages": []}, time.time(), 0.0)
    store.update_run(run_id, status="finished", steps=2)
    store.close()
    with sqlite3.connect(home / "runs.db") as db:
        db.execute("UPDATE steps SET payload = ? WHERE run_id = ? AND seq = 1", (payload, run_id))
    return run_id


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    from toolpath.viewer import serve

    home = tmp_path_factory.mktemp("viewer-http") / "home"
    run_id = write_old_run(home)
    store = Store(home)
    eval_id = store.create_eval("arith", "put", {}, 1)
    store.put_eval_sample(eval_id, "arith/0", run_id, "add", "finished", 1.0, 1, 0.1, {"answer": "ok"})
    store.close()
    server, url = serve(home, port=0)
    yield {"port": server.server_address[1], "run": run_id, "eval": eval_id}
    server.shutdown()
    server.server_close()


def request(viewer, head: str) -> tuple[int, str]:
    """Send a request as written (no client fixing up its Host header) and read the whole answer: (status, body).
    A dropped connection is a status of 0."""
    with socket.create_connection(("127.0.0.1", viewer["port"]), timeout=30) as conn:
        conn.sendall(head.replace("\n", "\r\n").encode() + b"\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    if not data:
        return 0, ""
    head_part, _, body = data.partition(b"\r\n\r\n")
    return int(head_part.split()[1]), body.decode()


def get(viewer, path: str, host: str = "127.0.0.1") -> tuple[int, str]:
    return request(viewer, f"GET {path} HTTP/1.0\nHost: {host}")


def strict_json(text: str):
    def refuse(constant):
        raise AssertionError(f"invalid JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


# ---- a store from before strict JSON -------------------------------------------------------------------

def test_steps_with_nan_are_served_as_strict_json(viewer):
    status, body = get(viewer, f"/api/runs/{viewer['run']}/steps")
    page = strict_json(body)
    assert status == 200 and page["total"] == 2 and len(page["steps"]) == 2
    policy = page["steps"][1]["payload"]
    assert policy["messages"][0]["tool_calls"][0]["arguments"] == {"x": None, "y": None, "z": None}
    assert policy["text"].startswith("half a pair: ")  # the lone surrogate is still shown, as U+FFFD


def test_the_run_page_inlines_strict_json(viewer):
    status, html = get(viewer, f"/runs/{viewer['run']}")
    inlined = re.search(r"<script type=application/json id=first-page>(.*?)</script>", html, re.S)
    assert status == 200 and inlined
    assert len(strict_json(inlined.group(1))["steps"]) == 2


# ---- numbers in queries --------------------------------------------------------------------------------

def _numeric_params(viewer) -> list[tuple[str, str]]:
    run, ev = viewer["run"], viewer["eval"]
    return [("/api/runs", "offset"), ("/api/runs", "limit"), ("/api/evals", "offset"), ("/api/evals", "limit"),
            (f"/api/runs/{run}/steps", "offset"), (f"/api/runs/{run}/steps", "limit"),
            (f"/api/evals/{ev}/samples", "offset"), (f"/api/evals/{ev}/samples", "limit"),
            ("/", "runs"), ("/", "evals"), (f"/runs/{run}", "page_size"), (f"/evals/{ev}", "offset")]


@pytest.mark.parametrize("value", ["99999999999999999999999", "9223372036854775808", "1" + "0" * 5000,
                                   "-99999999999999999999999", "1_0", "+5", "%205", "%D9%A5", "0x10", "1e3", "NaN"])
def test_every_numeric_parameter_answers_400_naming_itself(viewer, value):
    for path, name in _numeric_params(viewer):
        status, body = get(viewer, f"{path}?{name}={value}")
        assert status == 400, (path, name, value, status)
        assert f"query parameter {name}=" in body, (path, name, body[:200])
        if path.startswith("/api/"):
            assert strict_json(body)["status"] == 400


def test_a_numeric_parameter_given_twice_is_refused(viewer):
    for path, name in _numeric_params(viewer):
        status, body = get(viewer, f"{path}?{name}=1&{name}=2")
        assert status == 400 and f"query parameter {name} is given 2 times" in body, (path, name)


def test_the_largest_offset_is_an_empty_page(viewer):
    status, body = get(viewer, "/api/runs?offset=9007199254740991")
    assert status == 200 and strict_json(body)["runs"] == []


# ---- the Host header -----------------------------------------------------------------------------------

@pytest.mark.parametrize("head", [
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1:80@evil.com",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1\nHost: evil.com",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1\nHost: 127.0.0.1",
    "GET /api/runs HTTP/1.0",
    "GET /api/runs HTTP/1.0\nHost: ",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1:0",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1:65536",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1:80:80",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1/evil",
    "GET /api/runs HTTP/1.0\nHost: localhost.",
    "GET /api/runs HTTP/1.0\nHost: [::1",
    "GET /api/runs HTTP/1.0\nHost: 127.0.0.1 evil.com",
    "GET http://evil.com/api/runs HTTP/1.1\nHost: 127.0.0.1",
])
def test_a_malformed_or_repeated_host_is_refused(viewer, head):
    status, body = request(viewer, head)
    assert status == 400 and "runs" not in strict_json(body)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.2", "localhost.evil.com"])
def test_another_host_name_is_refused(viewer, host):
    status, body = get(viewer, "/api/runs", host)
    assert status == 403 and "not this viewer's" in strict_json(body)["error"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]", "[::1]:65535"])
def test_our_own_names_are_served(viewer, host):
    status, body = get(viewer, "/api/runs", host)
    assert status == 200 and strict_json(body)["total"] == 1


# ---- secrets left in an old store ------------------------------------------------------------------------

def test_a_secret_left_in_an_old_store_is_not_served(tmp_path, monkeypatch):
    """A store written before errors and steps were redacted: the viewer redacts what it knows (the key in the
    environment, a URL's credentials, an Authorization header) from every page and answer."""
    from toolpath.viewer import serve

    key, password = "sk-tp-" + secrets.token_hex(16), secrets.token_hex(12)
    echoed = f"server said: Authorization: Bearer {key}; from http://user:{password}@127.0.0.1:9/v1"
    home = tmp_path / "home"
    run_id = write_old_run(home, json.dumps({"messages": [{"role": "assistant", "content": echoed}], "raw": echoed}))
    with sqlite3.connect(home / "runs.db") as db:
        db.execute("UPDATE runs SET error = ?, answer = ?, spec = ? WHERE id = ?",
                   (echoed, echoed, json.dumps({"id": "old", "instruction": echoed}), run_id))
    monkeypatch.setenv("OPENAI_API_KEY", key)
    server, _ = serve(home, port=0)
    try:
        site = {"port": server.server_address[1]}
        for path in ["/", "/api/runs", f"/runs/{run_id}", f"/api/runs/{run_id}", f"/api/runs/{run_id}/steps"]:
            status, body = get(site, path)
            assert status == 200 and ("server said" in body or path == "/"), path
            assert key not in body and password not in body, path
    finally:
        server.shutdown()
        server.server_close()


def test_a_row_the_viewer_cannot_show_is_a_500_that_says_so(tmp_path, capsys):
    """An unexpected failure (here a hand-edited row) is answered, never a dropped connection."""
    from toolpath.viewer import serve

    home = tmp_path / "home"
    run_id = write_old_run(home)
    with sqlite3.connect(home / "runs.db") as db:
        db.execute("UPDATE runs SET created = 'yesterday' WHERE id = ?", (run_id,))
    server, _ = serve(home, port=0)
    try:
        site = {"port": server.server_address[1]}
        status, body = get(site, f"/runs/{run_id}")
        assert status == 500 and "the viewer failed: TypeError" in body
        status, body = get(site, "/api/runs")  # the rest of the store is still served
        assert status == 200 and strict_json(body)["runs"][0]["created"] == "yesterday"
    finally:
        server.shutdown()
        server.server_close()
    assert f"GET '/runs/{run_id}' failed: " in capsys.readouterr().err
