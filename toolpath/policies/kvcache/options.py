"""Checking a kind's options: each error names the field as the spec writes it (`kv_cache.bits: ...`)."""

from __future__ import annotations

from typing import Any


def known_only(options: dict[str, Any], allowed: dict[str, Any], kind: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"kv_cache.{unknown[0]}: {kind} has no option {unknown[0]!r}; its options: "
                         f"{', '.join(allowed)}")


def integer(options: dict[str, Any], name: str, default: int, *, choices: tuple[int, ...] = (),
            minimum: int | None = None) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise ValueError(f"kv_cache.{name}: expected an integer, got {value!r}")
    if choices and value not in choices:
        raise ValueError(f"kv_cache.{name}: must be one of {', '.join(map(str, choices))}, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"kv_cache.{name}: must be at least {minimum}, got {value}")
    return value


def boolean(options: dict[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"kv_cache.{name}: expected true or false, got {value!r}")
    return value


def attention_refusal(config: Any) -> str | None:
    """Why a cache that keeps every token of every layer cannot serve this model: layers that are not plain full
    attention (sliding windows drop old tokens, linear/recurrent layers keep no keys)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    types = getattr(text, "layer_types", None) or []
    other = sorted({t for t in types if t != "full_attention"})
    if other:
        return f"its layers include {', '.join(other)} (only full-attention layers are supported)"
    if getattr(text, "use_sliding_window", False) and getattr(text, "sliding_window", None):
        return f"it uses a sliding window of {text.sliding_window} tokens"
    return None
