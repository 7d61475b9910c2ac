"""Typed observations and the policy registry: the rule-based deciders read the observation an agent hands
them exactly as they read the prompt it writes, only a policy that declares `observes` gets one, and a policy
kind added to the registry is known to spec validation, loading, prices and `models list` at once."""

from __future__ import annotations

import json

import pytest

from toolpath import registry
from toolpath.baselines.dom import DOMPolicy, page_of, read_message
from toolpath.baselines.fsd_oracle import OraclePolicy
from toolpath.evals.prices import cost_usd
from toolpath.observations import SceneObservation, ScreenObservation
from toolpath.policies import base
from toolpath.policies.base import Response, observation_kwargs
from toolpath.policies.formats import fsd
from toolpath.policies.formats.scalecua import ScaleCUAFormat
from toolpath.spec import ModelSpec
from toolpath.state import Message

ELEMENTS = [{"id": 0, "tag": "DIV", "text": 'Click on the "OK" button.', "box": [0, 0, 160, 50]},
            {"id": 1, "tag": "button", "text": "Cancel", "box": [10, 60, 50, 80]},
            {"id": 2, "tag": "button", "text": "OK", "box": [60, 60, 100, 80]},
            {"id": 3, "tag": "span", "text": 7, "box": [1, 2]}]  # unusable: no valid box
TASK = "Follow the instruction at the top of the page."


def _prompt(history: list[str]) -> str:
    lines = [f"Task: {TASK}"]
    if history:
        lines.append("Previous operations:\n" + "\n".join(f"Step {i}: {op}" for i, op in enumerate(history, 1)))
    lines.append("Elements (boxes as [x1, y1, x2, y2] in your coordinates):")
    lines += [json.dumps(e) for e in ELEMENTS]
    lines.append(f"Step {len(history) + 1}: the current screenshot is attached.")
    return "\n".join(lines)


def test_the_dom_policy_reads_the_observation_as_it_reads_the_prompt():
    history = ["Open the tab \"A\" to look for it"]
    obs = ScreenObservation(task=TASK, history=tuple(history), elements=tuple(ELEMENTS), screen=(160, 210))
    assert page_of(obs) == read_message(_prompt(history))
    fmt = ScaleCUAFormat(mode="direct", platform="web")
    from_text = DOMPolicy().respond([Message(role="user", content=_prompt(history))], [], format=fmt)
    # handed the observation, it ignores the prompt's wording altogether
    from_obs = DOMPolicy().respond([Message(role="user", content="(any layout)")], [], format=fmt, observation=obs)
    assert from_obs.raw == from_text.raw
    assert [c.name for c in from_obs.tool_calls] == ["click", "terminate"]
    assert from_obs.tool_calls[0].arguments == {"x": 80, "y": 70}


def test_the_oracle_reads_the_scene_truth_from_the_observation(tmp_path):
    import numpy as np
    from PIL import Image

    rgb = np.full((120, 160, 3), 200, np.uint8)
    rgb[20:40, 20:40] = (217, 31, 31)  # a red cube
    rgb[70:100, 90:150] = (38, 77, 217)  # a blue plate
    labels = np.zeros((120, 160), np.uint16)
    labels[20:40, 20:40], labels[70:100, 90:150] = 1, 2
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(labels).save(tmp_path / "seg.png")
    truth = ({"index": 0, "name": "red cube", "kind": "cube", "color": "red", "box": [125, 167, 243, 325]},
             {"index": 1, "name": "blue plate", "kind": "plate", "color": "blue", "box": [562, 583, 931, 825]})
    task, question = "put the red cube on the blue plate", fsd.QUESTIONS["relations"]
    obs = SceneObservation(task=task, question=question, image=str(tmp_path / "rgb.png"), size=(160, 120),
                           truth=truth, segmentation=str(tmp_path / "seg.png"))
    r = OraclePolicy().respond([Message(role="user", content="(any layout)")], [], observation=obs)
    a = fsd.parse_fsd(r.text)
    assert not a.issues, r.text
    assert [n for n, _ in a.objects] == ["red cube", "blue plate"]
    # without the truth it answers in words, as it does for a prompt without "Scene truth:" lines
    bare = OraclePolicy().respond([], [], observation=SceneObservation(task=task, question=question,
                                                                       image=str(tmp_path / "rgb.png")))
    assert "needs the scene truth" in bare.text


def test_only_a_policy_that_declares_observes_is_handed_an_observation():
    class Plain:
        name = "plain"

    class Looking:
        name, observes = "looking", ("screenshot",)

    built = []
    assert observation_kwargs(Plain(), lambda: built.append(1)) == {} and not built  # not even built
    assert observation_kwargs(Looking(), lambda: "obs") == {"observation": "obs"}
    assert base.observes(Plain()) == () and base.observes(DOMPolicy()) == ("screenshot", "dom")


@pytest.fixture
def mine():
    class Mine:
        name, observes = "mine", ()

        def __init__(self, spec):
            self.spec = spec

        def respond(self, messages, tools, **generation):
            return Response(text="42")

    registry.add("policy", "mine", Mine, meta={"value": "none", "local": True, "about": "a test's own kind"})
    yield Mine
    registry.reset()


def test_a_policy_kind_added_to_the_registry_is_known_everywhere(mine):
    assert ModelSpec(name="mine").name == "mine"
    with pytest.raises(ValueError, match="takes no value"):
        ModelSpec(name="mine:x")
    assert isinstance(base.load("mine"), mine)
    assert cost_usd("mine", 1000, 1000, {}) == 0.0
    row = next(k for k in base.kinds() if k.kind == "mine")
    assert (row.example, row.available, row.reason) == ("mine", True, "a test's own kind")


def test_unknown_kinds_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown model kind 'nope'"):
        ModelSpec(name="nope:x")
    assert cost_usd("nope:x", 1000, 1000, {}) is None
    assert [k.kind for k in base.kinds()][:5] == ["local", "hf", "openai", "scripted", "python"]
