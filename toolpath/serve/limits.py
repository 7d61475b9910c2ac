"""What one server lets its clients hold: time, bytes and connections, all in one place so a test can shrink them.

A client that sends its headers or body slowly, or many clients sending large bodies at once, must not hold
the server's memory or sockets: each limit here is a point where the server answers (408, 413, 503) or closes
the connection instead of waiting.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    header_seconds: float = 10.0  # from connecting (or the last answer) to the end of the request's headers
    body_seconds: float = 30.0  # from the headers to the end of the body: a trickled body is cut off
    body_bytes: int = 64 << 20  # one body: a request with a few large images fits; a runaway upload does not
    # All bodies being read or parsed at once; beyond it a request is answered 503 with Retry-After, so many
    # large uploads together cannot take the machine's memory.
    inflight_bytes: int = 128 << 20
    connections: int = 256  # open connections (uvicorn's limit_concurrency): more get a 503
    keep_alive_seconds: float = 5.0  # an idle connection between two requests
    header_bytes: int = 64 << 10  # the request line and headers together (h11's incomplete-event bound)
