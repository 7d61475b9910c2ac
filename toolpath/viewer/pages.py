"""The viewer's HTML pages. Everything from the store is escaped here (model output is untrusted); the steps
of a run are drawn in the browser by static/viewer.js, from JSON, with DOM text nodes only."""

from __future__ import annotations

import contextvars
import functools
import json
import time
from html import escape
from http import HTTPStatus
from urllib.parse import quote, urlencode

from ..redact import redact, redactor
from ..runs import to_json

PAGE = 50  # rows (runs, evals, samples) or steps per page


# The redaction a page is built with: the known secrets are read once per page (reading them means reading the
# environment, which per field made a page of 50 rows ten times slower).
_page_redact = contextvars.ContextVar("page_redact", default=None)


def page(build):
    """A page builder: every e() inside it redacts with one set of known secrets."""
    @functools.wraps(build)
    def built(*args, **kwargs):
        token = _page_redact.set(redactor())
        try:
            return build(*args, **kwargs)
        finally:
            _page_redact.reset(token)
    return built


def e(value) -> str:
    """Text for HTML: secrets the viewer knows of redacted (a store written before redaction may hold
    them), then escaped."""
    text = "" if value is None else str(value)
    return escape((_page_redact.get() or redact)(text), quote=True)


def _when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""


def _num(value, fmt="{:.3g}") -> str:
    return "" if value is None else fmt.format(value)


def layout(title: str, body: str) -> str:
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>{e(title)} · toolpath</title><link rel=icon href='data:,'>"
            "<link rel=stylesheet href='/static/viewer.css'></head>"
            f"<body><header class=top><a href='/'>toolpath</a> <span>{e(title)}</span></header>"
            f"<main>{body}</main></body></html>")


@page
def not_found(what: str) -> str:
    return layout("not found", f"<h1>Not found</h1><p class=notfound>{e(what)}</p><p><a href='/'>all runs</a></p>")


@page
def bad_request(what: str, status: int = 400) -> str:
    phrase = HTTPStatus(status).phrase
    return layout(phrase.lower(), f"<h1>{e(phrase)}</h1><p class=notfound>{e(what)}</p>")


def json_text(value) -> str:
    """JSON a browser can parse, by the rules the store writes with (runs.to_json): a store written before
    them may hold bare NaN or Infinity (served as null), lone surrogates, or a secret the viewer knows of."""
    return to_json(value)


def _pager(path: str, key: str, offset: int, total: int, others: dict | None = None) -> str:
    """Links to the previous and next page; `others` keeps the other tables' offsets on the same page."""
    def link(off, label):
        q = {**(others or {}), key: off}
        return f"<a class=pager-{label.split()[0].lower()} href='{e(path)}?{e(urlencode(q))}'>{e(label)}</a>"

    parts = []
    if offset > 0:
        parts.append(link(max(0, offset - PAGE), "previous page"))
    shown = f"{offset + 1}–{min(offset + PAGE, total)} of {total}" if total else "none"
    parts.append(f"<span>{shown}</span>")
    if offset + PAGE < total:
        parts.append(link(offset + PAGE, "next page"))
    return f"<nav class=pager>{' '.join(parts)}</nav>"


def _run_link(run_id) -> str:
    return f"<a href='/runs/{e(quote(str(run_id), safe=''))}'>{e(run_id)}</a>" if run_id else ""


@page
def index(runs, runs_total, runs_offset, evals, evals_total, evals_offset) -> str:
    rows = "".join(
        f"<tr><td>{_run_link(r['id'])}</td><td>{e(r['task_id'])}</td><td>{e(r['agent'])}</td><td>{e(r['model'])}</td>"
        f"<td class='status {e(r['status'])}'>{e(r['status'])}</td><td>{e(_num(r['score']))}</td>"
        f"<td>{e(r['steps'])}</td><td>{e(_when(r['created']))}</td></tr>" for r in runs)
    ev_rows = "".join(
        f"<tr><td><a href='/evals/{e(quote(ev['id'], safe=''))}'>{e(ev['id'])}</a></td><td>{e(ev['benchmark'])}</td>"
        f"<td>{e(ev['model'])}</td><td>{e(ev['n'])}</td><td>{e(ev['done'])}</td><td>{e(_num(ev['score']))}</td>"
        f"<td>{e(_when(ev['created']))}</td></tr>" for ev in evals)
    body = (f"<h1>Runs</h1><table id=runs><thead><tr><th>run</th><th>task</th><th>agent</th><th>model</th>"
            f"<th>status</th><th>score</th><th>steps</th><th>created</th></tr></thead><tbody>{rows}</tbody></table>"
            + _pager("/", "runs", runs_offset, runs_total, {"evals": evals_offset})
            + f"<h1>Evals</h1><table id=evals><thead><tr><th>eval</th><th>benchmark</th><th>model</th><th>n</th>"
            f"<th>done</th><th>score</th><th>created</th></tr></thead><tbody>{ev_rows}</tbody></table>"
            + _pager("/", "evals", evals_offset, evals_total, {"runs": runs_offset}))
    return layout("runs and evals", body)


def _facts(pairs) -> str:
    return "<dl class=facts>" + "".join(f"<dt>{e(k)}</dt><dd class='f-{e(k)}'>{v}</dd>" for k, v in pairs) + "</dl>"


def _script_json(value) -> str:
    """JSON for a <script type=application/json>: `<`, `>` and `&` escaped so no text can close the tag."""
    text = json_text(value)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _instruction(spec_json) -> str:
    try:
        spec = json.loads(spec_json or "{}")
    except ValueError:
        return ""
    return str(spec.get("instruction") or "") if isinstance(spec, dict) else ""


def _nested_tree(children: list[dict]) -> str:
    """The runs nested in a run, under the step that started each, as nested lists."""
    if not children:
        return ""
    items = "".join(
        f"<li>step {e(c['parent_seq'])}: {_run_link(c['id'])} <span class=agent>{e(c['agent'])}</span> "
        f"<span class='status {e(c['status'])}'>{e(c['status'])}</span> {e(c['steps'])} steps"
        + (f" — <q>{e(str(c['answer'])[:200])}</q>" if c["answer"] is not None else "")
        + _nested_tree(c.get("nested", [])) + "</li>" for c in children)
    return f"<ul class=nested>{items}</ul>"


@page
def run(r: dict, first: dict, page_size: int, nested: list[dict] = (), dag: str = "") -> str:
    """A run's header, then its steps: the first page is inlined (no second round trip before the first
    screen), the rest comes from /api/runs/<id>/steps as the reader scrolls."""
    tokens = f"{r['tokens_in']} in / {r['tokens_out']} out"
    header = _facts([
        ("task", e(r["task_id"])), ("instruction", f"<pre>{e(_instruction(r.get('spec')))}</pre>"),
        ("agent", e(r["agent"])), ("model", e(r["model"])),
        ("status", f"<span class='status {e(r['status'])}'>{e(r['status'])}</span>"),
        ("answer", f"<pre>{e(r['answer'])}</pre>"), ("error", f"<pre class=error-text>{e(r['error'])}</pre>"),
        ("score", e(_num(r["score"]))), ("tokens", e(tokens)), ("seconds", e(_num(r["seconds"], "{:.2f}"))),
        ("steps", e(r["steps"])), ("created", e(_when(r["created"]))),
        ("eval", f"<a href='/evals/{e(quote(r['eval_id'], safe=''))}'>{e(r['eval_id'])}</a>"
         if r.get("eval_id") else ""),
        ("nested in", f"{_run_link(r['parent_id'])}, step {e(r['parent_seq'])}" if r.get("parent_id") else ""),
    ])
    tree = f"<h2>Nested runs</h2>{_nested_tree(list(nested))}" if nested else ""
    api = f"/api/runs/{quote(r['id'], safe='')}/steps"
    body = (f"<h1>Run {e(r['id'])}</h1>{header}{tree}{dag}<h2>Steps <span id=step-count></span></h2>"
            f"<div id=steps data-api='{e(api)}' data-agent='{e(r['agent'])}' data-page-size='{page_size}'></div>"
            "<div id=more><button id=load-more type=button hidden>load more steps</button>"
            "<span id=loading hidden>loading…</span></div>"
            f"<script type=application/json id=first-page>{_script_json(first)}</script>"
            "<script src='/static/viewer.js' defer></script>")
    return layout(f"run {r['id']}", body)


@page
def evaluation(ev: dict, samples: list[dict], total: int, offset: int) -> str:
    summary = ev.get("summary") or {}
    header = _facts([
        ("benchmark", e(ev["benchmark"])), ("model", e(ev["model"])), ("n", e(ev["n"])), ("done", e(ev["done"])),
        ("score", e(_num(ev.get("score")))), ("tokens", e(summary.get("tokens", ""))),
        ("seconds", e(_num(summary.get("seconds"), "{:.1f}"))), ("created", e(_when(ev["created"]))),
        ("finished", e(_when(ev.get("finished"))) or "not yet"),
        ("params", f"<pre>{e(json.dumps(ev.get('params') or {}, ensure_ascii=False))}</pre>"),
    ])
    rows = []
    for s in samples:
        d = s["detail"] if isinstance(s["detail"], dict) else {"answer": s["detail"]}
        rows.append(f"<tr><td>{e(s['sample_id'])}</td><td>{_run_link(s['run_id'])}</td><td>{e(s['category'])}</td>"
                    f"<td class='status {e(s['status'])}'>{e(s['status'])}</td><td>{e(_num(s['score']))}</td>"
                    f"<td>{e(s['tokens'])}</td><td>{e(_num(s['seconds'], '{:.2f}'))}</td>"
                    f"<td class=cell-text>{e(d.get('answer'))}</td>"
                    f"<td class='cell-text error-text'>{e(d.get('error'))}</td></tr>")
    body = (f"<h1>Eval {e(ev['id'])}</h1>{header}<h2>Samples</h2><table id=samples><thead><tr><th>sample</th>"
            "<th>run</th><th>category</th><th>status</th><th>score</th><th>tokens</th><th>seconds</th><th>answer</th>"
            f"<th>error</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            + _pager(f"/evals/{quote(ev['id'], safe='')}", "offset", offset, total))
    return layout(f"eval {ev['id']}", body)
