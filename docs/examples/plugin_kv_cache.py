"""A kv-cache kind written outside toolpath: transformers' plain DynamicCache under the name `plain`.

A kind is one object, `KIND`, with

    name                       the name it is registered under
    Options                    a pydantic model of its options (unknown ones refused: extra="forbid")
    attach(model, options)     a fresh transformers Cache for one generate() call, given the validated Options

and, if it wants them, `short` (the option the N of `NAME:N` sets, as kivi's bits) and `refuse(config)` (why a
model cannot use it, or None). Register it for a run and use it like a built-in kind:

    PYTHONPATH=docs/examples TOOLPATH_PLUGINS=kv_cache:plain=plugin_kv_cache:KIND \\
        toolpath run examples/hello.yaml --model local --kv-cache plain

or in a spec, `model: {name: local, options: {kv_cache: {kind: plain}}}`; an installed package declares it as
an entry point instead (`[project.entry-points."toolpath.kv_cache"] plain = "plugin_kv_cache:KIND"`).
`toolpath models list` lists it with its options, and a bad option is the spec's error, before the model
loads: `{kind: plain, bits: 4}` is "model.options.kv_cache.bits: plain has no option 'bits'; its options: none".

Run this file to see it generate on a tiny random model: python docs/examples/plugin_kv_cache.py
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PlainCache:
    name = "plain"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")  # no options, so any option given is a spec error

    @staticmethod
    def attach(model, options):
        from transformers import DynamicCache  # here, not at the top: validating a spec imports no torch

        return DynamicCache(config=model.config)


KIND = PlainCache()


def main() -> None:
    """Generate with the plugin's cache and without: the same tokens."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from toolpath import registry
    from toolpath.policies import kvcache

    registry.add("kv_cache", KIND.name, KIND)  # what TOOLPATH_PLUGINS does, for this process
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2)).eval()
    ids = torch.randint(0, 64, (1, 8))
    cache = kvcache.attach(model, "plain", {})
    with_plugin = model.generate(ids, max_new_tokens=8, do_sample=False, cache=cache, pad_token_id=0)
    default = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(with_plugin, default)
    print(f"kv cache 'plain': {type(cache).__name__}, {cache.get_seq_length()} tokens, same tokens as no cache option")


if __name__ == "__main__":
    main()
