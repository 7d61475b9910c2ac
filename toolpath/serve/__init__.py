"""`toolpath serve MODEL`: any model a spec can name, behind an OpenAI-compatible API on 127.0.0.1.

    chat_request.py  the chat-completions body checked and turned into toolpath Messages, tool schemas and
                     generation options; OpenAI-shaped errors (APIError) naming the parameter
    engine.py        the one model instance behind a FIFO queue and one worker thread; streaming and
                     cancelling through transformers' streamer and stopping criteria
    gate.py          which part of a reply being written may already be streamed (stop sequences, tool calls)
    app.py           the Starlette routes (/v1/models, /v1/chat/completions, SSE) and the uvicorn server
    access.py        the gate in front of the routes: a loopback (or allowed) Host, a JSON content type
    body.py          a body read within its deadline and the shared byte budget; JSON parsed with bounded depth
    connection.py    uvicorn's h11 connection with a deadline for the request headers
    context.py       a request's prompt counted against the model's context before it queues
    limits.py        the time, byte and connection limits of one server

Only the CLI imports this package (floor 7); it uses policies.load, so local, local:NAME and hf:PATH
(text, vision-language and compressed folders) all serve the same way.
"""

from __future__ import annotations

from typing import Any


def start(spec: Any, host: str = "127.0.0.1", port: int = 0, access_log: bool = False, model_id: str | None = None,
          **options: Any):
    """Load the model of `spec` (a ModelSpec or a model name) and serve it from a thread; -> the ChatServer
    (its `url`, and `stop()`). `options`: ChatServer's allowed_hosts and limits."""
    return build(spec, host, port, access_log, model_id, **options).start()


def build(spec: Any, host: str = "127.0.0.1", port: int = 0, access_log: bool = False, model_id: str | None = None,
          **options: Any):
    from ..policies.base import load
    from ..spec import ModelSpec
    from .app import ChatServer
    from .engine import Engine

    spec = ModelSpec(name=spec) if isinstance(spec, str) else spec
    return ChatServer(Engine(load(spec), model_id or spec.name), host, port, access_log, **options)
