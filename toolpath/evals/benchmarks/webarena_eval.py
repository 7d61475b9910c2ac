"""WebArena's evaluators, offline: the agent's answer and the browser's final state in, a score out.

Two schemas:
  - WebArena's own (test.raw.json, WebArena-Lite, Lite-v2): `eval` is a dict with `eval_types` among
    string_match, url_match, program_html; the scores of the listed evaluators multiply.
  - webarena-verified: `eval` is a list of {"evaluator": "AgentResponseEvaluator" | "NetworkEventEvaluator", ...};
    all of them must pass. Those evaluators live in webarena_verified.py; `evaluate()` here is the entry point
    for both schemas.

Semantics follow WebArena's evaluation_harness (evaluators.py, helper_functions.py): answers are cleaned
(stripped, one pair of surrounding quotes removed, lower-cased) before comparing; must_include is a substring
test per phrase, where " |OR| " separates alternatives; a lone one-character phrase is matched against the
answer's tokens, so "0" is not found in "10"; must_exclude fails on any excluded phrase; fuzzy_match asks a
judge policy; an "N/A" reference is matched exactly, else the judge compares the reported reason with the
data's string_note. url_match compares host+path ("GOLD in PRED": the reference is contained in the final
URL) and requires every reference query parameter to have one of its reference values.
program_html reads the values of JavaScript locators that the agent's final state recorded as probes
(webarena_probes.probes_for builds them; the adapter puts them in the task spec) and applies exact_match /
must_include / fuzzy_match to each, like WebArena does to `str(page.evaluate(locator))`.

What cannot be scored offline is reported, never passed: a fuzzy item with no judge configured, a helper
function that needs the real site's REST API (shopping_get_latest_order_url, shopping_get_sku_latest_review_*),
a probe missing from the final state, and webarena-verified's NetworkEventEvaluator checks that need the
request log (only URL-only checks are scored, against the URLs the final state has).
`evaluate()` returns the details; its "score" is None when the outcome depends on something unscorable.

Scoring modes (evaluate(..., scoring=)): "official" is the published code, "toolpath" (default) differs where
a careful grader would:
  - must_include "65 |OR| 3": toolpath accepts either alternative; official looks for the literal text;
  - must_exclude: toolpath fails an answer naming an excluded phrase; official has no such case and ignores it;
  - url_match: toolpath drops the path's trailing slash (".../issues/?s=x" is ".../issues?s=x"); official does not;
  - program_html fuzzy_match: toolpath asks the judge; official raises (scored 0);
  - WebArena-Verified (webarena_verified_official.py, the package's release 1.2.3 unless `release=` names
    1.0.0): toolpath reads a JSON object inside prose (and, unlike 1.0.0, passes a RETRIEVE task whose expected
    status is an error when the answer says so, and an answer without a retrieved_data key for MUTATE /
    NAVIGATE tasks), and reads values with its own readers first, then the
    package's (webarena_verified_values.py) for what its own cannot read: so it accepts what the package accepts
    and a grader would ("El Gallo de Oro." as a location name, "Macy’s" for "Macy's", "Café" for "Cafe",
    "a ß b" for "a ss b", "one hundred and five", "36,39 €", "00:07:00", "818 yards", "Wed, March 2, 2022",
    "ssh://git@host:2222/a/b.git" for "git@__SSH_HOST__:a/b.git", "N/A" for an empty value) and also what
    the package cannot read ("about 7 min", "748m (walking)", "$6.00" for the number 6, 40.4424 for
    40.4424191). Where toolpath rejects what the package accepts, a grader would reject it too:
      - several values in one answer item (["#170", "#189"] for one order): the package takes them as
        alternatives, so listing every candidate passes;
      - a pattern in the answer ("^.*$", or the task's own "^#?\\s*0*170$" echoed back): the package applies it
        as a regex to the expected value; an answer is text;
      - a sign that unidecode spells in letters or drops: "a PS b" for "a £ b", "a deg b" for "a ° b",
        "a  b" for "a ★ b" (the package folds both to the same ASCII; "5 EUR" for "5 €" and "16 x 24" for
        "16 × 24" are accepted, the way people type those signs);
      - a duration off by more than max(1 minute, 5 %): "10 min" or "4 min" for 7 min, "5h 20min" for
        5h 47min (the package allows max(3 minutes, 10 %)); "0.12 hours" and "6h" for 5h 47min pass;
      - an amount off by a cent or more ("$36.4", "$36.3", "$36.49" for 36.39; the package allows 0.1), a
        negative amount ("$-36.39"; the package drops the sign after "$"), and "36,390" (thirty-six thousand;
        the package reads the comma as a decimal one).
    A range ("7–8 min") is neither value in either mode.
"""

from __future__ import annotations

import functools
import html
import math
import urllib.parse
from collections import defaultdict
from typing import Any

from .webarena_probes import html_target, reddit_get_post_url
from .webarena_result import result as _result
from .webarena_verified import agent_response, network_event
from .webarena_verified_official import CURRENT
from .webarena_verified_official import agent_response as official_agent_response

OR = " |OR| "

# ---- string comparisons (WebArena's StringEvaluator) -----------------------------------------------------

def clean_answer(text: Any) -> str:
    s = str(text).strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        s = s[1:-1]
    return s.lower()


@functools.lru_cache(maxsize=1)
def _tokenizers():
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer(), NLTKWordTokenizer()


def _tokens(text: str) -> list[str]:
    """nltk's word_tokenize, as WebArena's must_include calls it: sentences, then the Treebank word rules, so
    "6.5", "6,000" and "6-star" stay one token and a lone "6" does not match inside them. The sentence splitter
    is Punkt without its trained English model (a data download, never made at run time); what the model adds
    is mostly abbreviations ("Dr.") that do not end a sentence, which seldom touches a one-character match."""
    sentences, words = _tokenizers()
    return [tok for sentence in sentences.tokenize(text) for tok in words.tokenize(sentence)]


def exact_match(ref: Any, pred: Any) -> float:
    return float(clean_answer(pred) == clean_answer(ref))


def must_include(ref: str, pred: str, tokenize: bool = False, split_or: bool = True) -> float:
    """1 if any " |OR| " alternative of `ref` occurs in `pred` (a token of it, for a lone character).

    split_or=False is WebArena's StringEvaluator as published: it never splits a string_match reference, so
    "65 |OR| 3" (task 386's shape) is looked for as that literal text and no answer contains it."""
    p = clean_answer(pred)
    for alt in str(ref).split(OR) if split_or else [str(ref)]:
        r = clean_answer(alt)
        if tokenize and len(r) == 1:
            if r in _tokens(p):
                return 1.0
        elif r in p:
            return 1.0
    return 0.0


# ---- the judge ---------------------------------------------------------------------------------------------

def _ask(judge, prompt: str) -> str:
    from ...state import Message

    messages = [Message(role="system", content="You are a careful grader."), Message(role="user", content=prompt)]
    try:
        resp = judge.respond(messages, [], temperature=0.0, max_new_tokens=256)
    except Exception as err:  # noqa: BLE001 - a judge that fails leaves the item unscorable, not the sweep dead
        raise _Unscorable(f"the judge policy failed: {err}") from err
    return " ".join(x for x in (resp.text, resp.answer or "", "" if resp.text else resp.raw) if x).lower()


def judge_fuzzy(judge, question: str, reference: str, pred: str) -> float:
    """1 if the judge calls the answer correct (semantically the reference), 0 for incorrect / partially correct."""
    verdict = _ask(judge, (
        "Grade a student's answer to a question against the reference answer. The wording may differ; "
        "what matters is whether the answer means the same as the reference.\n"
        f"question: {question}\nreference answer: {reference}\n"
        "The string 'N/A' anywhere above means 'not achievable'.\n"
        f"student answer: {pred}\n"
        "End with one verdict: correct, incorrect or partially correct."))
    if "partially correct" in verdict or "incorrect" in verdict or "correct" not in verdict:
        return 0.0
    return 1.0


def judge_unachievable(judge, task: str, reason: str, pred: str) -> float:
    """1 if the judge finds the agent's reason for giving up the same as the data's reason the task is unachievable."""
    verdict = _ask(judge, (
        f"task: {task}\nactual reason the task cannot be done: {reason}\nreason the agent reported: {pred}\n"
        "The task cannot be done, for the actual reason above. Does the agent's reported reason agree with "
        "it, even if only implicitly? Answer 'same' if it does, 'different' if it does not."))
    return 0.0 if "different" in verdict or "same" not in verdict else 1.0


# ---- WebArena's three evaluators -----------------------------------------------------------------------------

class _Unscorable(Exception):
    pass


def _fuzzy(ref: str, pred: str, intent: str, judge, items: list) -> float:
    if exact_match(ref, pred):  # identical answers need no judge
        items.append({"fuzzy_match": ref, "score": 1.0, "by": "identical"})
        return 1.0
    if judge is None:
        raise _Unscorable(f"fuzzy_match {ref!r} needs a judge policy (set TOOLPATH_WEBARENA_JUDGE, e.g. "
                          "openai:gpt-4.1-mini, or pass judge=)")
    s = judge_fuzzy(judge, intent, ref, pred)
    items.append({"fuzzy_match": ref, "score": s, "by": "judge"})
    return s


def string_match(block: dict, answer: str | None, intent: str = "", judge=None, scoring: str = "toolpath") -> dict:
    """WebArena's StringEvaluator. Where the published code (scoring="official") differs from what a careful
    grader accepts (the default), the official branch is marked with the case that shows it."""
    official = scoring == "official"
    pred = clean_answer(answer or "")
    refs = block.get("reference_answers") or {}
    score, items = 1.0, []
    try:
        for kind, value in refs.items():
            if kind == "exact_match":
                s = exact_match(value, pred)
                items.append({"exact_match": value, "score": s})
                score *= s
            elif kind == "must_include":
                values = value if isinstance(value, list) else [value]
                for v in values:
                    s = must_include(v, pred, tokenize=len(values) == 1, split_or=not official)
                    items.append({"must_include": v, "score": s})
                    score *= s
            elif kind == "must_exclude":
                if official:  # the published match statement has no must_exclude case: "Teofila, Emerald" passes
                    items.append({"must_exclude": value, "score": None, "note": "ignored by WebArena's code"})
                    continue
                for v in value if isinstance(value, list) else [value]:
                    s = 1.0 - must_include(v, pred)
                    items.append({"must_exclude": v, "score": s})
                    score *= s
            elif kind == "fuzzy_match":
                if value == "N/A":  # an unachievable task: "N/A", or the same reason as the data's note
                    s = exact_match("N/A", pred)
                    if not s:
                        note = block.get("string_note") or block.get("reference_answer_raw_annotation") or ""
                        if judge is None:
                            raise _Unscorable("the answer is not 'N/A'; comparing its reason with the data's "
                                              f"string_note {note!r} needs a judge policy")
                        s = judge_unachievable(judge, intent, note, pred)
                    items.append({"fuzzy_match": "N/A", "score": s})
                    # Official: after a failed exact "N/A" the judge's verdict replaces the score so far instead
                    # of multiplying it (`score = 1.0 * ua_match(...)`).
                    score = s if official and not exact_match("N/A", pred) else score * s
                else:
                    for v in value if isinstance(value, list) else [value]:
                        if score == 0:
                            break  # already failed: don't spend judge calls
                        score *= _fuzzy(str(v), pred, intent, judge, items)
            elif not official:  # the published match statement skips an approach it does not know
                raise _Unscorable(f"unknown string_match approach {kind!r}")
    except _Unscorable as err:
        return _result("string_match", score, items, str(err))
    return _result("string_match", score, items)


def _url_parts(url: str) -> tuple[str, dict[str, list[str]]]:
    # The path's trailing slash is dropped too (WebArena drops only the whole URL's): ".../issues/?sort=x"
    # and ".../issues?sort=x" are the same page, and GitLab writes the second.
    p = urllib.parse.urlparse(url)
    return p.netloc + p.path.rstrip("/"), urllib.parse.parse_qs(p.query)


def url_match(block: dict, final_url: str | None, scoring: str = "toolpath") -> dict:
    if not final_url:
        return _result("url_match", None, [], "the final state has no URL")
    if scoring == "official":
        return _official_url_match(block, final_url)
    pred = str(final_url).rstrip("/")
    refs = [u.strip().rstrip("/") for u in str(block.get("reference_url") or "").split(OR.strip())]
    refs = [r for r in refs if r]
    rule = block.get("url_note") or "GOLD in PRED"
    pred_base, pred_q = _url_parts(pred)
    if rule == "EXACT":
        ok = any(_url_parts(r) == (pred_base, pred_q) for r in refs)
        return _result("url_match", float(ok), [{"rule": rule, "pred": pred, "refs": refs}])
    if rule != "GOLD in PRED":
        return _result("url_match", None, [], f"unknown url_note {rule!r}")
    ref_q: dict[str, set[str]] = defaultdict(set)
    ref_bases = []
    for r in refs:
        base, q = _url_parts(r)
        ref_bases.append(base)
        for k, v in q.items():
            ref_q[k].update(v)
    base_score = float(any(b in pred_base for b in ref_bases))
    query_score = float(all(any(v in pred_q.get(k, []) for v in vals) for k, vals in ref_q.items()))
    return _result("url_match", base_score * query_score,
                   [{"rule": rule, "pred": pred, "refs": refs, "base": base_score, "query": query_score}])


def _official_url_match(block: dict, final_url: str) -> dict:
    """WebArena's URLEvaluator as published: only the whole URL's trailing slash is dropped, so a reference
    ".../issues/?sort=x" (base ".../issues/") is not found in ".../issues?sort=x"; a url_note other than
    "GOLD in PRED" raises ValueError there (scored 0 here, with the reason)."""
    rule = block.get("url_note") or "GOLD in PRED"
    if rule != "GOLD in PRED":
        return _result("url_match", 0.0, [{"rule": rule, "error": "WebArena's URLEvaluator raises on this rule"}])
    pred = str(final_url).rstrip("/")
    refs = [u.rstrip("/") for u in str(block.get("reference_url") or "").split(OR)]
    ref_q: dict[str, set[str]] = defaultdict(set)
    ref_bases = []
    for r in refs:
        p = urllib.parse.urlparse(r)
        ref_bases.append(p.netloc + p.path)
        for k, v in urllib.parse.parse_qs(p.query).items():
            ref_q[k].update(v)
    p = urllib.parse.urlparse(pred)
    pred_base, pred_q = p.netloc + p.path, urllib.parse.parse_qs(p.query)
    base_score = float(any(b in pred_base for b in ref_bases))
    query_score = float(all(any(v in pred_q.get(k, []) for v in vals) for k, vals in ref_q.items()))
    return _result("url_match", base_score * query_score,
                   [{"rule": rule, "pred": pred, "refs": refs, "base": base_score, "query": query_score}])


def _py_str(value: Any) -> str:
    """What WebArena's str(page.evaluate(...)) gives for a JSON value (True, None, [1, 2] …)."""
    if isinstance(value, float) and value.is_integer() and not math.isinf(value):
        value = int(value)  # a JS number 3 arrives as 3 from Playwright
    return str(value)


def _probe_value(probes: list, want: dict) -> tuple[bool, str]:
    for p in probes:
        if isinstance(p, dict) and p.get("url") == want["url"] and p.get("js") == want["js"]:
            if "error" in p and "value" not in p:
                return True, ""  # the page lacked the element: WebArena reads it as ""
            return True, _py_str(p.get("value"))
    return False, ""


def program_html(block: dict, final_state: dict | None, intent: str = "", judge=None,
                 scoring: str = "toolpath") -> dict:
    if not final_state:
        return _result("program_html", None, [], "no final state of the browser")
    probes = final_state.get("probes") or []
    score, items = 1.0, []
    for n, entry in enumerate(block.get("program_html") or []):
        target = html_target(entry)
        if "unscorable" in target:
            return _result("program_html", 0.0 if score == 0 else None, items,
                           f"program_html[{n}]: {target['unscorable']}")
        found, text = _probe_value(probes, target["probe"])
        if not found:
            return _result("program_html", 0.0 if score == 0 else None, items,
                           f"program_html[{n}]: the final state has no probe for {target['probe']['js'][:80]!r}")
        text = html.unescape(text)
        item: dict[str, Any] = {"locator": entry.get("locator", ""), "value": text[:300]}
        if target.get("post_url") and final_state.get("url"):
            post = reddit_get_post_url(final_state["url"])
            if post.rstrip("/") != str(final_state["url"]).rstrip("/"):
                item["note"] = f"read on the last page, under the post {post}"
        rc = entry.get("required_contents") or {}
        try:
            if "exact_match" in rc:
                s = exact_match(rc["exact_match"], text)
            elif "must_include" in rc:
                s = 1.0
                for phrase in rc["must_include"]:
                    s *= must_include(phrase, text)
            elif "fuzzy_match" in rc and scoring == "official":
                # WebArena's HTMLContentEvaluator knows only exact_match and must_include: it raises
                # ValueError("Unknown required_contents") here, and the task fails.
                s = 0.0
                item["error"] = "WebArena's HTMLContentEvaluator has no fuzzy_match"
            elif "fuzzy_match" in rc:
                s, sub = 1.0, []
                for ref in rc["fuzzy_match"]:
                    s *= _fuzzy(str(ref), text, intent, judge, sub) if s else 0.0
                item["fuzzy"] = sub
            else:
                raise _Unscorable(f"unknown required_contents {sorted(rc)}")
        except _Unscorable as err:
            items.append(item)
            return _result("program_html", 0.0 if score == 0 else None, items, f"program_html[{n}]: {err}")
        item.update(required=rc, score=s)
        items.append(item)
        score *= s
    return _result("program_html", score, items)


# ---- entry point ------------------------------------------------------------------------------------------

def evaluate(eval_block: Any, answer: str | None, final_state: dict | None = None, *, intent: str = "",
             judge=None, scoring: str = "toolpath", release: str = CURRENT) -> dict:
    """Every evaluator of a task: {"score": product or None when unscorable, "evaluators": [details...]}.

    scoring="official" applies the published evaluators (WebArena's evaluation_harness, webarena-verified's
    package, as its `release`) with their known bugs; the default is what a careful grader accepts (see each
    evaluator).

    A zero from any evaluator decides the score even when another one is unscorable."""
    results: list[dict] = []
    if isinstance(eval_block, list):  # webarena-verified
        for cfg in eval_block:
            name = cfg.get("evaluator") if isinstance(cfg, dict) else None
            if name == "AgentResponseEvaluator":
                results.append(official_agent_response(cfg, answer, release) if scoring == "official"
                               else agent_response(cfg, answer))
            elif name == "NetworkEventEvaluator":
                results.append(network_event(cfg, final_state))
            else:
                results.append(_result(str(name), None, [], f"unknown evaluator {name!r}"))
    elif isinstance(eval_block, dict):
        for kind in eval_block.get("eval_types") or []:
            if kind == "string_match":
                results.append(string_match(eval_block, answer, intent, judge, scoring))
            elif kind == "url_match":
                results.append(url_match(eval_block, (final_state or {}).get("url"), scoring))
            elif kind == "program_html":
                results.append(program_html(eval_block, final_state, intent, judge, scoring))
            else:
                results.append(_result(kind, None, [], f"unknown eval type {kind!r}"))
    else:
        results.append(_result("eval", None, [],
                               f"eval block must be a dict or a list, got {type(eval_block).__name__}"))
    scores = [r["score"] for r in results]
    if any(s == 0 for s in scores):
        total: float | None = 0.0
    elif any(s is None for s in scores) or not scores:
        total = None
    else:
        total = math.prod(scores)
    out: dict[str, Any] = {"score": total, "evaluators": results}
    reasons = [f"{r['type']}: {r['unscorable']}" for r in results if "unscorable" in r]
    if total is None:
        out["unscorable"] = "; ".join(reasons) or "no evaluator"
    return out


def eval_types(eval_block: Any) -> list[str]:
    """The evaluator names of a task, in either schema (for counts and reports)."""
    if isinstance(eval_block, list):
        return [str(c.get("evaluator")) for c in eval_block if isinstance(c, dict)]
    if isinstance(eval_block, dict):
        return list(eval_block.get("eval_types") or [])
    return []


def score_case(case: dict, scoring: str) -> float:
    """One case of the scoring tables (tests/data/scoring_cases/webarena*.json), through `evaluate`:
    {"eval": a WebArena eval block, "answer": …, "url": the final URL (url_match)} or {"agent_response": a
    WebArena-Verified AgentResponseEvaluator config, "answer": …, "release": the package's release that gave its
    official score, when not the current one}. Unscorable counts 0, as in the benchmark."""
    block = [{"evaluator": "AgentResponseEvaluator", **case["agent_response"]}] if "agent_response" in case \
        else case["eval"]
    state = {"url": case["url"], "probes": []} if case.get("url") else None
    result = evaluate(block, case.get("answer"), state, scoring=scoring, release=case.get("release", CURRENT))
    return float(result["score"] or 0.0)
