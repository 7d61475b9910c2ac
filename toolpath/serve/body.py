"""A request body read under limits and parsed as JSON without deep recursion.

The body is read in the chunks it arrives in, against a deadline (a trickled body is cut off with 408) and a
byte budget shared by every connection (a body that does not fit what other requests are holding is answered
503 with Retry-After); the bytes are given back once the request is parsed. JSON's C decoder refuses nesting past
Python's recursion limit cleanly, and what it parsed is then walked without recursion for a much lower bound, so
a body of 100,000 `[` is a 400, never a RecursionError; both passes are linear in the body's size.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator

from .chat_request import APIError, bad
from .limits import Limits

MAX_DEPTH = 64  # a tool's JSON Schema nests a few levels per object; no honest request comes near this


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


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Do a parsed body's arrays and objects nest deeper than `limit`? Walked with a stack of our own, so no
    depth of input can exhaust Python's."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def parse_body(raw: bytes | bytearray) -> dict:
    """The body as a JSON object; a 400 naming what is wrong otherwise."""
    deep = bad(f"the request body nests arrays or objects more than {MAX_DEPTH} levels deep", code="invalid_json")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad(f"the request body is not valid JSON: {err}", code="invalid_json") from None
    except RecursionError:  # the C decoder guards its recursion and gives up cleanly past Python's limit
        raise deep from None
    if too_deep(body):  # what reads the request later (schemas, templates) recurses: bounded here
        raise deep
    if not isinstance(body, dict):
        raise bad(f"the request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body
