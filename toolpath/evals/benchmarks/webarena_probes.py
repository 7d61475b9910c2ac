"""The probes WebArena's program_html checks need: for each locator of a task's `eval` block, the page to open
and the JavaScript to read there, recorded in the browser's final state for webarena_eval.program_html to
compare. WebArena's own helper functions (func:...) are computed here when the final URL is enough to compute
them, and reported as unscorable when they need the real site's REST API.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

# ---- helpers that WebArena calls in configs, and whether we can compute them ----------------------------

# Those that need the live site's REST API (an admin token): no page state can stand in for them.
NEEDS_SITE_API = {
    "shopping_get_latest_order_url": "asks the shopping site's REST API (admin token) for the latest order",
    "shopping_get_sku_latest_review_rating": "asks the shopping site's REST API (admin token) for a product's reviews",
    "shopping_get_sku_latest_review_author": "asks the shopping site's REST API (admin token) for a product's reviews",
}
_FUNC = re.compile(r"^func:(\w+)\((.*)\)\s*$", re.DOTALL)


def _func(text: str) -> tuple[str, list[str]] | None:
    """('name', [string args]) of a `func:name('a', 'b')` locator or URL, else None."""
    m = _FUNC.match(text.strip())
    if not m:
        return None
    args = [a or b for a, b in re.findall(r"'([^']*)'|\"([^\"]*)\"", m.group(2))]
    return m.group(1), args


def reddit_get_post_url(url: str) -> str:
    """The post's own page for a URL under it (/f/<forum>/<id>/…), else the URL unchanged (WebArena's helper)."""
    p = urllib.parse.urlparse(url)
    parts = p.path.split("/")
    if len(parts) < 4 or parts[1] != "f":
        return url
    return f"{p.scheme}://{p.netloc}/f/{parts[2]}/{parts[3]}/"


def _gitlab_member_role_js(account: str) -> str:
    # WebArena's helper, as one expression: the role shown in the members table for @account, "" if absent.
    who = json.dumps("@" + account)
    return ("(() => { try { const names = document.querySelectorAll(\"td[data-label='Account'] "
            "span.gl-avatar-labeled-sublabel\"); let i = -1; for (let k = 0; k < names.length; k++) "
            f"{{ if (names[k].outerText === {who}) {{ i = k; break; }} }} "
            "return document.querySelectorAll('td.col-max-role span')[i].outerText; } catch (e) { return ''; } })()")


def _with_prep(js: str, prep: list[str]) -> str:
    """The locator preceded by the config's prep_actions (clicks that reveal a field); their errors are ignored,
    as WebArena ignores them."""
    if not prep:
        return js
    steps = " ".join(f"try {{ {p}; }} catch (e) {{}}" for p in prep)
    return f"(() => {{ {steps} return ({js}); }})()"


def html_target(entry: dict) -> dict:
    """How one program_html entry is read: {"probe": {"url", "js"}} or {"unscorable": reason}; plus "post_url"
    when the URL is reddit_get_post_url('__last_url__') (computed from the final URL at scoring time)."""
    url, locator = str(entry.get("url", "last")), str(entry.get("locator", ""))
    out: dict[str, Any] = {}
    for text in (url, locator):
        f = _func(text) if text.startswith("func:") else None
        if text.startswith("func:") and f is None:
            return {"unscorable": f"cannot read the helper call {text!r}"}
        if f and f[0] in NEEDS_SITE_API:
            return {"unscorable": f"helper {f[0]} {NEEDS_SITE_API[f[0]]}; not computable offline"}
    f = _func(url) if url.startswith("func:") else None
    if f:
        if f[0] != "reddit_get_post_url":
            return {"unscorable": f"unknown helper {f[0]} in program_html url"}
        # The post page is the agent's last page or one under it (a comment, the slug): read it there.
        out["post_url"], url = True, "last"
    f = _func(locator) if locator.startswith("func:") else None
    if f:
        if f[0] != "gitlab_get_project_memeber_role" or len(f[1]) != 1:
            return {"unscorable": f"unknown helper call {locator!r} in program_html locator"}
        js = _gitlab_member_role_js(f[1][0])
    elif not locator.strip():
        js = "document.documentElement.outerHTML"  # WebArena reads page.content(): the page's HTML
    elif locator.startswith(("document.", "[...document.")):
        js = locator
    else:
        return {"unscorable": f"unknown locator {locator!r}"}
    out["probe"] = {"url": url, "js": _with_prep(js, list(entry.get("prep_actions") or []))}
    return out


def probes_for(eval_block: Any) -> list[dict]:
    """The probes a task's final state must hold for program_html (WebArena schema), deduplicated, in order."""
    if not isinstance(eval_block, dict) or "program_html" not in (eval_block.get("eval_types") or []):
        return []
    out: list[dict] = []
    for entry in eval_block.get("program_html") or []:
        probe = html_target(entry).get("probe")
        if probe and probe not in out:
            out.append(probe)
    return out
