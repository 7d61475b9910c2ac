"""Fitting an INR to one image: Adam on the squared error, seeded, bounded in steps and in seconds.

`fit` trains on the pixels a mask keeps (all by default) and can hold some of them out to stop early: the
held-out error stops falling once the network starts to fit what varies pixel to pixel (noise), which is the
INR's spectral bias used as a prior (restore.py's denoising). With `supersample` the image is taken as the box
average of a finer one (restore.py's super-resolution): each pixel is compared with the mean of the network's
values at the finer grid's pixel centres inside it, so the fit explains the observation through the operator
that made it instead of interpolating it. With `watch` the fit scores its own rendering every few steps (the
benchmark's PSNR against a reference), so a caller can report the best value over the fit beside the last one,
the statistic the INR papers report. Everything runs on the CPU in float32.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .network import DEFAULT_BUDGET, INR, build, grid, subpixel_offsets

# Adam's starting rate per activation, from trial fits of a few photos with mini-batches of pixels: the sine
# networks (SIREN, FINER) diverge above about 1e-3 there; COSMO fits less well at 1e-3 and 5e-3; WIRE takes
# its reference script's 5e-3 (its authors give 5e-3 to 2e-2 as its range).
LEARNING_RATES = {"cosmo": 2e-3, "siren": 1e-3, "wire": 5e-3, "gauss": 2e-3, "finer": 1e-3}
FINAL_LR_FRACTION = 0.1  # the rate decays exponentially to this fraction of itself by the last step
RENDER_CHUNK = 65_536  # pixels per forward pass when rendering, so a large output stays in bounded memory
# Threads for the fit's torch ops. The tensors are small (pixels x width), so more threads gain little, and on
# shared cores they lose a lot: every op waits for all of its threads to be scheduled.
THREADS = 1


@dataclass
class Fit:
    model: INR
    steps: int  # steps taken
    seconds: float
    stopped: str  # "steps" (all asked), "time" (the seconds budget ran out), "early" (held-out error rose)
    loss: list[float] = field(default_factory=list)  # training loss per step (MSE, plus any smoothness penalty)
    prior: torch.nn.Module | None = None
    band_raw: torch.Tensor | None = None  # COSMO's bands from the prior, fixed for rendering
    watched: list[tuple[int, float]] = field(default_factory=list)  # (steps done, watch's score), in order

    def render(self, height: int, width: int) -> np.ndarray:
        """The fitted image sampled on a height x width grid of the same square: (H, W, C) floats in [0, 1]."""
        with _threads(THREADS):
            return _render(self.model, self.band_raw, height, width)

    def best_watched(self) -> tuple[int, float]:
        """(steps done, score) of the highest score `watch` gave during the fit (the earliest such)."""
        if not self.watched:
            raise ValueError("the fit watched nothing: pass watch= to fit")
        return max(self.watched, key=lambda item: (item[1], -item[0]))

    def account(self) -> str:
        why = {"steps": "all steps done", "time": "stopped by the seconds budget",
               "early": "stopped early when the held-out error rose"}[self.stopped]
        return f"{self.steps} steps in {self.seconds:.1f} s ({why})"


def as_float_image(image) -> np.ndarray:
    """An (H, W, C) float32 array in [0, 1] from a PIL image or an integer or float array."""
    a = np.asarray(image)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in (1, 3, 4):
        raise ValueError(f"expected an image of shape (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), got {a.shape}")
    a = a[:, :, :3] if a.shape[2] == 4 else a
    if a.dtype == np.uint8:
        return a.astype(np.float32) / 255.0
    if a.dtype == bool:
        return a.astype(np.float32)
    return np.clip(a.astype(np.float32), 0.0, 1.0)


def fit(image, activation: str = "cosmo", steps: int = 300, seed: int = 0, *, seconds: float | None = None,
        budget: int = DEFAULT_BUDGET, lr: float | None = None, batch: int | None = None,
        known: np.ndarray | None = None, holdout: float = 0.0, patience: int = 20, supersample: int = 1,
        smoothness: float = 0.0, prior_weights: str | Path | None = None, hidden_width: int | None = None,
        band_start: float | None = None, watch: Callable[[Callable[[int, int], np.ndarray]], float] | None = None,
        watch_every: int = 10) -> Fit:
    """Fit an INR of `activation` to `image` ((H, W[, C]) array or PIL image).

    lr: Adam's starting rate (the activation's own by default, LEARNING_RATES).
    steps/seconds: stop at whichever comes first (`Fit.stopped` says which). batch: pixels per step, drawn at
    random (all pixels when None). known: an (H, W) bool mask of the pixels to fit (the rest are unknown).
    holdout: a fraction of the known pixels kept out of training; the fit then returns the state with the
    lowest held-out error and stops after `patience` steps without a new lowest. supersample: each pixel is
    the box average of supersample x supersample finer pixels, and the fit matches that average (a step then
    evaluates the network supersample^2 times per pixel of the batch). smoothness (with supersample): the
    weight of a total-variation penalty on the fine image (mean absolute difference of neighbouring fine pixels),
    which picks, among the fine images whose averages match the pixels, one without spurious detail; every step
    then renders the whole fine grid, whatever `batch`. prior_weights: COSMO's band prior from a CNN weights file
    (prior.py); refused for other activations. hidden_width: every hidden layer this wide instead of the width that
    meets `budget`. band_start: COSMO's raw band start (network.build). watch: called with a renderer (height,
    width -> image as `Fit.render` gives it) after every `watch_every` steps and after the last; its scores land
    in `Fit.watched` (they do not steer the fit).
    The same image, arguments and seed give the same fit."""
    target = torch.from_numpy(as_float_image(image))
    height, width, channels = target.shape
    colours = target.reshape(-1, channels)
    coords = grid(height, width)
    mask = np.ones((height, width), bool) if known is None else np.asarray(known, bool)
    if mask.shape != (height, width):
        raise ValueError(f"the known-pixel mask is {mask.shape[1]}x{mask.shape[0]}, the image {width}x{height}")
    if not mask.any():
        raise ValueError("the known-pixel mask keeps no pixel")
    if supersample < 1:
        raise ValueError(f"supersample must be 1 or more, got {supersample}")
    if smoothness and supersample == 1:
        raise ValueError("smoothness needs supersample > 1: it smooths the finer image behind the pixels")
    if watch is not None and watch_every < 1:
        raise ValueError(f"watch_every must be 1 or more, got {watch_every}")
    offsets = subpixel_offsets(height, width, supersample) if supersample > 1 else None
    with torch.random.fork_rng(devices=[]), _deterministic(), _threads(THREADS):
        torch.manual_seed(seed)
        model = build(activation, budget, channels, width=hidden_width, band_start=band_start)
        prior = band_raw = None
        if prior_weights is not None:
            from .prior import BandPrior

            prior = BandPrior.load(prior_weights, model, _rgb(target))
        train = torch.from_numpy(np.flatnonzero(mask.reshape(-1)))
        train = train[torch.randperm(len(train))]
        n_held = int(len(train) * holdout)
        held, train = train[:n_held], train[n_held:]
        params = list(model.parameters()) + ([] if prior is None else list(prior.trainable()))
        optimiser = torch.optim.Adam(params, lr=lr or LEARNING_RATES[activation])
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser, lambda step: FINAL_LR_FRACTION ** min(step / max(steps, 1), 1.0))
        observed = _Observed(model, coords, offsets, (height, width), smoothness)
        watcher = None if watch is None else _Watcher(watch, watch_every, model, prior)
        result = _train(observed, prior, optimiser, schedule, colours, train, held, steps, seconds, batch,
                        patience, watcher)
    if prior is not None:
        with torch.no_grad():
            band_raw = prior(None)
    result.prior, result.band_raw = prior, band_raw
    return result


class _Observed:
    """The network as the image observes it: its value at each pixel's centre, or with subpixel offsets the mean
    of its values at the finer pixel centres inside each pixel (a box-average downsampling, differentiable).
    `penalty` is the smoothness term of the last call (0 without smoothness)."""

    def __init__(self, model: INR, coords: torch.Tensor, offsets: torch.Tensor | None, shape: tuple[int, int],
                 smoothness: float = 0.0):
        self.model, self.coords, self.offsets, self.shape, self.smoothness = model, coords, offsets, shape, smoothness
        self.penalty: torch.Tensor | float = 0.0

    def __call__(self, idx: torch.Tensor, band_raw: torch.Tensor | None) -> torch.Tensor:
        if self.offsets is None:
            return self.model(self.coords[idx], band_raw)
        n = len(self.offsets)
        if not self.smoothness:
            fine = (self.coords[idx][:, None, :] + self.offsets[None]).reshape(-1, 2)
            return self.model(fine, band_raw).reshape(len(idx), n, -1).mean(1)
        fine = (self.coords[:, None, :] + self.offsets[None]).reshape(-1, 2)
        values = self.model(fine, band_raw).reshape(len(self.coords), n, -1)
        self.penalty = self.smoothness * _total_variation(values, *self.shape, round(n ** 0.5))
        return values[idx].mean(1)


def _total_variation(values: torch.Tensor, height: int, width: int, factor: int) -> torch.Tensor:
    """Mean absolute difference of vertically and horizontally neighbouring pixels of the fine image, given as
    (coarse pixels in row-major order, factor^2 fine pixels each in row-major order, channels)."""
    image = (values.reshape(height, width, factor, factor, -1).permute(0, 2, 1, 3, 4)
             .reshape(height * factor, width * factor, -1))
    return (image[1:] - image[:-1]).abs().mean() + (image[:, 1:] - image[:, :-1]).abs().mean()


def _render(model: INR, band_raw: torch.Tensor | None, height: int, width: int) -> np.ndarray:
    coords = grid(height, width)
    with torch.no_grad():
        parts = [model(coords[i:i + RENDER_CHUNK], band_raw) for i in range(0, len(coords), RENDER_CHUNK)]
    return torch.cat(parts).clamp(0, 1).reshape(height, width, -1).numpy()


class _Watcher:
    """Scores the network's current rendering every `every` steps (and once after the last step)."""

    def __init__(self, watch, every: int, model: INR, prior):
        self.watch, self.every, self.model, self.prior = watch, every, model, prior
        self.scores: list[tuple[int, float]] = []

    def __call__(self, done: int, last: bool = False, rolled_back: bool = False) -> None:
        """After step `done`; `last`: the fit is over, and its final state is scored unless this step already
        was and early stopping did not roll the network back to an earlier state."""
        if done == 0 or (done % self.every and not last):
            return
        if self.scores and self.scores[-1][0] == done:
            if not rolled_back:
                return
            self.scores.pop()
        with torch.no_grad():
            band_raw = None if self.prior is None else self.prior(None)
        self.scores.append((done, float(self.watch(lambda h, w: _render(self.model, band_raw, h, w)))))


def _train(observed: _Observed, prior, optimiser, schedule, colours, train, held, steps, seconds, batch,
           patience, watcher: _Watcher | None = None) -> Fit:
    model = observed.model
    start = time.monotonic()
    losses: list[float] = []
    best, best_state, since_best = float("inf"), None, 0
    stopped, done = "steps", 0
    for step in range(steps):
        if seconds is not None and time.monotonic() - start >= seconds:
            stopped = "time"
            break
        idx = train if batch is None or batch >= len(train) else train[torch.randint(len(train), (batch,))]
        band_raw = None if prior is None else prior(None)
        loss = ((observed(idx, band_raw) - colours[idx]) ** 2).mean() + observed.penalty
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(loss.item())
        done = step + 1
        if watcher is not None:
            watcher(done)
        if len(held):
            with torch.no_grad():
                band_raw = None if prior is None else prior(None)
                error = ((observed(held, band_raw) - colours[held]) ** 2).mean().item()
            if error < best:
                best, since_best = error, 0
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
            else:
                since_best += 1
                if since_best >= patience:
                    stopped = "early"
                    break
    if best_state is not None:
        model.load_state_dict(best_state)
    if watcher is not None:  # the state the fit returns, whatever cut it short
        watcher(done, last=True, rolled_back=best_state is not None)
    fitted = Fit(model, done, time.monotonic() - start, stopped, losses)
    fitted.watched = [] if watcher is None else watcher.scores
    return fitted


def _rgb(target: torch.Tensor) -> torch.Tensor:
    """The image as the prior's CNN reads it: three channels (a grey image repeated)."""
    return target.expand(-1, -1, 3) if target.shape[2] == 1 else target


class _threads:
    """torch's intra-op thread count for the fit, then back to what the process had."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        torch.set_num_threads(self.before)


class _deterministic:
    """torch.use_deterministic_algorithms for the fit, then back to what the process had (warn_only: an op
    without a deterministic version still runs; on the CPU the ops used here all have one)."""

    def __enter__(self):
        self.before = (torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled())
        torch.use_deterministic_algorithms(True, warn_only=True)

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.before[0], warn_only=self.before[1])
