"""The HTTP side: a Starlette app with OpenAI's routes, run by uvicorn on 127.0.0.1.

    GET  /v1/models              the one served model
    GET  /v1/models/{id}         it, or 404
    POST /v1/chat/completions    a chat completion, whole or streamed as server-sent events

Every error is OpenAI's shape with its HTTP status; a model that fails answers that request with a 500 and
the server goes on with the next one. Before a request queues for the model it has passed the gate (Host,
content type: access.py), been read within its time and byte limits (body.py, limits.py), checked field by
field (chat_request.py) and counted against the model's context (context.py); a client that leaves while its
request waits or runs gives the model back (its job is cancelled).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..policies.base import Response
from .access import Gate, host_names
from .body import ByteBudget, parse_body, read_body
from .chat_request import APIError, ChatRequest, parse_request
from .connection import with_header_deadline
from .context import fit_to_context
from .engine import END, Engine, Job, pieces_to_loop
from .gate import TextGate
from .limits import Limits

PLAIN_TURN = "\nUser:"  # policies/hf.py's: where a model without a chat template starts a user turn of its own


def _model_error(err: BaseException) -> APIError:
    return APIError(500, f"the model failed on this request: {type(err).__name__}: {err}", code="model_error")


def _calls(response: Response) -> list[dict]:
    return [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in response.tool_calls]


def _content(response: Response) -> str:
    """The answer's text: a call the grammar could not read is shown as the model wrote it, not dropped."""
    if response.issues and not response.tool_calls:
        return response.raw.strip()
    return response.text


def _finish(response: Response, request: ChatRequest, default_max: int) -> str:
    if response.tool_calls:
        return "tool_calls"
    return "length" if response.tokens_out >= request.generation.get("max_new_tokens", default_max) else "stop"


def _usage(response: Response) -> dict:
    usage = {"prompt_tokens": response.tokens_in, "completion_tokens": response.tokens_out,
             "total_tokens": response.tokens_in + response.tokens_out}
    if response.reused_tokens is not None:  # prefix reuse: OpenAI's name for prompt tokens not computed again
        usage["prompt_tokens_details"] = {"cached_tokens": response.reused_tokens}
    return usage


class ChatServer:
    """The app around one Engine; `start()` runs it in a thread (tests, benchmarks), `serve()` in the
    foreground (the CLI)."""

    def __init__(self, engine: Engine, host: str = "127.0.0.1", port: int = 8000, access_log: bool = False,
                 allowed_hosts: tuple[str, ...] = (), limits: Limits | None = None):
        self.engine = engine
        self.host = host
        self.limits = limits or Limits()
        self.budget = ByteBudget(self.limits.inflight_bytes)
        self.host_names = host_names(host, allowed_hosts)
        self._counting = threading.Lock()  # one prompt counted at a time: counting is CPU work beside the model's
        self.default_max = int(getattr(getattr(engine.policy, "spec", None), "max_new_tokens", 256))
        self.created = int(time.time())
        self.socket = socket.create_server((host, port))  # bound now, so port 0 has its number before serving
        self.port = self.socket.getsockname()[1]
        self.access_log = access_log
        self.app = self._app()
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    # ---- routes ----
    def _app(self):
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def api_error(_request, err: APIError):
            return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

        async def http_error(_request, err: HTTPException):
            text = {404: "no such route", 405: "method not allowed"}.get(err.status_code, str(err.detail))
            return JSONResponse(APIError(err.status_code, f"{text}: see GET /v1/models and POST /v1/chat/completions",
                                         code=None).body(), status_code=err.status_code)

        async def crash(_request, err: Exception):
            return JSONResponse(APIError(500, f"internal error: {type(err).__name__}: {err}").body(), status_code=500)

        app = Starlette(routes=[Route("/v1/models", self.models, methods=["GET"]),
                                Route("/v1/models/{model:path}", self.model, methods=["GET"]),
                                Route("/v1/chat/completions", self.chat, methods=["POST"])],
                        exception_handlers={APIError: api_error, HTTPException: http_error, Exception: crash})
        return Gate(app, self.host_names)

    def _card(self) -> dict:
        # `options`: how it is served (weights, kv_cache, decoding), so a client can tell two servers apart;
        # `engine`: what runs a local model, also when the default chose it
        options = getattr(getattr(self.engine.policy, "spec", None), "options", None) or {}
        engine = getattr(self.engine.policy, "engine", None)
        return {"id": self.engine.model_id, "object": "model", "created": self.created, "owned_by": "toolpath",
                "options": options, **({"engine": engine} if isinstance(engine, str) else {})}

    async def models(self, _request):
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [self._card()]})

    async def model(self, request):
        from starlette.responses import JSONResponse

        if request.path_params["model"] != self.engine.model_id:
            raise APIError(404, f"the model {request.path_params['model']!r} does not exist here; this server serves "
                                f"{self.engine.model_id!r}", "model", "model_not_found")
        return JSONResponse(self._card())

    async def chat(self, request):
        from starlette.responses import JSONResponse, StreamingResponse

        async with read_body(request, self.limits, self.budget) as raw:
            # parsed off the event loop (a large body takes a while), and held against the budget until checked
            chat, folder = await asyncio.to_thread(self._checked, raw)
        ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if chat.stream:
            # queued now, in the order requests arrived; the images go with the job, which removes them
            pieces, push = pieces_to_loop(asyncio.get_running_loop())
            job = self.engine.submit(Job(chat, on_text=push, folder=folder))
            return StreamingResponse(self._events(chat, job, pieces, ident, created), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        job = self.engine.submit(Job(chat, folder=folder))
        try:
            response = await self._unless_gone(request, job)
        except asyncio.CancelledError:  # the server is stopping: its turn in the queue is given up
            job.cancelled.set()
            raise
        except Exception as err:
            raise _model_error(err) from None
        calls = _calls(response)
        message: dict[str, Any] = {"role": "assistant", "content": _content(response) or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        return JSONResponse({"id": ident, "object": "chat.completion", "created": created,
                             "model": self.engine.model_id, "system_fingerprint": None,
                             "choices": [{"index": 0, "message": message, "logprobs": None,
                                          "finish_reason": _finish(response, chat, self.default_max)}],
                             "usage": _usage(response)})

    def _checked(self, raw: bytearray) -> tuple[ChatRequest, Path]:
        """The request parsed, checked and counted against the context (in a worker thread); its images are in
        the returned folder, which the job removes."""
        body = parse_body(raw)
        folder = Path(tempfile.mkdtemp(prefix="toolpath-serve-"))
        try:
            chat = parse_request(body, self.engine.model_id, folder, self.engine.sees_images)
            with self._counting:
                fit_to_context(self.engine.policy, chat, self.default_max)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return chat, folder

    async def _unless_gone(self, request, job: Job) -> Response:
        """The job's answer; if the client disconnects first the job is cancelled (dropped if still queued,
        stopped at its next token if running) and the request ends unanswered."""

        async def gone() -> None:
            # the body is read whole, so the next message uvicorn has for us is the disconnect
            while (await request.receive())["type"] != "http.disconnect":
                pass

        answer = asyncio.ensure_future(asyncio.wrap_future(job.result))
        watch = asyncio.ensure_future(gone())
        try:
            await asyncio.wait({answer, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if not answer.done():
            job.cancelled.set()
            answer.cancel()
            raise APIError(499, "the client closed the connection before the answer", code="client_closed")
        return answer.result()

    async def _events(self, chat: ChatRequest, job: Job, pieces: asyncio.Queue, ident: str,
                      created: int) -> AsyncIterator[str]:
        def event(delta: dict | None, finish: str | None = None, **extra) -> str:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            return "data: " + json.dumps({"id": ident, "object": "chat.completion.chunk", "created": created,
                                          "model": self.engine.model_id, "system_fingerprint": None,
                                          "choices": choices, **extra}) + "\n\n"

        cut = tuple(chat.generation.get("stop") or ()) + ((PLAIN_TURN,) if self.engine.plain else ())
        gate = TextGate(cut_at=cut, calls=bool(chat.tools))
        forced = "tool_choice" in chat.generation  # the reply is a call from its first token: none of it streams
        try:
            yield event({"role": "assistant", "content": ""})
            while (piece := await pieces.get()) is not END:
                if not forced and (new := gate.feed(piece)):
                    yield event({"content": new})
            try:
                response = job.result.result()
            except Exception as err:  # headers are gone already: the error is the stream's last event
                yield "data: " + json.dumps(_model_error(err).body()) + "\n\n"
                return
            if rest := gate.rest(_content(response)):
                yield event({"content": rest})
            calls = _calls(response)
            if calls:
                yield event({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]})
            yield event({}, _finish(response, chat, self.default_max))
            if chat.include_usage:
                yield event(None, usage=_usage(response))
            yield "data: [DONE]\n\n"
        finally:
            job.cancelled.set()  # a no-op once it finished; a gone client's job stops at its next token

    # ---- running ----
    def _uvicorn(self):
        import uvicorn

        limits = self.limits
        config = uvicorn.Config(self.app, log_level="info" if self.access_log else "warning",
                                access_log=self.access_log, lifespan="off", timeout_graceful_shutdown=5,
                                http=with_header_deadline(limits.header_seconds),
                                timeout_keep_alive=limits.keep_alive_seconds, limit_concurrency=limits.connections,
                                h11_max_incomplete_event_size=limits.header_bytes)
        self._server = uvicorn.Server(config)
        return self._server

    def serve(self) -> None:
        """In the foreground until interrupted (Ctrl-C)."""
        try:
            self._uvicorn().run(sockets=[self.socket])
        finally:
            self.engine.close()

    def start(self) -> ChatServer:
        """In a daemon thread; returns once it accepts connections."""
        server = self._uvicorn()
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [self.socket]},
                                        name="toolpath-serve-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.engine.close()
        self.socket.close()
