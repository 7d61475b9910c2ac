"""The model a compression method starts from: any model name a spec accepts (`local`, `local:NAME`, `hf:PATH`)."""

from __future__ import annotations

from ..spec import ModelSpec

KINDS = ("local", "hf")


def check_source(source: str) -> None:
    """A clear error for a name no local backend loads, before any work (the CLI calls it first)."""
    from pathlib import Path

    kind, _, value = source.partition(":")
    if kind not in KINDS:
        raise ValueError(f"model {source!r}: compression needs a local model: local, local:NAME or hf:PATH")
    if kind == "hf" and not Path(value).expanduser().exists():
        raise ValueError(f"model {source!r}: {value} does not exist")
    if kind == "local" and not value:
        from ..policies.local import availability

        ok, why = availability()
        if not ok:
            raise ValueError(f"model 'local': {why}")
    if kind == "local" and value:
        from ..registry import entry

        choices = entry("policy", "local").meta.get("choices", ())
        if value not in choices:
            raise ValueError(f"model {source!r}: unknown local model {value!r}; local models: {', '.join(choices)}")


def load_source(source: str):
    """(model, tokenizer) of `source`, in float32 on the CPU, ready to be quantized in place."""
    check_source(source)
    # quantized in place as torch modules: never the inference engine's export, whatever the default engine
    spec = ModelSpec(name=source, options={"engine": "torch"})
    if source.partition(":")[0] == "local":
        from ..policies.local import load_local

        policy = load_local(spec)
    else:
        from ..policies.hf import HFPolicy

        policy = HFPolicy.from_spec(spec)
    return policy.model, policy.tokenizer
