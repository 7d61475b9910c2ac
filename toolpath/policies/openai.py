"""Any OpenAI-compatible chat server: vLLM, SGLang, Ollama, llama.cpp's server, OpenAI itself.

Base URL and key come from the spec (`model.base_url`, `model.api_key_env`) or OPENAI_BASE_URL /
OPENAI_API_KEY. With the JSON format, tools are sent as native function definitions; with a text grammar
(DeepEyesV2's tags) the grammar is taught in the system prompt, the format's stop sequences are sent, and
the reply text is parsed. Images go as data URLs. The server's
tool-call arguments are a JSON string produced by a model: they are parsed tolerantly, and one that cannot
be read becomes an issue the model is told about, never a crash.

The key is read only from a variable the user allowed (toolpath.spec_secrets: OPENAI_API_KEY and what
TOOLPATH_API_KEYS or --api-key-env adds) and sent only to the server it was given for (OPENAI_BASE_URL or
OpenAI's API, or the URL the user bound it to): a spec that points base_url elsewhere gets no key.

Nor does it leave through us otherwise: it is registered with toolpath.redact, credentials written into the
base URL (`http://user:KEY@host`) are taken out of it and sent as Basic authorization, and every error message
and every reply is redacted before it is raised or returned (a server may quote our headers back in either).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

from ..redact import redact, redact_data, register_secret, strip_url_credentials
from ..spec import ModelSpec
from ..spec_secrets import DEFAULT_KEY_ENV, DEFAULT_SERVER, KEYS_VARIABLE, key_env_problem, key_goes_to, key_servers
from ..state import Message
from .base import PolicyError, Response
from .formats import FORMATS, loads_lenient, make_call, parse_tool_calls

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def _cut(text: str, n: int) -> str:
    """Redacted first, then cut: a cut made first could leave a secret's prefix that no longer matches it."""
    return redact(text)[:n]


def _data_url(path: str, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode()}"


def availability() -> tuple[bool, str]:
    """Whether a server is configured (for `toolpath models list`); nothing is contacted."""
    base = os.environ.get("OPENAI_BASE_URL")
    if base or os.environ.get("OPENAI_API_KEY"):
        return True, f"server {base or 'https://api.openai.com/v1'} (not contacted)"
    return False, "set OPENAI_BASE_URL (and OPENAI_API_KEY if the server needs one), or base_url in the spec"


class OpenAIPolicy:
    @classmethod
    def from_spec(cls, spec: ModelSpec) -> OpenAIPolicy:
        """`openai:MODEL` on any OpenAI-compatible server."""
        return cls(spec.name.partition(":")[2], spec)

    def __init__(self, model: str, spec: ModelSpec, retries: int = 3, timeout: float = 120.0):
        self.model = model
        self.spec = spec
        problem = key_env_problem(spec.api_key_env)  # checked when the spec loads too; this covers every caller
        if problem is not None:
            raise PolicyError(f"model.api_key_env: {problem}")
        # The spec's variable, or OPENAI_API_KEY when that one is unset; either goes only where the user sent it.
        self.key_env = spec.api_key_env if os.environ.get(spec.api_key_env) else DEFAULT_KEY_ENV
        key = os.environ.get(self.key_env) or ""
        register_secret(key)  # whatever the variable is called, its value is redacted everywhere
        self.name = redact(f"openai:{model}")
        base = spec.base_url or os.environ.get("OPENAI_BASE_URL")
        if not base and not key:
            # Neither a server nor a key: refuse before any request instead of calling OpenAI's API unasked.
            raise PolicyError(f"{self.name} needs a server: set OPENAI_BASE_URL (e.g. a local vLLM or Ollama) "
                              f"or model.base_url in the spec, and OPENAI_API_KEY if it needs one")
        # user:password in the URL become Basic authorization, so the URL we name in messages holds no secret
        base, self._basic_auth = strip_url_credentials((base or DEFAULT_SERVER).strip())
        self.base_url = base.rstrip("/")
        self.api_key = key if key and key_goes_to(self.key_env, self.base_url) else ""
        self._withheld = bool(key) and not self.api_key
        self.retries = int(spec.options.get("retries", retries))
        self.timeout = float(spec.options.get("timeout", timeout))

    def _withheld_note(self) -> str:
        """Why no key went with the request, and how the user sends it."""
        servers = ", ".join(key_servers(self.key_env))
        return (f"no key was sent: {self.key_env} is for {servers}, not {self.base_url}; to send it there, set "
                f"{KEYS_VARIABLE}={self.key_env}={self.base_url} or pass --base-url {self.base_url}")

    def _grammar_messages(self, messages: list[Message], tools: list[dict], fmt) -> list[dict]:
        """The conversation for a text grammar: the guide in the system turn, calls and results as plain text."""
        out, guide = [], fmt.guide(tools) if tools else ""
        for m in messages:
            if m.role == "system":
                out.append({"role": "system", "content": (m.content + "\n\n" + guide).strip()})
                guide = ""
                continue
            if m.role == "assistant":
                out.append({"role": "assistant", "content": fmt.render_assistant(m.content, m.tool_calls)})
                continue
            text = fmt.render_observation(m.name or "", m.content) if m.role == "tool" else m.content
            out.append({"role": "user" if m.role == "tool" else m.role, "content": self._with_images(text, m.images)})
        if guide:
            out.insert(0, {"role": "system", "content": guide})
        return out

    @staticmethod
    def _with_images(text: str, images) -> Any:
        if not images:
            return text
        return [{"type": "text", "text": text}] + [
            {"type": "image_url", "image_url": {"url": _data_url(r.path, r.mime)}} for r in images]

    def _messages(self, messages: list[Message]) -> list[dict]:
        out = []
        for m in messages:
            if m.role == "tool":
                out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
                if m.images:  # tool messages cannot carry images in the API: show them in a user turn
                    out.append({"role": "user", "content": self._with_images(f"Images from {m.name}:", m.images)})
                continue
            entry: dict[str, Any] = {"role": m.role, "content": self._with_images(m.content, m.images)}
            if m.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                       for c in m.tool_calls]
            out.append(entry)
        return out

    def _post(self, body: dict) -> dict:
        import httpx

        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/chat/completions"
        last = ""
        for attempt in range(self.retries + 1):
            try:
                r = httpx.post(url, json=body, headers=headers, auth=self._basic_auth, timeout=self.timeout)
            except httpx.HTTPError as err:
                last = redact(f"cannot reach {url}: {type(err).__name__}: {err}")
            else:
                if r.status_code == 200:
                    try:
                        return r.json()
                    except ValueError:
                        raise PolicyError(f"{url} answered 200 with a body that is not JSON: "
                                          f"{_cut(r.text, 200)!r}") from None
                last = f"{url} answered HTTP {r.status_code}: {_cut(r.text, 300)}"
                if r.status_code in (401, 403) and self._withheld:
                    last += f" ({self._withheld_note()})"
                if r.status_code not in _RETRY_STATUS:
                    raise PolicyError(last)
            if attempt < self.retries:
                time.sleep(min(8.0, 0.5 * 2 ** attempt))
        raise PolicyError(last, transient=True)

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        started = time.perf_counter()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(messages),
            "temperature": float(generation.get("temperature", self.spec.temperature)),
            "max_tokens": int(generation.get("max_new_tokens", self.spec.max_new_tokens)),
        }
        if "seed" in generation:
            body["seed"] = int(generation["seed"])
        fmt = generation.get("format") or FORMATS["json"]
        if not fmt.native_tools:
            body["messages"] = self._grammar_messages(messages, tools, fmt)
            body["stop"] = list(fmt.stop)
        elif tools:
            body["tools"] = [{"type": "function", "function": t} for t in tools]
        data = self._post(body)
        try:
            msg = redact_data(data["choices"][0]["message"])  # a server may put our headers in its reply
            if not isinstance(msg, dict):
                raise TypeError
        except (KeyError, IndexError, TypeError):
            raise PolicyError(f"{self.base_url}: response has no choices[0].message: "
                              f"{_cut(json.dumps(data), 300)}") from None
        text = msg.get("content") or ""
        if isinstance(text, list):  # some servers return content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        calls, issues = [], []
        turn = sum(1 for m in messages if m.role == "assistant") + 1
        usage = data.get("usage") or {}
        if not fmt.native_tools:
            parsed = fmt.parse(text, id_prefix=f"call{turn}")
            return Response(text=parsed.content, tool_calls=parsed.calls, issues=parsed.issues, answer=parsed.answer,
                            raw=json.dumps(msg), tokens_in=int(usage.get("prompt_tokens") or 0),
                            tokens_out=int(usage.get("completion_tokens") or 0),
                            latency_s=time.perf_counter() - started)
        for i, c in enumerate(msg.get("tool_calls") or []):
            fn = c.get("function") if isinstance(c, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                issues.append(f"tool call {i + 1}: missing function name")
                continue
            raw_args = fn.get("arguments") or "{}"
            try:
                args = loads_lenient(raw_args) if isinstance(raw_args, str) else raw_args
            except json.JSONDecodeError as err:
                issues.append(f"tool call {i + 1} ({name}): arguments are not valid JSON ({err.msg}): {raw_args[:80]}")
                continue
            if not isinstance(args, dict):
                issues.append(f"tool call {i + 1} ({name}): arguments must be a JSON object")
                continue
            call, problem = make_call(str(c.get("id") or f"call{turn}_{i + 1}"), name, args,
                                      f"tool call {i + 1} ({name})")
            calls.append(call) if call else issues.append(problem)
        if not calls and not issues and "<tool_call>" in text:  # a server without native tool parsing
            parsed = parse_tool_calls(text, id_prefix=f"call{turn}")
            text, calls, issues = parsed.content, parsed.calls, parsed.issues
        return Response(text=text, tool_calls=calls, issues=issues, raw=json.dumps(msg),
                        tokens_in=int(usage.get("prompt_tokens") or 0),
                        tokens_out=int(usage.get("completion_tokens") or 0), latency_s=time.perf_counter() - started)
