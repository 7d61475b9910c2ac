"""The HTTP backend: a SearxNG-compatible JSON search API given by URL."""

from __future__ import annotations

import os

from ..registry import ToolError


def _http_search(base: str, query: str) -> tuple[list[dict], list[str]]:
    import httpx

    url = base.rstrip("/")
    url = url if url.endswith("/search") else url + "/search"
    timeout = float(os.environ.get("TOOLPATH_SEARCH_TIMEOUT", "10"))
    try:
        r = httpx.get(url, params={"q": query, "format": "json"}, timeout=timeout, follow_redirects=True)
    except httpx.TimeoutException:
        raise ToolError(f"search: {url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as err:
        raise ToolError(f"search: cannot reach {url}: {err}") from None
    if r.status_code != 200:
        raise ToolError(f"search: {url} answered HTTP {r.status_code}: {' '.join(r.text[:200].split())}")
    try:
        body = r.json()
    except ValueError:
        raise ToolError(f"search: {url} did not return JSON (starts with {r.text[:80]!r}); is format=json enabled "
                        "in its settings?") from None
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise ToolError(f"search: the answer from {url} has no 'results' list")
    hits, notes = [], []
    for i, res in enumerate(results):
        if not isinstance(res, dict) or not isinstance(res.get("url"), str) or not res["url"]:
            notes.append(f"result {i + 1} from {url} has no url")
            continue
        text = res.get("content") if isinstance(res.get("content"), str) else ""
        hits.append({"title": str(res.get("title") or res["url"]), "url": res["url"], "text": text,
                     "score": float(len(results) - i)})  # the engine's order is its ranking
    if results and not hits:
        raise ToolError(f"search: none of the {len(results)} results from {url} has a url")
    return hits, notes
