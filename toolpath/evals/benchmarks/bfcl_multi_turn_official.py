"""BFCL's official scoring of a multi-turn conversation: the package's own multi_turn_checker (state checks and
response checks, turn by turn), run unchanged on the calls the episode made, with what the package's evaluation
does around it reproduced and named (eval_runner._evaluate_single_multi_turn_entry): a conversation that did not
reach its last turn is wrong (force_terminated), and each step's calls are the text a function-calling handler
decodes them to (model_handler.utils.convert_to_function_call: `name(key=repr(value),...)`), steps without a
call left out.

The checker `eval`s that text. Our calls' values are JSON values, whose repr is a literal, but a call's name and
argument names are the model's: a name that is not one of the item's functions, or an argument name that is not
a Python identifier, would be code in that text. Such a call becomes text that runs nothing and fails as the
package's would (an unknown name; `name(**{...})` with the arguments as one literal), so the verdict is the
package's without anything the model wrote being run. tests/security/test_bfcl_multi_turn_attacks.py shows it.

The checker keeps each conversation's instances in its module's globals under a name made of the model name and
the item id: every check here gets a name of its own, and its instances are dropped when it is done.
"""

from __future__ import annotations

import keyword
import uuid
from typing import Any

from .bfcl_data import class_functions

UNKNOWN_FUNCTION = "toolpath_unknown_function"  # defined nowhere: the call fails with a NameError, as the package's


def call_text(call: dict, names: set[str]) -> str:
    """One call as the package's function-calling handlers decode it, made safe as the module's doc says."""
    name, arguments = call.get("name"), call.get("arguments")
    if name not in names or not isinstance(arguments, dict):
        return f"{UNKNOWN_FUNCTION}()"
    if all(isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k) for k in arguments):
        return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"
    return f"{name}(**{arguments!r})"


def decoded_turns(turns: list[dict], names: set[str]) -> list[list[list[str]]]:
    """Each turn's steps as the package's evaluation decodes them, steps with no call left out."""
    return [[[call_text(c, names) for c in step if isinstance(c, dict)]
             for step in turn.get("steps", []) if isinstance(step, list) and step] for turn in turns]


def check(item: dict, turns: list[dict] | None) -> tuple[bool, str]:
    """(right, why) for a conversation: `turns` as agents/user_turns.py records it, None when the run ended
    before it answered its last turn."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils

    truth = item["ground_truth"]
    if turns is None or len(turns) != len(truth):
        got = "no conversation" if turns is None else f"{len(turns)} turns"
        return False, f"multi_turn:force_terminated: {got} of {len(truth)}"
    names = {f["name"] for f in class_functions(item["involved_classes"])}
    model_name = f"toolpath_{uuid.uuid4().hex}"
    entry = {"id": item["id"], "initial_config": item.get("initial_config", {}),
             "involved_classes": item["involved_classes"]}
    try:
        result = multi_turn_checker.multi_turn_checker(decoded_turns(turns, names), truth, entry,
                                                       entry["id"].rsplit("_", 1)[0], model_name)
    finally:  # the instances the checker kept for this check, and only those
        for key in [k for k in vars(multi_turn_utils) if k.startswith(model_name)]:
            delattr(multi_turn_utils, key)
    if result.get("valid"):
        return True, ""
    return False, f"{result.get('error_type', '')}: {result.get('error_message', '')}"


def conversation_calls(turns: Any) -> int:
    """How many calls a conversation made."""
    return sum(len(step) for turn in turns or [] for step in turn.get("steps", []) if isinstance(step, list))
