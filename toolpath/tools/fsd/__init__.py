"""FSD's perception of the tabletop at the tools floor: mask geometry (masks.py), the scene and its answers in
pixels (scene.py), finding the objects by colour and shape (detect.py), and the tools over them (tools.py:
locate, trace, relations, in FSD's 0-1000 grid)."""
