"""The `torch` engine: transformers in this process (policies/hf.py); it has no options of its own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from . import checked


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


def validate(options: dict) -> dict:
    return checked(Options, options)


def missing() -> str:
    return ""
