"""One model, one request at a time: a worker thread takes jobs from a queue in the order they came.

A job is a checked request; its answer comes back as a future (the whole Response) and, when streamed, as
text pieces pushed to the asyncio loop of the connection as the model writes them (a transformers streamer
on the local backend). A job whose client went away is cancelled: one still waiting is skipped, and one
generating is stopped at its next token by a stopping criterion, so the queue is never held by nobody.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import shutil
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..policies.base import Policy, Response
from .chat_request import ChatRequest

END = None  # what a job's piece stream ends with


@dataclass
class Job:
    request: ChatRequest
    on_text: Callable[[Any], None] | None = None  # called from the worker thread with each piece, then END
    folder: Path | None = None  # the request's decoded images: removed once the model is done with them
    cancelled: threading.Event = field(default_factory=threading.Event)
    result: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


def text_streamer(tokenizer, on_text: Callable[[str], None]):
    """A transformers TextStreamer that hands each decoded piece on instead of printing it; the prompt is
    skipped (generate() sends it first), special tokens are not shown."""
    from transformers import TextStreamer

    class Pieces(TextStreamer):
        def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
            if text:
                on_text(text)

    return Pieces(tokenizer, skip_prompt=True, skip_special_tokens=True)


def _cancellation(event: threading.Event):
    from transformers import StoppingCriteria, StoppingCriteriaList

    class Cancelled(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            import torch

            return torch.full((input_ids.shape[0],), event.is_set(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([Cancelled()])


class Engine:
    """The served model behind a FIFO queue and one worker thread."""

    def __init__(self, policy: Policy, model_id: str):
        self.policy = policy
        self.model_id = model_id
        self.streams = hasattr(policy, "tokenizer") and hasattr(policy, "_generate")  # the local transformers backend
        self.sees_images = bool(getattr(policy, "is_vlm", True))  # a policy that is not local decides for itself
        self.plain = bool(getattr(policy, "plain", False))  # prompted as `User:`/`Assistant:` turns
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.served = 0
        self.dropped = 0  # jobs whose client left while they waited: never run
        self.running: Job | None = None  # the job the model is on
        # the last jobs run: whether their client was gone by the end, tokens made, the error if any
        self.history: deque[dict] = deque(maxlen=100)
        self._worker = threading.Thread(target=self._work, name="toolpath-serve-model", daemon=True)
        self._worker.start()

    def submit(self, job: Job) -> Job:
        self.jobs.put(job)
        return job

    def close(self) -> None:
        self.jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            if job.cancelled.is_set() or not job.result.set_running_or_notify_cancel():
                job.result.cancel()
                self.dropped += 1
            else:
                self.running = job
                try:
                    self._run(job)
                finally:
                    self.running = None
            if job.folder is not None:
                shutil.rmtree(job.folder, ignore_errors=True)
            if job.on_text is not None:
                job.on_text(END)

    def _run(self, job: Job) -> None:
        gen = dict(job.request.generation)
        if self.streams:
            gen["stopping_criteria"] = _cancellation(job.cancelled)
            if job.on_text is not None:
                gen["streamer"] = text_streamer(self.policy.tokenizer, job.on_text)
        try:
            response: Response = self.policy.respond(job.request.messages, job.request.tools, **gen)
        except BaseException as err:  # a model failure answers this request, and the worker goes on
            self.history.append({"cancelled": job.cancelled.is_set(), "tokens_out": 0, "error": str(err)})
            job.result.set_exception(err)
        else:
            self.served += 1
            self.history.append({"cancelled": job.cancelled.is_set(), "tokens_out": response.tokens_out, "error": None})
            job.result.set_result(response)


def pieces_to_loop(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Queue, Callable[[Any], None]]:
    """An asyncio queue for the connection and the thread-safe callback the worker feeds it with."""
    q: asyncio.Queue = asyncio.Queue()

    def push(piece: Any) -> None:
        try:
            loop.call_soon_threadsafe(q.put_nowait, piece)
        except RuntimeError:  # the loop is closed: the server is shutting down, nobody is reading
            pass

    return q, push
