"""`toolpath curate` as a user runs it: its sources (a folder whose hostile files are skipped and named, a JSONL
file, stored runs), its JSON, and every bad input answered with one line and exit 2."""

from __future__ import annotations

import json
import os

import pytest

from tests.test_curate import tiny  # noqa: F401  (the module-scoped tiny chat model)
from toolpath.cli import main


def curate(capsys, *args) -> tuple[int, str, str]:
    code = main(["curate", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("The model reads a paragraph about the world.")
    (docs / "sub" / "b.md").write_text("yes no yes no")
    (docs / "empty.txt").write_text("  \n")
    (docs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (docs / "code.py").write_text("print('not a text file')")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the folder")
    (docs / "leak.txt").symlink_to(secret)
    os.mkfifo(docs / "pipe.txt")  # opening it would block for ever
    return docs


def test_a_folder_is_scored_file_by_file_and_what_is_not_read_is_named(capsys, folder, tiny, home):  # noqa: F811
    code, out, err = curate(capsys, folder, "--model", f"hf:{tiny}", "--select", "top:1", "--askllm-shots", "none",
                            "--json", "-q")  # the tiny model's context cannot hold the built-in examples
    assert code == 0, err
    report = json.loads(out)
    assert [i["source"] for i in report["items"]] == [str(folder / "a.txt"), str(folder / "sub" / "b.md")]
    assert all(0 < i["score"] < 1 for i in report["items"]) and report["selected"] == 1
    assert sum(i["selected"] for i in report["items"]) == 1
    skipped = "\n".join(report["skipped"])
    for name, why in [("empty.txt", "empty"), ("latin1.txt", "not UTF-8"), ("leak.txt", "leaves the corpus"),
                      ("pipe.txt", "FIFO")]:
        assert f"{name}: " in skipped and why in skipped
    assert "secret" not in out and "code.py" not in out


def test_jsonl_lines_are_items_and_the_kept_ones_are_exported(capsys, tmp_path, tiny, home):  # noqa: F811
    src = tmp_path / "in.jsonl"
    chats = [{"messages": [{"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": "yes"}]}
             for n in range(4)]
    src.write_text("\n".join(json.dumps(c) for c in chats) + "\n")
    out_file = tmp_path / "sft.jsonl"
    code, out, err = curate(capsys, src, "--model", f"hf:{tiny}", "--score", "perplexity", "--select",
                            "fraction:0.5", "--export", out_file, "--json", "-q")
    assert code == 0, err
    report = json.loads(out)
    assert [i["source"] for i in report["items"]] == [f"{src}:{n}" for n in range(1, 5)]
    assert report["export"] == {"path": str(out_file), "rows": 2}
    kept = [json.loads(line) for line in out_file.read_text().splitlines()]
    chosen = [chats[n] for n, i in enumerate(report["items"]) if i["selected"]]
    assert sorted(kept, key=json.dumps) == sorted(chosen, key=json.dumps)


def test_density_needs_no_model_and_samples_a_share(capsys, tmp_path, home):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(t) for t in ["a cat sat on the mat", "a cat sat on a mat", "a cat on the mat",
                                                    "quarterly tax law for shipping companies"]) + "\n")
    code, out, err = curate(capsys, src, "--score", "density", "--select", "density:0.5", "--json", "-q")
    assert code == 0, err
    report = json.loads(out)
    scores = [i["score"] for i in report["items"]]
    assert scores.index(min(scores)) == 3  # the one text unlike the others is the rarest
    assert report["selected"] == 2 and report["model"] is None


@pytest.mark.parametrize("args,why", [
    (["/no/such/place"], "SOURCE /no/such/place: no such file or folder"),
    (["runs:colour=red"], "runs:colour=red: unknown key 'colour'"),
    (["runs:", "--select", "best:3"], "--select 'best:3': expected top:K, fraction:F or density:F"),
    (["runs:", "--batch-size", "0"], "--batch-size must be at least 1"),
    (["runs:", "--model", "openai:gpt-4.1-mini"], "curation reads a local model's logits"),
    (["runs:", "--score", "perplexity", "--engine", "onnxruntime"], "use --engine torch"),
    (["runs:", "--askllm-shots", "/no/shots.jsonl"], "--askllm-shots /no/shots.jsonl: expected builtin, none or"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, home, args, why):
    from toolpath.runs import Store

    Store(home).close()  # an empty store: runs: has nothing to score unless the input is refused first
    code, out, err = curate(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("toolpath: ") and why in err and len(err.strip().splitlines()) == 1, err


def test_bad_jsonl_names_the_file_and_line(capsys, tmp_path, home):
    src = tmp_path / "bad.jsonl"
    src.write_text('"fine"\n{"text": 3}\n')
    code, _, err = curate(capsys, src, "--score", "density")
    assert code == 2 and f"{src}:2: expected a JSON string" in err
    src.write_text('"fine"\n{not json\n')
    code, _, err = curate(capsys, src, "--score", "density")
    assert code == 2 and f"{src}:2: not valid JSON" in err


def test_an_empty_selection_of_runs_is_no_error(capsys, home):
    from toolpath.runs import Store

    Store(home).close()
    code, out, err = curate(capsys, "runs:status=finished", "--score", "density", "--json")
    assert code == 0, err
    assert json.loads(out)["items"] == []
