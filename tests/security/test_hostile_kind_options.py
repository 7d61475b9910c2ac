"""Hostile and careless model kind options (`model.options.kv_cache`, `decoding`, `engine`), in a spec file or
on the command line. Each must make `toolpath run` exit 2 naming the file and the field, with no traceback,
before anything starts: no run stored, no sandbox opened, no model loaded, no packet sent, and nothing
imported from a plugin target that was never registered."""

import pytest
from conftest import write

from security.test_hostile_specs import assert_refused, nothing_starts  # noqa: F401  (the fixture)
from toolpath import cli

BASE = "id: hostile\ninstruction: What is 2 + 3?\n"


def model(options: str) -> str:
    return BASE + f"model: {{name: local, options: {options}}}\n"


# name: (the spec's text, extra arguments to `toolpath run`, the field or words its error names)
CASES = {
    "bits_not_a_choice": (model("{kv_cache: kivi:3}"), (), "model.options.kv_cache.bits"),
    "bits_true": (model("{kv_cache: {kind: chanmix, bits: true}}"), (), "model.options.kv_cache.bits"),
    "bits_fraction": (model("{kv_cache: {kind: kivi, bits: 2.5}}"), (), "model.options.kv_cache.bits"),
    "budget_huge_text": (model("{kv_cache: 'quest:" + "9" * 5_000 + "'}"), (), "model.options.kv_cache.budget"),
    "budget_negative": (model("{kv_cache: {kind: icecache, budget: -64}}"), (), "model.options.kv_cache.budget"),
    "budget_nan": (model("{kv_cache: {kind: quest, budget: .nan}}"), (), "model.options.kv_cache.budget"),
    "budget_a_list": (model("{kv_cache: {kind: quest, budget: [64]}}"), (), "model.options.kv_cache.budget"),
    "group_zero": (model("{kv_cache: {kind: kivi, group: 0}}"), (), "model.options.kv_cache.group"),
    "residual_not_whole_groups": (model("{kv_cache: {kind: kivi, group: 32, residual: 40}}"), (),
                                  "model.options.kv_cache.residual"),
    "option_misspelt": (model("{kv_cache: {kind: kivi, bitz: 2}}"), (), "kivi has no option 'bitz'"),
    "kind_a_module_path": (model("{kv_cache: {kind: 'os:system'}}"), (), "kv_cache.kind: unknown kind 'os"),
    "kind_a_mapping": (model("{kv_cache: {kind: {kind: kivi}}}"), (), "kv_cache.kind"),
    "far_dir_nul": (model("{kv_cache: {kind: icecache, far: mmap, far_dir: \"a\\0b\"}}"), (),
                    "model.options.kv_cache.far_dir"),
    "far_dir_outside_home": (model("{kv_cache: {kind: icecache, far: mmap, far_dir: /etc}}"), (),
                             "model.options.kv_cache.far_dir"),
    "engine_with_a_torch_option": (model("{engine: onnxruntime, kv_cache: kivi:4}"), (),
                                   "options.kv_cache needs options.engine torch"),
    "decoding_option_out_of_range": (model("{decoding: {kind: vcd, alpha: -1}}"), (), "model.options.decoding.alpha"),
    "flag_bits_not_a_choice": (BASE + "model: local\n", ("--kv-cache", "chanmix:9"), "model.options.kv_cache.bits"),
    "flag_value_for_a_kind_without_one": (BASE + "model: local\n", ("--decoding", "vcd:2"), "--decoding"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_kind_option_exits_2_naming_file_and_field(case, tmp_path, home, capsys, nothing_starts):  # noqa: F811
    text, args, field = CASES[case]
    path = write(tmp_path / "task.yaml", text)
    code = cli.main(["run", str(path), *args])
    out, err = capsys.readouterr()
    if not field.startswith("--"):
        assert_refused(code, err, home, path, field)
    else:  # a malformed flag is the flag's error, before the spec is read
        assert code == 2 and field in err and "Traceback" not in err, err
    assert out == "" and nothing_starts["sandboxes"] == [] and nothing_starts["models"] == []
