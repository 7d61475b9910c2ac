"""COSMO-INR and its baseline activations: sizes, determinism, fitting, restoration, and the tools' refusals.

Images here are 16x16 and fits a few steps long, so the whole file runs in seconds on two cores.
"""

import math

import numpy as np
import pytest
import torch

from toolpath.tools.inr import network, restore
from toolpath.tools.inr.activations import BandRCLayer
from toolpath.tools.inr.fit import fit
from toolpath.tools.inr.prior import PriorError, Stem
from toolpath.tools.registry import ToolContext, ToolError, get_tool

ACTIVATIONS = network.activation_names()


def _image(size=16, seed=0):
    """A smooth colour pattern plus an edge: something an INR can learn in a few steps, not a constant."""
    y, x = np.mgrid[0:size, 0:size] / size
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0, math.pi, 3)
    img = np.stack([0.5 + 0.4 * np.sin(3 * x + 2 * y + p) for p in phase], axis=-1)
    img[:, size // 2:, 0] *= 0.5
    return (img * 255).astype(np.uint8)


@pytest.fixture(scope="module")
def image():
    return _image()


@pytest.fixture
def ctx(store, tmp_path, image):
    from PIL import Image

    paths = {}
    for name, a in {"image_1": image, "big": np.zeros((300, 300, 3), np.uint8),
                    "mask": np.pad(np.full((4, 4), 255, np.uint8), 6)}.items():
        paths[name] = tmp_path / f"{name}.png"
        Image.fromarray(a).save(paths[name])
    return ToolContext(save_artifact=store.put_artifact, images=paths)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_each_activation_maps_coordinates_to_colours_at_the_same_size(activation):
    model = network.build(activation, budget=4000)
    out = model(network.grid(5, 7))
    assert out.shape == (35, 3) and out.dtype == torch.float32 and torch.isfinite(out).all()
    n = network.count_parameters(model)
    assert n == network.size(activation, model.width)
    assert abs(n - 4000) / 4000 < 0.05


def test_bandrc_real_arithmetic_is_the_complex_formula():
    """The hidden BandRC layer computes rc(z) exp(j 2 pi c0 z), normalised, exactly as written with complex
    tensors (the formula of the official layer), though it never builds a complex tensor."""
    torch.manual_seed(0)
    layer = BandRCLayer(4, 6)
    x = torch.randn(10, 8)
    t0, c0 = torch.tensor(3.0), torch.tensor(1.2)
    ours = layer(x, torch.stack([t0, c0]))
    w = torch.complex(layer.linear.weight[0], layer.linear.weight[1])
    b = torch.complex(layer.linear.bias[0], layer.linear.bias[1])
    z = torch.complex(x[:, :4], x[:, 4:]) @ w.T + b
    z = z / z.abs()
    u = z / t0
    rc = torch.sinc(u) * torch.cos(math.pi * 0.5 * u) / (t0 * (1 - u ** 2))
    ref = rc * torch.exp(2j * math.pi * c0 * z)
    ref = ref / ref.abs()
    assert torch.allclose(ours, torch.cat([ref.real, ref.imag], dim=1), atol=1e-4)


def test_same_seed_same_fit_other_seed_other_fit(image):
    a = fit(image, "cosmo", steps=3, seed=1).render(16, 16)
    b = fit(image, "cosmo", steps=3, seed=1).render(16, 16)
    c = fit(image, "cosmo", steps=3, seed=2).render(16, 16)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize("activation", ["cosmo", "siren", "wire"])
def test_fitting_lowers_the_error(image, activation):
    from toolpath.tools.inr.metrics import psnr

    early = fit(image, activation, steps=5, seed=0)
    late = fit(image, activation, steps=60, seed=0)
    assert late.steps == 60 and late.stopped == "steps"
    reference = image / 255.0
    assert psnr(late.render(16, 16), reference) > psnr(early.render(16, 16), reference) + 3


def test_watching_scores_the_fit_along_the_way_without_changing_it(image):
    """The best-over-the-fit statistic: scores every few steps and after the last, the fit itself unchanged."""
    from toolpath.tools.inr.metrics import psnr

    reference = image / 255.0
    plain = fit(image, "siren", steps=12, seed=0)
    watched = fit(image, "siren", steps=12, seed=0, watch=lambda render: psnr(render(16, 16), reference),
                  watch_every=5)
    assert np.array_equal(plain.render(16, 16), watched.render(16, 16))
    assert [step for step, _ in watched.watched] == [5, 10, 12]
    assert watched.watched[-1][1] == pytest.approx(psnr(watched.render(16, 16), reference))
    assert watched.best_watched()[1] == max(score for _, score in watched.watched)
    with pytest.raises(ValueError, match="watched nothing"):
        plain.best_watched()


def test_equal_width_gives_a_complex_network_about_twice_the_weights():
    cosmo, siren = network.build("cosmo", width=12), network.build("siren", width=12)
    assert cosmo.width == siren.width == 12
    assert 1.8 < network.count_parameters(cosmo) / network.count_parameters(siren) < 2.2
    with pytest.raises(ValueError, match="width must be 1 or more"):
        network.build("siren", width=0)


def test_cosmo_band_start_is_an_option_and_other_activations_ignore_it():
    default = network.build("cosmo", budget=4000)
    official = network.build("cosmo", budget=4000, band_start=0.312)
    assert torch.all(default.band_raw == network.BAND_START) and torch.allclose(official.band_raw,
                                                                              torch.tensor(0.312))
    assert network.build("siren", budget=4000, band_start=0.312).band_raw is None


def test_a_seconds_budget_stops_the_fit_and_says_so(image):
    f = fit(image, "siren", steps=10_000, seed=0, seconds=0.0)
    assert f.stopped == "time" and f.steps == 0 and "seconds budget" in f.account()


def test_super_resolution_renders_at_scale(image):
    out, f = restore.super_resolve(image[:8, :6], 4, "siren", steps=5)
    assert out.shape == (32, 24, 3) and out.min() >= 0 and out.max() <= 1


def test_subpixel_offsets_land_on_the_finer_grid():
    coarse, fine = network.grid(3, 5), network.grid(6, 10)
    placed = coarse[:, None, :] + network.subpixel_offsets(3, 5, 2)[None]
    # coarse pixel (i, j) holds fine pixels (2i + a, 2j + b)
    expected = fine.reshape(3, 2, 5, 2, 2).permute(0, 2, 1, 3, 4).reshape(15, 4, 2)
    assert torch.allclose(placed, expected, atol=1e-6)


def test_super_resolution_fits_the_box_average_of_its_output(image):
    """The fine rendering, averaged back over each input pixel, reproduces the input: the fit goes through the
    downsampling operator rather than interpolating the input's pixel centres."""
    from toolpath.tools.inr.metrics import psnr

    small = image[::2, ::2][:8, :8] / 255.0
    out, f = restore.super_resolve(small, 2, "siren", steps=150)
    averaged = out.reshape(8, 2, 8, 2, 3).mean(axis=(1, 3))
    assert psnr(averaged, small) > 30
    with pytest.raises(ValueError, match="smoothness needs supersample"):
        fit(small, "siren", steps=1, smoothness=0.1)


def test_inpaint_keeps_the_known_pixels(image):
    known = np.ones((16, 16), bool)
    known[5:10, 5:10] = False
    out, _ = restore.inpaint(image, known, "siren", steps=5)
    assert np.allclose(out[known], image[known] / 255.0, atol=1 / 255)
    assert out.shape == (16, 16, 3)


def test_denoise_stops_on_the_held_out_error(image):
    noisy = np.clip(image / 255.0 + np.random.default_rng(0).normal(0, 0.1, image.shape), 0, 1)
    out, f = restore.denoise(noisy, "siren", steps=300, seed=0)
    assert out.shape == (16, 16, 3) and f.stopped == "early" and f.steps < 300


def test_the_prior_refuses_a_missing_or_wrong_weights_file(image, tmp_path):
    with pytest.raises(PriorError, match="does not exist"):
        fit(image, "cosmo", steps=1, prior_weights=tmp_path / "nope.safetensors")
    from safetensors.torch import save_file

    bad = {k: v.clone() for k, v in Stem().state_dict().items()}
    bad["conv1.weight"] = torch.zeros(32, 3, 7, 7)
    save_file(bad, tmp_path / "bad.safetensors")
    with pytest.raises(PriorError, match=r"'conv1.weight' has shape \(32, 3, 7, 7\)"):
        fit(image, "cosmo", steps=1, prior_weights=tmp_path / "bad.safetensors")
    save_file(dict(Stem().state_dict()), tmp_path / "stem.safetensors")
    with pytest.raises(PriorError, match="the siren activation has no band"):
        fit(image, "siren", steps=1, prior_weights=tmp_path / "stem.safetensors")


def test_the_prior_sets_cosmo_bands_from_the_image(image, tmp_path):
    from safetensors.torch import save_file

    save_file(dict(Stem().state_dict()), tmp_path / "stem.safetensors")
    f = fit(image, "cosmo", steps=3, prior_weights=tmp_path / "stem.safetensors")
    assert f.band_raw.shape == (len(f.model.layers), 2)
    assert f.render(16, 16).shape == (16, 16, 3)


def test_inr_fit_tool_writes_the_reconstruction_with_its_scores(ctx):
    r = get_tool("inr_fit").call({"image": "image_1", "activation": "siren", "steps": 20}, ctx)
    assert r.content.startswith("inr_fit_1: 16x16 image") and r.artifacts[0].mime == "image/png"
    assert r.data["steps"] == 20 and math.isfinite(r.data["psnr"]) and -1 <= r.data["ssim"] <= 1


def test_inr_restore_tool_super_resolves_and_inpaints(ctx):
    from PIL import Image

    r = get_tool("inr_restore").call({"image": "image_1", "task": "super_resolution", "scale": 3, "steps": 3}, ctx)
    assert Image.open(r.artifacts[0].path).size == (48, 48)
    r = get_tool("inr_restore").call({"image": "image_1", "task": "inpaint", "mask": "mask", "steps": 3,
                                      "activation": "gauss"}, ctx)
    assert "16 pixels of mask filled" in r.content


@pytest.mark.parametrize("name, args, words", [
    ("inr_fit", {"image": "image_1", "activation": "relu"}, "unknown activation 'relu'; choose one of cosmo"),
    ("inr_fit", {"image": "image_1", "steps": 0}, "steps must be between 1 and 5000"),
    ("inr_fit", {"image": "big"}, "big is 300x300 (90000 pixels)"),
    ("inr_fit", {"image": "image_9"}, "unknown image 'image_9'"),
    ("inr_restore", {"image": "image_1", "task": "deblur"}, "unknown task 'deblur'"),
    ("inr_restore", {"image": "image_1", "task": "super_resolution", "scale": 1}, "scale must be between 2 and 8"),
    ("inr_restore", {"image": "image_1", "task": "super_resolution", "scale": 500}, "scale must be between 2"),
    ("inr_restore", {"image": "image_1", "task": "inpaint"}, "inpaint needs mask"),
    ("inr_restore", {"image": "image_1", "task": "inpaint", "mask": "big"}, "mask big is 300x300, image_1 is 16x16"),
])
def test_bad_arguments_say_what_is_wrong(ctx, name, args, words):
    with pytest.raises(ToolError) as ei:
        get_tool(name).call(args, ctx)
    assert words in str(ei.value)


def test_the_torch_free_names_list_every_layer_in_order():
    from toolpath.tools.inr import activations, names

    assert tuple(activations.LAYERS) == names.ACTIVATIONS
