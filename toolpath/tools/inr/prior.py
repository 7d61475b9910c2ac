"""COSMO's task prior: the image's features from a pretrained CNN pick each layer's band (t0, c0).

The official network reads the image through the first five blocks of an ImageNet ResNet-34 (stem and
layer1: 64 channels), averages them over the image and maps them with a small MLP (64 -> 64 -> 32 -> 2 per
layer, SiLU, weights N(0, 0.001), biases 0.312) to raw band values, trained with the INR. The ResNet's weights
are not shipped here, so this is an option: `fit(..., prior_weights=FILE)` with FILE a safetensors (or
weights-only torch) state dict in torchvision's ResNet-34 key names (conv1.*, bn1.*, layer1.*; other keys are
ignored). The CNN stays frozen during the fit: it describes the image, the MLP learns from it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

STEM_CHANNELS = 64
MLP_HIDDEN = (64, 32)
MLP_BIAS = 0.312
MLP_STD = 0.001


class PriorError(ValueError):
    """The prior's weights file is missing, unreadable, or not a ResNet-34 stem."""


class _Block(nn.Module):
    """ResNet's basic block at 64 channels: conv-bn-relu-conv-bn plus the input, then relu."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(64)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class Stem(nn.Module):
    """ResNet-34 up to layer1 (conv1, bn1, relu, maxpool, three basic blocks): the official prior's extractor."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.layer1 = nn.Sequential(_Block(), _Block(), _Block())

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        return self.layer1(nn.functional.max_pool2d(x, 3, stride=2, padding=1))


def read_state(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.is_file():
        raise PriorError(f"the prior's weights file {path} does not exist")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # any reader's failure is the same fact for the user: not a weights file
        raise PriorError(f"cannot read the prior's weights file {path}: {e}") from e
    if not isinstance(state, dict):
        raise PriorError(f"the prior's weights file {path} holds a {type(state).__name__}, not a state dict")
    return state


def load_stem(path: str | Path) -> Stem:
    """The frozen stem with the file's weights; a missing key or a wrong shape is named."""
    stem = Stem()
    state = read_state(path)
    wanted = stem.state_dict()
    for key, tensor in wanted.items():
        if key not in state:
            raise PriorError(f"the prior's weights file {path} has no {key!r}: expected torchvision ResNet-34 keys "
                             f"(conv1.weight, bn1.*, layer1.N.*)")
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise PriorError(f"the prior's weights file {path}: {key!r} has shape {tuple(state[key].shape)}, "
                             f"a ResNet-34 stem needs {tuple(tensor.shape)}")
    stem.load_state_dict({k: state[k] for k in wanted})
    stem.eval().requires_grad_(False)
    return stem


class BandPrior(nn.Module):
    """Image features (computed once) -> the MLP -> raw (t0, c0) for each of the INR's layers."""

    def __init__(self, features: torch.Tensor, layers: int):
        super().__init__()
        sizes = (STEM_CHANNELS, *MLP_HIDDEN, 2 * layers)
        mlp: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            linear = nn.Linear(n_in, n_out)
            nn.init.trunc_normal_(linear.weight, std=MLP_STD)
            nn.init.constant_(linear.bias, MLP_BIAS)
            mlp += [linear] if i == len(sizes) - 2 else [linear, nn.SiLU()]
        self.mlp = nn.Sequential(*mlp)
        self.register_buffer("features", features)
        self.layers = layers

    @classmethod
    def load(cls, path: str | Path, model: nn.Module, image: torch.Tensor) -> BandPrior:
        if not getattr(model, "banded", False):
            raise PriorError(f"the band prior is COSMO's; the {model.activation} activation has no band to set")
        stem = load_stem(path)
        with torch.no_grad():
            features = stem(image.permute(2, 0, 1)[None]).mean(dim=(2, 3))[0]
        return cls(features, len(model.layers))

    def trainable(self):
        return self.mlp.parameters()

    def forward(self, _=None) -> torch.Tensor:
        return self.mlp(self.features).view(self.layers, 2)
