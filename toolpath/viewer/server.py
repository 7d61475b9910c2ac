"""`toolpath view`: a local web app over the run store (standard library only, bound to 127.0.0.1).

    /                           runs (newest first) and evals, a page each (?runs=OFFSET&evals=OFFSET)
    /runs/<id>                  a run: header, then its steps, page by page (?page_size=N for the first page)
    /evals/<id>                 an eval's samples, a page at a time (?offset=N), each linking to its run
    /api/runs?offset=&limit=    the same data as JSON; also /api/evals, /api/runs/<id>, /api/evals/<id>,
    /api/runs/<id>/steps?offset=&limit=, /api/evals/<id>/samples?offset=&limit=
    /artifacts/<sha256>         an image or file, only for a digest listed in the store's artifacts table
    /depictions/<sha256>        a molecule artifact (a task's inputs.graphs) drawn by RDKit, as PNG
    /static/<file>              the page's own script and style (package files: nothing from the network)

Unknown ids and paths are a 404 that says what was not found; bad query parameters a 400 that names them. A
request must carry exactly one Host header naming this machine's loopback (127.0.0.1, localhost or [::1], with
an optional port): anything else is a 400 (malformed) or a 403 (another host's name). Every JSON answer is
strict JSON (a NaN or infinity that an older store kept in a payload is served as null), and no answer holds a
secret the viewer knows of (toolpath.redact), even from a store written before secrets were redacted.
"""

from __future__ import annotations

import mimetypes
import re
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from ..redact import redact
from . import dag, pages
from .data import MAX_LIMIT, Reader, json_or_text

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {p.name: p for p in STATIC.iterdir() if p.is_file()} if STATIC.is_dir() else {}
# Our pages run only our own script and style; an artifact (which could be HTML or SVG) runs nothing at all.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
ARTIFACT_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
INLINE_MIMES = re.compile(r"(image/(png|jpeg|gif|webp|bmp)|audio/(x-wav|wav|flac|mpeg|ogg)|text/plain"
                          r"|application/json)$")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}  # addresses we may be bound to
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]"}  # what a Host header may name then
# Host = name [":" port]: a DNS name, an IPv4 address or a bracketed IPv6 one; nothing else (no user@, no path)
HOST_HEADER = re.compile(r"(?P<name>[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::(?P<port>[0-9]{1,5}))?",
                         re.I | re.A)


def host_name(values: list[str]) -> str:
    """The name a request's Host header addresses, lower-cased; ValueError saying why when `values` (every Host
    header it sent) is not exactly one name with an optional port (1-65535). The header is parsed whole: a
    lenient split would read `127.0.0.1:80@evil.com` as ours, and of two Host headers one would be checked and
    another obeyed. The viewer, `toolpath serve` and `toolpath mcp serve` all check their requests with it."""
    if len(values) != 1:
        raise ValueError(f"a request needs exactly one Host header, this one has {len(values)}")
    host = values[0].strip()
    m = HOST_HEADER.fullmatch(host)
    if m is None or (m["port"] is not None and not 1 <= int(m["port"]) <= 65535):
        raise ValueError(f"Host header {host[:100]!r} is not a host name with an optional port (1-65535)")
    return m["name"].lower()


# The largest offset or limit we accept: the largest integer a browser's JSON numbers hold exactly, well within
# SQLite's 64-bit integers (a larger one made the driver raise OverflowError and the connection drop).
MAX_NUMBER = 2 ** 53 - 1
INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits only: int() would also take "1_0", " 5", "+5" and "٥"


class HTTPError(Exception):
    def __init__(self, status: HTTPStatus, what: str):
        super().__init__(what)
        self.status, self.what = status, what


def _int_param(query: dict, name: str, default: int, lo: int = 0, hi: int = MAX_NUMBER) -> int:
    given = query.get(name, [])
    if len(given) > 1:  # which one was meant is a guess we do not make
        raise HTTPError(HTTPStatus.BAD_REQUEST, f"query parameter {name} is given {len(given)} times")
    raw = given[0] if given else None
    if raw is None or raw == "":
        return default
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    if not INTEGER.fullmatch(raw):
        raise HTTPError(HTTPStatus.BAD_REQUEST, f"query parameter {name}={shown!r} is not an integer")
    # a number of more digits than the bound is out of range without converting it (int() refuses 4,300+)
    value = int(raw) if len(raw.lstrip("-")) <= len(str(hi)) else None
    if value is None or not lo <= value <= hi:
        raise HTTPError(HTTPStatus.BAD_REQUEST, f"query parameter {name}={shown} must be between {lo} and {hi}")
    return value


def _page(query: dict, default_limit: int = pages.PAGE) -> tuple[int, int]:
    return _int_param(query, "offset", 0), _int_param(query, "limit", default_limit, 1, MAX_LIMIT)


def _paged(key: str, rows: list, total: int, offset: int, limit: int, **extra) -> dict:
    end = offset + len(rows)
    return {**extra, "total": total, "offset": offset, "limit": limit, key: rows,
            "next": end if end < total else None}


class Handler(BaseHTTPRequestHandler):
    server_version = "toolpath-viewer"
    reader: Reader  # set on the subclass made per server
    quiet = True

    # ---- plumbing -------------------------------------------------------------------------------------
    def log_message(self, fmt, *args):  # the CLI prints the URL; a line per request would drown it
        if not self.quiet:
            super().log_message(fmt, *args)

    def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, status: int, text: str) -> None:
        # errors="replace": a lone surrogate in model text has no UTF-8 form; it is shown as "?"
        self._send(status, text.encode(errors="replace"), "text/html; charset=utf-8",
                   {"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})

    def _json(self, status: int, value) -> None:
        self._send(status, pages.json_text(value).encode(), "application/json; charset=utf-8",
                   {"Cache-Control": "no-store"})

    def _check_host(self) -> None:
        """Refuse requests addressed to another host name (DNS rebinding: a web page that re-points its own
        name at 127.0.0.1 must not read the store)."""
        given = self.headers.get_all("Host") or []
        try:
            name = host_name(given)
        except ValueError as why:
            raise HTTPError(HTTPStatus.BAD_REQUEST, str(why)) from None
        if self.server.server_address[0] in LOOPBACK and name not in LOOPBACK_NAMES:
            raise HTTPError(HTTPStatus.FORBIDDEN, f"host {given[0].strip()!r} is not this viewer's: open it as "
                                                  f"127.0.0.1, localhost or [::1]")

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query, keep_blank_values=True)
        api = path.startswith("/api/")
        try:
            if url.scheme or url.netloc:  # an absolute URL's authority would stand in for the Host header
                raise HTTPError(HTTPStatus.BAD_REQUEST, "the request target must be a path (/…), not a full URL")
            self._check_host()
            self._route(path, query)
        except HTTPError as err:
            self._error(err, api)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away (a page closed mid-scroll): nothing to answer
        except Exception as err:  # a store we cannot read, a bug: answer and say what, never drop the connection
            what = redact(f"{type(err).__name__}: {err}")
            # repr: the path and the message may hold terminal escape sequences, shown as text, never sent raw
            print(f"toolpath viewer: {self.command} {url.path[:200]!r} failed: {what!r}", file=sys.stderr, flush=True)
            self._error(HTTPError(HTTPStatus.INTERNAL_SERVER_ERROR, f"the viewer failed: {what}"), api)

    def _error(self, err: HTTPError, api: bool) -> None:
        if api:
            self._json(err.status, {"error": err.what, "status": int(err.status)})
        elif err.status == HTTPStatus.NOT_FOUND:
            self._html(err.status, pages.not_found(err.what))
        else:
            self._html(err.status, pages.bad_request(err.what, int(err.status)))

    def _not_allowed(self):
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"the viewer is read-only: GET and HEAD only\n",
                   "text/plain; charset=utf-8", {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

    # ---- routes ---------------------------------------------------------------------------------------
    def _route(self, path: str, query: dict) -> None:
        parts = [p for p in path.split("/") if p]
        r = self.reader
        if not parts:
            runs_off, evals_off = _int_param(query, "runs", 0), _int_param(query, "evals", 0)
            runs, runs_total = r.runs_page(runs_off, pages.PAGE)
            evals, evals_total = r.evals_page(evals_off, pages.PAGE)
            return self._html(200, pages.index(runs, runs_total, runs_off, evals, evals_total, evals_off))
        head, rest = parts[0], parts[1:]
        if head == "runs" and len(rest) == 1:
            run = self._run(rest[0])
            size = _int_param(query, "page_size", pages.PAGE, 1, MAX_LIMIT)
            steps, total = r.steps_page(run["id"], 0, size)
            first = _paged("steps", steps, total, 0, size, run_id=run["id"])
            seen = steps if size >= total else r.steps_page(run["id"], 0, dag.STEPS)[0]  # the graph's steps
            graph = dag.section(seen, more=len(seen) < total)
            return self._html(200, pages.run(run, first, size, r.nested(run["id"]), graph))
        if head == "evals" and len(rest) == 1:
            ev = self._eval(rest[0])
            offset = _int_param(query, "offset", 0)
            samples, total = r.samples_page(ev["id"], offset, pages.PAGE)
            return self._html(200, pages.evaluation(ev, samples, total, offset))
        if head == "artifacts" and len(rest) == 1:
            return self._artifact(rest[0])
        if head == "depictions" and len(rest) == 1:
            return self._depiction(rest[0])
        if head == "static" and len(rest) == 1 and rest[0] in STATIC_FILES:
            return self._static(STATIC_FILES[rest[0]])
        if head == "api":
            return self._api(rest, query)
        raise HTTPError(HTTPStatus.NOT_FOUND, f"no page at {path}")

    def _api(self, parts: list[str], query: dict) -> None:
        r = self.reader
        if parts == ["runs"]:
            offset, limit = _page(query)
            rows, total = r.runs_page(offset, limit)
            return self._json(200, _paged("runs", [_run_json(x) for x in rows], total, offset, limit))
        if parts == ["evals"]:
            offset, limit = _page(query)
            rows, total = r.evals_page(offset, limit)
            return self._json(200, _paged("evals", rows, total, offset, limit))
        if len(parts) == 2 and parts[0] == "runs":
            return self._json(200, _run_json(self._run(parts[1])))
        if len(parts) == 3 and parts[0] == "runs" and parts[2] == "steps":
            run = self._run(parts[1])
            offset, limit = _page(query)
            steps, total = r.steps_page(run["id"], offset, limit)
            return self._json(200, _paged("steps", steps, total, offset, limit, run_id=run["id"]))
        if len(parts) == 2 and parts[0] == "evals":
            return self._json(200, self._eval(parts[1]))
        if len(parts) == 3 and parts[0] == "evals" and parts[2] == "samples":
            ev = self._eval(parts[1])
            offset, limit = _page(query)
            rows, total = r.samples_page(ev["id"], offset, limit)
            return self._json(200, _paged("samples", rows, total, offset, limit, eval_id=ev["id"]))
        raise HTTPError(HTTPStatus.NOT_FOUND, f"no API endpoint /api/{'/'.join(parts)}")

    def _run(self, run_id: str) -> dict:
        run = self.reader.run(run_id)
        if run is None:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no run with id {run_id!r} in {self.reader.store.db_path}")
        return run

    def _eval(self, eval_id: str) -> dict:
        ev = self.reader.eval(eval_id)
        if ev is None:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no eval with id {eval_id!r} in {self.reader.store.db_path}")
        return ev

    def _artifact(self, sha256: str) -> None:
        found = self.reader.artifact(sha256.lower())
        if found is None:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no artifact {sha256!r} in {self.reader.store.db_path}")
        path, mime = found
        headers = {"Content-Security-Policy": ARTIFACT_CSP, "Cache-Control": "private, max-age=31536000, immutable"}
        if not INLINE_MIMES.match(mime):  # HTML, SVG, archives…: downloaded, never rendered on our origin
            headers["Content-Disposition"] = f"attachment; filename={sha256[:12]}{Path(path).suffix}"
        self._send(200, path.read_bytes(), mime, headers)

    def _depiction(self, sha256: str) -> None:
        from ..spec_molecules import MOL_MIME, NEEDS_RDKIT, MoleculeError
        from ..tools.chem.depict import molblock_png

        found = self.reader.artifact(sha256.lower())
        if found is None or found[1] != MOL_MIME:
            raise HTTPError(HTTPStatus.NOT_FOUND, f"no molecule artifact {sha256!r} in {self.reader.store.db_path}")
        try:
            picture = molblock_png(found[0].read_text(encoding="utf-8", errors="replace"))
        except MoleculeError as err:
            status = HTTPStatus.NOT_IMPLEMENTED if str(err) == NEEDS_RDKIT else HTTPStatus.UNPROCESSABLE_ENTITY
            raise HTTPError(status, f"cannot draw molecule {sha256[:12]}: {err}") from None
        self._send(200, picture, "image/png", {"Content-Security-Policy": ARTIFACT_CSP,
                                               "Cache-Control": "private, max-age=31536000, immutable"})

    def _static(self, path: Path) -> None:
        ctype = {".js": "text/javascript", ".css": "text/css"}.get(path.suffix) or \
            mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self._send(200, path.read_bytes(), f"{ctype}; charset=utf-8", {"Cache-Control": "no-cache"})


def _run_json(run: dict) -> dict:
    out = dict(run)
    out["spec"] = json_or_text(out.get("spec") or "null")
    return out


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True  # a browser holding a keep-alive connection must not keep the process alive

    def server_close(self) -> None:
        super().server_close()
        self.RequestHandlerClass.reader.close()


def make_server(home=None, host: str = "127.0.0.1", port: int = 8765, quiet: bool = True) -> ViewerServer:
    """The server, bound (port 0: any free port) but not yet serving."""
    reader = Reader(home)
    handler = type("BoundHandler", (Handler,), {"reader": reader, "quiet": quiet})
    try:
        return ViewerServer((host, port), handler)
    except OSError as err:
        reader.close()
        raise OSError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err


def _url(server: ViewerServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"


def serve(home=None, host: str = "127.0.0.1", port: int = 8765) -> tuple[ViewerServer, str]:
    """Start the viewer on a daemon thread; returns (server, url). `server.shutdown()` stops it."""
    server = make_server(home, host, port)
    threading.Thread(target=server.serve_forever, name="toolpath-viewer", daemon=True).start()
    return server, _url(server)


def serve_forever(home=None, host: str = "127.0.0.1", port: int = 8765, quiet: bool = True,
                  on_ready=None) -> None:
    """Serve in this thread until interrupted (Ctrl-C). `on_ready(url)` is called once it listens."""
    server = make_server(home, host, port, quiet=quiet)
    url = _url(server)
    if on_ready is not None:
        on_ready(url)
    else:
        print(f"toolpath viewer on {url} (store {server.RequestHandlerClass.reader.home}); Ctrl-C stops it",
              flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
