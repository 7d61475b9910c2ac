"""Reports of stored evals: HTML (self-contained) and Markdown, with numbers, failures and plots.

`write_report(store, ["e2026…", …])` reads the evals' samples from the store and writes, into one folder:

    report.html   every table, the plots embedded as base64 PNG (one file to mail or open offline)
    report.md     the same tables, the plots as the PNG files beside it
    *.png         score per category (one per eval), cost vs score, and the evals side by side (several ids)

Scores come with bootstrap 95% confidence intervals (percentile method, seeded, so a report is reproducible).
Everything that came from a model or a benchmark (answers, errors, categories, model names) is untrusted
text: it is HTML-escaped in the HTML (which also forbids scripts through its Content-Security-Policy),
Markdown-escaped in the Markdown, and `$`-escaped in plot labels (matplotlib would parse it as math). Secrets
are redacted from all of it (toolpath.redact: a store written before redaction may hold them), and links
into the viewer are made only from an http(s) address.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

from ..redact import redact_data
from .intervals import LEVEL, N_RESAMPLES, bootstrap_ci, weighted_ci

MODES = ("official", "toolpath")  # the scoring modes, a column each beside the score (benchmarks/base.py)

MAX_FAILURES = 500  # per eval in the report; the rest are counted (toolpath view pages through them all)
CELL_CHARS = 300  # an answer or error longer than this is cut in the tables


# ---- numbers -----------------------------------------------------------------------------------------

def _detail(row: dict) -> dict:
    try:
        d = json.loads(row.get("detail") or "{}")
    except json.JSONDecodeError:  # a hand-edited or truncated row: report the sample without its detail
        return {}
    return d if isinstance(d, dict) else {}


def _p90(xs: list[float]) -> float:
    import numpy as np

    return float(np.percentile(xs, 90))


def _cost(details: list[dict]) -> tuple[float | None, int]:
    """(sum of cost_usd over the priced samples or None when none is priced, how many are not priced)."""
    priced = [float(d["cost_usd"]) for d in details
              if isinstance(d.get("cost_usd"), (int, float)) and not isinstance(d["cost_usd"], bool)]
    return (sum(priced) if priced else None), len(details) - len(priced)


def _scored(rows: list[dict], details: list[dict], scoring: str) -> dict:
    """n, the (weighted) mean score with its CI, and the mean in each scoring mode, over some samples; a sample
    stored without its scores per mode (an older eval) has its score in the eval's mode and none in the
    other, which then has no mean."""
    if not rows:
        return {"n": 0, "score": None, "ci": None, "scores": {}}
    values = [float(r["score"]) for r in rows]
    weights = [float(d.get("weight", 1.0)) for d in details]

    def mean(vals: list[float], ws: list[float]) -> float:
        t = sum(ws)
        return sum(w * v for w, v in zip(ws, vals)) / t if t else 0.0

    scores = {}
    for m in MODES:
        per = [(d.get("scores") or {}).get(m, v if m == scoring else None) for d, v in zip(details, values)]
        if all(isinstance(x, (int, float)) for x in per):
            ws = [float((d.get("weights") or {}).get(m, w)) for d, w in zip(details, weights)]
            scores[m] = mean([float(x) for x in per], ws)
    plain = all(w == 1.0 for w in weights)
    ci = bootstrap_ci(values) if plain else weighted_ci(values, weights)
    return {"n": len(rows), "score": mean(values, weights), "ci": list(ci), "scores": scores}


def _natural(name: str) -> list:
    """Sort key that puts cat2 before cat10."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name) if t]


# A viewer address is made of RFC 3986's characters less quotes, parentheses, angle brackets and the backslash,
# so it cannot end the HTML attribute or the Markdown link it is written into, whatever the escaping.
_URL_CHARS = re.compile(r"[A-Za-z0-9._~:/\[\]@!$&*+,;=%-]+")


def check_viewer_url(url: str) -> str:
    """`url` when it can be the address of `toolpath view` in a report's links: http or https, a host, no
    credentials, query or fragment. Anything else (javascript:, data:, a bare path) is a ValueError."""
    def refuse(why: str) -> ValueError:
        shown = repr(url if len(url) <= 80 else url[:80] + "…")
        return ValueError(f"report: viewer URL (--viewer-url) {shown} {why}: give an http(s) address of "
                          f"toolpath view such as http://127.0.0.1:8765/")

    if not isinstance(url, str):
        raise ValueError(f"report: viewer URL (--viewer-url) must be a string, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as err:
        raise refuse(f"is not a URL ({err})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise refuse("is not http(s) with a host")
    if parts.username is not None or parts.password is not None:
        raise refuse("holds credentials, which a report would show to everyone it is sent to")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise refuse("has a query or fragment, which run links cannot follow")
    if not _URL_CHARS.fullmatch(url):
        raise refuse("has characters a link cannot hold (spaces, quotes, parentheses, angle brackets)")
    return url


def _link(run_id: str | None, viewer_url: str | None) -> str | None:
    if not run_id:
        return None
    if viewer_url:
        return f"{viewer_url.rstrip('/')}/runs/{quote(str(run_id), safe='')}"
    return f"toolpath runs show {run_id}"


def eval_numbers(store, ev: dict, viewer_url: str | None = None) -> dict:
    """Everything the report says about one eval, as plain JSON-able data."""
    rows = store.eval_samples(ev["id"])
    details = [_detail(r) for r in rows]
    summary = ev.get("summary") or {}
    excludes = list(summary.get("overall_excludes") or [])  # e.g. MindCube's overall leaves translation out
    out = {"id": ev["id"], "benchmark": ev["benchmark"], "model": ev["model"], "params": ev.get("params") or {},
           "planned": ev.get("n"), "finished": bool(ev.get("finished")), "created": ev.get("created"),
           "samples": len(rows), "overall_excludes": excludes, "ci_level": LEVEL, "resamples": N_RESAMPLES,
           "wall_seconds": summary.get("seconds"), "closeness": summary.get("closeness")}
    out["scoring"] = scoring = (ev.get("params") or {}).get("scoring", "toolpath")
    kept = [i for i, r in enumerate(rows) if r["category"] not in excludes]
    out["overall"] = _scored([rows[i] for i in kept], [details[i] for i in kept], scoring)
    cats: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        cats.setdefault(str(r["category"]), []).append(i)
    out["by_category"] = {}
    for cat in sorted(cats, key=_natural):
        idx = cats[cat]
        cost, unpriced = _cost([details[i] for i in idx])
        out["by_category"][cat] = {**_scored([rows[i] for i in idx], [details[i] for i in idx], scoring),
                                   "cost_per_sample": None if cost is None else cost / (len(idx) - unpriced)}
    cost, unpriced = _cost(details)
    out["cost_usd"] = cost
    out["cost_per_sample"] = None if cost is None else cost / (len(rows) - unpriced)
    out["unpriced"] = unpriced
    secs = [float(r["seconds"]) for r in rows]
    out["seconds"] = ({"total": sum(secs), "mean": sum(secs) / len(secs), "p90": _p90(secs)} if secs else None)
    t_in = sum(int(d.get("tokens_in") or 0) for d in details)
    t_out = sum(int(d.get("tokens_out") or 0) for d in details)
    total = sum(int(r["tokens"]) for r in rows)
    split = any("tokens_in" in d for d in details)  # evals stored before the split have only the total
    out["tokens"] = {"total": total, "in": t_in if split else None, "out": t_out if split else None,
                     "per_sample": total / len(rows) if rows else None}
    out["retries"] = sum(int(d.get("retries") or 0) for d in details)
    out["timed_out"] = sum(1 for d in details if d.get("timed_out"))
    failures = []
    for r, d in zip(rows, details):
        if r["score"] < 1 or r["status"] != "finished":
            failures.append({"sample_id": r["sample_id"], "category": r["category"], "status": r["status"],
                             "score": r["score"], "error": d.get("error"), "answer": d.get("answer"),
                             "run_id": r["run_id"], "link": _link(r["run_id"], viewer_url)})
    out["n_failures"] = len(failures)
    out["failures"] = failures
    return redact_data(out)


# ---- formatting ----------------------------------------------------------------------------------------

def _f(x: float | None, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _ci(c: list | None) -> str:
    return "–" if not c else f"[{c[0]:.3f}, {c[1]:.3f}]"


def usd(x: float | None) -> str:
    if x is None:
        return "not priced"
    return f"${x:.4f}" if x == 0 or abs(x) >= 0.01 else f"${x:.6f}"


def _secs(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f} s"


def _cut(s, limit: int = CELL_CHARS) -> str:
    s = re.sub(r"\s+", " ", "" if s is None else str(s)).strip()  # a table cell is one line
    return s if len(s) <= limit else s[:limit - 1] + "…"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~#!])")


def md(s, limit: int = CELL_CHARS) -> str:
    """Untrusted text as inert Markdown on one line: pipes cannot split a table row, `<` cannot open HTML,
    `[`/`!` cannot make links or images, `*`/`_`/backticks cannot format."""
    return _MD_SPECIAL.sub(r"\\\1", _cut(s, limit))


def h(s, limit: int | None = None) -> str:
    return html.escape(_cut(s, limit) if limit else ("" if s is None else str(s)), quote=True)


def _mpl(s, limit: int = 40) -> str:
    """A plot label: short, and `$` escaped so matplotlib does not parse (or fail on) it as mathtext."""
    return "\n".join(_cut(line, limit) for line in str(s).split("\n")).replace("$", r"\$")


def _label(num: dict) -> str:
    return f"{num['id']} ({num['model']})"


def _score_cell(o: dict) -> tuple[str, str, str]:
    return str(o["n"]), _f(o["score"]), _ci(o["ci"])


# ---- plots ----------------------------------------------------------------------------------------------

def _figure(w: float, h_: float):
    # the Agg canvas on a bare Figure: no pyplot, so no global backend switch and no state shared between calls
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h_), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _yerr(rows: list[dict]) -> list[list[float]]:
    return [[max(0.0, r["score"] - r["ci"][0]) for r in rows], [max(0.0, r["ci"][1] - r["score"]) for r in rows]]


def _ticks(ax, names: list[str]) -> None:
    ax.set_xticks(range(len(names)), [_mpl(n, 32) for n in names], rotation=45 if len(names) > 6 else 0,
                  ha="right" if len(names) > 6 else "center")


def plot_categories(num: dict) -> bytes:
    """One eval's score per category and overall, with the CI as error bars and n under each bar."""
    names = list(num["by_category"]) + ["overall"]
    rows = list(num["by_category"].values()) + [num["overall"]]
    rows_ok = [r for r in rows if r["score"] is not None]
    names = [n for n, r in zip(names, rows) if r["score"] is not None]
    fig = _figure(min(20, max(5, 0.7 * len(names) + 2)), 3.6)
    ax = fig.add_subplot()
    colors = ["C0"] * (len(names) - 1) + ["C3"]
    ax.bar(range(len(names)), [r["score"] for r in rows_ok], yerr=_yerr(rows_ok), capsize=4, color=colors)
    _ticks(ax, [f"{_cut(name, 24)}\nn={r['n']}" for name, r in zip(names, rows_ok)])
    ax.set_ylim(0, max(1.05, max(r["ci"][1] for r in rows_ok) * 1.05))
    ax.set_ylabel(f"score (bars: {LEVEL:.0%} CI)")
    ax.set_title(_mpl(f"{num['id']} · {num['benchmark']} · {num['model']}", 80), fontsize=10)
    return _png(fig)


def plot_cost_score(nums: list[dict]) -> bytes:
    """Cost per sample against score: a point per eval, or per category when there is one eval."""
    if len(nums) == 1:
        n0 = nums[0]
        points = [(c, v) for c, v in n0["by_category"].items() if v["score"] is not None]
        points = [(name, v["cost_per_sample"], v) for name, v in points]
        title = _mpl(f"{n0['id']}: cost vs score per category", 80)
    else:
        points = [(_label(n), n["cost_per_sample"], n["overall"]) for n in nums if n["overall"]["score"] is not None]
        title = "cost vs score per eval"
    fig = _figure(6, 4)
    ax = fig.add_subplot()
    priced = [(name, c, v) for name, c, v in points if c is not None]
    for i, (name, c, v) in enumerate(priced):
        ax.errorbar([c], [v["score"]], yerr=_yerr([v]), fmt="o", capsize=4, color=f"C{i % 10}",
                    label=_mpl(name, 50))
    unpriced = [name for name, c, _ in points if c is None]
    if unpriced:  # said on the figure, so a sparse plot is not read as "cost 0"
        shown = [_mpl(u, 60) for u in unpriced[:8]] + ([f"… {len(unpriced) - 8} more"] if len(unpriced) > 8 else [])
        ax.text(0.5, 0.5, "not priced:\n" + "\n".join(shown), transform=ax.transAxes, fontsize=8, ha="center",
                va="center", color="#555")
    if priced:
        ax.legend(fontsize=7, loc="best")
    top = max([c for _, c, _ in priced], default=0.0)
    pad = 0.08 * top or 0.001  # costs are never negative: the axis starts just left of $0, where local models sit
    ax.set_xlim(-pad, top + pad)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set_xlabel("cost per sample (USD)")
    ax.set_ylabel(f"score ({LEVEL:.0%} CI)")
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=10)
    return _png(fig)


def plot_compare(nums: list[dict]) -> bytes:
    """The evals side by side: grouped bars per category (and overall), one colour per eval."""
    cats = sorted({c for n in nums for c in n["by_category"]}, key=_natural) + ["overall"]
    fig = _figure(min(22, max(6, 0.5 * len(cats) * len(nums) + 3)), 4)
    ax = fig.add_subplot()
    width = 0.8 / len(nums)
    for j, n in enumerate(nums):
        xs, rows = [], []
        for i, c in enumerate(cats):
            r = n["overall"] if c == "overall" else n["by_category"].get(c)
            if r and r["score"] is not None:
                xs.append(i - 0.4 + width * (j + 0.5))
                rows.append(r)
        ax.bar(xs, [r["score"] for r in rows], width=width, yerr=_yerr(rows), capsize=3, color=f"C{j % 10}",
               label=_mpl(_label(n), 50))
    _ticks(ax, cats)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(f"score ({LEVEL:.0%} CI)")
    below = -0.28 if len(cats) > 6 else -0.15  # under the (rotated) category names, off the bars
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, below), ncol=min(3, len(nums)))
    ax.set_title("evals side by side", fontsize=10)
    return _png(fig)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80]


def make_plots(nums: list[dict]) -> list[dict]:
    """[{"file", "title", "png"}] in report order; evals without samples have nothing to plot."""
    with_data = [n for n in nums if n["samples"]]
    plots = [{"file": f"scores_{i}_{_safe(n['id'])}.png", "title": f"score per category: {n['id']}",
              "eval_id": n["id"], "kind": "categories", "png": plot_categories(n)}
             for i, n in enumerate(nums, 1) if n["samples"]]
    if with_data:
        plots.append({"file": "cost_vs_score.png", "title": "cost vs score", "kind": "cost_score", "eval_id": None,
                      "png": plot_cost_score(with_data)})
    if len(with_data) >= 2:
        plots.append({"file": "compare.png", "title": "evals side by side", "kind": "compare", "eval_id": None,
                      "png": plot_compare(with_data)})
    return plots


# ---- documents ------------------------------------------------------------------------------------------

def _status(n: dict) -> str:
    done = f"{n['samples']}/{n['planned']} samples"
    return done if n["finished"] else f"{done}, not finished"


def _cost_line(n: dict) -> str:
    s = f"cost {usd(n['cost_usd'])}"
    if n["cost_usd"] is not None:
        s += f" ({usd(n['cost_per_sample'])} per sample)"
        if n["unpriced"]:
            s += f"; {n['unpriced']} samples not priced"
    return s


def _time_line(n: dict) -> str:
    t = n["seconds"]
    s = f"time {_secs(t['total'])} total, {_secs(t['mean'])} mean, {_secs(t['p90'])} p90 per sample"
    if n["wall_seconds"] is not None:
        s += f" ({_secs(float(n['wall_seconds']))} wall clock)"
    return s


def _token_line(n: dict) -> str:
    t = n["tokens"]
    split = f"{t['in']} in, {t['out']} out" if t["in"] is not None else "in/out not recorded"
    return (f"tokens {t['total']} ({split}; {_f(t['per_sample'], 1)} per sample); "
            f"retries {n['retries']}, timed out {n['timed_out']}")


def _closeness_line(n: dict) -> str:
    from .dag.runs import closeness_text

    return closeness_text(n["closeness"])


def _modes(v: dict) -> list[str]:
    return [_f(v.get("scores", {}).get(m)) for m in MODES]


def _scoring_line(n: dict) -> str:
    return (f"score: {n['scoring']} scoring; columns official and toolpath: the same answers scored by the "
            "published scorer and by ours")


def _overall_name(n: dict) -> str:
    return "overall" + (f" (without {', '.join(n['overall_excludes'])})" if n["overall_excludes"] else "")


def _markdown(nums: list[dict], plots: list[dict], created: str) -> str:
    out = ["# toolpath report", "",
           f"{len(nums)} eval(s), written {created}. Scores are means (weighted where a benchmark pools its score); "
           f"intervals are {LEVEL:.0%} bootstrap confidence intervals (percentile, {N_RESAMPLES} resamples, seed 0).",
           ""]
    if len(nums) > 1:
        out += ["| eval | benchmark | model | n | score | 95% CI | cost | failures |",
                "|---|---|---|---:|---:|---|---|---:|"]
        for n in nums:
            o = n["overall"]
            out.append(f"| {md(n['id'])} | {md(n['benchmark'])} | {md(n['model'])} | {o['n']} | {_f(o['score'])} | "
                       f"{_ci(o['ci'])} | {md(usd(n['cost_usd']))} | {n['n_failures']} |")
        out.append("")
    for p in plots:
        if p["eval_id"] is None:
            out += [f"![{md(p['title'])}]({p['file']})", ""]
    for n in nums:
        out += [f"## {md(n['id'])}: {md(n['benchmark'])}, model {md(n['model'])}", "",
                f"{md(_status(n))}; params {md(json.dumps(n['params'], sort_keys=True))}", ""]
        if not n["samples"]:
            out += ["This eval has no samples stored: nothing to report yet.", ""]
            continue
        out += [md(_scoring_line(n)), "",
                "| category | n | score | 95% CI | official | toolpath | cost per sample |",
                "|---|---:|---:|---|---:|---:|---|"]
        for c, v in n["by_category"].items():
            out.append(f"| {md(c)} | {v['n']} | {_f(v['score'])} | {_ci(v['ci'])} | {' | '.join(_modes(v))} | "
                       f"{md(usd(v['cost_per_sample']))} |")
        o = n["overall"]
        out += [f"| **{md(_overall_name(n))}** | {o['n']} | **{_f(o['score'])}** | {_ci(o['ci'])} | "
                f"{' | '.join(_modes(o))} | {md(usd(n['cost_per_sample']))} |", ""]
        out += [f"- {md(_cost_line(n))}", f"- {md(_time_line(n))}", f"- {md(_token_line(n))}"]
        out += [f"- {md(_closeness_line(n))}"] * bool(n["closeness"]) + [""]
        out += [f"![{md(p['title'])}]({p['file']})" for p in plots if p["eval_id"] == n["id"]] + [""]
        out += [f"### Failures ({n['n_failures']})", ""]
        if not n["failures"]:
            out += ["None: every sample finished with score 1.", ""]
            continue
        out += ["| sample | category | status | score | error | answer | run |", "|---|---|---|---:|---|---|---|"]
        for fl in n["failures"][:MAX_FAILURES]:
            if fl["link"] is None:
                run = "no run (the episode never started)"
            elif fl["link"].startswith("toolpath "):
                run = md(fl["link"])
            else:
                run = f"[{md(fl['run_id'])}](<{fl['link']}>)"  # the link is built from a %-quoted run id
            out.append(f"| {md(fl['sample_id'])} | {md(fl['category'])} | {md(fl['status'])} | {_f(fl['score'])} | "
                       f"{md(fl['error'])} | {md(fl['answer'])} | {run} |")
        if n["n_failures"] > MAX_FAILURES:
            out.append(f"\n{n['n_failures'] - MAX_FAILURES} more failures not shown (toolpath view lists them all).")
        out.append("")
    return "\n".join(out)


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}td.n{text-align:right}tr.all td{font-weight:bold}img{max-width:100%;border:1px solid #eee}
.muted{color:#666}td.t{max-width:28em;overflow-wrap:anywhere}"""


def _html(nums: list[dict], plots: list[dict], created: str) -> str:
    def img(p: dict) -> str:
        data = base64.b64encode(p["png"]).decode("ascii")
        return (f"<figure><img alt='{h(p['title'])}' data-plot='{h(p['kind'])}' src='data:image/png;base64,{data}'>"
                f"<figcaption><a href='{h(quote(p['file']))}'>{h(p['file'])}</a></figcaption></figure>")

    def row(cells: list[tuple[str, str]], cls: str = "") -> str:
        tds = "".join(f"<td class='{c}'>{v}</td>" for c, v in cells)
        return f"<tr{f' class={cls!r}' if cls else ''}>{tds}</tr>"

    out = ["<!doctype html><html><head><meta charset='utf-8'>",
           # no script may run and nothing may load from elsewhere: model output in the page stays inert
           "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; "
           "style-src 'unsafe-inline'\">",
           f"<title>toolpath report: {h(', '.join(n['id'] for n in nums))}</title><style>{_CSS}</style></head><body>",
           "<h1>toolpath report</h1>",
           f"<p class='muted'>{len(nums)} eval(s), written {h(created)}. Scores are means "
           f"(weighted where a benchmark pools its score); intervals are {LEVEL:.0%} bootstrap confidence intervals "
           f"(percentile, {N_RESAMPLES} resamples, seed 0).</p>"]
    if len(nums) > 1:
        out.append("<table><tr><th>eval</th><th>benchmark</th><th>model</th><th>n</th><th>score</th><th>95% CI</th>"
                   "<th>cost</th><th>failures</th></tr>")
        for n in nums:
            o = n["overall"]
            out.append(row([("", f"<a href='#{h(_safe(n['id']))}'>{h(n['id'])}</a>"), ("", h(n["benchmark"])),
                            ("", h(n["model"])), ("n", str(o["n"])), ("n", _f(o["score"])), ("", _ci(o["ci"])),
                            ("", h(usd(n["cost_usd"]))), ("n", str(n["n_failures"]))]))
        out.append("</table>")
    out += [img(p) for p in plots if p["eval_id"] is None]
    for n in nums:
        out += [f"<h2 id='{h(_safe(n['id']))}'>{h(n['id'])}: {h(n['benchmark'])}, model {h(n['model'])}</h2>",
                f"<p class='muted'>{h(_status(n))}; params {h(json.dumps(n['params'], sort_keys=True))}</p>"]
        if not n["samples"]:
            out.append("<p>This eval has no samples stored: nothing to report yet.</p>")
            continue
        out.append(f"<p class='muted'>{h(_scoring_line(n))}</p>")
        out.append("<table><tr><th>category</th><th>n</th><th>score</th><th>95% CI</th><th>official</th>"
                   "<th>toolpath</th><th>cost per sample</th></tr>")
        for c, v in n["by_category"].items():
            out.append(row([("", h(c)), ("n", str(v["n"])), ("n", _f(v["score"])), ("", _ci(v["ci"])),
                            *[("n", x) for x in _modes(v)], ("", h(usd(v["cost_per_sample"])))]))
        o = n["overall"]
        out.append(row([("", h(_overall_name(n))), ("n", str(o["n"])), ("n", _f(o["score"])), ("", _ci(o["ci"])),
                        *[("n", x) for x in _modes(o)], ("", h(usd(n["cost_per_sample"])))], "all") + "</table>")
        out.append(f"<ul><li>{h(_cost_line(n))}</li><li>{h(_time_line(n))}</li><li>{h(_token_line(n))}</li>"
                   + (f"<li>{h(_closeness_line(n))}</li>" if n["closeness"] else "") + "</ul>")
        out += [img(p) for p in plots if p["eval_id"] == n["id"]]
        out.append(f"<h3>Failures ({n['n_failures']})</h3>")
        if not n["failures"]:
            out.append("<p>None: every sample finished with score 1.</p>")
            continue
        out.append("<table class='failures'><tr><th>sample</th><th>category</th><th>status</th><th>score</th>"
                   "<th>error</th><th>answer</th><th>run</th></tr>")
        for fl in n["failures"][:MAX_FAILURES]:
            if fl["link"] is None:
                run = "<span class='muted'>no run (the episode never started)</span>"
            elif fl["link"].startswith("toolpath "):
                run = f"<code>{h(fl['link'])}</code>"
            else:
                run = f"<a href='{h(fl['link'])}'>{h(fl['run_id'])}</a>"
            out.append(row([("", h(fl["sample_id"])), ("", h(fl["category"])), ("", h(fl["status"])),
                            ("n", _f(fl["score"])), ("t", h(fl["error"], CELL_CHARS)),
                            ("t", h(fl["answer"], CELL_CHARS)), ("", run)]))
        out.append("</table>")
        if n["n_failures"] > MAX_FAILURES:
            out.append(f"<p>{n['n_failures'] - MAX_FAILURES} more failures not shown "
                       "(toolpath view lists them all).</p>")
    out.append("</body></html>")
    return "\n".join(out)


# ---- entry point ----------------------------------------------------------------------------------------

def resolve_evals(store, eval_ids: list[str]) -> list[dict]:
    """Each id or unique prefix to its eval row; an unknown or ambiguous one is a ValueError naming it."""
    if not eval_ids:
        raise ValueError("report: give at least one eval id (toolpath eval list shows them)")
    found, seen = [], set()
    for given in eval_ids:
        ev = store.find_eval(str(given))
        if ev is None:
            raise ValueError(f"report: no eval {given!r} in {store.home} (unknown id, or a prefix of several; "
                             f"toolpath eval list shows them)")
        if ev["id"] not in seen:  # the same eval named twice is reported once
            seen.add(ev["id"])
            found.append(ev)
    return found


def write_report(store, eval_ids: list[str], out_dir=None, viewer_url: str | None = None) -> dict:
    """Write report.html, report.md and the plots' PNGs for the given evals (ids or unique prefixes).

    out_dir defaults to <store home>/reports/<first eval id>, with "+N" when N more evals are compared.
    Failures link to `{viewer_url}/runs/<run_id>` when viewer_url is given (toolpath view; only an http(s)
    address, else a ValueError), else name the command `toolpath runs show <run_id>`. Returns {"html",
    "markdown", "dir", "plots": {file: path}, "evals": [the numbers of each eval, as in the report]}.
    """
    if viewer_url:
        check_viewer_url(viewer_url)
    evs = resolve_evals(store, eval_ids)
    nums = [eval_numbers(store, ev, viewer_url) for ev in evs]
    name = _safe(evs[0]["id"]) + (f"+{len(evs) - 1}" if len(evs) > 1 else "")
    out = Path(out_dir) if out_dir else Path(store.home) / "reports" / name
    plots = make_plots(nums)
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        out.mkdir(parents=True, exist_ok=True)
        for p in plots:
            (out / p["file"]).write_bytes(p["png"])
        (out / "report.md").write_text(_markdown(nums, plots, created), encoding="utf-8")
        (out / "report.html").write_text(_html(nums, plots, created), encoding="utf-8")
    except OSError as err:  # a read-only home: say where, and how to write it elsewhere
        where = err.filename or out
        raise ValueError(f"report: cannot write to {where}: {err.strerror or err}"
                         + ("" if out_dir else " (--out DIR writes the report elsewhere)")) from None
    return {"html": str(out / "report.html"), "markdown": str(out / "report.md"), "dir": str(out),
            "plots": {p["file"]: str(out / p["file"]) for p in plots}, "evals": nums}
