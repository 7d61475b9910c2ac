"""`--option KEY=VALUE` values of a compression method, read against the method's defaults (their types) and
the bounds below, so an option the machine cannot carry out is refused before any model is loaded."""

from __future__ import annotations

import math
import os
from typing import Any

# Every numeric option of every method, (lowest, highest). The highest values are what one machine of the kind
# toolpath runs on (tens of GiB of memory, a few cores) can carry out in one sitting:
# - calibration (nsamples windows of seqlen tokens): GPTQ keeps one layer's inputs and outputs for every token
#   in float32, 8 bytes per token and hidden unit; MAX_CALIBRATION_TOKENS windows' worth at a 2,048-wide model
#   is 16 GiB. calibration_fits() checks the real width once the model is loaded.
# - group_size: one group per row is the coarsest layout there is; rows longer than 65,536 do not occur.
# - seeds: what torch's and Python's generators take without folding.
# - zeta: the reference's variance ratio is 3; beyond 1,000 no expert ever moves, so larger is meaningless.
LIMITS: dict[str, tuple[float, float]] = {
    "nsamples": (1, 4096), "seqlen": (1, 8192), "group_size": (1, 65536), "seed": (0, 2**32 - 1),
    "order_seed": (0, 2**32 - 1), "zeta": (0.0, 1000.0), "attn_bits": (0, 8)}
MAX_CALIBRATION_TOKENS = 4096 * 256
BYTES_PER_TOKEN_AND_UNIT = 8  # a layer's input and output, float32 each


def _bound(method: str, key: str, value: float) -> None:
    low, high = LIMITS[key]
    if not math.isfinite(value):
        raise ValueError(f"{method} {key}: expected a finite number from {low} to {high}, got {value}")
    if value < low:
        raise ValueError(f"{method} {key}: at least {low}, got {value}")
    if value > high:
        raise ValueError(f"{method} {key}: at most {high}, got {value}")


def read_options(given: dict[str, str], defaults: dict[str, Any], method: str = "compress") -> dict[str, Any]:
    """The defaults overridden by `given`, each converted to its default's type and held to LIMITS; an unknown
    key, a value of the wrong kind or out of bounds is a ValueError naming the method and the option (and the
    limit). A default of None takes the text as it is."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"unknown option {', '.join(unknown)}; options of this method: "
                         f"{', '.join(sorted(defaults)) or 'none'}")
    out = dict(defaults)
    for key, text in given.items():
        kind = type(defaults[key])
        try:
            if kind is bool:
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                out[key] = text.lower() in ("1", "true", "yes", "on")
            elif kind is int:
                out[key] = int(text)
            elif kind is float:
                out[key] = float(text)
            else:
                out[key] = text
        except ValueError:
            expect = {bool: "true or false", int: "a whole number", float: "a number"}.get(kind, "text")
            raise ValueError(f"{method} {key}={text!r}: expected {expect}") from None
    for key, value in out.items():
        if type(value) in (int, float):
            if key not in LIMITS:  # a new numeric option must say how far it may go
                raise ValueError(f"{method} {key}: no bounds declared in compress/options.py LIMITS")
            _bound(method, key, value)
    if "nsamples" in out and "seqlen" in out and out["nsamples"] * out["seqlen"] > MAX_CALIBRATION_TOKENS:
        raise ValueError(f"{method} nsamples x seqlen: at most {MAX_CALIBRATION_TOKENS:,} calibration tokens, got "
                         f"{out['nsamples']} x {out['seqlen']} = {out['nsamples'] * out['seqlen']:,}")
    return out


def machine_memory() -> int:
    """Bytes of memory this machine has (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def calibration_fits(method: str, nsamples: int, seqlen: int, hidden: int, memory: int | None = None) -> None:
    """A ValueError when the calibration activations of a model `hidden` units wide would take more than half of
    this machine's memory: refused once the model's width is known, before they are made."""
    memory = machine_memory() if memory is None else memory
    need = nsamples * seqlen * hidden * BYTES_PER_TOKEN_AND_UNIT
    if memory and need > memory // 2:
        raise ValueError(f"{method} nsamples x seqlen: {nsamples} x {seqlen} tokens of a {hidden}-wide model need "
                         f"{need / 2**30:.1f} GiB of activations, more than half of this machine's "
                         f"{memory / 2**30:.1f} GiB; lower nsamples or seqlen")
