"""Sparse KV caches (quest, icecache) against the full cache on a local model: rows 3-5 of the KV-cache table.

    python benchmarks/kvcache_sparse.py [--model local] [--rows passkey,recall,speed] [--json]
        [--lengths 1024:20,2048:20,4096:20,8192:20] [--budgets 64,256] [--recall-budgets 64,128,256,512]
        [--context 2048] [--new-tokens 256] [--threads 1]

Row 3, passkey: a five-digit pass key hidden at varied depths (trial i of n at depth i / (n - 1)) in filler
text of L tokens; greedy answer; accuracy per kind and budget, and relative to the full cache on the same
prompts. Row 4, on held-out English (the last 20 % of pydoc_data.topics by sorted key): greedy agreement with
the full cache over the generated tokens (position-wise and the prefix before the first difference), and the
attention mass the selected tokens hold of full attention over every key, averaged over sparse layers, query
heads and steps. Row 5: decode ms per token against DynamicCache on the same context, and icecache's bytes
moved from the far store per token beside the bytes an offloaded full cache would move.

One prefill per prompt is shared by every kind: the prefill is dense for all of them (as in the references),
so each sparse cache is filled from the full cache's prefill keys through its own update(), which builds its
pages, and decoding starts at the prompt's last token.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
INTRO = ("There is a pass key hidden inside a lot of irrelevant text. Find it and memorize it. "
         "I will quiz you about the pass key.\n")
QUESTION = "\nWhat is the pass key? The pass key is"


def log(text: str) -> None:
    """Progress on stderr (a long CPU run shows where it is; --json stays clean on stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def load(model_name: str):
    from toolpath.policies.local import load_local
    from toolpath.spec import ModelSpec

    policy = load_local(ModelSpec(name=model_name, options={"engine": "torch"}))  # the caches are torch layers
    return policy.model.eval(), policy.tokenizer


# what a name in --kinds attaches: the kind and the options beside its budget (the ablation rows are variants)
VARIANTS = {"quest": ("quest", {}), "icecache": ("icecache", {}),
            "icecache-kv": ("icecache", {"select": "kv"}), "icecache-bound": ("icecache", {"score": "bound"}),
            "icecache-centroid": ("icecache", {"score": "centroid"})}


def configs(kinds, budgets):
    return [("full", None)] + [(kind, budget) for kind in kinds for budget in budgets]


def prefill(model, ids):
    """Dense prefill of ids [1, T] into a DynamicCache."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.no_grad():
        model(ids, cache=cache)
    return cache


def cache_for(model, full, kind, budget):
    """A cache of `kind` holding the full cache's prefill (built through the kind's own update)."""
    from toolpath.policies.kvcache import attach

    kind, options = VARIANTS[kind]
    cache = attach(model, kind, {**options, "budget": budget})
    for i, layer in enumerate(full.layers):
        cache.update(layer.keys, layer.values, i)
    return cache


def prefilled(model, full, label, budget, built: dict):
    """cache_for, but icecache's clustered index (the same for every budget and selection rule, and the slow
    part on a CPU) is built once per prefill in `built` and copied for each variant and budget."""
    import copy

    kind, options = VARIANTS[label]
    if kind != "icecache":
        return cache_for(model, full, label, budget)
    if "icecache" not in built:
        built["icecache"] = cache_for(model, full, "icecache", 4096)
    cache = copy.deepcopy(built["icecache"])
    for layer in cache.layers:
        if not layer.dense:
            layer.budget, layer.per_query = budget, options.get("select", "query") == "query"
            layer.score = options.get("score", "key")
    return cache


def decode(model, cache, first, n, on_step=None):
    """Greedy tokens from the prompt's last token `first`; on_step(cache) after every forward."""
    import torch

    out, token = [], int(first)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([[token]]), cache=cache).logits[0, -1]
            if on_step:
                on_step(cache)
            token = int(logits.argmax())
            out.append(token)
    return out


def run_kinds(model, full, first, n, kinds_budgets, on_step=None):
    """Decode n tokens with each (kind, budget) from the same prefill; the full cache is cropped back."""
    length = full.get_seq_length()
    out = {}
    for kind, budget in kinds_budgets:
        if kind == "full":
            out[(kind, budget)] = decode(model, full, first, n, on_step)
            full.crop(-(full.get_seq_length() - length))
        else:
            out[(kind, budget)] = decode(model, cache_for(model, full, kind, budget), first, n, on_step)
    return out


def passkey_prompt(tok, length: int, depth: float, key: int):
    per = len(tok(FILLER, add_special_tokens=False).input_ids)
    fixed = len(tok(INTRO + QUESTION, add_special_tokens=False).input_ids) + 20
    n = max(1, (length - fixed) // per)
    at = round(depth * n)
    needle = f"The pass key is {key}. Remember it. {key} is the pass key. "
    text = INTRO + FILLER * at + needle + FILLER * (n - at) + QUESTION
    return tok(text, return_tensors="pt", add_special_tokens=False).input_ids


def passkey_rows(model, tok, kinds, lengths, trials, budgets=(64, 256), seed=0):
    """Row 3. lengths: token counts; trials: an int or {length: trials}."""
    rng = random.Random(seed)
    rows = []
    for length in lengths:
        n = trials[length] if isinstance(trials, dict) else trials
        hits: dict = {}
        for i in range(n):
            key = rng.randint(10000, 99999)
            ids = passkey_prompt(tok, length, i / (n - 1) if n > 1 else 0.5, key)
            full = prefill(model, ids[:, :-1])
            answers = run_kinds(model, full, ids[0, -1], 7, configs(kinds, budgets))
            log(f"passkey {length} trial {i + 1}/{n}: key {key}, answers " + ", ".join(
                f"{k}:{b}={tok.decode(t).strip()!r}" for (k, b), t in answers.items()))
            for config, tokens in answers.items():
                hits[config] = hits.get(config, 0) + (str(key) in tok.decode(tokens))
        base = hits[("full", None)] / n
        for (kind, budget), hit in hits.items():
            acc = hit / n
            rows.append({"row": "passkey", "length": int(ids.shape[1]), "target_length": length, "kind": kind,
                         "budget": budget, "trials": n, "accuracy": acc,
                         "relative_to_full": acc / base if base else None})
    return rows


def heldout_ids(tok, tokens: int):
    from toolpath.pydoc_text import held_out_text

    return tok(held_out_text(), return_tensors="pt", add_special_tokens=False).input_ids[:, :tokens]


def attention_mass(cache) -> list[float]:
    """Share of full attention (over every key) that the last step's selected tokens hold, per sparse layer."""
    import torch

    out = []
    for layer in cache.layers:
        q, sel = getattr(layer, "last_query", None), getattr(layer, "last_selection", None)
        if q is None or sel is None:
            continue
        keys = layer.materialize()[0] if hasattr(layer, "materialize") else layer.keys
        t = q.shape  # [B, Hq, 1, D]
        keys = keys[..., : layer.get_seq_length(), :].float()
        hkv = keys.shape[1]
        group = t[1] // hkv
        scores = (q.float().view(t[0], hkv, group, t[3]) @ keys.transpose(-1, -2)) * t[3] ** -0.5
        probs = torch.softmax(scores, dim=-1).view(t[0], t[1], -1)  # [B, Hq, T]
        if sel.shape[1] != t[1]:  # one selection per KV head: its query heads share it
            sel = sel.repeat_interleave(group, dim=1)
        # padding (-1) points at an extra column, so it cannot clear a real token's mark (token 0 is the sink)
        slot = torch.where(sel >= 0, sel, torch.full_like(sel, probs.shape[-1]))
        chosen = torch.zeros(*probs.shape[:2], probs.shape[-1] + 1).scatter_(2, slot, 1.0)[..., :-1]
        out.append(float((chosen * probs).sum(-1).mean()))
        layer.last_query = None
    return out


def recall_rows(model, tok, kinds, budgets=(64, 128, 256, 512), context=2048, new_tokens=256):
    """Row 4: greedy agreement with full and attention-mass recall of the selected tokens."""
    ids = heldout_ids(tok, context)
    full = prefill(model, ids[:, :-1])
    masses: dict = {}

    def collect(config):
        def on_step(cache):
            masses.setdefault(config, []).extend(attention_mass(cache))
        return on_step

    ref = run_kinds(model, full, ids[0, -1], new_tokens, [("full", None)])[("full", None)]
    rows = []
    for config in configs(kinds, budgets)[1:]:
        tokens = run_kinds(model, full, ids[0, -1], new_tokens, [config], collect(config))[config]
        same = [a == b for a, b in zip(tokens, ref)]
        prefix = same.index(False) if False in same else len(same)
        m = masses.get(config, [])
        log(f"recall {config}: agreement {sum(same)}/{len(same)}")
        rows.append({"row": "recall", "kind": config[0], "budget": config[1], "context": int(ids.shape[1]),
                     "new_tokens": new_tokens, "greedy_agreement": sum(same) / len(same),
                     "agreement_prefix": prefix, "attention_recall": sum(m) / len(m) if m else None})
    return rows


def stdlib_docstrings() -> str:
    """English prose no one here wrote or chose for this benchmark: the docstrings of a fixed list of standard
    library modules (the module's, then each public class's and function's longer than a line or two, by name),
    pinned by the Python version the JSON records."""
    import importlib
    import inspect

    parts = []
    for name in STDLIB_DOC_MODULES:
        module = importlib.import_module(name)
        own = [module] + [obj for key, obj in sorted(vars(module).items())
                          if not key.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
                          and getattr(obj, "__module__", None) == module.__name__]
        parts += [inspect.cleandoc(obj.__doc__) for obj in own if obj.__doc__ and len(obj.__doc__) > 200]
    return "\n\n".join(parts)


STDLIB_DOC_MODULES = ("argparse", "asyncio", "collections", "concurrent.futures", "contextlib", "csv", "dataclasses",
                      "datetime", "decimal", "difflib", "email.message", "enum", "fractions", "functools",
                      "gettext", "heapq", "http.client", "inspect", "ipaddress", "json", "logging", "mailbox",
                      "multiprocessing.pool", "optparse", "pathlib", "pickle", "pprint", "queue", "random",
                      "sched", "shutil", "smtplib", "socketserver", "statistics", "string", "subprocess",
                      "tarfile", "tempfile", "textwrap", "threading", "unittest.case", "urllib.request", "uuid",
                      "warnings", "weakref", "zipfile")


def source_text(source: str) -> str:
    if source == "pydoc":
        from toolpath.pydoc_text import held_out_text

        return held_out_text()
    if source == "stdlib-docs":
        return stdlib_docstrings()
    raise SystemExit(f"--sources: unknown text source {source!r} (pydoc, stdlib-docs)")


def ppl_rows(model, tok, kinds, budgets=(64, 128, 256), sources=("pydoc", "stdlib-docs"), contexts=(1024, 4096),
             scored=64, windows=2, recall_every=8):
    """Row 6: perplexity of `scored` tokens decoded one at a time (teacher-forced) after a dense prefill of
    `context` tokens, per kind and budget, with the attention-mass recall of the selections beside (every
    `recall_every`-th step: it reads every key of every layer). The windows of one source and context run as
    one batch; each kind decodes from the same prefill."""
    import torch

    rows = []
    for source in sources:
        ids = tok(source_text(source), return_tensors="pt", add_special_tokens=False).input_ids[0]
        for context in contexts:
            span = context + scored
            if ids.numel() < windows * span:
                raise SystemExit(f"{source} has {ids.numel()} tokens, fewer than {windows} windows of {span}")
            batch = torch.stack([ids[i * span:(i + 1) * span] for i in range(windows)])
            full = prefill(model, batch[:, :context - 1])
            base, built = None, {}
            for kind, budget in configs(kinds, budgets):
                masses: list[float] = []
                cache = full if kind == "full" else prefilled(model, full, kind, budget, built)
                nll = []
                with torch.no_grad():
                    for step, t in enumerate(range(context - 1, span - 1)):
                        logits = model(batch[:, t:t + 1], cache=cache).logits[:, -1].float()
                        nll.append(torch.nn.functional.cross_entropy(logits, batch[:, t + 1], reduction="none"))
                        if kind != "full" and step % recall_every == 0:
                            masses.extend(attention_mass(cache))
                if kind == "full":
                    full.crop(-(full.get_seq_length() - (context - 1)))
                ppl = float(torch.stack(nll).mean().exp())
                base = ppl if kind == "full" else base
                row = {"row": "ppl", "source": source, "context": context, "scored": scored, "windows": windows,
                       "kind": kind, "budget": budget, "ppl": ppl, "ppl_increase_pct": 100 * (ppl / base - 1),
                       "attention_recall": sum(masses) / len(masses) if masses else None}
                log(f"ppl {source} {context} {kind}:{budget}: {ppl:.3f} ({row['ppl_increase_pct']:+.2f} %), "
                    f"recall {row['attention_recall']}")
                rows.append(row)
    return rows


def speed_rows(model, tok, kinds, budget=256, context=2048, new_tokens=32):
    """Row 5: decode ms/token against DynamicCache; icecache's bytes moved per token."""
    ids = heldout_ids(tok, context)
    full = prefill(model, ids[:, :-1])
    cfg = sa_text_config(model)
    per_token_full = (2 * cfg.num_key_value_heads * cfg.head_dim * cfg.num_hidden_layers
                      * next(model.parameters()).element_size())
    rows, base = [], None
    for kind, b in configs(kinds, [budget]):
        cache = full if kind == "full" else cache_for(model, full, kind, b)
        moved0 = cache.bytes_moved() if kind != "full" else 0
        start = time.perf_counter()
        decode(model, cache, ids[0, -1], new_tokens)
        ms = (time.perf_counter() - start) * 1000 / new_tokens
        if kind == "full":
            full.crop(-new_tokens)
            base = ms
        row = {"row": "speed", "kind": kind, "budget": b, "context": int(ids.shape[1]), "ms_per_token": ms,
               "ratio_to_full": ms / base}
        if kind == "icecache":
            row["bytes_moved_per_token"] = (cache.bytes_moved() - moved0) / new_tokens
            row["full_offload_bytes_per_token"] = per_token_full * int(ids.shape[1])
        if kind != "full":
            row["cache_bytes"] = cache.nbytes()
        rows.append(row)
    return rows


def sa_text_config(model):
    from toolpath.policies.kvcache.kind import text_config

    cfg = text_config(model.config)
    if not hasattr(cfg, "head_dim") or cfg.head_dim is None:
        cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
    return cfg


def parse_lengths(text: str):
    lengths, trials = [], {}
    for part in text.split(","):
        length, _, n = part.partition(":")
        lengths.append(int(length))
        trials[int(length)] = int(n or 20)
    return lengths, trials


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local")
    ap.add_argument("--rows", default="passkey,recall,ppl,speed")
    ap.add_argument("--kinds", default="quest,icecache", help=f"any of {', '.join(VARIANTS)}")
    ap.add_argument("--lengths", default="1024:20,2048:20,4096:20,8192:20", help="LENGTH:TRIALS,...")
    ap.add_argument("--budgets", default="64,256", help="passkey budgets")
    ap.add_argument("--recall-budgets", default="64,128,256,512")
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--speed-tokens", type=int, default=32)
    ap.add_argument("--ppl-budgets", default="64,128,256")
    ap.add_argument("--sources", default="pydoc,stdlib-docs", help="perplexity texts: pydoc, stdlib-docs")
    ap.add_argument("--ppl-contexts", default="1024,4096", help="dense prefill lengths before the scored tokens")
    ap.add_argument("--scored", type=int, default=64, help="tokens scored per window after the context")
    ap.add_argument("--windows", type=int, default=2, help="windows per source and context (one batch)")
    ap.add_argument("--quick", action="store_true",
                    help="iteration form: perplexity only, one 1,024-token window per source, 32 scored tokens")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 avoids spin-waits on a shared CPU)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.ppl_contexts, args.scored, args.windows = "ppl", "1024", 32, 1

    import torch

    torch.set_num_threads(args.threads)
    model, tok = load(args.model)
    kinds = args.kinds.split(",")
    rows_wanted = args.rows.split(",")
    out = {"model": args.model, "threads": args.threads, "python": sys.version.split()[0],
           "load_average": os.getloadavg(), "rows": []}
    started = time.perf_counter()
    if "passkey" in rows_wanted:
        lengths, trials = parse_lengths(args.lengths)
        out["rows"] += passkey_rows(model, tok, kinds, lengths, trials, [int(b) for b in args.budgets.split(",")])
    if "recall" in rows_wanted:
        out["rows"] += recall_rows(model, tok, kinds, [int(b) for b in args.recall_budgets.split(",")],
                                   args.context, args.new_tokens)
    if "ppl" in rows_wanted:
        out["rows"] += ppl_rows(model, tok, kinds, [int(b) for b in args.ppl_budgets.split(",")],
                                args.sources.split(","), [int(c) for c in args.ppl_contexts.split(",")],
                                args.scored, args.windows)
    if "speed" in rows_wanted:
        out["rows"] += speed_rows(model, tok, kinds, 256, args.context, args.speed_tokens)
    out["seconds"] = time.perf_counter() - started
    out["load_average_end"] = os.getloadavg()
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for row in out["rows"]:
            print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        print(f"{out['seconds']:.0f} s, load average {out['load_average_end']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
