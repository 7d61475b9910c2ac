"""The web trace viewer served by `toolpath view`: runs, evals and every step of a run, in a local browser.

    from toolpath.viewer import serve
    server, url = serve(port=0)      # a daemon thread on 127.0.0.1, any free port
    ...
    server.shutdown()
"""

from __future__ import annotations


def serve(home=None, host: str = "127.0.0.1", port: int = 8765):
    """Start the viewer on a daemon thread; returns (server, url). `server.shutdown()` stops it."""
    from .server import serve as _serve

    return _serve(home, host, port)


def serve_forever(home=None, host: str = "127.0.0.1", port: int = 8765, **kw) -> None:
    """Serve until Ctrl-C, printing the URL first (the CLI's `toolpath view`)."""
    from .server import serve_forever as _serve_forever

    _serve_forever(home, host, port, **kw)


__all__ = ["serve", "serve_forever"]
