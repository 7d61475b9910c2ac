"""A complex linear map stored and computed in real numbers.

Complex activations travel as real tensors (N, 2 * features): real parts, then imaginary parts. torch's complex
kernels on the CPU are several times slower than the real ones (and their autograd more so), while the same map
written as one real matmul with the block matrix [[Re W, Im W], [-Im W, Re W]] costs what a real layer twice as
wide costs.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]


def join(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    return torch.cat([re, im], dim=-1)


class ComplexLinear(nn.Module):
    """z = W x + b with complex W, b; x and z as (N, 2 * features). Real and imaginary parts of the weights
    start uniform in +-weight_bound (default: PyTorch's 1/sqrt(n_in)), the bias in +-1/sqrt(n_in)."""

    def __init__(self, n_in: int, n_out: int, weight_bound: float | None = None):
        super().__init__()
        bound = 1.0 / math.sqrt(n_in)
        w = weight_bound or bound
        self.weight = nn.Parameter(torch.empty(2, n_out, n_in).uniform_(-w, w))
        self.bias = nn.Parameter(torch.empty(2, n_out).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wr, wi = self.weight[0].T, self.weight[1].T
        block = torch.cat([torch.cat([wr, wi], dim=1), torch.cat([-wi, wr], dim=1)], dim=0)
        return x @ block + join(self.bias[0], self.bias[1])

    def real_part(self, x: torch.Tensor) -> torch.Tensor:
        """Re(W x + b) alone: what a complex network's head outputs."""
        re, im = split(x)
        return re @ self.weight[0].T - im @ self.weight[1].T + self.bias[0]
