"""BFCL's own prompt handler for a model family, run in-process on toolpath's local backend: the anchor that
"through toolpath" is compared with, item by item.

The `bfcl-eval` package evaluates a local model through a handler per family (model_handler/local_inference/):
the handler writes the whole prompt itself (`_format_prompt`: the family's chat markup, its system text and the
functions as the package shows them), sends it to a completions server, and reads the reply with its own
`decode_ast`. Here the handler's module is run unchanged and its inference flow for one turn is followed step by
step (`_pre_query_processing_prompting`, `add_first_turn_message_prompting`, `_query_prompting`,
`_parse_query_response_prompting`, then `decode_ast` as the package's evaluation calls it); only the completions
server is replaced, by greedy generation on the policy's own weights (HFPolicy or the engine's EnginePolicy:
their tokenizer and `_generate`). The decoded calls are scored by the same official checker as toolpath's runs.

The handler modules import at load time what the package needs for serving and for other paths (its result
folders, `overrides`, the OpenAI client, requests, tree-sitter through its parsers). Those modules stand in,
for the load only and then removed, as bfcl_official does for the checker; each stand-in function raises if
anything calls it, so a handler that reached for one would fail loudly rather than be silently changed.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
import time
import types
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import BenchmarkDataError
from .bfcl_data import AST_CATEGORIES, RELEVANCE_CATEGORIES, package_dir
from .bfcl_official import check, is_call_list

# A model's transformers `model_type` -> the package's handler for its family (file, class). The package ranks
# Qwen3 models through QwenFCHandler; Qwen2.5 writes calls the same way (<tool_call> JSON in ChatML), and the
# handler's prompt is Qwen2.5's own template but for the default system line ("You are Qwen, ...") that
# Qwen2.5's adds when a conversation has none. SmolLM2 (model_type llama) has no handler: the package's llama
# ones are for Llama 3.x's markup, and QuickTestingOSSHandler is a fallback its own note advises against,
# listed for no model.
HANDLERS = {"qwen2": ("qwen_fc", "QwenFCHandler"), "qwen3": ("qwen_fc", "QwenFCHandler")}
BASE = "base_oss_handler"
LOCAL = "bfcl_eval.model_handler.local_inference"


class AnchorError(BenchmarkDataError):
    """The handler anchor cannot run for this model (no handler for its family) or this item."""


def _refusing(module: str):
    def attr(name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def refused(*_: Any, **__: Any):
            raise AnchorError(f"bfcl-eval's {module}.{name} is not run by toolpath's handler anchor")

        return refused

    return attr


def _stand_ins() -> dict[str, types.ModuleType]:
    """The modules the handler files import but whose code this path never runs."""
    out = {}
    for name in ("openai", "requests", "bfcl_eval.utils", "bfcl_eval.model_handler.utils"):
        mod = types.ModuleType(name)
        mod.__getattr__ = _refusing(name)  # any name imported from it: a function that refuses to run
        out[name] = mod
    overrides = types.ModuleType("overrides")  # class decorators that only check overriding: no behaviour
    overrides.override = overrides.final = lambda f: f
    overrides.EnforceOverrides = type("EnforceOverrides", (), {})
    out["overrides"] = overrides
    config = types.ModuleType("bfcl_eval.constants.eval_config")  # the real one makes result folders on import
    config.LOCAL_SERVER_PORT = 1053
    out[config.__name__] = config
    base = types.ModuleType("bfcl_eval.model_handler.base_handler")  # its flow is followed in `respond` below
    base.BaseHandler = type("BaseHandler", (), {})
    out[base.__name__] = base
    return out


def _exec(path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def handler_class(module: str, cls: str) -> type:
    """The package's handler class, from its file and its base class's, with the stand-ins seen by them only."""
    folder = package_dir() / "model_handler" / "local_inference"
    scoped = _stand_ins()
    saved = {name: sys.modules.get(name) for name in [*scoped, f"{LOCAL}.{BASE}"]}
    sys.modules.update(scoped)
    try:
        sys.modules[f"{LOCAL}.{BASE}"] = _exec(folder / f"{BASE}.py", f"toolpath_bfcl_{BASE}")
        return getattr(_exec(folder / f"{module}.py", f"toolpath_bfcl_{module}"), cls)
    finally:  # nobody else who imports these names ever gets a stand-in
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def complete(policy: Any, prompt: str, max_new_tokens: int) -> tuple[str, int, int]:
    """Greedy completion of a raw prompt on a local policy's weights: (text, prompt tokens, new tokens).

    The prompt is tokenized as a completions server tokenizes one (with the tokenizer's special tokens, which
    add none for ChatML models), and the reply decoded as it returns it (special tokens skipped). Prefix reuse
    is used as the policy's own replies use it, so seconds per item compare with toolpath's runs."""
    tok = policy.tokenizer
    inputs = dict(tok(prompt, add_special_tokens=True, return_tensors="pt"))
    kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, pad_token_id=tok.eos_token_id, do_sample=False,
                                  temperature=None, top_p=None, top_k=None)
    prefix = getattr(policy, "prefix", None)
    reuse = prefix.lookup(inputs["input_ids"][0]) if prefix is not None else None
    if reuse is not None:
        kwargs["cache"] = reuse.cache
    out, _ = policy._generate(inputs, kwargs)
    if reuse is not None:
        prefix.store(out[0], reuse.cache)
    n_in = int(inputs["input_ids"].shape[1])
    new = out[0, n_in:]
    return tok.decode(new, skip_special_tokens=True), n_in, int(new.shape[0])


class _Completions:
    """What the handler's `self.client.completions` is: its `create` answered by `complete` on the policy."""

    def __init__(self, policy: Any, max_new_tokens: int):
        self.policy, self.max_new_tokens = policy, max_new_tokens

    def create(self, *, prompt: str, max_tokens: int, extra_body: dict | None = None, **_: Any):
        if extra_body:  # stop token ids and the like: none of the mapped handlers sends any
            raise AnchorError(f"the handler asks the server for {sorted(extra_body)}, which the anchor does not honour")
        text, n_in, n_out = complete(self.policy, prompt, min(max_tokens, self.max_new_tokens))
        return types.SimpleNamespace(choices=[types.SimpleNamespace(text=text)],
                                     usage=types.SimpleNamespace(prompt_tokens=n_in, completion_tokens=n_out))


@dataclass
class Reply:
    prompt: str  # the handler's formatted prompt
    text: str  # the reply as the handler keeps it (model_responses)
    seconds: float


class Anchor:
    """One model family's BFCL handler over a loaded local policy (its weights, tokenizer and context)."""

    def __init__(self, policy: Any, max_new_tokens: int | None = None):
        config = getattr(getattr(policy, "model", None), "config", None)
        model_type = getattr(config, "model_type", None)
        if model_type not in HANDLERS or getattr(policy, "tokenizer", None) is None:
            raise AnchorError(f"bfcl-eval has no handler for {getattr(policy, 'name', policy)!r} "
                              f"(model_type {model_type}); handlers are mapped for {', '.join(sorted(HANDLERS))}")
        cls = handler_class(*HANDLERS[model_type])
        h = cls.__new__(cls)  # not its __init__: that makes an OpenAI client for a server that is not started
        # What the handler's spin_up_local_server would set, from the same model.
        h.tokenizer = policy.tokenizer
        h.max_context_length = getattr(config, "max_position_embeddings", None) or policy.tokenizer.model_max_length
        h.model_path_or_id = getattr(policy, "name", "local")
        h.temperature = 0.0  # greedy, as toolpath's runs (the package asks 0.001 of its server)
        h.client = types.SimpleNamespace(completions=_Completions(
            policy, max_new_tokens or int(getattr(getattr(policy, "spec", None), "max_new_tokens", 256))))
        self.handler, self.name = h, cls.__name__

    def respond(self, item: dict) -> Reply:
        """The handler's single-turn inference (BaseHandler.inference_single_turn_prompting) on one BFCL item."""
        h = self.handler
        entry = copy.deepcopy({"id": item["id"], "question": item["question"], "function": item["function"]})
        started = time.perf_counter()
        data = h._pre_query_processing_prompting(entry)
        data = h.add_first_turn_message_prompting(data, entry["question"][0])
        response, _ = h._query_prompting(data)
        parsed = h._parse_query_response_prompting(response)
        return Reply(data["inference_input_log"]["formatted_prompt"], parsed["model_responses"],
                     time.perf_counter() - started)

    def decode(self, text: str) -> list:
        """The handler's decode_ast as the package's evaluation calls it (Python return format, no tool-call
        tag); raises what the handler raises for a reply it cannot read."""
        from bfcl_eval.constants.enums import ReturnFormat

        return self.handler.decode_ast(text, ReturnFormat.PYTHON, False)

    def score(self, category: str, item: dict, text: str) -> tuple[bool, str]:
        """(right, why) of a handler reply, by the package's evaluation: a reply the decoder refuses is a
        decoder failure (wrong on AST categories, no call on relevance ones); otherwise the official checker."""
        try:
            output = self.decode(text)
        except Exception as err:  # noqa: BLE001 — the handler raises what it likes for an unreadable reply
            if category in RELEVANCE_CATEGORIES:
                return check(category, item["function"], item.get("ground_truth"), None)
            return False, f"ast_decoder:decoder_failed: {err}"
        return score_decoded(category, item, output)


def score_decoded(category: str, item: dict, output: Any) -> tuple[bool, str]:
    """The official checker on a handler's decoded output ([{name: arguments}], names as the model was shown).

    The package scores these handlers' models with dotted names kept (underscore_to_dot false), where
    bfcl_official's checker is told names had "." made "_": the same judgement once the item's own names are
    written that way, and a name the item does not have is wrong on every AST category, as it is there."""
    functions, truth = item["function"], item.get("ground_truth")
    if not is_call_list(output):  # relevance: no call; AST: not in the function-calling format
        return check(category, functions, truth, None) if category in RELEVANCE_CATEGORIES else \
            (False, "the response is not a list of function calls")
    names = {str(f.get("name")) for f in functions if isinstance(f, dict)}
    calls = []
    for entry in output:
        for name, arguments in entry.items():
            if category in AST_CATEGORIES and name not in names:
                return False, f"wrong_func_name: {name!r} is not one of the item's functions"
            calls.append({"name": str(name).replace(".", "_"), "arguments": arguments})
    return check(category, functions, truth, calls)
