"""The option fields the quantizing compressors share, as pydantic constraints, and the calibration memory check.

A compressor's `Options` model (see toolpath/kinds.py) is built from these: `toolpath compress --bits N
--option KEY=VALUE` is validated into it before any model is loaded, so an option the machine cannot carry out
is refused first, its error naming the option and the limit. The highest values are what one machine of the kind
toolpath runs on (tens of GiB of memory, a few cores) can carry out in one sitting:
- calibration (nsamples windows of seqlen tokens): GPTQ keeps one layer's inputs and outputs for every token in
  float32, 8 bytes per token and hidden unit; MAX_CALIBRATION_TOKENS windows' worth at a 2,048-wide model is
  16 GiB. calibration_fits() checks the real width once the model is loaded.
- group_size: one group per row is the coarsest layout there is; rows longer than 65,536 do not occur.
- seeds: what torch's and Python's generators take without folding.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_CALIBRATION_TOKENS = 4096 * 256
BYTES_PER_TOKEN_AND_UNIT = 8  # a layer's input and output, float32 each

Seed = Annotated[int, Field(ge=0, le=2**32 - 1, description="seed of the random choices")]
GroupSize = Annotated[int, Field(ge=1, le=65536, description="input columns sharing a scale and zero point")]
WholeBits = Annotated[int, Field(ge=1, le=8, description="bits per quantized weight")]


class MethodOptions(BaseModel):
    """Every compressor's options: unknown ones are refused, values are checked when they are set too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Calibration(MethodOptions):
    """The calibration text a method quantizes against: nsamples windows of seqlen tokens of English text."""

    nsamples: int = Field(32, ge=1, le=4096, description="calibration windows")
    seqlen: int = Field(256, ge=1, le=8192, description="tokens per calibration window")
    seed: Seed = 0

    @model_validator(mode="after")
    def _calibration_is_bounded(self):
        tokens = self.nsamples * self.seqlen
        if tokens > MAX_CALIBRATION_TOKENS:
            raise ValueError(f"nsamples x seqlen: at most {MAX_CALIBRATION_TOKENS:,} calibration tokens, got "
                             f"{self.nsamples} x {self.seqlen} = {tokens:,}")
        return self


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
