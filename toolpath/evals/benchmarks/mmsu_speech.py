"""A generated MMSU-style set: spoken clips made with espeak-ng, each question's answer known by construction.

Every item is 4-choice, like MMSU's. Its answer follows from how the clip was made, not from a listener:

    content      what was said: which number, which colour (the sentence names exactly one)
    speed        two clips of one sentence at two espeak rates (words per minute): which is faster
    pitch        two clips of one sentence at two espeak pitches: which voice is higher
    intonation   one clause ending in "?" (espeak's rising question tune) or "." (falling): question or statement
    stress       one word of a sentence spoken slower, louder and higher (SSML <prosody>): which word is stressed
    word_count   a sentence of 3 to 8 words: how many words were spoken

Voices (espeak-ng's English voices and variants), rates and pitches are drawn per item from the seed, so a
seed always gives the same items, and the same clips (espeak-ng is deterministic). The clips are WAV files
written under the folder the caller gives; `generate` writes items.jsonl there in the reader's format
(mmsu.py), so a generated set can also be read back with --data.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Written into a generated folder's stamp: a folder made by another version of this module is made again.
VERSION = 2
KINDS = ("content", "speed", "pitch", "intonation", "stress", "word_count")
VOICES = ("en-us", "en-gb", "en-gb-x-rp", "en-029", "en-us+f3", "en-gb+f2", "en-us+m3")
RATES = (110, 140, 170, 200, 230)  # words per minute (espeak-ng -s)
PITCHES = (15, 30, 50, 70, 90)  # espeak-ng -p, 0..99
LETTERS = "ABCD"
NUMBERS = ("three", "seven", "twelve", "fifteen", "twenty", "forty two", "sixty", "ninety nine")
NUMBER_DIGITS = dict(zip(NUMBERS, ("3", "7", "12", "15", "20", "42", "60", "99"), strict=True))
COLOURS = ("red", "blue", "green", "yellow", "purple", "orange", "white", "black")
NOUNS = ("car", "house", "door", "boat", "coat", "chair", "kite", "bag")
PLACES = ("the park", "the station", "the market", "school", "the river", "the office")
NAMES = ("Anna", "David", "Maria", "Peter", "Sarah", "Tom")
FILLER = ("please", "really", "quickly", "today", "again", "together", "slowly", "now")


class EspeakMissing(RuntimeError):
    """espeak-ng is not installed: the generated set cannot be made here."""


def espeak() -> str:
    found = shutil.which("espeak-ng")
    if not found:
        raise EspeakMissing("the generated MMSU set is spoken by espeak-ng, which is not installed: "
                            "sudo apt-get install espeak-ng (or make system), or read MMSU's release with --data")
    return found


def say(text: str, out: Path, voice: str = "en-us", rate: int = 160, pitch: int = 50, ssml: bool = False) -> Path:
    """One WAV clip of `text` spoken by espeak-ng."""
    cmd = [espeak(), "-v", voice, "-s", str(rate), "-p", str(pitch), "-w", str(out)]
    if ssml:
        cmd.append("-m")
    done = subprocess.run([*cmd, text], capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"espeak-ng failed on {text!r} ({voice}): {done.stderr.strip()[:200]}")
    return out


@dataclass
class Item:
    id: str
    kind: str
    question: str
    choices: list[str]
    answer: str  # the letter
    texts: list[str]  # what each clip says (for word error rate)
    clips: list[dict]  # how each clip is made: text, voice, rate, pitch, ssml

    def record(self, audio: list[str]) -> dict:
        """The item as a line of the reader's JSONL (mmsu.py), with its audio paths."""
        return {"id": self.id, "question": self.question, **{f"choice_{c.lower()}": t for c, t in
                zip(LETTERS, self.choices, strict=True)}, "answer_gt": self.choices[LETTERS.index(self.answer)],
                "answer": self.answer, "task_name": self.kind, "audio_path": audio[0] if len(audio) == 1 else audio,
                "transcripts": self.texts, "construction": self.clips}


def _choices(rng: random.Random, right: str, others: list[str]) -> tuple[list[str], str]:
    opts = [right, *rng.sample([o for o in others if o != right], 3)]
    rng.shuffle(opts)
    return opts, LETTERS[opts.index(right)]


def _fixed(options: list[str], right: str) -> tuple[list[str], str]:
    return options, LETTERS[options.index(right)]


def _voice(rng: random.Random) -> dict:
    return {"voice": rng.choice(VOICES), "rate": rng.choice(RATES[1:4]), "pitch": rng.choice(PITCHES[1:4])}


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)} went to {rng.choice(PLACES)} with the {rng.choice(COLOURS)} {rng.choice(NOUNS)}"


def make_item(kind: str, index: int, rng: random.Random) -> Item:
    iid = f"{kind}_{index:04d}"
    v = _voice(rng)
    if kind == "content":
        if rng.random() < 0.5:
            n = rng.choice(NUMBERS)
            text = f"The number you need is {NUMBER_DIGITS[n]}"
            choices, ans = _choices(rng, NUMBER_DIGITS[n], list(NUMBER_DIGITS.values()))
            q = "Which number does the speaker say?"
        else:
            c, noun = rng.choice(COLOURS), rng.choice(NOUNS)
            text = f"{rng.choice(NAMES)} bought a {c} {noun} yesterday"
            choices, ans = _choices(rng, c, list(COLOURS))
            q = f"What colour is the {noun} the speaker mentions?"
        return Item(iid, kind, q, choices, ans, [text], [{"text": text, **v}])
    if kind in ("speed", "pitch"):
        text = _sentence(rng)
        key, values = ("rate", RATES) if kind == "speed" else ("pitch", PITCHES)
        lo, hi = sorted(rng.sample(range(len(values)), 2))
        while hi - lo < 2:  # at least two steps apart: a difference a listener hears at once
            lo, hi = sorted(rng.sample(range(len(values)), 2))
        first_high = rng.random() < 0.5
        a, b = (values[hi], values[lo]) if first_high else (values[lo], values[hi])
        word = "faster" if kind == "speed" else "higher-pitched"
        options = [f"The first clip is {word}", f"The second clip is {word}", "Both are the same",
                   "Only one clip contains speech"]
        choices, ans = _fixed(options, options[0] if first_high else options[1])
        q = ("Two clips of the same sentence: audio_1 then audio_2. Which one is spoken faster?" if kind == "speed"
             else "Two clips of the same sentence: audio_1 then audio_2. Which one has the higher voice?")
        return Item(iid, kind, q, choices, ans, [text, text],
                    [{"text": text, **v, key: a}, {"text": text, **v, key: b}])
    if kind == "intonation":
        clause = f"{rng.choice(['You', 'They', 'We'])} are going to {rng.choice(PLACES)} {rng.choice(FILLER)}"
        question = rng.random() < 0.5
        text = clause + ("?" if question else ".")
        # no option opens with a lone capital ("A question"): it would read as the letter A
        options = ["It is a question", "It is a statement", "It is a command", "It is a greeting"]
        choices, ans = _fixed(options, options[0] if question else options[1])
        q = "The speaker's words carry no question word. Judging by the intonation, is it a question or a statement?"
        return Item(iid, kind, q, choices, ans, [clause], [{"text": text, **v}])
    if kind == "stress":
        words = [rng.choice(NAMES), "wants", "the", rng.choice(COLOURS), rng.choice(NOUNS), rng.choice(FILLER)]
        candidates = [0, 1, 3, 4, 5]
        k = rng.choice(candidates)
        marked = " ".join(f'<prosody pitch="+70%" volume="+90%" rate="60%">{w}</prosody>' if i == k else w
                          for i, w in enumerate(words))
        text = " ".join(words)
        choices, ans = _choices(rng, words[k], [words[i] for i in candidates])
        q = "Which word does the speaker stress most?"
        return Item(iid, kind, q, choices, ans, [text],
                    [{"text": f"<speak>{marked}</speak>", **v, "ssml": True}])
    if kind == "word_count":
        n = rng.randint(3, 8)
        pool = [rng.choice(NAMES), "likes", "the", rng.choice(COLOURS), rng.choice(NOUNS), "very", "much",
                rng.choice(FILLER)]
        words = pool[:n]
        text = " ".join(words)
        others = [str(x) for x in range(max(1, n - 3), n + 4)]
        choices, ans = _choices(rng, str(n), others)
        q = "How many words does the speaker say?"
        return Item(iid, kind, q, choices, ans, [text], [{"text": text, **v}])
    raise ValueError(f"unknown item kind {kind!r}; kinds: {', '.join(KINDS)}")


def items(n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> list[Item]:
    """`n` items, the kinds taken in turn, all drawn from `seed`."""
    rng = random.Random(seed)
    return [make_item(kinds[i % len(kinds)], i, rng) for i in range(n)]


def generate(folder: Path, n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> Path:
    """Speak `n` items into `folder` (audio/*.wav) and write folder/items.jsonl; returns the JSONL's path.
    A folder that already holds this set (same n, seed, kinds) is reused."""
    espeak()
    folder = Path(folder)
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    target = folder / "items.jsonl"
    stamp = json.dumps({"n": n, "seed": seed, "kinds": list(kinds), "version": VERSION})
    stamp_file = folder / "set.json"
    if target.is_file() and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return target
    lines = []
    for item in items(n, seed, kinds):
        audio = []
        for j, c in enumerate(item.clips, 1):
            rel = f"audio/{item.id}_{j}.wav"
            say(c["text"], folder / rel, c["voice"], c["rate"], c["pitch"], c.get("ssml", False))
            audio.append(rel)
        lines.append(json.dumps(item.record(audio)))
    tmp = target.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(target)
    stamp_file.write_text(stamp)
    return target
