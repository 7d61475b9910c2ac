"""Reports link into the viewer only through an http(s) address, escape everything they put in HTML, and hold no
secret, even from a store written before secrets were redacted."""

import html
import re
import secrets
import sqlite3

import pytest
from conftest import toolpath_cli

from toolpath.evals.report import write_report
from toolpath.runs import Store

HOSTILE = "<img src=x onerror=alert(1)>'\"` | [x](javascript:alert(2))"


@pytest.fixture
def evaluation(tmp_path):
    """An eval whose ids, category, model and texts are hostile, one failure with a run to link to."""
    store = Store(tmp_path / "home")
    eval_id = store.create_eval("bench" + HOSTILE, "model" + HOSTILE, {"p": HOSTILE}, 2)
    store.put_eval_sample(eval_id, "s1" + HOSTILE, "run'1<x>", "cat" + HOSTILE, "failed", 0.0, 10, 0.5,
                          {"answer": HOSTILE, "error": HOSTILE})
    store.put_eval_sample(eval_id, "s2", "r2", "cat", "finished", 1.0, 10, 0.5, {"answer": "ok"})
    yield store, eval_id
    store.close()


@pytest.mark.parametrize("url", ["javascript:alert(document.cookie)", "JavaScript://host/%0aalert(1)",
                                 "data:text/html,<script>alert(1)</script>", "vbscript:x", "/runs", "127.0.0.1:8765",
                                 "http://", "http://host/'onmouseover='alert(1)", "http://host/>)<script>",
                                 "http://user:sk-secret-123456@host/", "http://host/?q=1", "ftp://host/"])
def test_a_viewer_url_that_is_not_an_http_address_is_refused(evaluation, tmp_path, url):
    store, eval_id = evaluation
    with pytest.raises(ValueError, match=r"viewer URL \(--viewer-url\).*http\(s\)"):
        write_report(store, [eval_id], out_dir=tmp_path / "out", viewer_url=url)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_the_cli_refuses_a_javascript_viewer_url_with_exit_2(evaluation, tmp_path):
    store, eval_id = evaluation
    r = toolpath_cli("report", eval_id, "--out", tmp_path / "out", "--viewer-url", "javascript:alert(1)",
                     home=store.home)
    assert r.returncode == 2 and "--viewer-url" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_links_and_every_text_are_escaped(evaluation, tmp_path):
    store, eval_id = evaluation
    out = write_report(store, [eval_id], out_dir=tmp_path / "out", viewer_url="https://viewer.example:8443/base/")
    page = open(out["html"], encoding="utf-8").read()
    text = open(out["markdown"], encoding="utf-8").read()
    # every href is our viewer's or a plot file beside the report, every src an embedded image
    hrefs = re.findall(r"href='([^']*)'", page)
    assert hrefs and all(h.startswith(("https://viewer.example:8443/base/runs/", "#", "scores_", "cost_vs_score"))
                         for h in map(html.unescape, hrefs)), hrefs
    assert "https://viewer.example:8443/base/runs/run%271%3Cx%3E" in page
    assert all(s.startswith("data:image/png;base64,") for s in re.findall(r"src='([^']*)'", page))
    assert "<img src=x" not in page and "javascript:" not in page.replace("javascript:alert(2)", "")
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") >= 5  # benchmark, model, sample, category, texts
    # in the Markdown, brackets and angle brackets come escaped: no link, no image, no HTML
    assert not re.search(r"(?<!\\)\]\(javascript:", text) and not re.search(r"(?<!\\)<img", text)
    assert r"\[x\](javascript:alert(2))" in text


def test_a_secret_left_in_an_old_store_is_not_reported(evaluation, tmp_path, monkeypatch):
    store, eval_id = evaluation
    key = "sk-tp-" + secrets.token_hex(16)
    with sqlite3.connect(store.home / "runs.db") as db:  # as stores wrote it before errors were redacted
        db.execute("UPDATE eval_samples SET detail = ? WHERE sample_id = 's2'",
                   (f'{{"answer": "no", "error": "server said: Authorization: Bearer {key}"}}',))
        db.execute("UPDATE eval_samples SET score = 0 WHERE sample_id = 's2'")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    out = write_report(store, [eval_id], out_dir=tmp_path / "out")
    for path in [out["html"], out["markdown"], *out["plots"].values()]:
        assert key.encode() not in open(path, "rb").read(), path
    assert key not in repr(out["evals"])
