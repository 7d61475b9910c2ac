"""Secrets never leave: the redaction rules, the OpenAI policy against a server that quotes our headers back,
and the whole path end to end: `toolpath run` and `toolpath eval` in a subprocess against such a server,
then every place the key could land (stdout, stderr, every column of every row of the store, every file
under TOOLPATH_HOME, the viewer's pages and API answers) searched for it."""

import base64
import json
import secrets
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.request import urlopen

import pytest
from conftest import toolpath_cli, write

from toolpath.policies.base import PolicyError, load
from toolpath.redact import MARK, redact, redact_data, register_secret, strip_url_credentials
from toolpath.spec import ModelSpec
from toolpath.state import Message


def fresh_key() -> str:
    """A key no other test has registered, so nothing redacts it by accident."""
    return "sk-tp-" + secrets.token_hex(16)


# ---- the redaction rules ---------------------------------------------------------------------------------

def test_a_registered_secret_is_removed_in_the_forms_it_is_quoted_back_in():
    key = "sk-" + secrets.token_hex(8) + '/"\\+é'  # characters that JSON and URLs escape
    register_secret(key)
    for form in (key, json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1],
                 "sk-" + key[3:].replace("/", "%2F").replace('"', "%22").replace("\\", "%5C").replace("+", "%2B")
                 .replace("é", "%C3%A9")):
        assert redact(f"you sent {form}!") == f"you sent {MARK}!", form


def test_short_values_are_not_secrets():
    register_secret("abc")
    assert redact("abc def") == "abc def"


@pytest.mark.parametrize("text", [
    "Authorization: Bearer abcdefgh12345678",
    '{"authorization": "Bearer abcdefgh12345678"}',
    "{'Authorization': 'Basic dXNlcjpwYXNzd29yZDEyMw=='}",
    "x-api-key: abcdefgh12345678", "https://host/v1?api_key=abcdefgh12345678",
    "headers: [('authorization', 'Bearer abcdefgh12345678')]",
])
def test_authorization_headers_and_bearer_tokens_are_removed(text):
    out = redact(text)
    assert "abcdefgh12345678" not in out and "dXNlcjpwYXNzd29yZDEyMw" not in out and MARK in out


def test_url_credentials_are_removed_and_taken_apart():
    password = secrets.token_hex(10)
    said = redact(f"cannot reach http://bob:{password}@127.0.0.1:9/v1 now")
    assert said == f"cannot reach http://{MARK}@127.0.0.1:9/v1 now"
    url, pair = strip_url_credentials(f"https://bob:{password}%21@models.local:8443/v1")
    assert url == "https://models.local:8443/v1" and pair == ("bob", password + "!")
    basic = base64.b64encode(f"bob:{password}!".encode()).decode()
    # registered as it is, decoded, and as the Basic value a client sends: each is removed wherever it appears
    assert redact(f"{password}! {basic} {password}%21") == f"{MARK} {MARK} {MARK}"
    assert strip_url_credentials("http://127.0.0.1:8000/v1") == ("http://127.0.0.1:8000/v1", None)


def test_redact_data_reaches_every_string_keys_included():
    key = fresh_key()
    register_secret(key)
    out = redact_data({"a": [key, ("x", {key: 1})], "n": 3, "f": None})
    assert out == {"a": [MARK, ("x", {MARK: 1})], "n": 3, "f": None}


# ---- a server that quotes our headers back ---------------------------------------------------------------

class EchoServer:
    """An OpenAI-compatible server on 127.0.0.1 that quotes every request header back: in a 500 or 400 error
    body (`mode` "500", "400"), or as the model's reply (a 200 whose content is the headers)."""

    def __init__(self, mode: str):
        self.mode, self.seen = mode, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append(dict(self.headers))
                quoted = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
                if outer.mode == "200":
                    status, body = 200, {"choices": [{"message": {"role": "assistant",
                                                                  "content": "You sent me:\n" + quoted}}],
                                         "usage": {"prompt_tokens": 5, "completion_tokens": 5}}
                else:
                    status = int(outer.mode)
                    body = {"error": {"message": f"rejected; your request was:\n{quoted}",
                                      "headers": dict(self.headers)}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def echo(request):
    server = EchoServer(request.param)
    yield server
    server.close()


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("echo", ["500", "400"], indirect=True)
def test_the_policy_never_raises_the_key_a_server_quotes_back(echo, monkeypatch):
    key = fresh_key()
    monkeypatch.setenv("TP_MODEL_ACCESS", key)  # a name that does not say "key": registered by the policy
    monkeypatch.setenv("TOOLPATH_API_KEYS", f"TP_MODEL_ACCESS={echo.url}")  # the user allows it, for this server
    policy = load(ModelSpec(name="openai:m", base_url=echo.url, api_key_env="TP_MODEL_ACCESS",
                            options={"retries": 0}))
    with pytest.raises(PolicyError) as err:
        policy.respond([Message(role="user", content="hi")], [])
    assert echo.seen[0]["Authorization"] == f"Bearer {key}"  # the key did go out…
    assert key not in str(err.value) and key[:12] not in str(err.value)  # …and does not come back
    assert f"HTTP {echo.mode}" in str(err.value) and MARK in str(err.value)


@pytest.mark.parametrize("echo", ["200"], indirect=True)
def test_a_reply_that_quotes_the_key_is_redacted_before_anyone_sees_it(echo, monkeypatch):
    key = fresh_key()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("OPENAI_BASE_URL", echo.url)  # the key's own server
    resp = load(ModelSpec(name="openai:m", base_url=echo.url)).respond([Message(role="user", content="hi")], [])
    assert echo.seen[0]["Authorization"] == f"Bearer {key}"
    assert "You sent me" in resp.text and key not in resp.text and key not in resp.raw and MARK in resp.text


@pytest.mark.parametrize("echo", ["400"], indirect=True)
def test_credentials_in_the_base_url_are_sent_but_never_shown(echo, monkeypatch):
    password = fresh_key()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = echo.url.replace("http://", f"http://proxyuser:{password}@")
    policy = load(ModelSpec(name="openai:m", base_url=url, options={"retries": 0}))
    assert password not in policy.base_url and password not in policy.name
    assert policy.base_url == echo.url
    with pytest.raises(PolicyError) as err:
        policy.respond([Message(role="user", content="hi")], [])
    assert echo.seen[0]["Authorization"] == "Basic " + _basic("proxyuser", password)  # still authenticated
    text = str(err.value)
    assert password not in text and _basic("proxyuser", password) not in text and echo.url in text


def test_an_unreachable_url_with_credentials_is_named_without_them(monkeypatch):
    password = fresh_key()
    policy = load(ModelSpec(name="openai:m", base_url=f"http://u:{password}@127.0.0.1:9/v1", options={"retries": 0}))
    with pytest.raises(PolicyError, match="cannot reach http://127.0.0.1:9/v1") as err:
        policy.respond([Message(role="user", content="hi")], [])
    assert password not in str(err.value)


# ---- end to end: the CLI, the store, the files, the viewer ----------------------------------------------

def _scan_store(db: Path, needles: list[str]) -> list[str]:
    """Every table, every column of every row (text and blobs): where a needle is."""
    found = []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cur = conn.execute(f'SELECT * FROM "{table}"')
            cols = [d[0] for d in cur.description]
            for row in cur:
                for col, value in zip(cols, row):
                    data = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                    if isinstance(data, str) and any(n in data for n in needles):
                        found.append(f"store {table}.{col}")
    finally:
        conn.close()
    return sorted(set(found))


def _scan_files(home: Path, needles: list[str]) -> list[str]:
    """Every file under the home but the database (searched by rows above): artifacts, reports, logs."""
    raw = [n.encode() for n in needles]
    return sorted(f"file {p.relative_to(home)}" for p in home.rglob("*")
                  if p.is_file() and not p.name.startswith("runs.db") and any(n in p.read_bytes() for n in raw))


def _viewer_pages(home: Path) -> dict[str, str]:
    """Every page and API answer of the viewer over this store, by path."""
    from toolpath.viewer import serve

    server, url = serve(home, port=0)
    pages = {}

    def get(path: str) -> str:
        with urlopen(url.rstrip("/") + path, timeout=30) as r:
            pages[path] = r.read().decode()
        return pages[path]

    try:
        get("/")
        runs = json.loads(get("/api/runs?limit=10000"))["runs"]
        evals = json.loads(get("/api/evals?limit=10000"))["evals"]
        for run in runs:
            for path in (f"/runs/{run['id']}", f"/api/runs/{run['id']}", f"/api/runs/{run['id']}/steps?limit=10000"):
                get(path)
        for ev in evals:
            for path in (f"/evals/{ev['id']}", f"/api/evals/{ev['id']}", f"/api/evals/{ev['id']}/samples?limit=10000"):
                get(path)
    finally:
        server.shutdown()
        server.server_close()
    return pages


def _stored_places(home: Path, needles: list[str]) -> list[str]:
    """Where under this home a needle is: store rows, files, the viewer's pages and answers."""
    found = _scan_store(home / "runs.db", needles) + _scan_files(home, needles)
    return found + [f"viewer {path.split('?')[0]}" for path, text in _viewer_pages(home).items()
                    if any(n in text for n in needles)]


# Where the key is: OPENAI_API_KEY; a variable the spec names (model.api_key_env) whose name does not say it
# holds a secret; the user:password of OPENAI_BASE_URL; the user:password of the spec's own base_url. Each place
# and each way of quoting it back (500 and 400 error bodies, a 200 reply) at least once, `run` and `eval` both.
SCENARIOS = [("run", "500", "OPENAI_API_KEY"), ("run", "400", "api_key_env"), ("run", "200", "api_key_env"),
             ("run", "200", "OPENAI_BASE_URL"), ("run", "400", "spec base_url"), ("eval", "400", "OPENAI_API_KEY"),
             ("eval", "200", "OPENAI_BASE_URL")]
JSON_TOO = {("run", "500", "OPENAI_API_KEY"), ("run", "200", "api_key_env")}  # `run --json` prints its own way


def _setup(server: EchoServer, where: str, key: str, tmp_path: Path) -> tuple[dict, dict]:
    """(environment for the CLI, the spec's model) with the key placed `where`."""
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "", "TP_MODEL_ACCESS": ""}
    model = {"name": "openai:echo-model", "options": {"retries": 0}}
    with_credentials = server.url.replace("http://", f"http://proxyuser:{key}@")
    if where == "OPENAI_API_KEY":
        env["OPENAI_API_KEY"] = key
    elif where == "api_key_env":
        env["TP_MODEL_ACCESS"] = key
        env["TOOLPATH_API_KEYS"] = "TP_MODEL_ACCESS"  # the user allows it (for OPENAI_BASE_URL's server)
        model["api_key_env"] = "TP_MODEL_ACCESS"
    elif where == "OPENAI_BASE_URL":
        env["OPENAI_BASE_URL"] = with_credentials
    else:
        model["base_url"] = with_credentials
    return env, model


def _cli(outputs: dict, label: str, *args, home: Path, env: dict):
    """Run the CLI and keep what it printed, by label, to search later."""
    r = toolpath_cli(*args, home=home, env=env)
    outputs[f"{label} stdout"], outputs[f"{label} stderr"] = r.stdout, r.stderr
    return r


def _ids(home: Path, table: str) -> list[str]:
    if not (home / "runs.db").exists():
        return []
    with sqlite3.connect(f"file:{home / 'runs.db'}?mode=ro", uri=True) as db:
        return [r[0] for r in db.execute(f"SELECT id FROM {table} ORDER BY created")]


@pytest.mark.parametrize("command,mode,where", SCENARIOS, ids=["-".join(s).replace(" ", "_") for s in SCENARIOS])
def test_the_key_is_nowhere_after_a_run_or_an_eval(command, mode, where, tmp_path):
    server = EchoServer(mode)
    key, home, outputs = fresh_key(), tmp_path / "home", {}
    try:
        env, model = _setup(server, where, key, tmp_path)
        if command == "run":
            task = write(tmp_path / "task.yaml", json.dumps({"id": "echo", "instruction": "What is 2 + 3?",
                                                            "model": model, "tools": ["calculator"]}))
            r = _cli(outputs, "run", "run", task, home=home, env=env)
            assert r.returncode in (0, 1, 2), r.stderr
            if (command, mode, where) in JSON_TOO:
                _cli(outputs, "run --json", "run", task, "--json", home=home, env=env)
        else:
            r = _cli(outputs, "eval", "eval", "arith", "--limit", "1", "--model", "openai:echo-model", "--retries", "1",
                     home=home, env=env)
            assert r.returncode in (0, 1), r.stderr
            for eval_id in _ids(home, "evals"):
                _cli(outputs, "report", "report", eval_id, home=home, env=env)
        if where != "spec base_url":  # a spec holding credentials may be refused: then the server saw nothing
            assert server.seen, "the run never reached the server: the test would prove nothing"
        for run_id in _ids(home, "runs")[-1:]:
            _cli(outputs, "runs show", "runs", "show", run_id, home=home, env=env)
        if where == "OPENAI_BASE_URL":  # the one command that prints the environment's server
            _cli(outputs, "models list", "models", "list", home=home, env=env)
        needles = [key, key[:14], _basic("proxyuser", key)]  # the key, a cut one, and inside Basic authorization
        found = [name for name, text in outputs.items() if any(n in text for n in needles)]
        if home.exists():
            found += _stored_places(home, needles)
        assert found == [], f"the key leaks into {len(found)} places: {found}"
    finally:
        server.close()


# ---- which variables a spec may name as its key, and where each key goes ----------------------------------
# Two real servers on 127.0.0.1 that record every request's headers: "home", the server the user configured
# (OPENAI_BASE_URL), and "elsewhere", one a spec points base_url at. A spec may come from anyone: a variable the
# user did not allow is never read, and an allowed key reaches only the server the user gave it for.

@pytest.fixture(scope="module")
def two_servers():
    home, elsewhere = EchoServer("200"), EchoServer("401")
    yield home, elsewhere
    home.close()
    elsewhere.close()


@pytest.fixture
def keys(two_servers, monkeypatch):
    """Fresh keys in OPENAI_API_KEY, MY_API_KEY, OTHER_API_KEY and GITHUB_TOKEN, OPENAI_BASE_URL at the home
    server, nothing allowed beyond the default, and both servers' records emptied; the keys by name."""
    home, elsewhere = two_servers
    home.seen.clear(), elsewhere.seen.clear()
    values = {name: fresh_key() for name in ("OPENAI_API_KEY", "MY_API_KEY", "OTHER_API_KEY", "GITHUB_TOKEN")}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_BASE_URL", home.url)
    monkeypatch.delenv("TOOLPATH_API_KEYS", raising=False)
    return values


def _bearers(server: EchoServer) -> list[str]:
    return [h.get("Authorization", "") for h in server.seen]


def _ask(model: dict) -> str:
    """One request through the policy a spec's model gives; the error's text when it fails."""
    try:
        load(ModelSpec(name="openai:m", options={"retries": 0}, **model)).respond([Message(role="user", content="hi")],
                                                                                 [])
    except PolicyError as err:
        return str(err)
    return ""


def test_only_allowed_variables_are_read_and_each_key_goes_only_to_its_server(two_servers, keys, monkeypatch):
    home, elsewhere = two_servers
    assert _ask({}) == "" and _bearers(home) == [f"Bearer {keys['OPENAI_API_KEY']}"]  # the default, to its server
    said = _ask({"base_url": elsewhere.url})  # a spec pointing the default key elsewhere: it goes without
    assert _bearers(elsewhere) == [""] and "no key was sent" in said and "TOOLPATH_API_KEYS" in said
    for name in ("GITHUB_TOKEN", "MY_API_KEY"):  # never allowed, or not yet: refused before any request
        said = _ask({"api_key_env": name, "base_url": elsewhere.url})
        assert "model.api_key_env" in said and f"--api-key-env {name}" in said and keys[name] not in said
    monkeypatch.setenv("TOOLPATH_API_KEYS", "MY_API_KEY")  # allowed by the user, for the configured server
    assert _ask({"api_key_env": "MY_API_KEY"}) == "" and _bearers(home)[-1] == f"Bearer {keys['MY_API_KEY']}"
    _ask({"api_key_env": "MY_API_KEY", "base_url": elsewhere.url})
    monkeypatch.setenv("TOOLPATH_API_KEYS", f"*_API_KEY={elsewhere.url}")  # a pattern, bound to the other server
    _ask({"api_key_env": "OTHER_API_KEY", "base_url": elsewhere.url})
    assert "model.api_key_env" in _ask({"api_key_env": "GITHUB_TOKEN", "base_url": elsewhere.url})
    assert _bearers(elsewhere) == ["", "", f"Bearer {keys['OTHER_API_KEY']}"]
    sent = " ".join(_bearers(home) + _bearers(elsewhere))
    assert keys["GITHUB_TOKEN"] not in sent  # a variable the user never allowed is never read


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{other}/v1",  # the same host on another port
    "https://127.0.0.1:{port}/v1",  # another scheme
    "http://localhost:{port}/v1",  # another name for it
    "http://127.0.0.1:{port}/v10",  # a path beside the one given, not under it
    "http://127.0.0.1:{port}@127.0.0.1:{other}/v1",  # the server's address as credentials of another one
])
def test_a_key_is_not_sent_to_a_lookalike_of_its_server(url, two_servers, keys):
    from toolpath.spec_secrets import key_goes_to

    home, elsewhere = two_servers
    assert key_goes_to("OPENAI_API_KEY", home.url) and key_goes_to("OPENAI_API_KEY", home.url + "/sub")
    assert not key_goes_to("OPENAI_API_KEY", url.format(port=home.port, other=elsewhere.port))


def test_a_key_the_spec_may_not_name_is_refused_at_spec_time(two_servers, keys, tmp_path, home, capsys):
    from toolpath import cli

    home_server, elsewhere = two_servers
    graph = {"nodes": {"decide": {"policy": "say hi", "model": {"name": "openai:m", "base_url": elsewhere.url,
                                                                "api_key_env": "GITHUB_TOKEN"}}}}
    specs = {"model.api_key_env": {"model": {"name": "openai:m", "base_url": elsewhere.url,
                                             "api_key_env": "GITHUB_TOKEN"}},
             "agent.params.nodes.decide.model.api_key_env": {"model": "scripted:x", "agent": {"name": "graph",
                                                                                              "params": graph}}}
    for field, fields in specs.items():
        task = write(tmp_path / f"{field}.json", json.dumps({"id": "t", "instruction": "hi", **fields}))
        assert cli.main(["run", str(task)]) == 2
        err = capsys.readouterr().err
        assert str(task) in err and field in err and "--api-key-env GITHUB_TOKEN" in err
        assert keys["GITHUB_TOKEN"] not in err and "Traceback" not in err
    assert home_server.seen == [] and elsewhere.seen == [] and not (home / "runs.db").exists()


def test_the_user_binds_a_key_to_a_server_on_the_command_line(two_servers, keys, tmp_path, home, monkeypatch):
    from toolpath import cli

    home_server, elsewhere = two_servers
    elsewhere.mode = "200"
    monkeypatch.setenv("TOOLPATH_API_KEYS", "")  # the flags add to it: undone after the test
    try:
        for args, model, where in [
            (["--api-key-env", "MY_API_KEY"], {"api_key_env": "MY_API_KEY"}, home_server),
            (["--api-key-env", f"MY_API_KEY={elsewhere.url}"], {"api_key_env": "MY_API_KEY", "base_url": elsewhere.url},
             elsewhere),
            (["--base-url", elsewhere.url], {}, elsewhere),  # the user named the server: the default key goes there
        ]:
            monkeypatch.setenv("TOOLPATH_API_KEYS", "")
            task = write(tmp_path / "task.json", json.dumps({"id": "t", "instruction": "hi", "tools": [],
                                                             "model": {"name": "openai:m", **model},
                                                             "limits": {"max_steps": 1}}))
            assert cli.main(["run", str(task), "-q", *args]) in (0, 1)
            name = model.get("api_key_env", "OPENAI_API_KEY")
            assert _bearers(where) == [f"Bearer {keys[name]}"], args
            home_server.seen.clear(), elsewhere.seen.clear()
    finally:
        elsewhere.mode = "401"
