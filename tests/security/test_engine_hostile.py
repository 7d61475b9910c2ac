"""Hostile model folders on the inference engine: `--engine onnxruntime` must refuse each one exactly as torch does
(one clear error naming the file, no traceback, nothing unpickled) before its exporter reads a byte, and leave no
export, finished or half-written, under $TOOLPATH_HOME/models."""

import pytest
from conftest import write

from security.test_model_files import FOLDERS, hostile_folder
from toolpath import cli

pytest.importorskip("onnxruntime_genai")


@pytest.mark.parametrize("make", FOLDERS, ids=lambda f: f.__name__)
def test_a_hostile_model_folder_is_refused_before_export(make, tmp_path, home, capsys):
    folder, words = hostile_folder(tmp_path, make)
    spec = write(tmp_path / "task.yaml", f"id: t\ninstruction: hi\nmodel: 'hf:{folder}'\n")
    code = cli.main(["run", str(spec), "--engine", "onnxruntime"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert str(folder) in err and words in err, err
    assert not (tmp_path / "PWNED").exists()  # never unpickled
    assert not any((home / "models").glob("*onnxruntime*")) and not any((home / "models").glob(".*"))
