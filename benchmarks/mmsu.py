"""MMSU-style speech questions: the speech tools' outputs read by a fixed rule, an agent with a local model and
the tools, and Whisper tiny.en's word error rate, all on one generated set (espeak-ng, correct by construction).

    python benchmarks/mmsu.py [--items 60] [--seed 0] [--agent-items 12] [--model local:qwen2.5-coder-1.5b]
                              [--json OUT.json]

Rule (no model): content and word_count from the transcript; speed from words per second; pitch from the median
pitch; intonation from the final pitch change (or a "?" in the transcript); stress from the most prominent word.
Agent: `toolpath eval mmsu` on the first --agent-items items taken round-robin over the item kinds (0: skipped).
Chance is 0.25 for every kind. Goals: content >= 0.7, speed and pitch >= 0.8 (with the agent).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# semitones of the final pitch against the clip's median: a falling statement ends well below it
QUESTION_RISE = -1.5


def _norm(text: str, numbers: bool = True) -> str:
    """Lower case, punctuation out and, with `numbers`, numbers in words as digits ("seven" -> "7")."""
    from toolpath.number_words import digits

    return " ".join(re.sub(r"[^\w\s]", " ", (digits(text) if numbers else text).lower()).split())


def _best_stretch(option: str, said: str) -> float:
    """How closely the option matches some run of the transcript's words (as many words as it has, or one more
    or fewer), 0-100: a short option is compared with the words where it could be, not with every letter."""
    from rapidfuzz import fuzz

    want, heard = option.split(), said.split()
    if not want or not heard:
        return 0.0
    spans = {" ".join(heard[i:i + k]) for k in range(max(1, len(want) - 1), len(want) + 2)
             for i in range(max(1, len(heard) - k + 1))}
    return max(fuzz.ratio(option, span) for span in spans)


def content_pick(choices: list[str], transcript: str, numbers: bool = True) -> str:
    """The option that best matches a stretch of the transcript (tiny.en mishears some synthetic words). With
    `numbers`, numbers are compared both in digits ("seven" is "7") and in words, by sound ("free" is near
    "three", though nothing like "3")."""
    from toolpath.number_words import spoken

    def match(option: str) -> float:
        if not numbers:
            return _best_stretch(_norm(option, False), _norm(transcript, False))
        return max(_best_stretch(_norm(option), _norm(transcript)),
                   _best_stretch(_norm(spoken(option), False), _norm(spoken(_norm(transcript)), False)))

    return "ABCD"[max(range(4), key=lambda i: match(choices[i]))]


def rule_answer(record, outputs: list[dict]) -> str | None:
    """The letter a fixed rule picks from the tools' outputs for one item, None when it cannot tell."""
    kind, choices = record.category, record.data["choices"]
    first = outputs[0]
    if kind == "content":
        return content_pick(choices, first["transcript"]["text"])
    if kind == "word_count":
        n = str(len(first["transcript"]["words"]))
        return "ABCD"[choices.index(n)] if n in choices else None
    if kind in ("speed", "pitch"):
        if kind == "speed":
            a, b = (o["features"]["rate"].get("words_per_second") or o["features"]["rate"]["syllables_per_second"]
                    for o in outputs)
        else:
            a, b = (o["features"]["pitch"]["median_hz"] or 0.0 for o in outputs)
        return "A" if a > b else "B"
    if kind == "intonation":
        rise = first["features"]["pitch"].get("final_change_semitones", 0.0)
        question = first["transcript"]["text"].rstrip().endswith("?") or rise > QUESTION_RISE
        return "A" if question else "B"
    if kind == "stress":
        from rapidfuzz import fuzz

        word = _norm(first["features"].get("stressed_word", ""))
        return "ABCD"[max(range(4), key=lambda i: fuzz.ratio(_norm(choices[i]), word))] if word else None
    return None


def tool_outputs(record) -> list[dict]:
    """What transcribe and speech_features say of each of the item's clips (their functions, called directly)."""
    from toolpath.tools.audio.clips import read_clip
    from toolpath.tools.audio.prosody import analyse
    from toolpath.tools.audio.speech import transcript

    out = []
    for path in record.data["audio"]:
        clip = read_clip(Path(path))
        t = transcript(clip)
        out.append({"transcript": t, "features": analyse(clip, t["words"] or None)})
    return out


def word_error_rate(refs: list[str], hyps: list[str]) -> float:
    import jiwer

    return float(jiwer.wer([_norm(r) for r in refs], [_norm(h) for h in hyps]))


def agent_accuracy(seed: int, model: str, n: int, runs: Path, kinds: list[str]) -> dict:
    from toolpath.evals.runner import run_eval
    from toolpath.runs import open_store

    store = open_store(runs)
    result = run_eval("mmsu", store, model=model, limit=n, seed=seed, categories=kinds or None)
    per: dict[str, list[float]] = {}
    for s in result.samples:
        per.setdefault(s.category, []).append(float(s.score))
    print(f"agent ({model}, react, transcribe + speech_features; {len(result.samples)} items):")
    _table(per)
    return {"model": model, "samples": len(result.samples), "seconds": round(result.seconds, 1),
            "kinds": _figures(per), "answers": {s.sample_id: s.answer for s in result.samples}}


def rule_report(records) -> dict:
    """The rule's accuracy per kind and Whisper's word error rate over every clip of `records`."""
    per: dict[str, list[float]] = {}
    refs, hyps = [], []
    for r in records:
        outs = tool_outputs(r)
        per.setdefault(r.category, []).append(float(rule_answer(r, outs) == r.data["answer"]))
        for text, o in zip(r.data["transcripts"], outs, strict=True):
            refs.append(text)
            hyps.append(o["transcript"]["text"])
    print(f"rule on the tools' outputs ({len(records)} items; chance 0.25):")
    _table(per)
    wer = word_error_rate(refs, hyps)
    print(f"transcription word error rate (Whisper tiny.en, {len(refs)} clips): {wer:.4f}")
    return {"rule": _figures(per), "wer": round(wer, 4), "wer_clips": len(refs)}


def _figures(per: dict[str, list[float]]) -> dict:
    from toolpath.evals.intervals import bootstrap_ci

    return {k: {"accuracy": round(sum(v) / len(v), 3), "ci95": [round(x, 3) for x in bootstrap_ci(v)], "items": len(v)}
            for k, v in sorted(per.items())}


def _table(per: dict[str, list[float]]) -> None:
    for k, f in _figures(per).items():
        print(f"  {k:<11} {f['accuracy']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]  ({f['items']} items)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--agent-items", type=int, default=12)
    ap.add_argument("--agent-kind", action="append", default=[], help="item kinds the agent answers (default: all)")
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--skip-rule", action="store_true", help="only the agent (the rule and WER take minutes)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="mmsu-bench-"))  # the agent's runs: a throwaway store
    os.environ["TOOLPATH_MMSU_ITEMS"] = str(args.items)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from toolpath.evals.benchmarks.mmsu import MMSU

    report: dict = {"items": args.items, "seed": args.seed, "chance": 0.25}
    t0 = time.monotonic()
    if not args.skip_rule:
        report.update(rule_report(list(MMSU(items=args.items).records(seed=args.seed))),
                      rule_seconds=round(time.monotonic() - t0, 1))
    if args.agent_items:
        report["agent"] = agent_accuracy(args.seed, args.model, args.agent_items, runs, args.agent_kind)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
