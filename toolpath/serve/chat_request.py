"""An OpenAI chat-completions request body, checked and turned into what a toolpath policy takes.

Every problem is an `APIError` naming the parameter (`messages[2].content[1].image_url.url`) the way OpenAI's
own errors do, so a client shows the user what to fix. Parameters we cannot honour are refused by name rather
than ignored: a client that asked for `n: 3` or `logprobs` must not believe it got them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..policies.formats import JSONFormat, Parsed
from ..state import ArtifactRef, Message, NotPlainJSON, ToolCall

MAX_TOKENS_LIMIT = 32768  # ModelSpec.max_new_tokens' own bound
MAX_STOPS = 4  # as OpenAI's API
# Each stop string is matched against every token the model writes (transformers builds tables per string):
# a long one costs time and memory at every step, and nothing a client means to stop at is this long.
MAX_STOP_CHARS = 64
# The shape of one request: a model's context holds far less than this, but every item costs parsing and
# prompt-building time before the context check can see it, so the count is bounded first, by name.
MAX_TOOLS = 128  # as OpenAI's API
MAX_TOOL_CHARS = 64 << 10  # one tool's name, description and parameters, as JSON
MAX_MESSAGES = 2048
MAX_PARTS = 1024  # content parts in all messages together
MAX_IMAGES = 32
MAX_TEXT_CHARS = 2 << 20  # all text of the messages and tools together (a few times any served context)
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Accepted and ignored whatever their value: they change nothing about the answer.
IGNORED = {"user", "metadata", "store", "parallel_tool_calls", "service_tier", "stream_options"}
# Accepted when they ask for nothing (their default), refused otherwise.
DEFAULTS = {"logprobs": (False, None), "presence_penalty": (0, 0.0, None), "frequency_penalty": (0, 0.0, None),
            "response_format": (None, {"type": "text"}), "modalities": (None, ["text"]), "top_logprobs": (None, 0)}
HANDLED = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "seed", "n",
           "stream", "tools", "tool_choice"}


class APIError(Exception):
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with its HTTP status."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.kind = kind or ("invalid_request_error" if status < 500 else "server_error")
        self.headers: dict[str, str] = {}  # sent with the answer (Retry-After, Connection: close)

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None, code: str | None = "invalid_value") -> APIError:
    return APIError(400, message, param, code)


class PlainText(JSONFormat):
    """The reply read as it is, for requests that offer no tools: nothing in it is a call (the JSON grammar
    would read a bare JSON object in an answer as one), and `</tool_call>` stops nothing."""

    name = "text"
    stop: tuple[str, ...] = ()

    def parse(self, text: str, id_prefix: str = "call") -> Parsed:
        return Parsed(content=text)


PLAIN_TEXT = PlainText()
TOOL_GRAMMAR = JSONFormat()


@dataclass
class ChatRequest:
    messages: list[Message]
    tools: list[dict]  # toolpath tool schemas: name, description, parameters
    generation: dict[str, Any]  # temperature, max_new_tokens, top_p, seed, stop, format, tool_choice (when forced)
    stream: bool = False
    include_usage: bool = False
    images: int = 0
    files: list[Path] = field(default_factory=list)  # the decoded images, removed when the request is done


class Sizes:
    """Running totals of what a request holds, each refused by name at the item that crosses its bound."""

    def __init__(self):
        self.text = 0
        self.parts = 0

    def add_text(self, text: str, where: str) -> None:
        self.text += len(text)
        if self.text > MAX_TEXT_CHARS:
            raise bad(f"{where}: the request's text is over {MAX_TEXT_CHARS:,} characters in all (messages and "
                      f"tools together)", where, "request_too_large")

    def add_part(self, where: str) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise bad(f"{where}: the request has more than {MAX_PARTS} content parts in all", where,
                      "request_too_large")


def check_model(body: dict, served: str) -> None:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("you must give `model`: the name of the served model", "model", "missing_required_parameter")
    if model != served:
        raise APIError(404, f"the model {model!r} does not exist here; this server serves {served!r}", "model",
                       "model_not_found")


def _number(body: dict, key: str, low: float, high: float, integer: bool = False, low_open: bool = False) -> Any:
    value = body.get(key)
    if value is None:
        return None
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise bad(f"`{key}` must be {'an integer' if integer else 'a number'}, got {json.dumps(value)[:40]}", key)
    if value < low or value > high or (low_open and value == low):
        raise bad(f"`{key}` must be {'above' if low_open else 'at least'} {low} and at most {high}, got {value}", key)
    return value


def _refuse_unsupported(body: dict) -> None:
    for key, value in body.items():
        if key in HANDLED or key in IGNORED:
            continue
        if key in DEFAULTS:
            if value not in DEFAULTS[key]:
                raise bad(f"`{key}` is not supported by this server (only its default)", key, "unsupported_parameter")
            continue
        if value is not None:
            raise bad(f"`{key}` is not supported by this server", key, "unsupported_parameter")


def _generation(body: dict, grammar) -> dict:
    gen: dict[str, Any] = {"format": grammar}
    n = _number(body, "n", 1, 1e9, integer=True)
    if n not in (None, 1):
        raise bad(f"`n` must be 1 here (one choice per request), got {n}", "n", "unsupported_value")
    given = {k: _number(body, k, 1, MAX_TOKENS_LIMIT, integer=True) for k in ("max_completion_tokens", "max_tokens")}
    max_new = given["max_completion_tokens"] or given["max_tokens"]
    if max_new is not None:
        gen["max_new_tokens"] = max_new
    temperature = _number(body, "temperature", 0, 2)
    if temperature is not None:
        gen["temperature"] = float(temperature)
    top_p = _number(body, "top_p", 0, 1, low_open=True)
    if top_p is not None:
        gen["top_p"] = float(top_p)
    seed = _number(body, "seed", -2**63, 2**63 - 1, integer=True)
    if seed is not None:
        gen["seed"] = seed % 2**32  # torch.manual_seed takes what fits in 64 unsigned bits; a negative one does not
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > MAX_STOPS:
            raise bad(f"`stop` must be a non-empty string or a list of at most {MAX_STOPS} of them", "stop")
        longest = max(len(s) for s in stops)
        if longest > MAX_STOP_CHARS:
            raise bad(f"`stop` strings may be at most {MAX_STOP_CHARS} characters, got one of {longest:,}", "stop")
        gen["stop"] = stops
    return gen


def _tool_choice(choice: Any, schemas: list[dict]) -> str | dict | None:
    """`tool_choice` as the policy takes it: None (auto), "required", or {"name": NAME} of an offered tool. The
    local model is made to call by starting its reply with its call format's opener (policies/hf.py)."""
    if choice in (None, "auto", "none"):
        return None
    if choice == "required":
        return "required"
    fn = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise bad(f"`tool_choice` must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": "
                  f"{{\"name\": ...}}}}, got {json.dumps(choice)[:60]}", "tool_choice")
    if fn["name"] not in {s["name"] for s in schemas}:
        raise bad(f"`tool_choice` names the function {fn['name'][:64]!r}, which `tools` does not list",
                  "tool_choice.function.name")
    return {"name": fn["name"]}


def _tools(body: dict, sizes: Sizes) -> tuple[list[dict], str | dict | None]:
    """The offered tools (none when `tool_choice` is "none") and the call the model must make, if any."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if tools is None:
        if choice not in (None, "none", "auto"):
            raise bad(f"`tool_choice` {json.dumps(choice)[:60]} needs `tools`, and none were given", "tool_choice")
        return [], None
    if not isinstance(tools, list):
        raise bad("`tools` must be a list of function tools", "tools", "invalid_type")
    if len(tools) > MAX_TOOLS:
        raise bad(f"`tools` may list at most {MAX_TOOLS} tools, got {len(tools):,}", "tools", "request_too_large")
    schemas = []
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            raise bad(f"{where} must be {{\"type\": \"function\", \"function\": {{...}}}}", where)
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise bad(f"{where}.function.name must be 1 to 64 letters, digits, _ or -", f"{where}.function.name")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise bad(f"{where}.function.parameters must be a JSON Schema object", f"{where}.function.parameters")
        description = fn.get("description") or ""
        if not isinstance(description, str):
            raise bad(f"{where}.function.description must be a string", f"{where}.function.description")
        size = len(json.dumps([name, description, params]))
        if size > MAX_TOOL_CHARS:
            raise bad(f"{where} is {size:,} characters as JSON; a tool may take at most {MAX_TOOL_CHARS:,}", where,
                      "request_too_large")
        sizes.add_text(description + json.dumps(params), where)
        schemas.append({"name": name, "description": description, "parameters": params})
    forced = _tool_choice(choice, schemas)
    return ([], None) if choice == "none" else (schemas, forced)


def _text(content: Any, where: str, sizes: Sizes) -> str:
    """A message's content that may only be text: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        sizes.add_text(content, where)
        return content
    if isinstance(content, list):
        out = []
        for j, part in enumerate(content):
            sizes.add_part(f"{where}[{j}]")
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad(f"{where}[{j}] must be a text part here", f"{where}[{j}]")
            sizes.add_text(part["text"], f"{where}[{j}]")
            out.append(part["text"])
        return "\n".join(out)
    raise bad(f"{where} must be a string or a list of content parts", where, "invalid_type")


def _image(url: Any, where: str, folder: Path, number: int) -> tuple[ArtifactRef, Path]:
    """A `data:` URL decoded to a file in `folder`; a remote URL is refused: the server reads nothing from the
    network, so a picture must come with the request."""
    if not isinstance(url, str) or not url:
        raise bad(f"{where} must be a data: URL", where)
    if not url.startswith("data:"):
        scheme = url.split(":", 1)[0] if ":" in url else "a relative path"
        raise bad(f"{where}: only data: URLs are accepted (the server fetches nothing), got {scheme}", where,
                  "remote_image_refused")
    header, sep, payload = url[5:].partition(",")
    mime = header.split(";", 1)[0] or "application/octet-stream"
    if not sep or not header.endswith(";base64"):
        raise bad(f"{where}: expected data:<image type>;base64,<data>", where)
    if not mime.startswith("image/"):
        raise bad(f"{where}: {mime} is not an image type", where)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as err:
        raise bad(f"{where}: the base64 data cannot be read: {err}", where) from None
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise bad(f"{where}: the data is not a readable {mime} image: {err}", where) from None
    digest = hashlib.sha256(data).hexdigest()
    path = folder / f"image_{number}_{digest[:12]}"
    path.write_bytes(data)
    return ArtifactRef(sha256=digest, path=str(path), mime=mime, name=f"image_{number}", size=len(data)), path


def _call(c: Any, where: str, sizes: Sizes) -> ToolCall:
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(c.get("id"), str):
        raise bad(f"{where} must have an id and a function with a name", where)
    raw = fn.get("arguments") or "{}"
    sizes.add_part(where)
    sizes.add_text(raw if isinstance(raw, str) else json.dumps(raw), f"{where}.function.arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
        return ToolCall(id=c["id"], name=fn["name"], arguments=args)
    except json.JSONDecodeError as err:
        raise bad(f"{where}.function.arguments is not valid JSON: {err.msg}", f"{where}.function.arguments") from None
    except (ValueError, NotPlainJSON) as err:
        raise bad(f"{where}.function.arguments: {err}", f"{where}.function.arguments") from None


def _messages(body: dict, folder: Path, sees_images: bool, model: str,
              sizes: Sizes) -> tuple[list[Message], list[Path]]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad("`messages` must be a non-empty list", "messages", "missing_required_parameter")
    if len(raw) > MAX_MESSAGES:
        raise bad(f"`messages` may hold at most {MAX_MESSAGES:,} messages, got {len(raw):,}", "messages",
                  "request_too_large")
    out: list[Message] = []
    files: list[Path] = []
    names: dict[str, str] = {}  # tool call id -> function name, so a tool turn is named after what it answers
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad(f"{where} must be an object with a role and content", where, "invalid_type")
        role = m.get("role")
        if role in ("system", "developer"):
            out.append(Message(role="system", content=_text(m.get("content"), f"{where}.content", sizes)))
        elif role == "assistant":
            calls = [_call(c, f"{where}.tool_calls[{j}]", sizes) for j, c in enumerate(m.get("tool_calls") or [])]
            names.update({c.id: c.name for c in calls})
            out.append(Message(role="assistant", content=_text(m.get("content"), f"{where}.content", sizes),
                               tool_calls=calls))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad(f"{where}: a tool message needs the tool_call_id it answers", f"{where}.tool_call_id")
            out.append(Message(role="tool", content=_text(m.get("content"), f"{where}.content", sizes),
                               tool_call_id=call_id, name=names.get(call_id) or m.get("name") or None))
        elif role == "user":
            content = m.get("content")
            if not isinstance(content, list):
                out.append(Message(role="user", content=_text(content, f"{where}.content", sizes)))
                continue
            texts, images = [], []
            for j, part in enumerate(content):
                at = f"{where}.content[{j}]"
                sizes.add_part(at)
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text" and isinstance(part.get("text"), str):
                    sizes.add_text(part["text"], at)
                    texts.append(part["text"])
                elif kind == "image_url":
                    if not sees_images:
                        raise bad(f"{at}: {model} is a text-only model and takes no images", at, "images_not_supported")
                    if len(files) >= MAX_IMAGES:
                        raise bad(f"{at}: a request may carry at most {MAX_IMAGES} images", at, "request_too_large")
                    url = part.get("image_url")
                    ref, path = _image(url.get("url") if isinstance(url, dict) else url, f"{at}.image_url.url", folder,
                                       len(files) + 1)
                    images.append(ref)
                    files.append(path)
                else:
                    raise bad(f"{at} must be a text or image_url part", at, "invalid_type")
            out.append(Message(role="user", content="\n".join(texts), images=images))
        else:
            raise bad(f"{where}.role must be system, developer, user, assistant or tool, got {json.dumps(role)[:40]}",
                      f"{where}.role", "invalid_role")
    return out, files


def parse_request(body: dict, served: str, folder: Path, sees_images: bool) -> ChatRequest:
    """The checked request; APIError for the first problem. Images are written into `folder`."""
    check_model(body, served)
    _refuse_unsupported(body)
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise bad("`stream` must be true or false", "stream", "invalid_type")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad("`stream_options` must be an object", "stream_options", "invalid_type")
    sizes = Sizes()
    tools, forced = _tools(body, sizes)
    generation = _generation(body, TOOL_GRAMMAR if tools else PLAIN_TEXT)
    if forced is not None:
        generation["tool_choice"] = forced
    messages, files = _messages(body, folder, sees_images, served, sizes)
    return ChatRequest(messages=messages, tools=tools, generation=generation, stream=stream,
                       include_usage=bool(options.get("include_usage")), images=len(files), files=files)
