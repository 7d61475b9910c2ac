"""Content items of the generated MMSU-style set: how Whisper's decode settings, a prompt and number words change
which option the transcript names, and the word error rate. No agent: the content rule of benchmarks/mmsu.py
(the option that best matches a stretch of the transcript) on each setting's transcripts.

    python benchmarks/mmsu_content.py [--items 30] [--seed 1] [--setting NAME ...] [--json OUT.json]

Every setting is measured on the same clips in the same run, against `baseline` (transcribe's own settings).
`options prompt` and `options hotwords` give Whisper the item's four options, as an agent may through
transcribe's `prompt`: that biases the transcript towards the options, so it is reported apart from the rest.
`closed set` answers with the option `which_was_said` scores likeliest against the audio (no transcript rule).
Accuracy is given with numbers in words read as digits (the rule's matching) and without.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# name: (transcribe_samples keywords, whether the item's options go in as the prompt / hotwords)
SETTINGS = {
    "baseline": {},
    "greedy": {"beam_size": 1},
    "beam 10": {"beam_size": 10},
    "no temperature fallback": {"temperature": 0.0},
    "conditioned on previous text": {"condition_on_previous_text": True},
    "VAD on": {"vad_filter": True},
    "no padding": {"pad": 0.0},
    "padding 1 s": {"pad": 1.0},
    "options prompt": {"prompt": "options"},
    "options hotwords": {"hotwords": "options"},
    # not a transcript rule: the option which_was_said scores likeliest against the audio (closed_set.py)
    "closed set": {"closed_set": True},
}


def _decode(setting: dict, choices: list[str]) -> dict:
    listed = ", ".join(choices) + "."
    return {k: (listed if v == "options" else v) for k, v in setting.items() if k != "closed_set"}


def measure(records, names: list[str]) -> dict:
    from mmsu import content_pick, word_error_rate

    from toolpath.tools.audio.clips import read_clip, resampled
    from toolpath.tools.audio.closed_set import rank_options
    from toolpath.tools.audio.whisper import RATE, transcribe_samples

    clips = {r.id: resampled(read_clip(Path(r.data["audio"][0])), RATE) for r in records}
    out = {}
    for name in names:
        t0 = time.monotonic()
        right = right_raw = 0
        refs, hyps, misses = [], [], []
        for r in records:
            heard = transcribe_samples(clips[r.id], **_decode(SETTINGS[name], r.data["choices"]))["text"]
            if SETTINGS[name].get("closed_set"):
                likeliest = rank_options(clips[r.id], r.data["choices"], heard)[0]["option"]
                pick = "ABCD"[r.data["choices"].index(likeliest)]
                right_raw += pick == r.data["answer"]
            else:
                pick = content_pick(r.data["choices"], heard)
                right_raw += content_pick(r.data["choices"], heard, numbers=False) == r.data["answer"]
            right += pick == r.data["answer"]
            refs.append(r.data["transcripts"][0])
            hyps.append(heard)
            if pick != r.data["answer"]:
                misses.append({"id": r.id, "said": r.data["transcripts"][0], "heard": heard,
                               "voice": r.data.get("voice", "")})
        n = len(records)
        out[name] = {"accuracy": round(right / n, 3), "accuracy_numbers_as_said": round(right_raw / n, 3),
                     "wer": round(word_error_rate(refs, hyps), 4), "seconds": round(time.monotonic() - t0, 1),
                     "misses": misses}
        print(f"  {name:<30} accuracy {right / n:.3f} (numbers as said {right_raw / n:.3f})  "
              f"WER {out[name]['wer']:.3f}  {out[name]['seconds']:.0f} s", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--setting", action="append", choices=list(SETTINGS), help="default: every setting")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.items < 1:
        ap.error("--items must be at least 1")
    from toolpath.evals.benchmarks.mmsu import read_items
    from toolpath.evals.benchmarks.mmsu_speech import generate, items

    folder = Path(tempfile.mkdtemp(prefix="mmsu-content-"))
    records = read_items(generate(folder, args.items, args.seed, kinds=("content",)))
    voices = {f"content_{i:04d}": it.clips[0] for i, it in enumerate(items(args.items, args.seed, ("content",)))}
    for r in records:
        c = voices[r.id]
        r.data["voice"] = f"{c['voice']} rate {c['rate']} pitch {c['pitch']}"
    names = ["baseline", *[n for n in (args.setting or SETTINGS) if n != "baseline"]]
    print(f"content items: {len(records)} (seed {args.seed}), chance 0.25")
    report = measure(records, names)
    base = report["baseline"]
    print("against baseline (accuracy difference; WER ratio):")
    for name in names[1:]:
        r = report[name]
        print(f"  {name:<30} {r['accuracy'] - base['accuracy']:+.3f}  WER x{r['wer'] / max(base['wer'], 1e-9):.2f}")
    if args.json:
        args.json.write_text(json.dumps({"items": len(records), "seed": args.seed, "settings": report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
