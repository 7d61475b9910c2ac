"""What a sample cost: tokens times the model's price, from a table users extend.

Prices are US dollars per million tokens, input and output, keyed by the model string a spec gives
(`openai:gpt-4.1-mini`). Models that run on this machine (the registry's policy kinds whose meta says
`local`: the bundled model, local transformers models, the scripted, python and rule-based policies) cost 0.
A model the table does not know is "not priced" (None), never guessed. Users add or override entries in
`$TOOLPATH_HOME/prices.json` (or the file $TOOLPATH_PRICES names):

    {"openai:my-finetune": {"input": 0.30, "output": 1.20}}
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import registry

# List prices (USD per 1M tokens) of common OpenAI-compatible models, as published by their vendors.
PRICES: dict[str, tuple[float, float]] = {
    "openai:gpt-4.1": (2.00, 8.00),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4o-mini": (0.15, 0.60),
}


def price_file(home: Path) -> Path:
    return Path(os.environ.get("TOOLPATH_PRICES") or home / "prices.json").expanduser()


def load_prices(home: Path) -> dict[str, tuple[float, float]]:
    """The built-in table with the user's file on top; a malformed file is a ValueError naming it and the entry."""
    table = dict(PRICES)
    path = price_file(home)
    if not path.is_file():
        return table
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable JSON price table ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of model → {{\"input\": $, \"output\": $}} per 1M tokens")
    for model, entry in data.items():
        try:
            pin, pout = float(entry["input"]), float(entry["output"])
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"{path}: entry {model!r} needs numbers \"input\" and \"output\" (USD per 1M tokens), "
                             f"got {entry!r}") from None
        if pin < 0 or pout < 0:
            raise ValueError(f"{path}: entry {model!r} has a negative price")
        table[str(model)] = (pin, pout)
    return table


def cost_usd(model: str, tokens_in: int, tokens_out: int, table: dict[str, tuple[float, float]]) -> float | None:
    """Dollars for these tokens, 0 for a model run on this machine, None when the model has no price."""
    if model in table:
        pin, pout = table[model]
        return round((tokens_in * pin + tokens_out * pout) / 1e6, 8)
    kind = registry.declared("policy").get(model.split(":", 1)[0])
    if kind is not None and kind.meta.get("local"):
        return 0.0
    return None
