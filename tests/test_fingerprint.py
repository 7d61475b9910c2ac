"""One digest of a model's files and one fingerprint of a loaded model, behind every cache derived from a model."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolpath.policies.fingerprint import file_digest, files_digest, model_fingerprint  # noqa: E402


def _tiny(seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1)
    return transformers.LlamaForCausalLM(config).eval()


def test_a_folder_digest_is_the_one_exports_were_keyed_by(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\1" * 3000)
    (tmp_path / "README.md").write_text("not part of the model")
    old = hashlib.sha256()  # the export key's digest as written before: sorted names and bytes, each ended by \0
    for name in ("config.json", "model.safetensors"):
        old.update(name.encode() + b"\0" + (tmp_path / name).read_bytes() + b"\0")
    assert files_digest(tmp_path, (".json", ".safetensors")) == old.hexdigest()
    assert file_digest(tmp_path / "model.safetensors") == hashlib.sha256(b"\1" * 3000).hexdigest()


def test_a_loaded_model_is_named_by_its_config_and_every_tensor():
    model = _tiny()
    same = model_fingerprint(model)
    assert same == model_fingerprint(_tiny()) and len(same) == 20  # the same weights, loaded twice
    assert model_fingerprint(_tiny(seed=1)) != same
    with torch.no_grad():  # a fine-tune of one decoder layer only (embeddings, norm and head untouched)
        model.model.layers[1].mlp.down_proj.weight.view(-1)[0] += 0.5
    tuned = model_fingerprint(model)
    assert tuned != same
    assert model_fingerprint(model.to(torch.bfloat16)) != tuned  # other weights setting, other caches
    other = _tiny()
    other.config.max_position_embeddings = 64  # the config is part of it: same weights, another model
    assert model_fingerprint(other) != same


def test_the_folder_a_model_was_loaded_from_is_not_part_of_it(tmp_path):
    model = _tiny()
    model.save_pretrained(tmp_path / "a")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "a"), dtype=torch.float32)
    assert loaded.config._name_or_path and model_fingerprint(loaded) == model_fingerprint(model)


def test_parts_limit_what_is_fingerprinted():
    a, b = _tiny(), _tiny()
    with torch.no_grad():
        b.lm_head.weight.view(-1)[0] += 1.0
    assert model_fingerprint(a, [a.model.layers[0]]) == model_fingerprint(b, [b.model.layers[0]])
    assert model_fingerprint(a) != model_fingerprint(b)
