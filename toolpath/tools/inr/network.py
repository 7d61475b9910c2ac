"""The INR: coordinates in [-1, 1]^2 -> colour, an MLP of one activation's layers and a linear head.

`build(activation, budget)` picks the hidden width that brings the network to `budget` real parameters (a
complex weight counts as two), so that activations are compared at equal size, not equal width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .activations import LAYERS, BandRCLayer
from .complex_linear import ComplexLinear
from .names import ACTIVATIONS

HIDDEN_LAYERS = 3
DEFAULT_BUDGET = 13_000  # real parameters: about a 64-wide SIREN with three hidden layers
# COSMO's band (t0, c0) per layer is sigmoid(raw) scaled to these ranges (the official ones). Without the prior
# the raw bands are free parameters that Adam moves little in a short fit, so their start matters: the official
# prior's starting output (0.312, t0 near 5.8, c0 near 1.7) is a start it leaves quickly, image by image; a
# free band fits better from -1 (t0 near 2.7, c0 near 0.8), a narrower window and a slower carrier.
T0_RANGE = (0.0, 10.0)
C0_RANGE = (0.0, 3.0)
BAND_START = -1.0


def activation_names() -> list[str]:
    return list(ACTIVATIONS)


def check_activation(name: str) -> str:
    if name not in LAYERS:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(LAYERS)}")
    return name


def project_band(raw: torch.Tensor) -> torch.Tensor:
    """Raw (layers, 2) values -> (t0, c0) per layer, inside their ranges."""
    lo = raw.new_tensor([T0_RANGE[0], C0_RANGE[0]])
    hi = raw.new_tensor([T0_RANGE[1], C0_RANGE[1]])
    return torch.sigmoid(raw) * (hi - lo) + lo


class INR(nn.Module):
    def __init__(self, activation: str, width: int, channels: int = 3, hidden_layers: int = HIDDEN_LAYERS,
                 band_start: float = BAND_START):
        super().__init__()
        layer = LAYERS[check_activation(activation)]
        self.activation, self.width = activation, width
        self.layers = nn.ModuleList([layer(2, width, first=True)]
                                    + [layer(width, width) for _ in range(hidden_layers)])
        self.complex = layer.complex_out
        self.head = ComplexLinear(width, channels) if self.complex else nn.Linear(width, channels)
        omega = getattr(self.layers[-1], "omega", None)
        if omega is not None and not self.complex:  # SIREN and FINER start their head as their hidden layers
            with torch.no_grad():
                self.head.weight.uniform_(-math.sqrt(6 / width) / omega, math.sqrt(6 / width) / omega)
        self.banded = layer is BandRCLayer
        # Without the prior COSMO's bands are free parameters of the fit; with it (prior.py) they come from the
        # image and these stay unused.
        self.band_raw = nn.Parameter(torch.full((len(self.layers), 2), float(band_start))) if self.banded else None

    def forward(self, coords: torch.Tensor, band_raw: torch.Tensor | None = None) -> torch.Tensor:
        bands = project_band(self.band_raw if band_raw is None else band_raw) if self.banded else None
        x = coords
        for i, layer in enumerate(self.layers):
            x = layer(x, None if bands is None else bands[i])
        out = self.head.real_part(x) if self.complex else self.head(x)
        # COSMO's official network ends in a sigmoid (colours in [0, 1]); the baselines end linear, as theirs do.
        return torch.sigmoid(out) if self.banded else out


def count_parameters(model: nn.Module) -> int:
    """Real parameters (complex weights are stored as their two real parts, so they count twice)."""
    return sum(p.numel() for p in model.parameters())


def size(activation: str, width: int, channels: int = 3, hidden_layers: int = HIDDEN_LAYERS) -> int:
    """count_parameters of INR(activation, width, ...) without building it."""
    factor = 2 if LAYERS[check_activation(activation)].complex_out else 1
    first = 3 * width  # 2 inputs + bias, always real
    hidden = hidden_layers * factor * (width * width + width)
    head = factor * (width * channels + channels)
    band = 2 * (hidden_layers + 1) if LAYERS[activation] is BandRCLayer else 0
    return first + hidden + head + band


def width_for(activation: str, budget: int, channels: int = 3, hidden_layers: int = HIDDEN_LAYERS) -> int:
    """The hidden width whose network comes closest to `budget` real parameters."""
    factor = 2 if LAYERS[check_activation(activation)].complex_out else 1
    guess = max(1, int(math.sqrt(budget / (hidden_layers * factor))))
    candidates = range(max(1, guess - 8), guess + 9)
    return min(candidates, key=lambda w: abs(size(activation, w, channels, hidden_layers) - budget))


def build(activation: str, budget: int = DEFAULT_BUDGET, channels: int = 3,
          hidden_layers: int = HIDDEN_LAYERS, width: int | None = None, band_start: float | None = None) -> INR:
    """The network at `budget` real parameters, or, with `width`, at that hidden width whatever its size (the
    comparison at equal width, where a complex network carries twice the weights of a real one). band_start:
    COSMO's raw band value for every layer before the projection (BAND_START by default; the official prior's
    starting output is 0.312); ignored by the other activations."""
    if width is not None and width < 1:
        raise ValueError(f"the hidden width must be 1 or more, got {width}")
    chosen = width or width_for(activation, budget, channels, hidden_layers)
    return INR(activation, chosen, channels, hidden_layers, BAND_START if band_start is None else band_start)


def grid(height: int, width: int) -> torch.Tensor:
    """Pixel centres of a height x width image as (y, x) in [-1, 1], row-major: (height * width, 2).

    Centres, not edges: the same picture sampled at another resolution lands on the same continuous square,
    which is what makes rendering at a finer grid a super-resolution of it."""
    ys = (torch.arange(height, dtype=torch.float) * 2 + 1) / height - 1
    xs = (torch.arange(width, dtype=torch.float) * 2 + 1) / width - 1
    return torch.cartesian_prod(ys, xs)


def subpixel_offsets(height: int, width: int, factor: int) -> torch.Tensor:
    """Where the factor x factor pixel centres of a grid `factor` times finer sit relative to the centre of the
    height x width pixel that contains them: (factor * factor, 2) (y, x) offsets, row-major. grid(h, w)[i] plus
    these are exactly the fine grid's centres inside coarse pixel i (grid(h * factor, w * factor))."""
    steps = torch.arange(factor, dtype=torch.float) * 2 + 1 - factor
    return torch.cartesian_prod(steps / (height * factor), steps / (width * factor))
