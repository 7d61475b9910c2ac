"""The graph-LM as one object and one folder: a chat LM (its tokenizer grown by the `<graph>` placeholder, its
input embeddings trained), the graph encoder with its next-atom head (the patcher's signal), and the connector.

Folder layout: the LM as a plain transformers folder at the top (config.json, model.safetensors, tokenizer with
the chat template below), `graph.safetensors` (encoder., head. and connector. weights) and `graph_lm.json` (the
kind, the placeholder, the encoder, connector and patcher settings), so `hf:FOLDER` can tell a graph-LM folder
from a text one by that file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from . import connector as mc
from . import encoder as me
from . import graphs as mg
from . import patcher as mp

CONFIG = "graph_lm.json"
WEIGHTS = "graph.safetensors"
PLACEHOLDER = "<graph>"
# ChatML, as SmolLM2 was tuned on, with a graph item written as the placeholder and a newline (the VLM's image
# convention). No default system prompt: the model is trained without one.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'graph' -%}{{ '<graph>\\n' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class GraphLMConfig:
    kind: str
    encoder: me.EncoderSize
    connector_kind: str
    connector: mc.ConnectorSize
    quantile: float = mp.QUANTILE
    patch_rule: str = mp.RULE
    placeholder: str = PLACEHOLDER


def graph_tokenizer(lm_folder):
    """The LM's tokenizer with the placeholder token and the graph chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(lm_folder)
    tok.add_special_tokens({"additional_special_tokens": [PLACEHOLDER]})
    tok.chat_template = CHAT_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def grown_lm(lm_folder, tokenizer):
    """The LM with its embeddings grown by the placeholder (its row the mean of the others: it is never read,
    the connector's vectors replace it)."""
    import torch
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(lm_folder, dtype=torch.float32)
    lm.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    with torch.no_grad():
        emb = lm.get_input_embeddings().weight
        emb[-1] = emb[:-1].mean(0)
    lm.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    lm.generation_config.pad_token_id = tokenizer.pad_token_id
    lm.generation_config.do_sample = False
    return lm


class GraphLM:
    """A chat LM that reads molecules: `answer(smiles, question)`; the parts are the build's to train."""

    def __init__(self, config: GraphLMConfig, lm, tokenizer, encoder, head, connector):
        self.config, self.lm, self.tokenizer = config, lm, tokenizer
        self.encoder, self.head, self.connector = encoder, head, connector
        self.placeholder_id = tokenizer.convert_tokens_to_ids(config.placeholder)

    def prepare(self, graphs: list[mg.MolGraph]):
        """(node states, patch ids per graph): what the frozen encoder and patcher give the connector."""
        import torch

        with torch.no_grad():
            states = self.encoder(mg.batch(graphs))
        return states, mp.patches(self.encoder, self.head, graphs, self.config.quantile,
                                   self.config.patch_rule)

    def answer(self, smiles: str, question: str, max_new_tokens: int = 16) -> str:
        """The reply to a question about one molecule, in the form the build trained on."""
        return self.reply([{"type": "graph", "smiles": smiles}, {"type": "text", "text": question}],
                          max_new_tokens)[0]

    def reply(self, content: list[dict], max_new_tokens: int = 16) -> tuple[str, int, int]:
        """(reply, prompt tokens, reply tokens) to one user turn of text and graph items ({"type": "graph",
        "smiles": ...}), each graph read as its patches' tokens."""
        import torch

        graphs = [mg.mol_graph(item["smiles"], item.get("name", "SMILES")) for item in content
                  if item["type"] == "graph"]
        states, ids = self.prepare(graphs) if graphs else (None, [])
        # the placeholder written in a text would take a graph's place: it is not a word a user can type
        items = [{"type": item["type"], "text": item.get("text", "").replace(PLACEHOLDER, "")} for item in content]
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": items}], tokenize=False,
                                                  add_generation_prompt=True)
        parts = text.split(PLACEHOLDER)  # each graph's one placeholder becomes as many as it has tokens, in order
        text = parts[0] + "".join(PLACEHOLDER * self.connector.tokens(p) + rest for p, rest in zip(ids, parts[1:]))
        ids_in = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            x = self.lm.get_input_embeddings()(ids_in)
            if graphs:
                vectors = self.connector(states, [g.size for g in graphs], ids)
                x = x.masked_scatter((ids_in == self.placeholder_id)[..., None].expand_as(x), vectors.to(x.dtype))
            out = self.lm.generate(inputs_embeds=x, attention_mask=torch.ones_like(ids_in),
                                   max_new_tokens=max_new_tokens, do_sample=False)
        return (self.tokenizer.decode(out[0], skip_special_tokens=True).strip(), int(ids_in.shape[1]),
                int(out.shape[1]))

    def save(self, folder: Path) -> None:
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        self.lm.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        tensors = {f"{name}.{k}": v.contiguous() for name, part in
                   (("encoder", self.encoder), ("head", self.head), ("connector", self.connector))
                   for k, v in part.state_dict().items()}
        save_file(tensors, str(folder / WEIGHTS))
        (folder / CONFIG).write_text(json.dumps(asdict(self.config), indent=2) + "\n", encoding="utf-8")


def is_graph_lm(folder: Path) -> bool:
    return (Path(folder) / CONFIG).is_file() and (Path(folder) / WEIGHTS).is_file()


def load(folder: Path) -> GraphLM:
    """The graph-LM a build wrote to `folder`; a ValueError naming the folder and the file when one is missing
    or does not match the settings."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    if not is_graph_lm(folder):
        raise ValueError(f"{folder}: not a graph-LM folder (it needs {CONFIG} and {WEIGHTS})")
    raw = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    try:
        config = GraphLMConfig(kind=raw["kind"], encoder=me.EncoderSize(**raw["encoder"]),
                               connector_kind=raw["connector_kind"], connector=mc.ConnectorSize(**raw["connector"]),
                               quantile=float(raw.get("quantile", mp.QUANTILE)),
                               patch_rule=raw.get("patch_rule", mp.LEGACY_RULE),
                               placeholder=raw.get("placeholder", PLACEHOLDER))
    except (KeyError, TypeError) as e:
        raise ValueError(f"{folder / CONFIG}: not a graph-LM config ({e})") from None
    if config.patch_rule not in mp.RULES:
        raise ValueError(f"{folder / CONFIG}: patch_rule {config.patch_rule!r} is not one of {', '.join(mp.RULES)}")
    encoder, head = me.build_encoder(config.encoder, seed=0)
    connector = mc.build_connector(config.connector_kind, config.connector, seed=0)
    weights = load_file(str(folder / WEIGHTS))
    for name, part in (("encoder", encoder), ("head", head), ("connector", connector)):
        state = {k.removeprefix(f"{name}."): v for k, v in weights.items() if k.startswith(f"{name}.")}
        try:
            part.load_state_dict(state)
        except RuntimeError as e:
            raise ValueError(f"{folder / WEIGHTS}: the {name} weights do not match {CONFIG} ({e})") from None
        part.eval()
    lm = AutoModelForCausalLM.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    return GraphLM(config, lm, tok, encoder, head, connector)
