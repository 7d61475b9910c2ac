"""A request body read under limits and parsed as JSON without deep recursion.

The body is read in the chunks it arrives in, against a deadline (a trickled body is cut off with 408) and a
byte budget shared by every connection (a body that does not fit what other requests are holding is answered
503 with Retry-After); the bytes are given back once the request is parsed. Before `json.loads` sees it, the
nesting depth is measured on the raw bytes (strings taken out, brackets counted in C and numpy), so a body of
100,000 `[` is a 400, never a RecursionError.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from typing import AsyncIterator

from .chat_request import APIError, bad
from .limits import Limits

MAX_DEPTH = 64  # a tool's JSON Schema nests a few levels per object; no honest request comes near this
JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
CHUNK = 1 << 20  # brackets counted a million at a time: a flat body's counts never take much memory


class ByteBudget:
    """The bytes of request bodies held at once, across connections."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.held + n > self.limit:
                return False
            self.held += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held -= n


def _busy(held: int, limit: int) -> APIError:
    err = APIError(503, f"the server is reading {held:,} bytes of other requests (at most {limit:,} at once); "
                        "retry in a moment", code="server_busy")
    err.headers = {"Retry-After": "2", "Connection": "close"}
    return err


def _unread(err: APIError) -> APIError:
    """An answer given before the body was read whole: the connection closes with it, since the rest of the body
    would otherwise be read as the next request."""
    err.headers = {"Connection": "close"}
    return err


@contextlib.asynccontextmanager
async def read_body(request, limits: Limits, budget: ByteBudget) -> AsyncIterator[bytearray]:
    """The whole body, held against `budget` until the block ends; APIError 413, 408 or 503 otherwise."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.body_bytes:
        raise _unread(APIError(413, f"the request body is {int(declared):,} bytes; at most {limits.body_bytes:,} "
                                    "are read", code="request_too_large"))
    taken = 0
    try:
        # a declared length is reserved whole before reading, so a request that cannot fit is refused at once
        if declared.isdigit():
            if not budget.take(int(declared)):
                raise _busy(budget.held, budget.limit)
            taken = int(declared)
        raw = bytearray()
        try:
            async with asyncio.timeout(limits.body_seconds):
                async for part in request.stream():  # counted as it comes: a chunked body declares no length
                    raw += part
                    if len(raw) > limits.body_bytes:
                        raise _unread(APIError(413, f"the request body is over {limits.body_bytes:,} bytes",
                                               code="request_too_large"))
                    if len(raw) > taken:
                        if not budget.take(len(raw) - taken):
                            raise _busy(budget.held, budget.limit)
                        taken = len(raw)
        except TimeoutError:
            raise _unread(APIError(408, f"the request body did not arrive within {limits.body_seconds:g} s",
                                   code="request_timeout")) from None
        yield raw
    finally:
        budget.give(taken)


def too_deep(raw: bytes | bytearray, limit: int = MAX_DEPTH) -> bool:
    """Do the body's arrays and objects nest deeper than `limit`? Brackets inside strings do not count; a body
    that is not JSON may be answered either way (json.loads then says what is wrong)."""
    import numpy as np

    brackets = JSON_STRING.sub(b"", raw).translate(None, NOT_BRACKETS)
    depth = 0
    for start in range(0, len(brackets), CHUNK):
        chunk = np.frombuffer(brackets, dtype=np.uint8, count=min(CHUNK, len(brackets) - start), offset=start)
        steps = np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1).astype(np.int64)
        running = np.cumsum(steps) + depth
        if running.max() > limit:
            return True
        depth = int(running[-1])
    return False


def parse_body(raw: bytes | bytearray) -> dict:
    """The body as a JSON object; a 400 naming what is wrong otherwise."""
    if too_deep(raw):
        raise bad(f"the request body nests arrays or objects more than {MAX_DEPTH} levels deep", code="invalid_json")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad(f"the request body is not valid JSON: {err}", code="invalid_json") from None
    except RecursionError:  # not reached after the depth check; kept so no body can ever make a 500
        raise bad("the request body nests too deeply", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad(f"the request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body
