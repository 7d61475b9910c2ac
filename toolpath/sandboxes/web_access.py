"""Which URLs the browser sandbox may load: its start page's own origin (or, for a local start page, the files
beside it), the hosts a spec allows, and data:, about: and blob: URLs."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..spec import host_allowed
from .base import SandboxError

ALWAYS_ALLOWED = ("data", "about", "blob")


def endpoint(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port made explicit for http(s)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def file_path(url: str) -> Path:
    """The file a file:// URL names, symlinks and '..' resolved (so a link out of the folder is seen as out)."""
    return Path(unquote(urlsplit(url).path)).resolve()


def allowed_hosts_option(allowed_hosts) -> list[str]:
    """The `allowed_hosts` option as a list of lowered host patterns; a SandboxError for anything else."""
    if isinstance(allowed_hosts, str):
        allowed_hosts = [h for h in allowed_hosts.replace(",", " ").split() if h]
    if allowed_hosts is not None and not (isinstance(allowed_hosts, (list, tuple))
                                          and all(isinstance(h, str) and h.strip() for h in allowed_hosts)):
        raise SandboxError(f"allowed_hosts: expected a list of host names, got {allowed_hosts!r}")
    return [h.strip().lower() for h in allowed_hosts or []]


class AllowList:
    """May the browser load a URL? Answered without the browser (any thread)."""

    def __init__(self, start_url: str | None, hosts: list[str]):
        self.hosts = hosts
        # Hosts from start_url: exactly its host and port (another server on 127.0.0.1 is another site).
        self.origins: list[tuple[str, int | None]] = []
        # A local start page may load the files beside it (its CSS, scripts, the next page), nothing above them:
        # a model's goto('file:///etc/passwd') is a request like any other.
        self.file_root: Path | None = None
        if start_url:
            scheme, host, port = endpoint(start_url)
            if scheme == "file":
                self.file_root = file_path(start_url).parent
            elif host:
                self.origins.append((host, port))

    def allows(self, url: str) -> bool:
        scheme, host, port = endpoint(url)
        if scheme in ALWAYS_ALLOWED or "*" in self.hosts:
            return True
        if scheme == "file":
            if "file://" in self.hosts:
                return True
            return self.file_root is not None and file_path(url).is_relative_to(self.file_root)
        if (host, port) in self.origins:
            return True
        return host_allowed(host, port, self.hosts)

    def text(self) -> str:
        hosts = [f"{h}:{p}" if p else h for h, p in self.origins] + self.hosts
        return "allowed: " + (", ".join(hosts) if hosts else "nothing but data:/about:/blob:")
