"""Policies: the models that decide. `base.py` holds the Policy protocol and `load()`, which makes a policy
from a ModelSpec through the registry (kind `policy`); the backends are local.py (the bundled model, and
`local:NAME` from the catalog in local_models.py), hf.py,
openai.py, scripted.py and python_policy.py; retry.py wraps one with retries; formats/ holds the response
grammars a text-producing policy speaks. Rule-based deciders are not here but in toolpath/baselines.
"""
