"""A local text model that reads a web page's elements as text, for MiniWoB++ through the computer-use agent.

The agent puts the page's elements (JSON lines, boxes in the model's coordinates) into the prompt only for a
policy that declares it observes the DOM; a text model cannot see the screenshot, so without them it would act
blind. This wraps `local:NAME` to declare that and nothing more: same weights, options, prompts and replies.

    model: python:page_text:with_page__qwen2.5-coder-0.5b      (with benchmarks/ on sys.path)

The model's name is in the attribute because `python:MOD:ATTR` hands the factory only the ModelSpec, whose
options (engine, weights) are passed on as they are.
"""

from __future__ import annotations

PREFIX = "with_page__"


class PageTextPolicy:
    observes = ("dom",)

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def respond(self, messages, tools, observation=None, **generation):
        # the elements are already in the prompt's text; the typed observation is for rule-based deciders
        return self.inner.respond(messages, tools, **generation)

    def __getattr__(self, attr):  # whatever else the runtime asks of a policy (tokenizer, counts) is the model's
        return getattr(self.inner, attr)


def model_name(local_name: str) -> str:
    """The `python:` model string that runs `local:local_name` with the page's elements as text."""
    return f"python:page_text:{PREFIX}{local_name}"


def __getattr__(attr: str):
    if not attr.startswith(PREFIX):
        raise AttributeError(f"module page_text has no attribute {attr!r}; expected {PREFIX}<local model name>")
    name = attr[len(PREFIX):]

    def factory(spec):
        from toolpath.policies.base import load

        return PageTextPolicy(load(spec.model_copy(update={"name": f"local:{name}"})))

    return factory
