"""toolpath.kinds: a kind's options become its typed Options in one place, and every bad field is named."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from toolpath import kinds


class Demo:
    name = "demo"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        bits: Literal[2, 4, 16] = Field(2, description="bits per stored value")
        budget: int = Field(64, ge=1)

    def attach(self, model, options):
        return None


def test_options_are_typed_and_defaults_filled():
    opts = kinds.options(Demo(), {"bits": 4}, "kv_cache")
    assert (opts.bits, opts.budget) == (4, 64)


@pytest.mark.parametrize("values, expected", [
    ({"bits": 3}, "kv_cache.bits: Input should be 2, 4 or 16 (got 3)"),
    ({"bitz": 2}, "kv_cache.bitz: demo has no option 'bitz'; its options: bits, budget"),
    ({"budget": 0}, "kv_cache.budget: Input should be greater than or equal to 1 (got 0)"),
])
def test_a_bad_option_names_the_field_as_a_spec_writes_it(values, expected):
    with pytest.raises(ValueError) as err:
        kinds.options(Demo(), values, "kv_cache")
    assert str(err.value) == expected


def test_every_bad_field_is_named_at_once():
    with pytest.raises(ValueError, match=r"kv_cache\.bits: .*; kv_cache\.budget: "):
        kinds.options(Demo(), {"bits": "x", "budget": -1}, "kv_cache")


def test_an_object_without_the_family_verb_is_not_a_kind():
    assert kinds.check_kind(Demo(), "kv_cache", "demo")
    with pytest.raises(kinds.NotAKind, match=r"decoding\.kind: 'demo' .* has no build"):
        kinds.check_kind(Demo(), "decoder", "demo")


def test_describe_lists_each_option_with_its_default():
    assert kinds.describe(Demo()) == {"bits": "bits per stored value; default 2", "budget": "default 64"}
