"""Does a request fit the served model's context? Counted before it queues, with the model's own prompt.

The prompt is built the way the policy builds it (chat template, tool guide, image tokens), so the count is
the one the model would see. A request whose prompt plus the answer it asked for (`max_tokens`) does not fit
is a 400 naming the three numbers; one that did not ask gets what the context has left, up to the default.
A policy that builds no local prompt (a remote or scripted model) is not counted here.
"""

from __future__ import annotations

from typing import Any

from ..policies.base import PolicyError
from .chat_request import ChatRequest, bad


def context_length(policy: Any) -> int | None:
    """The model's context in tokens (its text model's max_position_embeddings), or None when unknown."""
    config = getattr(getattr(policy, "model", None), "config", None)
    if config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    limit = getattr(text, "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) and limit > 0 else None


def prompt_tokens(policy: Any, request: ChatRequest) -> int | None:
    """The request's prompt length in the model's tokens, or None for a policy that builds no local prompt."""
    build = getattr(policy, "_inputs", None)  # the local backend's one way from messages to model inputs
    if build is None:
        return None
    try:
        inputs, _labels = build(request.messages, request.tools, request.generation["format"],
                                request.generation.get("tool_choice"))
    except PolicyError as err:  # an image the processor refuses: the request's fault, said before it queues
        raise bad(f"the model cannot take this conversation: {err}", "messages") from None
    return int(inputs["input_ids"].shape[1])


def fit_to_context(policy: Any, request: ChatRequest, default_max: int) -> int | None:
    """Check `request` against the context and settle its max_new_tokens; -> the prompt's token count."""
    limit = context_length(policy)
    if limit is None:
        return None
    n = prompt_tokens(policy, request)
    if n is None:
        return None
    asked = request.generation.get("max_new_tokens")
    if asked is not None and n + asked > limit:
        raise bad(f"the prompt is {n:,} tokens and max_tokens asks for {asked:,} more: {n + asked:,} in all, over "
                  f"the model's context of {limit:,} tokens; shorten the messages or lower max_tokens", "messages",
                  "context_length_exceeded")
    if asked is None:
        if n >= limit:
            raise bad(f"the prompt is {n:,} tokens, which leaves no room to answer in the model's context of "
                      f"{limit:,} tokens (max_tokens not given); shorten the messages", "messages",
                      "context_length_exceeded")
        request.generation["max_new_tokens"] = min(default_max, limit - n)
    return n
