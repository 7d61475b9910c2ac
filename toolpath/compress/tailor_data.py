"""Real data for tailoring: English text and tool-call transcripts, each split into training, calibration and
held-out evaluation parts that never overlap.

English: Python's own `pydoc_data.topics` (about 700 kB of English every Python has), topics in sorted key order:
the first 70 % train the English fine-tune, the next 10 % are the search's calibration text, the last 20 % are
held out for evaluation.

Tool-call transcripts: episodes of the built-in arithmetic benchmark's kind (a question, a calculator call in the
project's JSON tool-call format, the tool's result, the number as the answer), rendered exactly as the hf policy
renders a run (HFPolicy._chat: system prompt with the tool guide and the worked demonstration, the model's chat
template). Training, calibration and evaluation use different seeds, so their questions differ. The task
accuracy is next-token accuracy on the tokens the assistant writes in the episode (the call and the answer).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..arith_questions import CATEGORIES, question
from ..pydoc_text import topics_text
from ..spec import ModelSpec
from ..state import Message, ToolCall

SPLITS = {"train": (0.0, 0.7), "calibration": (0.7, 0.8), "heldout": (0.8, 1.0)}
TRANSCRIPT_SEEDS = {"train": 1001, "calibration": 2002, "heldout": 3003}
# The schemas of the two tools an arithmetic episode offers, as the tool registry describes them.
TOOL_SCHEMAS = [
    {"name": "calculator", "description": "Evaluate an arithmetic expression exactly and return the number.",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}},
    {"name": "final_answer", "description": "Give the final answer and end the episode.",
     "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}}},
]
MIN_PREFIX = 8
SYSTEM = "You are a helpful assistant that solves the user's task with the tools given."


@dataclass
class Example:
    """One sequence: `ids` [1, T]; `scored`: positions whose token counts toward accuracy (None: all of them)."""
    ids: Any
    scored: Any = None


def english_text(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown data split {split!r}; splits: {', '.join(SPLITS)}")
    return topics_text(*SPLITS[split])


def english_blocks(tokenizer, split: str, n_blocks: int, length: int) -> list[Example]:
    """`n_blocks` consecutive blocks of `length` tokens from the split's English text."""
    import torch

    ids = tokenizer(english_text(split), return_tensors="pt")["input_ids"][0]
    if ids.numel() < length:
        raise ValueError(f"the {split} English text has {ids.numel()} tokens, fewer than one block of {length}")
    n = min(n_blocks, ids.numel() // length)
    return [Example(ids[i * length:(i + 1) * length].unsqueeze(0).to(torch.long)) for i in range(n)]


def arith_episodes(split: str, n: int) -> list[list[Message]]:
    """`n` solved arithmetic episodes as transcripts (what a correct run of the arith benchmark records)."""
    rng = random.Random(TRANSCRIPT_SEEDS[split])
    out = []
    for i in range(n):
        text, expr, answer = question(rng, CATEGORIES[i % len(CATEGORIES)])
        out.append([
            Message(role="system", content=SYSTEM),
            Message(role="user", content=text + " Use the calculator tool, then give the number."),
            Message(role="assistant", tool_calls=[ToolCall(id="call1", name="calculator",
                                                           arguments={"expression": expr})]),
            Message(role="tool", name="calculator", tool_call_id="call1", content=str(answer)),
            Message(role="assistant", content=str(answer)),
        ])
    return out


def _render(tokenizer, chat: list[dict]) -> str:
    from ..policies.hf import plain_prompt

    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(chat, tokenize=False)
    return plain_prompt(chat[:-1]) + " " + chat[-1]["content"]


def transcripts(tokenizer, split: str, n: int) -> list[Example]:
    """Tokenized episodes; `scored` marks the tokens of the episode's own assistant turns (not the demonstration)."""
    import torch

    from ..policies.hf import HFPolicy

    renderer = HFPolicy(None, tokenizer, ModelSpec(name="hf:tailor"), name="tailor")
    out = []
    for episode in arith_episodes(split, n):
        chat = renderer._chat(episode, TOOL_SCHEMAS)
        text = _render(tokenizer, chat)
        # The episode's assistant turns are the last ones in the chat; find their text from the end.
        spans, pos = [], len(text)
        for turn in reversed([m for m in chat if m["role"] == "assistant"][-2:]):
            start = text.rfind(turn["content"], 0, pos)
            if start < 0:
                raise ValueError(f"assistant turn {turn['content']!r} not found in the rendered transcript")
            spans.append((start, start + len(turn["content"])))
            pos = start
        enc = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
        offsets = enc["offset_mapping"][0].tolist()
        scored = torch.tensor([i for i, (a, b) in enumerate(offsets)
                               if i > 0 and b > a and any(s <= a < e for s, e in spans)], dtype=torch.long)
        out.append(Example(enc["input_ids"].to(torch.long), scored))
    return out


def shared_prefix(examples: list[Example]) -> int:
    """How many leading tokens every example shares and that no scored token is predicted from: the system
    prompt and the worked demonstration of a transcript, the same in every episode. A model can run them once."""
    if not examples:
        return 0
    first = examples[0].ids[0]
    n = min(int(e.scored.min()) - 1 if e.scored is not None and e.scored.numel() else e.ids.shape[1]
            for e in examples)
    for e in examples[1:]:
        m = min(n, e.ids.shape[1])
        same = (e.ids[0, :m] == first[:m]).tolist() + [False]
        n = same.index(False)
    return n if n >= MIN_PREFIX else 0  # a few shared tokens are not worth a cache


def suffix_batch(examples: list[Example], start: int, pad: int):
    """The examples' tokens from `start` on, right-padded into one batch (padding after a sequence cannot
    change its causal logits), and each example's scored positions relative to `start`."""
    import torch

    width = max(e.ids.shape[1] - start for e in examples)
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    for j, e in enumerate(examples):
        ids[j, :e.ids.shape[1] - start] = e.ids[0, start:]
    return ids, [e.scored - start for e in examples]


def describe(n_english: int, length: int, n_transcripts: int, split: str) -> dict:
    lo, hi = SPLITS[split]
    return {"english": f"pydoc_data.topics, sorted topics {lo:.0%}-{hi:.0%}: {n_english} blocks of {length} tokens",
            "transcripts": f"{n_transcripts} arithmetic tool-call episodes (JSON tool calls, seed "
                           f"{TRANSCRIPT_SEEDS[split]}), accuracy on the assistant's tokens"}
