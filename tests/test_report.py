"""Eval reports: the numbers in report.html / report.md, their bootstrap intervals, failures with links to
their runs, the plots (decodable PNGs, embedded and beside the Markdown), and escaping of model output."""

import base64
import html
import io
import json
import re

import numpy as np
import pytest
from conftest import toolpath_cli
from helpers import ArithPolicy
from PIL import Image

from toolpath.evals.report import bootstrap_ci, write_report
from toolpath.runs import Store

# What a hostile model might answer: HTML that would run, a pipe that would split a Markdown row, an image.
HOSTILE = "<script>alert('x')</script> | ![p](http://evil/x.png) **bold** </td></tr>"


class HostileDivPolicy(ArithPolicy):
    """ArithPolicy, except that on division it answers the hostile string (scored 0: it holds no number)."""

    def respond(self, messages, tools, **gen):
        r = super().respond(messages, tools, **gen)
        question = next(m.content for m in messages if m.role == "user")
        if "divided by" in question and r.tool_calls[0].name == "final_answer":
            r.tool_calls[0].arguments["answer"] = HOSTILE
        return r


def cells(row: str) -> list[str]:
    """A Markdown table row split at its unescaped pipes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def ci(values) -> str:
    lo, hi = bootstrap_ci(values)
    return f"[{lo:.3f}, {hi:.3f}]"


def embedded_pngs(page: str) -> dict[str, bytes]:
    """{data-plot kind: [png bytes, …]} of the HTML's embedded images."""
    out: dict[str, list[bytes]] = {}
    for kind, data in re.findall(r"data-plot='([^']+)' src='data:image/png;base64,([^']+)'", page):
        out.setdefault(kind, []).append(base64.b64decode(data))
    return out


def decoded(png: bytes) -> Image.Image:
    Image.open(io.BytesIO(png)).verify()  # a truncated or corrupt PNG raises here
    return Image.open(io.BytesIO(png)).convert("RGB")


def share_of(img: Image.Image, rgb: tuple[int, int, int]) -> float:
    a = np.asarray(img).astype(int)
    return float((np.abs(a - np.array(rgb)).sum(axis=2) < 30).mean())


# ---- bootstrap_ci ---------------------------------------------------------------------------------------

def test_bootstrap_ci_hand_checkable_cases():
    assert bootstrap_ci([1] * 50) == (1.0, 1.0)
    assert bootstrap_ci([0.3]) == (0.3, 0.3)
    # 400 fair coin flips: mean 0.5, standard error sqrt(.25/400) = 0.025, so about 0.5 ± 1.96 · 0.025
    lo, hi = bootstrap_ci([0, 1] * 200)
    assert lo == pytest.approx(0.5 - 0.049, abs=0.006) and hi == pytest.approx(0.5 + 0.049, abs=0.006)
    # 100,000 samples at p = 0.9 (the multinomial draw keeps this cheap): ± 1.96 · sqrt(.09/1e5) = ± 0.00186
    lo, hi = bootstrap_ci([1] * 90_000 + [0] * 10_000)
    assert lo == pytest.approx(0.9 - 0.00186, abs=0.0003) and hi == pytest.approx(0.9 + 0.00186, abs=0.0003)


@pytest.mark.parametrize("size", [60, 300])  # few distinct values (multinomial draw) and many (index draw)
def test_bootstrap_ci_matches_plain_index_resampling_and_is_seeded(size):
    values = np.random.default_rng(7).normal(2.0, 1.0, size=size)
    rng = np.random.default_rng(1)
    means = values[rng.integers(0, len(values), size=(20_000, len(values)))].mean(axis=1)
    ref = np.quantile(means, [0.025, 0.975])
    lo, hi = bootstrap_ci(values, n=4000)
    assert lo == pytest.approx(ref[0], abs=0.03) and hi == pytest.approx(ref[1], abs=0.03)
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    narrow = bootstrap_ci(values, level=0.5)
    assert lo < narrow[0] < narrow[1] < hi


def test_bootstrap_ci_rejects_what_it_cannot_resample():
    with pytest.raises(ValueError, match="no values"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([0, 1], level=1.5)


# ---- a real eval -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """arith, 10 records, through the real runner: every division answered with the hostile string."""
    from toolpath.evals.runner import run_eval

    store = Store(tmp_path_factory.mktemp("home"))
    result = run_eval("arith", store, model="python:test_report:HostileDivPolicy", limit=10)
    yield store, result
    store.close()


def test_report_of_a_real_eval(real):
    store, result = real
    out = write_report(store, [result.eval_id])
    assert out["dir"] == str(store.home / "reports" / result.eval_id)  # the default folder
    page, text = open(out["html"]).read(), open(out["markdown"]).read()
    summary = result.summary()
    assert summary["score"] == 0.8 and summary["by_category"]["div"]["score"] == 0.0
    scores = [s.score for s in result.samples]
    row = next(line for line in text.splitlines() if line.startswith("| **overall"))
    assert cells(row)[:4] == ["**overall**", "10", "**0.800**", ci(scores)]
    for cat in ("add", "sub", "mul", "mixed"):
        assert cells(next(line for line in text.splitlines() if line.startswith(f"| {cat} |")))[:4] == \
            [cat, "2", "1.000", "[1.000, 1.000]"]
    assert f"<td class=''>overall</td><td class='n'>10</td><td class='n'>0.800</td><td class=''>{ci(scores)}</td>" \
        in page
    # the price table makes python policies free: priced at $0, not "not priced"
    assert "cost $0.0000 ($0.0000 per sample)" in text
    tok = sum(s.tokens for s in result.samples)
    assert f"tokens {tok} (" in text and f"tokens {tok} (" in page

    # failures: the two divisions, each naming the command that shows its run, which is this eval's run
    fails = [s for s in result.samples if s.category == "div"]
    assert "### Failures (2)" in text and "<h3>Failures (2)</h3>" in page
    for s in fails:
        assert store.get_run(s.run_id)["eval_id"] == result.eval_id
        assert f"toolpath runs show {s.run_id}" in text
        assert f"<code>toolpath runs show {s.run_id}</code>" in page

    # the hostile answer is inert in both documents
    assert "<script>" not in page and HOSTILE not in page
    assert html.escape(HOSTILE, quote=True) in page
    assert "<script>" not in text and "![p]" not in text
    frow = next(line for line in text.splitlines() if line.startswith(f"| {fails[0].sample_id} |"))
    assert len(cells(frow)) == 7
    assert cells(frow)[5] == (r"\<script\>alert('x')\</script\> \| \!\[p\](http://evil/x.png) "
                              r"\*\*bold\*\* \</td\>\</tr\>")

    # plots: one score-per-category and one cost-vs-score (per category, as there is one eval); no comparison
    assert sorted(out["plots"]) == ["cost_vs_score.png", f"scores_1_{result.eval_id}.png"]
    pngs = embedded_pngs(page)
    assert sorted(pngs) == ["categories", "cost_score"]
    for name, path in out["plots"].items():
        assert f"]({name})" in text  # the Markdown shows the file beside it
        assert open(path, "rb").read() in (pngs["categories"] + pngs["cost_score"])  # the same image embedded
        assert decoded(open(path, "rb").read()).size[0] > 300


def test_the_cli_writes_the_report(real, tmp_path):
    store, result = real
    r = toolpath_cli("report", result.eval_id[:-2], "--out", tmp_path / "rep", "--json", home=store.home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["html"] == str(tmp_path / "rep" / "report.html") and (tmp_path / "rep" / "report.md").is_file()
    assert out["evals"][0]["overall"]["score"] == 0.8


# ---- synthetic evals: exact numbers, two evals side by side --------------------------------------------

ODD = "c$1 | <b>"  # a category name with mathtext, a pipe and a tag in it


@pytest.fixture
def two(store):
    a = store.create_eval("synth", "openai:gpt-4.1-mini", {"limit": 6}, 6)
    rows = [("s1", "r1", "x", "finished", 1.0), ("s2", "r2", "x", "finished", 1.0), ("s3", "r3", "x", "finished", 0.0),
            ("s4", "r4", "x", "finished", 1.0), ("s5", "r5", ODD, "finished", 1.0), ("s6", None, ODD, "failed", 0.0)]
    for i, (sid, run, cat, status, score) in enumerate(rows, 1):
        err = "the worker running it died: <b>boom</b>" if run is None else None
        store.put_eval_sample(a, sid, run, cat, status, score, 100, float(i),
                              {"answer": f"answer {i}", "error": err, "cost_usd": 0.002, "tokens_in": 80,
                               "tokens_out": 20, "retries": i % 2, "timed_out": False})
    store.finish_eval(a, {"seconds": 9.5})
    b = store.create_eval("synth", "scripted:old.yaml", {}, 4)  # an older eval: no cost, no token split
    for i in range(1, 4):
        store.put_eval_sample(b, f"t{i}", f"rb{i}", "x", "finished", 1.0, 50, 0.5, {"answer": "ok", "error": None})
    store.put_eval_sample(b, "t4", "rb4", "x", "budget_exhausted", 1.0, 50, 0.5,
                          {"answer": "ok", "error": "used 301 s of max_seconds=300"})
    return a, b


def test_report_of_two_synthetic_evals(store, two):
    a, b = two
    out = write_report(store, [a, b], viewer_url="http://127.0.0.1:8765/")
    assert out["dir"] == str(store.home / "reports" / f"{a}+1")
    page, text = open(out["html"]).read(), open(out["markdown"]).read()
    lines = text.splitlines()
    na, nb = out["evals"]

    # scores and intervals, per category and overall
    assert cells(next(line for line in lines if line.startswith("| x | 4 |"))) == \
        ["x", "4", "0.750", ci([1, 1, 0, 1]), "–", "0.750", "$0.002000"]  # stored without its official score
    odd = next(line for line in lines if line.startswith(r"| c$1 \| \<b\> |"))
    assert cells(odd) == [r"c$1 \| \<b\>", "2", "0.500", ci([1, 0]), "–", "0.500", "$0.002000"]
    assert na["overall"]["score"] == pytest.approx(4 / 6)
    assert na["overall"]["ci"] == list(bootstrap_ci([1, 1, 0, 1, 1, 0]))
    assert f"| {a} | synth | openai:gpt-4.1-mini | 6 | 0.667 | {ci([1, 1, 0, 1, 1, 0])} | $0.0120 | 2 |" in text
    assert f"| {b} | synth | scripted:old.yaml | 4 | 1.000 | [1.000, 1.000] | not priced | 1 |" in text
    assert f"<td class='n'>0.667</td><td class=''>{ci([1, 1, 0, 1, 1, 0])}</td><td class='n'>–</td>" in page
    assert "<td class=''>c$1 | &lt;b&gt;</td>" in page

    # cost, time (seconds 1..6: total 21, mean 3.5, p90 5.5), tokens, retries
    for doc in (text, page):
        assert "cost $0.0120 ($0.002000 per sample)" in doc
        assert "time 21.00 s total, 3.50 s mean, 5.50 s p90 per sample (9.50 s wall clock)" in doc
        assert "tokens 600 (480 in, 120 out; 100.0 per sample); retries 3, timed out 0" in doc
        assert "tokens 200 (in/out not recorded; 50.0 per sample)" in doc
    assert "- cost not priced" in text and nb["cost_usd"] is None and nb["unpriced"] == 4

    # failures: score below 1, or not finished (t4 scored 1 but ran out of budget); links into the viewer
    assert [f["sample_id"] for f in na["failures"]] == ["s3", "s6"]
    assert [f["sample_id"] for f in nb["failures"]] == ["t4"]
    assert "<a href='http://127.0.0.1:8765/runs/r3'>r3</a>" in page and "[r3](<http://127.0.0.1:8765/runs/r3>)" in text
    assert "<a href='http://127.0.0.1:8765/runs/rb4'>rb4</a>" in page
    assert "used 301 s of max\\_seconds=300" in text and "used 301 s of max_seconds=300" in page
    s6 = cells(next(line for line in lines if line.startswith("| s6 |")))
    assert s6 == ["s6", r"c$1 \| \<b\>", "failed", "0.000", r"the worker running it died: \<b\>boom\</b\>", "answer 6",
                  "no run (the episode never started)"]
    assert "the worker running it died: &lt;b&gt;boom&lt;/b&gt;" in page

    # plots: score per category for each, cost vs score, and the two side by side, embedded and as files
    assert sorted(out["plots"]) == ["compare.png", "cost_vs_score.png", f"scores_1_{a}.png", f"scores_2_{b}.png"]
    pngs = embedded_pngs(page)
    assert {k: len(v) for k, v in pngs.items()} == {"categories": 2, "cost_score": 1, "compare": 1}
    for name, _path in out["plots"].items():
        assert f"]({name})" in text and f"<a href='{name}'>" in page
    compare = decoded(open(out["plots"]["compare.png"], "rb").read())
    assert compare.tobytes() == decoded(pngs["compare"][0]).tobytes()
    # matplotlib's first two colours: eval a's bars (blue) and eval b's (orange) are both drawn
    assert share_of(compare, (0x1F, 0x77, 0xB4)) > 0.02 and share_of(compare, (0xFF, 0x7F, 0x0E)) > 0.02
    for img in pngs["categories"] + pngs["cost_score"]:
        assert decoded(img).size[0] > 300


def test_unknown_or_ambiguous_eval_is_named(store, two):
    a, _ = two
    with pytest.raises(ValueError, match="'e-nope'"):
        write_report(store, [a, "e-nope"])
    if a[:1] == "e":  # both ids start with "e": a prefix of several
        with pytest.raises(ValueError, match="'e'"):
            write_report(store, ["e"])
    with pytest.raises(ValueError, match="at least one"):
        write_report(store, [])


def test_an_eval_without_samples_says_so(store, tmp_path):
    empty = store.create_eval("arith", "local", {"limit": 5}, 5)
    out = write_report(store, [empty], out_dir=tmp_path / "r")
    text, page = open(out["markdown"]).read(), open(out["html"]).read()
    assert "0/5 samples, not finished" in text
    assert "This eval has no samples stored: nothing to report yet." in text and "no samples stored" in page
    assert out["plots"] == {} and out["evals"][0]["overall"] == {"n": 0, "score": None, "ci": None, "scores": {}}


def test_long_failure_lists_are_cut_and_counted(store, two, monkeypatch):
    from toolpath.evals import report

    a, _ = two
    monkeypatch.setattr(report, "MAX_FAILURES", 1)
    out = write_report(store, [a])
    text, page = open(out["markdown"]).read(), open(out["html"]).read()
    assert "| s3 |" in text and "| s6 |" not in text and "1 more failures not shown" in text
    assert "1 more failures not shown" in page and out["evals"][0]["n_failures"] == 2
