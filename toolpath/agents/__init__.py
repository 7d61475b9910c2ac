"""Agent graphs. Each agent module offers DEFAULT_TOOLS, SYSTEM_PROMPT and build(runtime, checkpointer)."""

from __future__ import annotations

import importlib
from types import ModuleType

# Capability issues add their agents here (visual_program, fast_slow, computer_use, embodied).
AGENTS = {"react": "toolpath.agents.react", "visual_program": "toolpath.agents.visual_program",
          "fast_slow": "toolpath.agents.fast_slow", "computer_use": "toolpath.agents.computer_use",
          "embodied": "toolpath.agents.embodied"}


class UnknownAgent(ValueError):
    pass


def agent_module(name: str) -> ModuleType:
    if name not in AGENTS:
        raise UnknownAgent(f"unknown agent {name!r}; available: {', '.join(sorted(AGENTS))}")
    return importlib.import_module(AGENTS[name])
