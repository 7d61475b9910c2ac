"""`toolpath serve` under hostile clients: every attack of the hardening probe fired at a real server process.

    python benchmarks/serve_hostile.py [--model local] [--requests 200] [--slow 1500] [--json]

Starts `toolpath serve MODEL --port 0 -q` in a subprocess and reports: how many hostile requests were refused
cleanly (an OpenAI-shaped 4xx/503, or a connection the server closed for a request never finished), the
latency of a normal 2-token request before and after them (median of 3), how long the next request waited
after a client abandoned a long non-streamed one, how many slow-body connections the server had closed within
its body deadline + 10 s, the server's peak RSS while eight 57 MiB bodies came at once, and its RSS before and
after `--requests` ordinary requests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HELLO = [{"role": "user", "content": "Say hello."}]


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def send(port: int, head: str, body: bytes = b"", timeout: float = 300) -> int:
    """A raw request; -> its status, or 0 for a connection closed unanswered."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        try:
            conn.sendall(head.replace("\n", "\r\n").encode() + b"\r\n\r\n" + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the whole body went: the answer is still there to read
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    return int(data.split()[1]) if data else 0


def post(port: int, body, host="127.0.0.1", ctype="application/json") -> int:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return send(port, f"POST /v1/chat/completions HTTP/1.1\nHost: {host}\nContent-Type: {ctype}\n"
                      f"Content-Length: {len(data)}\nConnection: close", data)


def normal_latency(client, model: str) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        client.chat.completions.create(model=model, messages=HELLO, max_tokens=2, temperature=0)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def hostile(port: int, model: str) -> dict[str, int]:
    chat = {"model": model, "messages": HELLO}
    cases = {
        "context overflow (~9,000-token prompt)": (lambda: post(port, {**chat, "messages": [
            {"role": "user", "content": "the dragon cooks soup " * 2300}]}), 400),
        "10,000 tools": (lambda: post(port, {**chat, "tools": [
            {"type": "function", "function": {"name": f"t{i}"}} for i in range(10_000)]}), 400),
        "100,000 messages": (lambda: post(port, {**chat, "messages": HELLO * 100_000}), 400),
        "20,000 text parts": (lambda: post(port, {**chat, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}] * 20_000}]}), 400),
        "5 stop strings": (lambda: post(port, {**chat, "stop": list("abcde")}), 400),
        "20,000-character stop": (lambda: post(port, {**chat, "stop": "x" * 20_000}), 400),
        "200,000-character stop": (lambda: post(port, {**chat, "stop": "x" * 200_000}), 400),
        "Host: evil.com": (lambda: post(port, chat, host="evil.com"), 403),
        "Host: 127.0.0.1:80@evil.com": (lambda: post(port, chat, host="127.0.0.1:80@evil.com"), 400),
        "text/plain POST": (lambda: post(port, chat, ctype="text/plain"), 415),
        "100,000 nested [": (lambda: post(port, b"[" * 100_000), 400),
        "65 MiB body declared": (lambda: send(port, "POST /v1/chat/completions HTTP/1.1\nHost: 127.0.0.1\n"
                                                    "Content-Type: application/json\n"
                                                    f"Content-Length: {65 << 20}"), 413),
    }
    return {name: int(run() == want) for name, (run, want) in cases.items()}


def abandoned(port: int, client, model: str) -> float:
    """A long non-streamed request left after 3 s; -> seconds the next 2-token request took."""
    data = json.dumps({"model": model, "messages": [{"role": "user", "content": "Write a long story."}],
                       "max_tokens": 2000}).encode()
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    time.sleep(3)
    conn.close()
    started = time.perf_counter()
    client.chat.completions.create(model=model, messages=HELLO, max_tokens=2)
    return time.perf_counter() - started


def slow_bodies(port: int, n: int, body_seconds: float) -> dict:
    """n connections that send headers and one byte of a 1,000-byte body; -> how many the server closed."""
    conns = []
    for _ in range(n):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{")
            conns.append(c)
        except OSError:
            break
    deadline = time.monotonic() + body_seconds + 10
    closed = 0
    for c in conns:
        c.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            while c.recv(65536):
                pass
            closed += 1
        except (TimeoutError, ConnectionResetError):
            closed += isinstance(sys.exc_info()[1], ConnectionResetError)
        c.close()
    return {"opened": len(conns), "closed_by_server": closed}


def big_bodies(port: int, pid: int, n: int = 8, size: int = 57 << 20) -> dict:
    statuses: list[int] = []
    body = b'{"model": "x", "messages": "' + b"a" * (size - 40) + b'"}'

    def one():
        statuses.append(post(port, body))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"statuses": sorted(statuses), "peak_rss_mb": round(rss_mb(pid, "VmHWM"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="local")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--slow", type=int, default=1500)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import openai

    from toolpath.serve.limits import Limits

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the slow connections are sockets of ours
    home = os.environ.get("TOOLPATH_HOME") or tempfile.mkdtemp(prefix="serve-hostile-")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOOLPATH_HOME=home)
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "serve", args.model, "--port", "0", "-q"],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        url = next(m.group(1) for line in proc.stderr if (m := re.search(r"serving \S+ at (\S+)", line)))
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep its pipe drained
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=600)
        out: dict = {"model": args.model, "latency_before_s": round(normal_latency(client, args.model), 3)}
        refused = hostile(port, args.model)
        out["hostile"] = {"sent": len(refused), "refused_cleanly": sum(refused.values()),
                          "not_refused": [k for k, v in refused.items() if not v]}
        out["next_after_abandoned_s"] = round(abandoned(port, client, args.model), 3)
        out["slow_bodies"] = slow_bodies(port, args.slow, Limits().body_seconds)
        out["rss_before_big_bodies_mb"] = round(rss_mb(proc.pid))
        out["big_bodies"] = big_bodies(port, proc.pid)
        out["latency_after_s"] = round(normal_latency(client, args.model), 3)
        rss_before = rss_mb(proc.pid)
        for i in range(args.requests):
            client.chat.completions.create(model=args.model, messages=[{"role": "user", "content": f"Count to {i}."}],
                                           max_tokens=8)
        out["rss_mb"] = {"before": round(rss_before), f"after_{args.requests}_requests": round(rss_mb(proc.pid))}
    finally:
        proc.terminate()
        proc.wait(30)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k:>24}: {v}")


if __name__ == "__main__":
    main()
