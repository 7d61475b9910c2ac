"""One optimiser step of the training loops here, with the running loss they show on their progress line."""

from __future__ import annotations


def optimizer_step(loss, opt, sched, losses: list[float], progress=None, window: int = 20) -> None:
    """Backpropagate `loss`, step the optimiser and its schedule, keep the loss in `losses` and show the mean of
    the last `window` on `progress` (a toolpath.progress.Progress, or None)."""
    import numpy as np

    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if progress:
        progress.update(value=f"loss {np.mean(losses[-window:]):.3f}")
