"""`python:MODULE:ATTR`: the user's own policy, a class or factory called with the ModelSpec."""

from __future__ import annotations

import importlib

from ..spec import ModelSpec
from .base import Policy, PolicyError


def load_python(spec: ModelSpec) -> Policy:
    """Import MOD, take ATTR, and call it with the ModelSpec. The spec names any importable callable, so each
    step is guarded: whatever it raises (a TypeError from `python:os:system`, SystemExit from `sys:exit`)
    becomes a PolicyError naming the field, and the run does not start."""
    target = spec.name.partition(":")[2]
    mod_name, _, attr = target.rpartition(":")
    where = f"model.name 'python:{target}'"
    if not mod_name or not attr:
        raise PolicyError(f"{where}: expected python:package.module:ClassOrFactory")
    try:
        factory = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as err:
        raise PolicyError(f"{where}: {err}") from err
    except (Exception, SystemExit) as err:  # the module's own code failed while importing
        raise PolicyError(f"{where}: importing {mod_name} failed: {type(err).__name__}: {err}") from err
    if not callable(factory):
        raise PolicyError(f"{where}: {attr} is a {type(factory).__name__}, not a class or factory")
    try:
        policy = factory(spec)
    except (Exception, SystemExit) as err:
        why = f"{type(err).__name__}: {str(err)[:200]}"
        raise PolicyError(f"{where}: calling {attr}(model_spec) failed: {why}") from err
    if not callable(getattr(policy, "respond", None)):
        raise PolicyError(f"{where}: the object it made has no respond() method")
    return policy
