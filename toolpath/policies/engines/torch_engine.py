"""The `torch` engine: transformers in this process (policies/hf.py); it has no options of its own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Torch:
    name = "torch"
    Options = Options

    def load(self, folder, spec, name: str, options: Options) -> None:
        """None: HFPolicy.from_path, which asked, goes on loading the folder with transformers itself."""
        return None

    def missing(self) -> str:
        return ""


KIND = Torch()
