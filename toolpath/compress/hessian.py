"""GPTQ's running Hessian of a linear layer's inputs, H = 2/n Σ x xᵀ: what weighs each column's rounding error."""

from __future__ import annotations

import math

import torch


class Hessian:
    """Running H = 2/n Σ x xᵀ over the rows of every batch added (GPTQ's accumulation)."""

    def __init__(self, cols: int):
        self.h = torch.zeros(cols, cols)
        self.n = 0

    def add(self, x: torch.Tensor) -> None:
        x = x.detach().reshape(-1, x.shape[-1]).float()
        if not len(x):
            return
        self.h *= self.n / (self.n + len(x))
        self.n += len(x)
        x = math.sqrt(2 / self.n) * x
        self.h += x.T @ x
