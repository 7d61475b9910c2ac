"""Every sandbox kind's options are one typed model (its limits and its own options), read once from a spec's
`sandbox.options`; the sandbox is built from what was read, without reading it again."""

import inspect

import pytest

from toolpath import registry
from toolpath.sandboxes.base import LIMIT_RANGES, SandboxLimits, SandboxOptions, open_sandbox, read_options

KINDS = list(registry.declared("sandbox"))


@pytest.mark.parametrize("kind", KINDS)
def test_each_kinds_options_are_its_constructors_arguments_and_the_limits(kind):
    cls = registry.load("sandbox", kind)
    options = cls.Options
    assert issubclass(options, SandboxOptions) and options.model_config["extra"] == "forbid"
    assert all(f.description for f in options.model_fields.values()), kind
    own = set(options.model_fields) - set(LIMIT_RANGES)
    takes = set(inspect.signature(cls.__init__).parameters) - {"self", "limits"}
    assert own == takes, kind  # an option the constructor does not take, or one a spec cannot set


@pytest.mark.parametrize("kind, values", [
    ("process", {"isolation": "unisolated", "memory_mb": 512, "cell_seconds": 2.5}),
    ("docker", {"image": "python:3.12-slim", "cpus": 1.5, "pull": True}),
    ("browser", {"viewport": "800x600", "allowed_hosts": ["example.org"], "settle": 0.2}),
    ("desktop", {"screen": "1024x768x24", "launch": ["xterm"], "windows": 1}),
    ("robot", {"seed": 7, "objects": ["red cube", "blue plate"], "image": "320x240"}),
])
def test_what_a_spec_sets_reaches_the_sandbox(kind, values):
    cls = registry.load("sandbox", kind)
    box = open_sandbox(cls, read_options(cls, values, kind))  # built, not started
    limits = {k: v for k, v in values.items() if k in LIMIT_RANGES}
    assert box.limits == SandboxLimits(**limits)
    if kind == "process":
        assert box.requested == "unisolated"
    if kind == "browser":
        assert (box.width, box.height, box.allowed_hosts) == (800, 600, ["example.org"])
    if kind == "robot":
        assert (box.seed, box.width, box.height) == (7, 320, 240)


@pytest.mark.parametrize("kind, values, words", [
    ("process", {"isolation": "vm"}, "sandbox.options.isolation: Input should be 'auto', 'bwrap'"),
    ("process", {"images": True}, "sandbox.options.images: expected a whole number from 0 to 1000 (got True)"),
    ("docker", {"cpus": "2"}, "sandbox.options.cpus: expected a number from 0.01 to 3600 (got '2')"),
    ("docker", {"imag": "x"}, "sandbox.options.imag: sandbox 'docker' has no option 'imag'; its options: "),
    ("browser", {"viewport": [50, 50]}, "sandbox.options.viewport: 50x50 is out of range"),
    ("browser", {"headless": "no"}, "sandbox.options.headless: Input should be a valid boolean (got 'no')"),
    ("desktop", {"display": ":1", "screen": "800x600"}, "sandbox.options.screen: only applies to the Xvfb"),
    ("desktop", {"settle": 99}, "sandbox.options.settle: expected seconds between 0 and 30 (got 99)"),
    ("robot", {"objects": ["red sphere"]}, "sandbox.options.objects: "),
    ("robot", {"seed": "x"}, "sandbox.options.seed: Input should be a valid integer"),
])
def test_a_bad_option_is_named_as_the_spec_writes_it(kind, values, words):
    with pytest.raises(ValueError) as err:
        read_options(registry.load("sandbox", kind), values, kind)
    assert str(err.value).startswith(words), str(err.value)
