"""The tiny graph-LM's graph encoder: message passing over RDKit atom and bond features in plain torch
(`index_add_`, no torch-scatter), pretrained on next-atom prediction (toolpath/train/molm_pretraining.py).

The same layers run in two modes. Causal (molm_graphs.batch(causal=True)): a bond carries messages only from the
earlier atom (in canonical SMILES order) to the later one, so atom i's state is a function of the graph of atoms
0..i alone, and a head reading it (with the mean state of atoms 0..i) predicts the element of atom i + 1, or the
end of the molecule. Its per-atom entropy is what the patcher cuts at. Whole (the default): every bond carries
messages both ways, and the node states are the features the connector reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import graphs as mg

END = len(mg.ELEMENTS) + 1  # the class after the last element class (mg.OTHER): the molecule ends here
CLASSES = END + 1


@dataclass(frozen=True)
class EncoderSize:
    width: int = 128
    layers: int = 4


def _torch_modules():
    import torch
    from torch import nn

    class MessageLayer(nn.Module):
        """h_i += MLP(LN(h_i + sum over bonds j->i of relu(h_j + bond embedding))), a GIN-style update."""

        def __init__(self, width: int):
            super().__init__()
            self.bond = nn.Embedding(len(mg.BOND_TYPES), width)
            self.norm = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

        def forward(self, h, edges, bonds):
            msg = torch.relu(h[edges[0]] + self.bond(bonds))
            agg = torch.zeros_like(h).index_add_(0, edges[1], msg)
            return h + self.mlp(self.norm(h + agg))

    class GraphEncoder(nn.Module):
        def __init__(self, size: EncoderSize):
            super().__init__()
            self.size = size
            self.atom = nn.ModuleList(nn.Embedding(n, size.width) for n in mg.ATOM_CARDINALITIES)
            self.layers = nn.ModuleList(MessageLayer(size.width) for _ in range(size.layers))
            self.norm = nn.LayerNorm(size.width)

        def forward(self, b: mg.GraphBatch):
            h = sum(emb(b.atoms[:, k]) for k, emb in enumerate(self.atom))
            for layer in self.layers:
                h = layer(h, b.edges, b.bonds)
            return self.norm(h)

    class NextAtomHead(nn.Module):
        """Logits of the next atom's element (or END) from an atom's causal state and its prefix's mean state."""

        def __init__(self, width: int):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(2 * width, width), nn.GELU(), nn.Linear(width, CLASSES))

        def forward(self, h, sizes: list[int]):
            return self.mlp(torch.cat([h, prefix_means(h, sizes)], -1))

    return GraphEncoder, NextAtomHead


def prefix_means(h, sizes: list[int]):
    """For each node, the mean of the nodes of its graph up to and including it (graphs side by side)."""
    import torch

    parts = []
    for chunk in torch.split(h, sizes):
        counts = torch.arange(1, len(chunk) + 1, dtype=h.dtype)[:, None]
        parts.append(chunk.cumsum(0) / counts)
    return torch.cat(parts)


def build_encoder(size: EncoderSize, seed: int):
    import torch

    GraphEncoder, NextAtomHead = _torch_modules()
    torch.manual_seed(seed)
    return GraphEncoder(size), NextAtomHead(size.width)


def next_atom_targets(graphs: list[mg.MolGraph]):
    """For each atom, the class of the atom after it (its element) or END after the last one."""
    import torch

    out = []
    for g in graphs:
        out += [a[0] for a in g.atoms[1:]] + [END]
    return torch.tensor(out, dtype=torch.long)


def next_atom_logits(encoder, head, graphs: list[mg.MolGraph]):
    b = mg.batch(graphs, causal=True)
    return head(encoder(b), b.sizes)


def entropies(encoder, head, graphs: list[mg.MolGraph]) -> list:
    """Per graph, the entropy (bits) of the next-atom distribution after each of its atoms."""
    import torch

    if not graphs:
        return []
    with torch.no_grad():
        logp = torch.log_softmax(next_atom_logits(encoder, head, graphs), -1)
        bits = -(logp.exp() * logp).sum(-1) / math.log(2)
    return list(torch.split(bits, [g.size for g in graphs]))
