"""The engine's stop strings (policies/engines/ort.py Stops) decode only a window of the newest tokens per step, yet
stop at exactly the token where decoding the whole answer so far first shows a stop string the newest token
completed: spanning tokens, across multi-byte characters, at the very first token."""

import random

import pytest

from toolpath.policies.engines.ort import Stops

STOPS = ["</tool_call>", "\nObservation:", "→é", "x"]


@pytest.fixture(scope="module")
def tokenizer():
    from toolpath.compress.text import split_text
    from toolpath.compress.tiny_moe import byte_bpe_tokenizer

    return byte_bpe_tokenizer(split_text()[0][:4000], vocab=300)


class WholeText:
    """The reference: decode every new token each step (what the window must agree with)."""

    def __init__(self, tokenizer, stops):
        self.tokenizer, self.stops, self.before = tokenizer, stops, ""

    def hit(self, new):
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        start = max(0, len(self.before) - max(map(len, self.stops)))
        self.before = text
        return any(s in text[start:] for s in self.stops)


def first_stop(checker, ids):
    for n in range(1, len(ids) + 1):
        if checker.hit(ids[:n]):
            return n
    return None


def texts():
    rng = random.Random(0)
    pieces = ["the answer is ", "</tool_call>", "\nObservation: ", "→é", "ünïcödé ", "日本語 ", "{\"a\": 1}", " "]
    made = ["</tool_call>", "x", "→é at once"]
    for _ in range(60):
        made.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))
    return made


def test_window_stops_where_the_whole_text_does(tokenizer):
    for stops in (STOPS, ["</tool_call>"], ["\nObservation:"], ["→é"]):
        for text in texts():
            ids = tokenizer.encode(text, add_special_tokens=False)
            assert first_stop(Stops(tokenizer, stops), ids) == first_stop(WholeText(tokenizer, stops), ids), \
                (stops, text)


def test_no_stop_strings_never_stop(tokenizer):
    ids = tokenizer.encode("</tool_call> anything", add_special_tokens=False)
    assert first_stop(Stops(tokenizer, [""]), ids) is None


def test_a_step_decodes_a_bounded_window(tokenizer):
    """The cost of a step does not grow with the answer: each decode sees at most `window` tokens."""
    seen = []

    class Counting:
        def decode(self, ids, **kw):
            seen.append(len(ids))
            return tokenizer.decode(ids, **kw)

    stops = Stops(Counting(), ["</tool_call>"])
    ids = tokenizer.encode("the answer is " * 200, add_special_tokens=False)
    first_stop(stops, ids)
    assert max(seen) == stops.window < len(ids)
