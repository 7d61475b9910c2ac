"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 that speaks the wire protocol."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolpath.agents.episode import run_episode
from toolpath.policies.base import PolicyError, load
from toolpath.spec import ModelSpec, parse_spec
from toolpath.state import ArtifactRef, Message


class FakeServer:
    def __init__(self, replies):
        self.replies = list(replies)  # each: (status, body dict)
        self.requests = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                status, reply = outer.replies.pop(0)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def reply(content=None, tool_calls=None, usage=(11, 7)):
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [{"id": f"x{i}", "type": "function", "function": {"name": n, "arguments": a}}
                             for i, (n, a) in enumerate(tool_calls)]
    return 200, {"choices": [{"message": msg}], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}


@pytest.fixture
def server(request):
    s = FakeServer(request.param)
    yield s
    s.close()


@pytest.mark.parametrize("server", [[reply(tool_calls=[("calculator", '{"expression": "2+3"}')]),
                                     reply(content="The answer is 5.")]], indirect=True)
def test_react_run_through_an_openai_server(server, store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # the key's server: a spec's base_url elsewhere gets no key
    spec = parse_spec({"id": "t", "instruction": "What is 2+3?",
                       "model": {"name": "openai:test-model", "base_url": server.url}, "tools": ["calculator"]})
    r = run_episode(spec, store)
    assert (r.status, r.answer, r.tokens_in, r.tokens_out) == ("finished", "The answer is 5.", 22, 14)
    first, second = server.requests
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert first["body"]["model"] == "test-model"
    assert {t["function"]["name"] for t in first["body"]["tools"]} == {"calculator", "final_answer"}
    # the tool result goes back as a tool message tied to the call id
    tool_msg = second["body"]["messages"][-1]
    assert tool_msg == {"role": "tool", "tool_call_id": "x0", "content": "5"}
    assert second["body"]["messages"][-2]["tool_calls"][0]["function"]["name"] == "calculator"


@pytest.mark.parametrize("server", [[reply(tool_calls=[("calculator", '{"expression": "2+')])]], indirect=True)
def test_garbled_arguments_become_an_issue(server):
    p = load(ModelSpec(name="openai:m", base_url=server.url))
    resp = p.respond([Message(role="user", content="hi")], [])
    assert resp.tool_calls == [] and "not valid JSON" in resp.issues[0]


@pytest.mark.parametrize("server", [[(503, {"error": "busy"}), reply(content="ok")]], indirect=True)
def test_transient_errors_are_retried(server):
    p = load(ModelSpec(name="openai:m2", base_url=server.url, options={"retries": 2}))
    assert p.respond([Message(role="user", content="hi")], []).text == "ok"
    assert len(server.requests) == 2


@pytest.mark.parametrize("server", [[(400, {"error": "bad model"})]], indirect=True)
def test_client_errors_are_not_retried(server):
    p = load(ModelSpec(name="openai:m3", base_url=server.url))
    with pytest.raises(PolicyError, match="HTTP 400.*bad model"):
        p.respond([Message(role="user", content="hi")], [])
    assert len(server.requests) == 1


@pytest.mark.parametrize("server", [[reply(content="a cat")]], indirect=True)
def test_images_are_sent_as_data_urls(server, store):
    ref = store.put_artifact(b"\x89PNG\r\n\x1a\nabc", name="cat.png")
    p = load(ModelSpec(name="openai:m4", base_url=server.url))
    p.respond([Message(role="user", content="what is this?", images=[ArtifactRef(**ref.model_dump())])], [])
    parts = server.requests[0]["body"]["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "what is this?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_unreachable_server_is_a_transient_policy_error():
    p = load(ModelSpec(name="openai:m5", base_url="http://127.0.0.1:9/v1", options={"retries": 0}))
    with pytest.raises(PolicyError, match="cannot reach") as ei:
        p.respond([Message(role="user", content="hi")], [])
    assert ei.value.transient


def test_no_server_and_no_key_is_refused_before_any_request(home, tmp_path, monkeypatch):
    from conftest import toolpath_cli, write

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(PolicyError, match="needs a server"):
        load(ModelSpec(name="openai:nokey"))
    task = write(tmp_path / "t.yaml", "id: t\ninstruction: hi\nmodel: openai:gpt-4.1-mini\n")
    r = toolpath_cli("run", task, home=home, env={"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""})
    assert r.returncode == 2 and "needs a server" in r.stderr


@pytest.mark.parametrize("server", [[reply(content='<think>add</think><tool_call>{"name": "calculator", '
                                                  '"arguments": {"expression": "2+3"}}'),
                                     reply(content="<think>done</think><answer>5</answer>")]], indirect=True)
def test_a_text_grammar_is_taught_in_the_prompt_and_cut_at_its_stop_sequences(server, store):
    spec = parse_spec({"id": "t", "instruction": "What is 2+3?", "model": {"name": "openai:m", "base_url": server.url},
                       "tools": ["calculator"], "agent": {"name": "react", "params": {"format": "deepeyes"}}})
    r = run_episode(spec, store)
    assert (r.status, r.answer) == ("finished", "5")
    first, second = (q["body"] for q in server.requests)
    assert "tools" not in first and first["stop"] == ["</code>", "</tool_call>"]
    assert "<answer>" in first["messages"][0]["content"] and first["messages"][0]["role"] == "system"
    # its own call goes back in the grammar, the result as a user turn
    assert second["messages"][-2] == {"role": "assistant", "content": '<think>add</think>\n<tool_call>{"name": '
                                      '"calculator", "arguments": {"expression": "2+3"}}</tool_call>'}
    assert second["messages"][-1] == {"role": "user", "content": "Result of calculator:\n5"}
