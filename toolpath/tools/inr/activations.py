"""One layer per activation: a linear map, then the nonlinearity, as each method's paper defines it.

Every layer takes `(x, band=None)`; only COSMO reads `band` (its layer's t0 and c0, see network.py). The first
layer of each network maps real coordinates; WIRE and COSMO continue in complex numbers after it, carried as
real tensors of real and imaginary parts (complex_linear.py says why), and network.py counts a complex weight
as two parameters when it matches parameter budgets.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .complex_linear import ComplexLinear, join, split

EPS = 1e-8


class SineLayer(nn.Module):
    """SIREN: sin(w0 (W x + b)), with SIREN's initialisation (first layer U(-1/n, 1/n), others
    U(-sqrt(6/n)/w0, sqrt(6/n)/w0)) so that activations stay distributed the same through depth."""

    complex_out = False

    def __init__(self, n_in: int, n_out: int, first: bool = False, omega: float = 30.0):
        super().__init__()
        self.omega = omega
        self.linear = nn.Linear(n_in, n_out)
        bound = 1.0 / n_in if first else math.sqrt(6.0 / n_in) / omega
        with torch.no_grad():
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor, band: torch.Tensor | None = None) -> torch.Tensor:
        return torch.sin(self.omega * self.linear(x))


class FinerLayer(SineLayer):
    """FINER: sin(w0 (|z| + 1) z) with z = W x + b: the frequency grows with |z|, so one layer covers a
    range of frequencies. The scale (|z| + 1) is held constant in the backward pass, as FINER does."""

    def forward(self, x: torch.Tensor, band: torch.Tensor | None = None) -> torch.Tensor:
        z = self.linear(x)
        return torch.sin(self.omega * (z.detach().abs() + 1.0) * z)


class GaussLayer(nn.Module):
    """Gauss: exp(-(s (W x + b))^2), PyTorch's default linear initialisation."""

    complex_out = False

    def __init__(self, n_in: int, n_out: int, first: bool = False, scale: float = 10.0):
        super().__init__()
        self.scale = scale
        self.linear = nn.Linear(n_in, n_out)

    def forward(self, x: torch.Tensor, band: torch.Tensor | None = None) -> torch.Tensor:
        return torch.exp(-(self.scale * self.linear(x)) ** 2)


class GaborLayer(nn.Module):
    """WIRE: the complex Gabor wavelet exp(j w0 z - |s0 z|^2) of z = W x + b, complex after the first layer.
    With z = a + jb that is exp(-w0 b - s0^2 (a^2 + b^2)) times (cos w0 a, sin w0 a).

    w0 = s0 = 5, the values of WIRE's reference image script, rather than the larger ones its authors suggest
    for representation with 181-wide layers: the default initialisation bounds pre-activations by 1/sqrt(width),
    so at the few tens of units an equal parameter budget gives here the same constants act as larger ones (the
    factor exp(-w0 Im z) swings over orders of magnitude), and trial fits with them stayed far from the image
    (docs/results/inr.md)."""

    complex_out = True

    def __init__(self, n_in: int, n_out: int, first: bool = False, omega: float = 5.0, scale: float = 5.0):
        super().__init__()
        self.omega, self.scale, self.first = omega, scale, first
        self.linear = nn.Linear(n_in, n_out) if first else ComplexLinear(n_in, n_out)

    def forward(self, x: torch.Tensor, band: torch.Tensor | None = None) -> torch.Tensor:
        z = self.linear(x)
        a, b = (z, torch.zeros_like(z)) if self.first else split(z)
        magnitude = torch.exp(-self.omega * b - self.scale ** 2 * (a * a + b * b))
        return join(magnitude * torch.cos(self.omega * a), magnitude * torch.sin(self.omega * a))


class BandRCLayer(nn.Module):
    """COSMO's BandRC: a raised-cosine window times a complex sinusoid, rc(z; t0) * exp(j 2 pi c0 z), where
    rc(z; t0) = sinc(z/t0) cos(pi b z/t0) / (t0 (1 - (2 b z/t0)^2)) with roll-off b = 0.5.

    The raised cosine alone is symmetric and band-limited; the complex sinusoid shifts its spectrum by c0, which
    restores the spectral support a symmetric activation loses. After the first layer the pre-activation and
    the output are put on the unit circle (divided by their modulus), as the official layer does, which keeps
    the product of windows from shrinking towards zero with depth. `band` is this layer's (t0, c0); the
    weights start uniform in +-1/n_in, as the official layer's do."""

    complex_out = True
    ROLL_OFF = 0.5

    def __init__(self, n_in: int, n_out: int, first: bool = False):
        super().__init__()
        self.first = first
        if first:
            self.linear = nn.Linear(n_in, n_out)
            with torch.no_grad():
                self.linear.weight.uniform_(-1.0 / n_in, 1.0 / n_in)
        else:
            self.linear = ComplexLinear(n_in, n_out, weight_bound=1.0 / n_in)

    def forward(self, x: torch.Tensor, band: torch.Tensor | None = None) -> torch.Tensor:
        if band is None:
            raise ValueError("a BandRC layer needs its band (t0, c0)")
        t0, c0 = band[0], band[1]
        beta = self.ROLL_OFF
        if self.first:  # real z: the window is real, no normalisation (as in the official first layer)
            z = self.linear(x)
            u = z / t0
            window = torch.sinc(u) * torch.cos(math.pi * beta * u) / (t0 * (1 - (2 * beta * u) ** 2 + EPS))
            phase = 2 * math.pi * c0 * z
            return join(window * torch.cos(phase), window * torch.sin(phase))
        return self._unit_phase(split(self.linear(x)), t0, c0)

    def _unit_phase(self, z: tuple[torch.Tensor, torch.Tensor], t0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
        """The hidden layer's output, rc(z) exp(j 2 pi c0 z) / |rc(z) exp(j 2 pi c0 z)| for z on the unit circle.

        Only its direction survives the final division, so it is the product of each factor's direction:
        sin(pi u) ~ (sin pi p, cos pi p tanh pi q) (both parts divided by cosh pi q, which would overflow for a
        small t0), 1/u ~ conj(u), cos(pi b u) ~ (cos pi b p, -sin pi b p tanh pi b q), 1/(1 - (2 b u)^2) ~ its
        conjugate, exp(j 2 pi c0 z) ~ angle 2 pi c0 Re z; with u = z / t0 = p + jq. Real arithmetic throughout."""
        a, b = z
        r = torch.sqrt(a * a + b * b) + EPS
        a, b = a / r, b / r
        p, q = a / t0, b / t0
        beta = self.ROLL_OFF
        factors = [
            (torch.sin(math.pi * p), torch.cos(math.pi * p) * torch.tanh(math.pi * q)),
            (a, -b),
            (torch.cos(math.pi * beta * p), -torch.sin(math.pi * beta * p) * torch.tanh(math.pi * beta * q)),
            (1 - 4 * beta ** 2 * (p * p - q * q) + EPS, 8 * beta ** 2 * p * q),
            (torch.cos(2 * math.pi * c0 * a), torch.sin(2 * math.pi * c0 * a)),
        ]
        re, im = factors[0]
        for fr, fi in factors[1:]:
            re, im = re * fr - im * fi, re * fi + im * fr
        norm = torch.sqrt(re * re + im * im) + EPS
        return join(re / norm, im / norm)


# name -> the layer class; network.py reads complex_out to size widths and choose the head.
LAYERS: dict[str, type[nn.Module]] = {
    "cosmo": BandRCLayer, "siren": SineLayer, "wire": GaborLayer, "gauss": GaussLayer, "finer": FinerLayer}
