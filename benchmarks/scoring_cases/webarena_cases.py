"""Case inputs for tests/data/scoring_cases/webarena.json and webarena_verified.json, and their official column.

    python benchmarks/scoring_cases/webarena_cases.py --data DIR --official-src SRC --table webarena
    python benchmarks/scoring_cases/webarena_cases.py --data DIR --official-src SRC --table webarena_verified

DIR holds the task files (test.raw.json, test_webarena_lite_v2 folder, webarena-verified.json). Run it with a
Python that can import the official code from SRC:
  webarena:          SRC holds evaluation_harness/evaluators.py from github web-arena-x/webarena (beartype and
                     nltk installed); its other imports (playwright, browser_env, helper_functions) are stubbed,
                     they are not used by the string and URL evaluators. nltk's punkt model is a data download:
                     without it, sentences are split by an untrained Punkt tokenizer (see `--help`).
  webarena_verified: SRC is a folder where `webarena_verified` (the PyPI package, 1.2.3) imports from.
                     The cases an earlier release scores otherwise are kept too, each with that "release":
                     write each release's column with --out (run by a Python that imports that release), then
                     --official-in the current one's and --earlier 1.0.0=FILE the earlier one's.
WebArena-Verified also gets the adversarial value cases of webarena_verified_extra.py. With --table-out the
script scores every generated case in both modes through toolpath (PYTHONPATH=the repository), prints official
mode's agreement on the whole set, and writes the table (every difference between the modes, every adversarial
case, a random sample of the rest, under 1.45 MB), e.g.
    PYTHONPATH=. python benchmarks/scoring_cases/webarena_cases.py --data DIR --official-src SRC \
        --table webarena_verified --table-out tests/data/scoring_cases/webarena_verified.json
No official code is in this file: it is imported from SRC.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import types
from pathlib import Path

SITES = {"__SHOPPING__": "http://localhost:7770", "__SHOPPING_ADMIN__": "http://localhost:7780/admin",
         "__REDDIT__": "http://localhost:9999", "__GITLAB__": "http://localhost:8023", "__MAP__": "http://localhost:3000",
         "__WIKIPEDIA__": "http://localhost:8888", "__HOMEPAGE__": "http://localhost:4399"}


def _sites(text: str) -> str:
    for k, v in SITES.items():
        text = text.replace(k, v)
    return text


# ---- WebArena: string_match and url_match ---------------------------------------------------------------------

def _string_answers(refs: dict) -> list:
    phrases = [refs["exact_match"]] if "exact_match" in refs else list(refs.get("must_include") or [])
    first = [p.split(" |OR| ")[0] for p in phrases]
    last = [p.split(" |OR| ")[-1] for p in phrases]
    right = ", ".join(first)
    out = [right, right.upper(), f'"{right}"', f"'{right}'", right + ".", f"The answer is {right}.",
           f"I found: {right}. Let me know if you need more.", ", ".join(last), " and ".join(first),
           "", "N/A", "I could not find the information.", first[0][:-1] if len(first[0]) > 2 else "x",
           ", ".join(reversed(first)), " ".join(first), right.replace(" ", "  ")]
    if len(phrases) > 1:
        out.append(first[0])
    for p in phrases:
        if re.fullmatch(r"\d+(\.\d+)?", p.strip()):
            n = p.strip()
            out += [f"{n}.5", f"{n},000", f"a {n}-star rating", f"({n})", f"{n}'s", f"rated {n}/10", f"{n} items",
                    f"There are {n} of them.", f"1{n}", f"{n}0", f"about {n}", f"${n}", f"{n}%"]
    for p in phrases:
        if " |OR| " in p:
            out += p.split(" |OR| ") + [p]
    return list(dict.fromkeys(out))


def _url_answers(ref: str) -> list:
    urls = [u.strip() for u in ref.split(" |OR| ")]
    u = urls[0]
    base, _, query = u.partition("?")
    out = [u, u + "/", u + ("&" if query else "?") + "page=2", base, base.rstrip("/") + "/edit",
           base.replace("http://", "https://"), base.rsplit("/", 1)[0], "http://localhost:1/" + base.split("/", 3)[-1]]
    if query:
        out += [base.rstrip("/") + "?" + query, base + "?" + "&".join(reversed(query.split("&"))),
                base + "?" + re.sub(r"=[^&]*", "=other", query, count=1)]
    if not query:
        out.append(base.rstrip("/") + "/?x=1")
    out += urls[1:]
    return list(dict.fromkeys(out))


def webarena_inputs(data: Path) -> list[dict]:
    configs = json.loads((data / "test.raw.json").read_text())
    lite2 = data / "webarena_lite_v2_tasks"
    extra = ([json.loads(p.read_text()) for p in sorted(lite2.glob("*.json")) if p.stem.isdigit()]
             if lite2.is_dir() else [])
    cases, seen = [], set()
    for source, tasks in (("wa", configs), ("lite2", extra)):
        for t in tasks:
            ev = t["eval"]
            refs = ev.get("reference_answers") or {}
            if "string_match" in ev["eval_types"] and refs and "fuzzy_match" not in refs:
                block = {"eval_types": ["string_match"], "reference_answers": refs}
                key = json.dumps(refs, sort_keys=True)
                if source == "lite2" and "must_exclude" not in refs or key in seen:
                    continue
                seen.add(key)
                for i, a in enumerate(_string_answers(refs)):
                    cases.append({"id": f"{source}{t['task_id']}-s{i}", "case": {"eval": block, "answer": a}})
            if "url_match" in ev["eval_types"] and source == "wa":
                ref = _sites(ev["reference_url"])
                block = {"eval_types": ["url_match"], "reference_url": ref,
                         **({"url_note": ev["url_note"]} if ev.get("url_note") else {})}
                for i, u in enumerate(_url_answers(ref)):
                    cases.append({"id": f"wa{t['task_id']}-u{i}", "case": {"eval": block, "answer": None, "url": u}})
    return cases


def webarena_official(src: Path, cases: list[dict]) -> list[float]:
    for name in ("browser_env", "browser_env.actions", "browser_env.utils", "playwright", "playwright.sync_api",
                 "evaluation_harness.helper_functions"):
        mod = types.ModuleType(name)
        for attr in ("Action", "StateInfo", "CDPSession", "Page", "PseudoPage", "gitlab_get_project_memeber_role",
                     "llm_fuzzy_match", "llm_ua_match", "reddit_get_post_url", "shopping_get_latest_order_url",
                     "shopping_get_sku_latest_review_author", "shopping_get_sku_latest_review_rating"):
            stub = {"Action": dict, "StateInfo": dict, "Page": types.SimpleNamespace}.get(attr)
            setattr(mod, attr, stub or (type(attr, (), {}) if attr[0].isupper() else (lambda *a, **k: None)))
        sys.modules[name] = mod
    import nltk.tokenize
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    try:
        nltk.tokenize.sent_tokenize("a. b")
    except LookupError:  # no punkt model on this machine: the untrained splitter (documented in the table)
        nltk.tokenize.sent_tokenize = lambda text, language="english": PunktSentenceTokenizer().tokenize(text)
    sys.path.insert(0, str(src))
    import tempfile

    from evaluation_harness.evaluators import StringEvaluator, URLEvaluator

    out = []
    for c in cases:
        case = c["case"]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"intent": "", "eval": case["eval"]}, f)
        try:
            if "url" in case:
                page = types.SimpleNamespace(url=case["url"])
                out.append(float(URLEvaluator()([{}, {}], f.name, page)))
            else:
                out.append(float(StringEvaluator()([{}, {"answer": case["answer"]}], f.name)))
        except Exception:  # noqa: BLE001 - the harness fails the task
            out.append(0.0)
    return out


# ---- WebArena-Verified: AgentResponseEvaluator ---------------------------------------------------------------

def _first(v):
    return v[0] if isinstance(v, list) and v else v


def _shapes(value, schema):
    """The right value in a few realistic shapes (alternatives: the first one)."""
    kind = (schema.get("items") or {}).get("format") or (schema.get("items") or {}).get("type")
    first = [{k: _first(x) for k, x in v.items()} if isinstance(v, dict) else _first(v) for v in value]
    out = [first, list(reversed(first))]
    if all(isinstance(v, str) for v in first):
        out += [[v.upper() for v in first], [v + "." for v in first], [f'"{v}"' for v in first],
                [", ".join(first)], [v.replace("-", " ") for v in first]]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in first):
        out += [[str(v) for v in first], [f"${v:,.2f}" for v in first], [f"{v:,}" for v in first],
                [f"{v} items" for v in first]]
    if kind == "month":
        out += [[{k: (str(x)[:3] if k == "month" else x) for k, x in v.items()} for v in first]]
    if len(first) > 1:
        out += [first[:-1], first + first[:1]]
    out += [[], ["something else"], first + ["extra"]]
    return out


def verified_inputs(data: Path) -> list[dict]:
    from webarena_verified_extra import verified_extra

    cases, tasks = [], json.loads((data / "webarena-verified.json").read_text())
    for t in tasks:
        cfg = next(c for c in t["eval"] if c["evaluator"] == "AgentResponseEvaluator")
        cfg = {k: v for k, v in cfg.items() if k != "evaluator"}
        ex = cfg["expected"]
        right = {"task_type": ex["task_type"].upper(), "status": ex["status"],
                 "retrieved_data": ex.get("retrieved_data")}
        answers = [right, json.dumps(right), "```json\n" + json.dumps(right, indent=1) + "\n```",
                   "Done. " + json.dumps(right), {**right, "task_type": ex["task_type"].lower()},
                   {**right, "status": "SUCCESS" if ex["status"] != "SUCCESS" else "NOT_FOUND_ERROR"},
                   {**right, "task_type": "NAVIGATE" if ex["task_type"] != "navigate" else "MUTATE"},
                   {k: v for k, v in right.items() if k != "retrieved_data"}, json.dumps(right)[:-2], "", "N/A",
                   {**right, "status": None}]
        if ex["task_type"] == "retrieve" and ex.get("retrieved_data"):
            for shape in _shapes(ex["retrieved_data"], cfg.get("results_schema") or {}):
                answers.append({**right, "retrieved_data": shape})
        else:
            answers.append({**right, "retrieved_data": ["something"]})
        for i, a in enumerate(answers):
            cases.append({"id": f"v{t['task_id']}-{i}", "case": {"eval": cfg, "answer": a}})
    return cases + verified_extra(tasks)


def verified_official(src: Path, cases: list[dict]) -> list[float]:
    import logging
    from pathlib import Path as P

    sys.path.insert(0, str(src))
    logging.disable(logging.CRITICAL)
    from webarena_verified.api.webarena_verified import WebArenaVerified
    from webarena_verified.core.evaluation.evaluators.agent_response_evaluator import AgentResponseEvaluator
    from webarena_verified.types.eval import TaskEvalContext
    from webarena_verified.types.task import WebArenaVerifiedTask
    from webarena_verified.types.tracing import NetworkTrace

    wv = WebArenaVerified()
    base = wv.get_task(1).model_dump(mode="json")
    trace = NetworkTrace.model_construct(is_playwright=False, src_file=P("<none>"), events=[])
    out = []
    for c in cases:
        task = WebArenaVerifiedTask.model_validate({**copy.deepcopy(base),
                                                    "eval": [{"evaluator": "AgentResponseEvaluator",
                                                              **copy.deepcopy(c["case"]["eval"])}]})
        ctx = TaskEvalContext(task=task, agent_response_raw=c["case"]["answer"], network_trace=trace, config=wv.config)
        out.append(float(AgentResponseEvaluator().evaluate(context=ctx, config=task.eval[0]).score))
    return out


def _answer_data(answer) -> list:
    """The retrieved values of an answer (a dict, or JSON text bare or in a ``` block), else []."""
    if isinstance(answer, str):
        m = re.search(r"```(?:json)?\s*\n?(.*?)\n?```", answer, re.DOTALL)
        try:
            answer = json.loads(m.group(1) if m else answer)
        except json.JSONDecodeError:
            return []
    data = answer.get("retrieved_data") if isinstance(answer, dict) else None
    return data if isinstance(data, list) else []


def _strings(value) -> list:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _is_pattern(s: str) -> bool:
    s = s.strip().strip("'\"`.,;:!?")
    return len(s) >= 2 and s.startswith("^") and s.endswith("$")


# Why toolpath rejects an answer the package accepts, per value format (the remaining differences).
_STRICTER = {"string": "sign spelled in letters or dropped (official folds it)",
             "duration": "duration off by more than max(1 min, 5 %) (official: max(3 min, 10 %))"}


def _verified_kind(case: dict, lower: bool = False) -> str:
    """A short name for why toolpath and official differ on one WebArena-Verified case."""
    ex, a = case["agent_response"]["expected"], case["answer"]
    if case.get("release") == "1.0.0":  # the two bugs 1.2.3 fixed
        if ex["task_type"].lower() == "retrieve" and ex["status"] != "SUCCESS":
            return "retrieve task with an error status (1.0.0 never passes)"
        if isinstance(a, dict) and "retrieved_data" not in a:
            return "retrieved_data key missing (1.0.0 fails it)"
    if isinstance(a, str) and a.startswith("Done. "):
        return "JSON object in prose"
    if "retrieved_data" not in ex:
        return "no retrieved_data in the task's expected value (official fails every answer)"
    if isinstance(a, dict) and "status" in a and a.get("status") is None:
        return "status null"
    if isinstance(a, dict) and "retrieved_data" not in a:
        return "retrieved_data key missing"
    items = (case["agent_response"].get("results_schema") or {}).get("items") or {}
    kinds = [items.get("format") or items.get("type") or "string"] if items.get("type") != "object" else \
        sorted({p.get("format") or p.get("type") or "string" for p in (items.get("properties") or {}).values()})
    if lower:
        data = _answer_data(a)
        if any(_is_pattern(s) for s in _strings(data)):
            return "pattern in the answer (official applies it as a regex)"
        if kinds != ["coordinates"] and any(isinstance(v, list) for v in data):
            return "several values in one answer item (official takes them as alternatives)"
        if kinds == ["currency"]:
            text = " ".join(_strings(data))
            if "-" in text:
                return "negative amount (official drops the sign)"
            if re.search(r"\d,\d{3}(?!\d)", text):
                return "thousands separator (official reads 36,390 as 36.39)"
            return "amount off by a cent or more (official: within 0.1)"
        if len(kinds) == 1 and kinds[0] in _STRICTER:
            return _STRICTER[kinds[0]]
    return "value read differently (" + ", ".join(kinds) + ")"


def write_table(path: Path, table: str, cases: list[dict], official_code: str, limit: int = 1_450_000) -> None:
    """Score every case in both modes through toolpath, print agreement on the whole generated set, and write
    the table: every case where toolpath and official differ, plus a random sample of the agreeing ones."""
    import collections
    import random

    from toolpath.evals.benchmarks.webarena_eval import score_case

    rows, wrong = [], []
    for c in cases:
        case = dict(c["case"])
        if "eval" in case and table == "webarena_verified":
            case = {"agent_response": case.pop("eval"), **case}
        mine, ours = score_case(case, "official"), score_case(case, "toolpath")
        if mine != c["official"]:
            wrong.append(c["id"])
        kind = "" if ours == c["official"] else \
            _verified_kind(case, ours < c["official"]) if table == "webarena_verified" else "other"
        rows.append({"id": c["id"], "case": case, "official": c["official"], "toolpath": ours, "kind": kind})
    print(f"{table}: {len(rows)} cases; official mode agrees on {len(rows) - len(wrong)}"
          f" ({100 * (len(rows) - len(wrong)) / len(rows):.2f} %); disagreeing: {wrong[:20]}")
    lines = {r["id"]: json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows}
    keep = [r for r in rows if r["kind"] or r["id"].startswith("x-") or "release" in r["case"]]
    size = sum(len(lines[r["id"]].encode()) + 2 for r in keep) + 1000
    rest = [r for r in rows if r not in keep]
    random.Random(0).shuffle(rest)
    for r in rest:
        if size + len(lines[r["id"]].encode()) + 2 > limit:
            break
        keep.append(r)
        size += len(lines[r["id"]].encode()) + 2
    order = {r["id"]: i for i, r in enumerate(rows)}
    keep.sort(key=lambda r: order[r["id"]])
    note = (f"; {len(keep)} of {len(rows)} generated cases kept: every toolpath/official difference, every "
            f"adversarial value case (x-…), every case an earlier release scores otherwise (its \"release\" named) "
            f"and a random sample of the rest; official mode agrees on all {len(rows)}")
    head = json.dumps({"benchmark": table, "official_code": official_code + note,
                       "scorer": "toolpath.evals.benchmarks.webarena_eval:score_case"})[:-1]
    path.write_text(head + ',\n"cases": [\n' + ",\n".join(lines[r["id"]] for r in keep) + "\n]}\n")
    print("kept", len(keep), dict(collections.Counter(r["kind"] for r in keep)))


OFFICIAL_CODE = {
    "webarena_verified": "webarena-verified 1.2.3 (PyPI; a case naming a release: that release, from PyPI), "
                         "webarena_verified/core/evaluation/evaluators/"
                         "agent_response_evaluator.py, AgentResponseEvaluator.evaluate (with value_normalizer.py, "
                         "value_comparator.py, data_types/*.py), default configuration (no environments)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--official-src", type=Path, help="where the official code imports from")
    ap.add_argument("--official-in", type=Path, help="the official column, as --out wrote it (instead of SRC)")
    ap.add_argument("--earlier", action="append", default=[], metavar="RELEASE=FILE",
                    help="webarena_verified: an earlier release's official column (--out); the cases it scores "
                         "otherwise are added with their \"release\"")
    ap.add_argument("--table", choices=("webarena", "webarena_verified"), required=True)
    ap.add_argument("--out", type=Path, help="write the official column here as JSON (id -> score)")
    ap.add_argument("--table-out", type=Path, help="also write the case table here (toolpath must import)")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    if args.table == "webarena":
        cases = webarena_inputs(args.data)
        scores = webarena_official(args.official_src, cases)
    else:
        cases = verified_inputs(args.data)
        scores = None if args.official_in else verified_official(args.official_src, cases)
    if args.official_in:
        scores = [c["official"] for c in json.loads(args.official_in.read_text())["cases"]]
    result = {"cases": [{**c, "official": s} for c, s in zip(cases, scores)]}
    for given in args.earlier:
        release, _, file = given.partition("=")
        earlier = json.loads(Path(file).read_text())["cases"]
        result["cases"] += [{"id": f"{c['id']}@{release}", "case": {**c["case"], "release": release},
                             "official": old["official"]}
                            for c, old in zip(result["cases"], earlier) if old["official"] != c["official"]]
    text = json.dumps(result)
    if args.out:
        args.out.write_text(text)
    elif not args.table_out:
        print(text)
    if args.table_out:
        write_table(args.table_out, args.table, result["cases"], OFFICIAL_CODE.get(args.table, ""))


if __name__ == "__main__":
    main()
