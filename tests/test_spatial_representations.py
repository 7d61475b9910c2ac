"""FSD's representations as data (tools.spatial): points, boxes, traces, the grid ↔ pixel conversion through
CoordinateSpace, relation graphs from parsed answers, the name match, lifting a pixel to the world, drawing."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

from toolpath.coords import CoordinateSpace
from toolpath.policies.formats.fsd import parse_fsd
from toolpath.tools.spatial import (
    Box,
    Point,
    RelationGraph,
    Trace,
    box_from_grid,
    box_to_grid,
    draw,
    from_grid,
    lift,
    points_from_grid,
    same_object,
    to_grid,
)

W, H = 640, 480


# ---- points, boxes, traces ------------------------------------------------------------------------------

def test_box_geometry_by_hand():
    b = Box(10, 20, 50, 40)
    assert (b.width, b.height, b.area) == (40, 20, 800)
    assert b.centre == Point(30, 30)
    assert b.contains((10, 20)) and b.contains((50, 40)) and b.contains(Point(30, 25))  # edges included
    assert not b.contains((50.01, 30)) and not b.contains((30, 19.9))
    # overlap 20x20 = 400; union 800 + 800 - 400 = 1200
    assert Box(10, 20, 50, 40).iou([30, 20, 70, 40]) == pytest.approx(400 / 1200)
    assert b.iou(b) == 1.0
    assert b.iou([100, 100, 200, 200]) == 0.0
    assert Box(1, 1, 1, 1).iou([1, 1, 1, 1]) == 0.0  # no area: no IoU, not a division by zero


@pytest.mark.parametrize("args, match", [((5, 0, 1, 1), "x1 <= x2"), ((0, 0, float("nan"), 1), "not a finite"),
                                         ((0, "a", 1, 1), "not a finite")])
def test_bad_boxes_are_named(args, match):
    with pytest.raises(ValueError, match=match):
        Box(*args)
    with pytest.raises(ValueError, match="expected a box"):
        Box.of([1, 2, 3])
    with pytest.raises(ValueError, match="expected a point"):
        Point.of("ab")


def test_trace_length_and_resampling_by_arc_length():
    t = Trace([(0, 0), (3, 4), (3, 10)])  # segments of 5 and 6
    assert t.length() == pytest.approx(11.0)
    assert len(t) == 3 and t.start == Point(0, 0) and t.end == Point(3, 10)
    r = t.resample(3)  # at arc lengths 0, 5.5, 11: 0.5 past the corner on the second segment
    assert np.allclose(r.array(), [[0, 0], [3, 4.5], [3, 10]])
    r12 = t.resample(12)  # every unit of arc length
    steps = np.hypot(*np.diff(r12.array(), axis=0).T)
    assert r12.start == t.start and r12.end == t.end
    assert np.allclose(steps, 1.0)  # arc length 5 is the corner itself, so no step cuts it
    r4 = t.resample(4).array()     # at 0, 11/3, 22/3, 11: the second step cuts the corner (a chord)
    assert np.allclose(r4[1], [0.6 * 11 / 3, 0.8 * 11 / 3]) and np.allclose(r4[2], [3, 4 + 22 / 3 - 5])
    assert t.resample(1).as_list() == [[0.0, 0.0]]
    assert Trace([(5, 5)]).resample(4).as_list() == [[5.0, 5.0]] * 4
    assert Trace([(1, 1), (1, 1)]).length() == 0
    with pytest.raises(ValueError, match="positive integer"):
        t.resample(0)
    with pytest.raises(ValueError, match="at least one point"):
        Trace(())


# ---- grid ↔ pixels --------------------------------------------------------------------------------------

def test_grid_conversion_is_coordinate_space():
    space = CoordinateSpace("grid1000", W, H)
    for gx, gy in [(0, 0), (500, 500), (1000, 1000), (123.4, 876.5)]:
        assert from_grid(gx, gy, W, H) == Point(*space.to_screen(gx, gy))
    assert from_grid(500, 500, W, H) == Point(320, 240)
    assert from_grid(1000, 1000, W, H) == Point(639, 479)  # the far edge is the last pixel
    assert to_grid((320, 240), W, H) == space.from_screen(320, 240) == (501.0, 501.0)
    # a pixel → the grid → back: the same pixel, all over the image
    for px, py in [(0, 0), (639, 479), (17, 400), (320, 1)]:
        assert from_grid(*to_grid((px, py), W, H), W, H) == Point(px, py)
    with pytest.raises(ValueError, match="outside"):
        from_grid(1000.5, 10, W, H)
    assert points_from_grid([[0, 0], [500, 500]], W, H) == [Point(0, 0), Point(320, 240)]
    assert Trace.from_grid([[0, 0], [1000, 1000]], W, H).as_list() == [[0, 0], [639, 479]]


def test_boxes_between_grid_and_pixels():
    assert box_from_grid([0, 0, 1000, 1000], W, H) == Box(0, 0, 639, 479)
    assert box_from_grid([250, 250, 750, 750], W, H) == Box(160, 120, 480, 360)
    g = box_to_grid(Box(160, 120, 480, 360), W, H)
    assert g == [251.0, 251.0, 751.0, 751.0]  # the corner pixels' centres
    assert box_from_grid(g, W, H) == Box(160, 120, 480, 360)


# ---- names ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, same", [
    ("red cube", "red cube", True), ("The Red Cube.", "red cube", True), ("red block", "red cube", True),
    ("a blue dish", "the blue plate", True), ("red cubes", "red cube", True), ("gray plate", "grey plate", True),
    ("red cube", "red plate", False), ("red cube", "blue cube", False), ("red cube", "cube", False),
    ("", "", False), (None, "red cube", False), ("the", "a", False),
])
def test_same_object(a, b, same):
    assert same_object(a, b) is same


# ---- relation graph -------------------------------------------------------------------------------------

def test_relation_graph_from_an_answer_in_pixels():
    ans = parse_fsd("<answer><ref>red cube</ref><box>[[250, 250, 750, 750]]</box>"
                    "<ref>blue plate</ref><box>[[0, 0, 1000, 1000]]</box>"
                    "<ref>blue plate</ref><box>[[0, 0, 500, 500]]</box>"
                    "<pred>red cube, on, blue plate</pred></answer>")
    g = RelationGraph.from_answer(ans, W, H)
    assert g.objects == {"red cube": Box(160, 120, 480, 360), "blue plate": Box(0, 0, 639, 479),
                         "blue plate #2": Box(0, 0, 320, 240)}
    assert g.relations == [("red cube", "on", "blue plate")]
    assert g.find("the red block") == ("red cube", Box(160, 120, 480, 360))
    assert g.find("green cube") is None
    text = g.describe()
    assert "red cube: box [160, 120, 480, 360] px, centre (320, 240)" in text
    assert "red cube on blue plate" in text
    assert RelationGraph().describe() == "no objects or relations"


# ---- lift -----------------------------------------------------------------------------------------------

def _camera():
    """A camera 1 m above the table looking straight down (camera z = world −z), x right = world x."""
    K = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
    R = np.diag([1.0, -1.0, -1.0])  # world → camera
    C = np.array([0.5, 0.0, 1.0])   # camera centre in the world
    E = np.eye(4)
    E[:3, :3] = R
    E[:3, 3] = -R @ C
    return K, E


def test_lift_back_projects_with_k_and_e():
    K, E = _camera()
    depth = np.full((H, W), 1.0, np.float32)  # the table (z = 0) everywhere
    assert lift(320, 240, depth, K, E) == pytest.approx([0.5, 0.0, 0.0])
    # 100 px right at 1 m with f = 500 → 0.2 m along world x; 50 px down → 0.1 m along world −y
    assert lift(420, 290, depth, K, E) == pytest.approx([0.7, -0.1, 0.0])
    # a known world point projects and lifts back
    world = np.array([0.6, 0.05, 0.0])
    cam = E[:3, :3] @ world + E[:3, 3]
    u, v = (K @ cam)[:2] / cam[2]
    assert lift(u, v, depth, K, E) == pytest.approx(world, abs=1e-9)


def test_lift_takes_the_median_depth_and_survives_edges_and_holes():
    K, E = _camera()
    depth = np.full((H, W), 1.0, np.float32)
    depth[:, 322:] = 0.955           # a 4.5 cm tall cube's top starts 2 px right of the centre column
    depth[240, 320] = 0.2            # one spurious near reading
    depth[0:3, 0:3] = np.nan         # holes
    depth[0:2, 3:6] = 0.0
    p = lift(320, 240, depth, K, E)  # window 5x5: 15 table pixels, 10 cube pixels → the table
    assert p[2] == pytest.approx(0.0, abs=1e-6)
    assert lift(324, 240, depth, K, E)[2] == pytest.approx(0.045, abs=1e-6)
    assert lift(0, 0, depth, K, E, window=3)[2] == pytest.approx(0.0, abs=1e-6)  # the corner: valid pixels only
    with pytest.raises(ValueError, match="no valid depth within 1 px of pixel \\(1, 1\\)"):
        lift(1, 1, depth, K, E, window=1)
    with pytest.raises(ValueError, match="outside the 640x480 depth image"):
        lift(640, 10, depth, K, E)
    with pytest.raises(ValueError, match="K must be 3x3"):
        lift(1, 1, depth, np.eye(4), E)
    with pytest.raises(ValueError, match="HxW"):
        lift(1, 1, depth[..., None], K, E)


# ---- draw -----------------------------------------------------------------------------------------------

def test_draw_returns_a_png_with_the_marks_where_they_belong():
    grey = np.full((H, W, 3), 128, np.uint8)
    png = draw(grey, boxes=[[100, 100, 200, 200]], labels=["red cube"], points=[(400, 300)],
               trace=[(120, 150), (250, 80), (400, 300)])
    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    assert im.shape == (H, W, 3)
    assert (im[100, 150] != 128).any()        # the box's top edge
    assert (im[150, 150] == 128).all()        # its inside left alone
    assert (im[300, 400] != 128).any()        # the point / trace end
    mid = (np.array([120, 150]) + np.array([250, 80])) // 2
    assert (im[mid[1], mid[0]] != 128).any()  # on the polyline between waypoints 1 and 2
    assert (im[450, 50] == 128).all()         # far from everything
    # PNG bytes and a path draw the same
    buf = io.BytesIO()
    Image.fromarray(grey).save(buf, format="PNG")
    assert draw(buf.getvalue(), trace=Trace([(1, 1), (5, 5)])) == draw(grey, trace=[(1, 1), (5, 5)])


def test_draw_rejects_bad_input_by_name():
    with pytest.raises(ValueError, match="not a readable image"):
        draw(b"not a png")
    with pytest.raises(ValueError, match="1 label\\(s\\) for 2 box"):
        draw(np.zeros((10, 10, 3), np.uint8), boxes=[[0, 0, 1, 1], [2, 2, 3, 3]], labels=["a"])
    with pytest.raises(ValueError, match="HxWx3"):
        draw(np.zeros((10, 10, 5), np.uint8))


def test_point_distance_and_unpacking():
    x, y = Point(3, 4)
    assert (x, y) == (3.0, 4.0)
    assert [list(p) for p in Trace([[0, 0], [2, 0]]).resample(3).points] == [[0, 0], [1, 0], [2, 0]]
    assert Point(0, 0).distance((3, 4)) == 5
    assert math.isclose(Point(1, 1).distance(Point(2, 2)), math.sqrt(2))
