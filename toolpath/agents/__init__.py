"""Agent graphs. Each agent module defines `AGENT`, an `agents.base.Agent`; the registry names them (kind "agent")."""

from __future__ import annotations

from .. import registry


def get_agent(name: str):
    """The Agent registered as `name`; a RegistryError (a ValueError) naming the choices if there is none."""
    return registry.load("agent", name)
