"""The connectors from the graph encoder's node states to the chat LM's embedding space: EDT-Former's dynamic
query tokens (one per entropy patch) and, for the ablation, a Q-Former-like connector with a fixed 8 learned
queries. Both have exactly the same parameters in number and shape, so a comparison at equal steps is fair:

- a query-input projection (node width -> connector width): the dynamic connector projects each patch's mean node
  state into that patch's query; the fixed one projects the whole molecule's mean state and adds it to every query;
- a table of 8 vectors: the fixed connector's 8 queries; the dynamic connector's patch-position embeddings (the
  8th shared by every later patch);
- one cross-attention from the queries to the node states (the dynamic query sees only its patch's atoms; the
  fixed queries, and "dynamic-global"'s patch queries, see every atom), a self-attention block among the
  queries (so a patch's token knows the rest of the molecule) and the output projection to the LM's width.

"dynamic-global" is the dynamic connector with EDT-Former's reference mask: the same patch queries (a patch's
mean state, projected, plus its position), but each reads every atom of the molecule, not only its patch's.
Only the cross-attention's mask differs from "dynamic", so the parameters are the same.

"edt" is the combination EDT-Former's reference code feeds its Q-Former: the 8 fixed queries followed by one
query per patch (its atoms' mean state, projected), every query reading every atom. The same modules again, so
the same parameters; 8 more tokens than "dynamic".

`forward(node_states, sizes, patch_ids)` returns the LM-width vectors of every molecule in order (the rows that
replace the placeholders), and `tokens(ids)` says how many a molecule gets;
`layout(sizes, patch_ids)` is the batch's queries and mask.
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_QUERIES = 8
KINDS = ("dynamic", "dynamic-global", "edt", "fixed")


@dataclass(frozen=True)
class ConnectorSize:
    node_width: int = 128
    width: int = 256
    heads: int = 4
    lm_width: int = 576  # SmolLM2-135M's hidden size


def build_connector(kind: str, size: ConnectorSize, seed: int):
    import torch
    from torch import nn

    if kind not in KINDS:
        raise ValueError(f"connector kind {kind!r}: expected one of {', '.join(KINDS)}")

    class QueryConnector(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind, self.size = kind, size
            self.node_norm = nn.LayerNorm(size.node_width)
            self.query_in = nn.Linear(size.node_width, size.width)
            self.table = nn.Parameter(torch.randn(FIXED_QUERIES, size.width) * 0.02)
            self.cross = nn.MultiheadAttention(size.width, size.heads, kdim=size.node_width,
                                               vdim=size.node_width, batch_first=True)
            self.mix = nn.TransformerEncoderLayer(size.width, size.heads, 2 * size.width, dropout=0.0,
                                                  batch_first=True, norm_first=True)
            self.out = nn.Sequential(nn.LayerNorm(size.width), nn.Linear(size.width, size.lm_width))

        def tokens(self, ids: list[int]) -> int:
            patches = ids[-1] + 1 if ids else 0
            return {"fixed": FIXED_QUERIES, "dynamic": patches, "dynamic-global": patches,
                    "edt": FIXED_QUERIES + patches}[self.kind]

        def layout(self, sizes: list[int], patch_ids: list[list[int]]):
            """(blocked, member, learned, counts) for a batch of molecules: blocked[b, q, n] says that query q of
            molecule b may not read atom n; member[b, q] averages the atoms whose mean state makes query q;
            learned[b, q] picks the table row query q adds; counts[b] is molecule b's number of queries."""
            n_max, counts = max(sizes), [self.tokens(ids) for ids in patch_ids]
            q_max = max(counts)
            blocked = torch.ones(len(sizes), q_max, n_max, dtype=torch.bool)
            member = torch.zeros(len(sizes), q_max, n_max)
            # learned[q]: query q adds its table row (the fixed queries; the dynamic kind's patch positions)
            learned = torch.zeros(len(sizes), q_max, FIXED_QUERIES)
            for b, (n, ids) in enumerate(zip(sizes, patch_ids)):
                first = 0  # the first patch query's row
                if self.kind in ("fixed", "edt"):
                    blocked[b, :FIXED_QUERIES, :n] = False
                    member[b, :FIXED_QUERIES, :n] = 1.0 / n
                    learned[b, torch.arange(FIXED_QUERIES), torch.arange(FIXED_QUERIES)] = 1.0
                    first = FIXED_QUERIES
                if self.kind != "fixed" and ids:
                    rows = first + torch.tensor(ids)
                    if self.kind == "dynamic":
                        blocked[b, rows, torch.arange(n)] = False
                    else:  # the reference's mask: every patch query reads the whole molecule
                        blocked[b, first:counts[b], :n] = False
                    if self.kind != "edt":
                        learned[b, rows, (rows - first).clamp_max(FIXED_QUERIES - 1)] = 1.0
                    member[b, rows, torch.arange(n)] = 1.0
                    member[b] /= member[b].sum(-1, keepdim=True).clamp_min(1.0)
                blocked[b, counts[b]:, 0] = False  # padding queries read one atom (never used) so no row is empty
            return blocked, member, learned, counts

        def forward(self, h, sizes: list[int], patch_ids: list[list[int]]):
            nodes = nn.utils.rnn.pad_sequence(torch.split(self.node_norm(h), sizes), batch_first=True)  # [B, N, d]
            blocked, member, learned, counts = self.layout(sizes, patch_ids)
            q_max = blocked.shape[1]
            queries = self.query_in(member @ nodes) + learned @ self.table
            heads = blocked.repeat_interleave(self.size.heads, 0)
            read, _ = self.cross(queries, nodes, nodes, attn_mask=heads, need_weights=False)
            padding = torch.arange(q_max)[None, :] >= torch.tensor(counts)[:, None]
            mixed = self.mix(queries + read, src_key_padding_mask=padding)
            out = self.out(mixed)
            return torch.cat([out[b, :c] for b, c in enumerate(counts)])

    torch.manual_seed(seed)
    return QueryConnector()


def parameter_count(module) -> int:
    return sum(p.numel() for p in module.parameters())
