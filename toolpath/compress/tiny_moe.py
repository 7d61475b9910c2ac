"""A small Mixtral-architecture model trained from scratch here, so the MoE method has a real checkpoint to work on.

No MoE checkpoint can be downloaded, so one is made: 8 experts, top-2 routing, 4 layers, hidden 128, small
experts (intermediate 128), a byte-level BPE vocabulary of 2,048 learnt from the same text. It trains on the
calibration part of `pydoc_data.topics` (English prose every Python ships) on the CPU, deterministic by seed,
and keeps the router weights as they were at initialisation (router_init.safetensors) beside the final model,
which is what the expert-wise bit allocation reads (the change of each router row's norm during training).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..pydoc_text import split_text

if TYPE_CHECKING:  # torch is imported where a model is trained, not when this module is
    import torch

VOCAB = 2048
CONFIG = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=256,
              rms_norm_eps=1e-5, tie_word_embeddings=True, router_aux_loss_coef=0.02, output_router_logits=False)


def byte_bpe_tokenizer(text: str, vocab: int = VOCAB):
    """A byte-level BPE tokenizer learnt from `text` (deterministic), wrapped so AutoTokenizer can load it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>")


def router_weights(model) -> dict[str, torch.Tensor]:
    """Every router's weight by its state-dict name (`…mlp.gate.weight`), copied."""
    return {name: p.detach().clone() for name, p in model.named_parameters()
            if name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight")}


def train(out: Path, *, steps: int = 800, seed: int = 0, batch: int = 8, seqlen: int = 128, lr: float = 3e-3,
          threads: int = 1, log: Callable[[str], None] = print) -> dict:
    """Train the model and write it to `out` (a model folder: config, weights, tokenizer, router_init.safetensors,
    training.json). Returns what training.json holds. `threads`: torch's CPU threads; one, because the model's
    many small operations run several times faster on one thread than on two when the cores are shared."""
    import torch
    from safetensors.torch import save_file
    from transformers import MixtralConfig, MixtralForCausalLM

    started = time.perf_counter()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    train_text, _ = split_text()
    tokenizer = byte_bpe_tokenizer(train_text)
    ids = torch.tensor(tokenizer(train_text)["input_ids"], dtype=torch.long)
    config = MixtralConfig(**CONFIG, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                           pad_token_id=tokenizer.pad_token_id)
    model = MixtralForCausalLM(config)
    init_routers = router_weights(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, steps // 20)

    def schedule(step: int) -> float:  # linear warm-up, then cosine down to a tenth
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    for step in range(steps):
        starts = torch.randint(0, len(ids) - seqlen - 1, (batch,), generator=gen)
        x = torch.stack([ids[s:s + seqlen] for s in starts.tolist()])
        result = model(input_ids=x, labels=x, output_router_logits=True)
        opt.zero_grad(set_to_none=True)
        result.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(result.loss.detach()))
        if step % 25 == 0 or step == steps - 1:
            log(f"tiny-moe: step {step + 1}/{steps} loss {sum(losses[-50:]) / len(losses[-50:]):.3f} "
                f"({time.perf_counter() - started:.0f} s)")
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    save_file(init_routers, str(out / "router_init.safetensors"))
    info = {"steps": steps, "seed": seed, "batch": batch, "seqlen": seqlen, "lr": lr, "tokens": len(ids),
            "final_loss": sum(losses[-50:]) / len(losses[-50:]), "seconds": round(time.perf_counter() - started, 1),
            "threads": threads, "config": CONFIG,
            "data": "pydoc_data.topics, sorted keys, first 80 % (the calibration part)"}
    (out / "training.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return info
