"""AskLLM (Sachdeva et al., "How to Train Data-Efficient LLMs", 2024): an instruction-tuned proxy model is asked
whether a text "contains informative signal for pre-training", and the text's score is P(yes).

The prompt is the paper's (its page 4), sent as the user turn of the model's chat template, after worked examples
(askllm_shots.py: the same question asked and answered for a few texts, as earlier turns) unless none are asked
for. P(yes) is read
from the logits of the first answer token: the probability of every single-token spelling of "yes" in the
model's vocabulary ("yes", " yes", "Yes", ...), renormalised over those of "yes" and "no" together, so a model
that would start its answer otherwise ("The", "I") still gives a comparable score.
"""

from __future__ import annotations

from .askllm_shots import BUILTIN
from .items import CurateError
from .proxy import Proxy

PROMPT = """###
{text}
###

Does the previous paragraph demarcated within ### and ### contain informative signal for pre-training a \
large-language model? An informative datapoint should be well-formatted, contain some usable knowledge of the \
world, and strictly NOT have any harmful, racist, sexist, etc. content.

OPTIONS:
- yes
- no"""
# A model without a chat template reads the prompt as plain text; this cue makes the next token the answer.
PLAIN_CUE = "\nANSWER:"
SPELLINGS = {"yes": ("yes", "Yes", "YES"), "no": ("no", "No", "NO")}
MAX_TEXT_TOKENS = 512  # a longer text is cut to its first 512 tokens: the paper scores passages of that order


def answer_ids(tokenizer, word: str) -> list[int]:
    """Every token of the vocabulary that is `word` on its own, with or without a leading space, in any case."""
    ids = set()
    for spelling in SPELLINGS[word]:
        for variant in (spelling, " " + spelling):
            encoded = tokenizer.encode(variant, add_special_tokens=False)
            if len(encoded) == 1:
                ids.add(int(encoded[0]))
    return sorted(ids)


def prompt_ids(proxy: Proxy, text: str, max_text_tokens: int = MAX_TEXT_TOKENS,
               shots: tuple[tuple[str, str], ...] = ()) -> list[int]:
    """The prompt's tokens for `text` (cut to `max_text_tokens` of its own, and to the model's context), after the
    worked examples `shots` ((text, "yes" | "no") pairs)."""
    body = proxy.encode(text)
    overhead = len(_render(proxy, "", shots)) + 8
    room = min(max_text_tokens, proxy.context - overhead - 1)
    if room < 16:
        examples = f" after the {len(shots)} worked examples ({overhead} tokens; --askllm-shots none drops them)"
        raise CurateError(f"--model {proxy.name}: its context of {proxy.context} tokens leaves no room for a text"
                          + (examples if shots else ""))
    if len(body) > room:
        text = proxy.tokenizer.decode(body[:room])
    return _render(proxy, text, shots)


def _render(proxy: Proxy, text: str, shots: tuple[tuple[str, str], ...] = ()) -> list[int]:
    # The examples come first and the scored text last, so every prompt of a corpus starts with the same tokens
    # and the engine reads them once (Proxy.next_logits keeps them).
    tokenizer = proxy.tokenizer
    if getattr(tokenizer, "chat_template", None):
        messages = []
        for example, answer in shots:
            messages += [{"role": "user", "content": PROMPT.format(text=example)},
                         {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": PROMPT.format(text=text)})
        return proxy.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
    worked = "".join(f"{PROMPT.format(text=example)}{PLAIN_CUE} {answer}\n\n" for example, answer in shots)
    return proxy.encode(worked + PROMPT.format(text=text) + PLAIN_CUE)


def p_yes(logits, yes: list[int], no: list[int]):
    """P(yes) over yes+no for each row of next-token logits (numpy, rows x vocab)."""
    import numpy as np

    def mass(ids):  # log of the summed probability (up to the shared normaliser) of those tokens
        part = logits[:, ids].astype(np.float64)
        top = part.max(axis=1, keepdims=True)
        return top[:, 0] + np.log(np.exp(part - top).sum(axis=1))

    a, b = mass(yes), mass(no)
    return 1.0 / (1.0 + np.exp(b - a))


def score(proxy: Proxy, texts: list[str], batch: int = 8, stage=None,
          shots: tuple[tuple[str, str], ...] = BUILTIN) -> list[float]:
    """P(yes) for each text after the worked examples `shots` (() for the paper's zero-shot prompt), `batch`
    prompts per forward pass on torch; `stage` (a Progress) is advanced per text."""
    yes, no = answer_ids(proxy.tokenizer, "yes"), answer_ids(proxy.tokenizer, "no")
    if not yes or not no:
        raise CurateError(f"--model {proxy.name}: its vocabulary has no single token for "
                          f"{'yes' if not yes else 'no'}, so AskLLM cannot read its answer")
    out: list[float] = []
    for start in range(0, len(texts), batch):
        prompts = [prompt_ids(proxy, t, shots=shots) for t in texts[start:start + batch]]
        out += [float(p) for p in p_yes(proxy.next_logits(prompts, batch), yes, no)]
        if stage is not None:
            stage.update(len(prompts))
    return out
