"""`toolpath serve` against hostile clients: one real server (uvicorn on 127.0.0.1) over a tiny random Llama,
with its time limits shrunk to a second so slow clients are cut off within the test. Hostile requests go as
raw HTTP (nothing fixes up their Host header or content type); ordinary ones through the official `openai`
client. Every hostile request must get a clean OpenAI-shaped refusal (or a closed connection, for one that
never finishes its request), never a 500, and the model must still answer afterwards."""

import json
import socket
import time

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
transformers = pytest.importorskip("transformers")

CONTEXT = 4096
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<eos>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
HELLO = [{"role": "user", "content": "hello"}]


def build_tiny_chat_model(folder):
    """A random two-layer Llama with a byte-level BPE tokenizer and a chat template; it never writes an end
    token (none is configured), so a long answer runs until max_tokens or a cancel."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["hello user assistant answer the question tool call"] * 4,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>"], show_progress=False,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    fast.chat_template = TEMPLATE
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=CONTEXT,
                                      eos_token_id=None, bos_token_id=None)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from toolpath import serve
    from toolpath.serve.limits import Limits
    from toolpath.spec import ModelSpec

    folder = build_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat"))
    limits = Limits(header_seconds=1, body_seconds=1, body_bytes=8 << 20, inflight_bytes=16 << 20)
    srv = serve.start(ModelSpec(name=f"hf:{folder}", max_new_tokens=4), model_id="tiny",
                      allowed_hosts=("models.lan",), limits=limits)
    yield srv
    srv.stop()


def raw(srv, head: str, body: bytes = b"") -> tuple[int, dict]:
    """Send a request exactly as written; -> (status, JSON body, or {"text": ...} when the HTTP layer answered
    in plain text). A connection closed unanswered is (0, {})."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as conn:
        conn.sendall(head.replace("\n", "\r\n").encode() + b"\r\n\r\n" + body)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    if not data:
        return 0, {}
    head_part, _, payload = data.partition(b"\r\n\r\n")
    try:
        return int(head_part.split()[1]), json.loads(payload or b"{}")
    except json.JSONDecodeError:
        return int(head_part.split()[1]), {"text": payload.decode(errors="replace")}


def post(srv, body, host="127.0.0.1", content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    ctype = f"\nContent-Type: {content_type}" if content_type else ""
    return raw(srv, f"POST /v1/chat/completions HTTP/1.1\nHost: {host}{ctype}\nContent-Length: {len(data)}\n"
                    f"Connection: close", data)


def chat(**fields):
    return {"model": "tiny", "messages": HELLO, **fields}


def client(srv):
    return openai.OpenAI(base_url=srv.url, api_key="unused", max_retries=0, timeout=60)


def refused(answer, status, code=None, param=None):
    got, body = answer
    assert got == status, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code is not None:
        assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    return error["message"]


# ---- a request the model cannot hold ------------------------------------------------------------------------

def test_a_prompt_over_the_context_is_refused_naming_the_counts(server):
    with pytest.raises(openai.BadRequestError) as err:
        client(server).chat.completions.create(model="tiny", max_tokens=16,
                                               messages=[{"role": "user", "content": "hello user " * 3000}])
    assert err.value.code == "context_length_exceeded"
    message = err.value.message
    assert f"{CONTEXT:,} tokens" in message and "max_tokens asks for 16" in message
    # max_tokens alone can overflow it too: the prompt fits, the answer asked for does not
    with pytest.raises(openai.BadRequestError, match="context_length_exceeded|over the model's context"):
        client(server).chat.completions.create(model="tiny", messages=HELLO, max_tokens=CONTEXT)


@pytest.mark.parametrize("fields, param", [
    ({"tools": [{"type": "function", "function": {"name": f"t{i}"}} for i in range(10_000)]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "t", "description": "x" * 70_000}}]}, "tools[0]"),
    ({"messages": HELLO * 100_000}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}] * 20_000}]},
     "messages[0].content[1024]"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"stop": "x" * 20_000}, "stop"),
])
def test_requests_too_big_to_hold_are_refused_naming_the_field(server, fields, param):
    body = chat(**fields)
    data = json.dumps(body).encode()
    assert len(data) < server.limits.body_bytes  # refused for its shape, not its size
    refused(post(server, data), 400, param=param)


def test_the_total_text_is_bounded_across_messages(server):
    from toolpath.serve.chat_request import MAX_TEXT_CHARS, Sizes

    sizes = Sizes()
    sizes.add_text("x" * (MAX_TEXT_CHARS - 1), "messages[0].content")
    with pytest.raises(Exception) as err:
        sizes.add_text("yy", "messages[1].content")
    assert err.value.status == 400 and err.value.param == "messages[1].content"


# ---- requests a web page could send -------------------------------------------------------------------------

@pytest.mark.parametrize("host, status", [
    ("evil.com", 403), ("127.0.0.1:80@evil.com", 400), ("127.0.0.1.evil.com", 403), ("localhost:80x", 400),
    ("[::1]:8000/..", 400), ("", 400),
])
def test_a_foreign_host_header_is_refused(server, host, status):
    refused(post(server, chat(), host=host), status)
    refused(raw(server, f"GET /v1/models HTTP/1.1\nHost: {host}\nConnection: close"), status)


def test_two_host_headers_are_refused(server):
    # h11 refuses it before the app sees it (a plain-text 400); the gate would too
    status, _ = raw(server, "GET /v1/models HTTP/1.1\nHost: 127.0.0.1\nHost: evil.com\nConnection: close")
    assert status == 400


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:8000", "[::1]:1", "models.lan", "MODELS.lan:9"])
def test_loopback_and_allowed_hosts_are_served(server, host):
    status, body = raw(server, f"GET /v1/models HTTP/1.1\nHost: {host}\nConnection: close")
    assert status == 200 and body["data"][0]["id"] == "tiny"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          None, "application/jsonx"])
def test_a_body_not_sent_as_json_is_refused(server, content_type):
    refused(post(server, chat(), content_type=content_type), 415, "unsupported_media_type")


def test_deep_json_is_a_400(server):
    refused(post(server, b"[" * 100_000), 400, "invalid_json")
    refused(post(server, b'{"model": "tiny", "messages": ' + b"[" * 65 + b"]" * 65 + b"}"), 400, "invalid_json")
    # a string of escaped quotes that never ends: a regex over the raw body took quadratic time on this
    refused(post(server, b'{"model": "tiny", "content": "' + b'\\"' * 500_000), 400, "invalid_json")
    # brackets inside strings are text, not nesting
    status, _ = post(server, chat(messages=[{"role": "user", "content": "[" * 500}]))
    assert status == 200


# ---- slow and large bodies ----------------------------------------------------------------------------------

def test_a_slow_body_is_cut_off_and_its_connection_closed(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as conn:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"model\"")
        data = b""
        while chunk := conn.recv(65536):  # the server answers and closes; the client never sent the rest
            data += chunk
    assert data.startswith(b"HTTP/1.1 408") and b"request_timeout" in data


def test_headers_that_never_end_lose_their_connection(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as conn:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert conn.recv(65536) == b""  # closed by the server, not by this client


def test_bodies_beyond_the_bytes_in_flight_get_a_503(server):
    size = server.limits.body_bytes  # each within one body's limit; together they fill the server's budget
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=60) for _ in range(2)]
    try:
        for conn in held:
            conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/json\r\n" + f"Content-Length: {size}\r\n\r\n{{".encode())
        wait_for(lambda: server.budget.held == 2 * size, "both bodies are being read")
        status, body = post(server, chat())
        assert status == 503 and body["error"]["code"] == "server_busy"
    finally:
        for conn in held:
            conn.close()
    wait_for(lambda: server.budget.held == 0, "the bytes are given back")


def test_an_oversized_body_is_a_413_before_it_is_read(server):
    refused(raw(server, "POST /v1/chat/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
                        f"Content-Length: {server.limits.body_bytes + 1}"), 413, "request_too_large")


# ---- clients that leave --------------------------------------------------------------------------------------

def start_request(srv, max_tokens):
    conn = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    data = json.dumps(chat(max_tokens=max_tokens)).encode()
    conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return conn


def wait_for(condition, what):
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_a_client_that_leaves_cancels_its_generation_and_its_queued_request(server):
    engine = server.engine
    dropped, runs = engine.dropped, len(engine.history)
    running = start_request(server, CONTEXT - 100)
    wait_for(lambda: engine.running is not None, "the first request runs")
    queued = start_request(server, 8)
    wait_for(lambda: engine.jobs.qsize() == 1, "the second request waits in the queue")
    queued.close()
    wait_for(lambda: engine.jobs.queue[0].cancelled.is_set(), "the queued request is cancelled")
    running.close()
    wait_for(lambda: len(engine.history) > runs and engine.jobs.qsize() == 0, "the queue empties")
    stopped = engine.history[-1]
    assert stopped["cancelled"] and stopped["tokens_out"] < CONTEXT - 100
    assert engine.dropped == dropped + 1 and len(engine.history) == runs + 1  # the queued one never ran
    # and the model answers the next request
    r = client(server).chat.completions.create(model="tiny", messages=HELLO, max_tokens=3)
    assert r.usage.completion_tokens == 3


def test_after_every_attack_a_normal_request_is_answered(server):
    r = client(server).chat.completions.create(model="tiny", messages=HELLO)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 4
    assert server.budget.held == 0  # every body's bytes were given back
