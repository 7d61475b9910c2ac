"""Model libraries' own output, silenced: transformers' (and diffusers') loading bars and advice.

Their bars and warnings would land in the agent's terminal, between toolpath's own progress lines
(toolpath/progress.py) and in run logs, so every loader calls `quiet_model_loading()` before it loads.
"""

from __future__ import annotations

import importlib.util


def quiet_model_loading(*, diffusers: bool = False) -> None:
    """Errors only, no progress bars, from transformers; from diffusers too when asked and installed (it is asked
    for, not always done, because importing diffusers takes long and only the diffusers loaders need it)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if diffusers and importlib.util.find_spec("diffusers") is not None:
        from diffusers.utils import logging as df_logging

        df_logging.set_verbosity_error()
        df_logging.disable_progress_bar()
