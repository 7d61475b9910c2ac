"""Drawing the generated GUI screens: a Screen that records every element it draws (its kind, label, box and
polygon), and the widgets the desktop and web layouts of gui_grounding.py are built from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from PIL import Image, ImageDraw

# ---- a screen being drawn ---------------------------------------------------------------------------------

@dataclass
class Element:
    kind: str  # one of KINDS
    label: str  # what the instruction names it by
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (x1, y1 exclusive) of what was drawn for it
    polygon: list[int] | None = None  # flat [x1, y1, …] when its drawn shape is round


@dataclass
class Screen:
    platform: str
    image: Image.Image
    theme: dict
    elements: list[Element] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # every string drawn

    def __post_init__(self):
        self.draw = ImageDraw.Draw(self.image)

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size

    def text(self, x: int, cy: int, s: str, font, fill, anchor: str = "lm") -> tuple[int, int, int, int]:
        """Draw s with its left (or centre, anchor "mm") at x and its middle at cy; its ink box."""
        self.draw.text((x, cy), s, font=font, fill=fill, anchor=anchor)
        self.texts.append(s)
        x0, y0, x1, y1 = self.draw.textbbox((x, cy), s, font=font, anchor=anchor)
        return int(x0), int(y0), int(x1), int(y1)

    def width(self, s: str, font) -> int:
        x0, _, x1, _ = self.draw.textbbox((0, 0), s, font=font, anchor="lm")
        return int(x1 - x0)

    def rect(self, box, fill=None, outline=None, radius: int = 0, width: int = 1) -> None:
        x0, y0, x1, y1 = box  # x1, y1 exclusive, as element boxes are
        if radius:
            self.draw.rounded_rectangle((x0, y0, x1 - 1, y1 - 1), radius=radius, fill=fill, outline=outline,
                                        width=width)
        else:
            self.draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=fill, outline=outline, width=width)

    def add(self, kind: str, label: str, box, polygon=None) -> Element:
        e = Element(kind, label, tuple(int(v) for v in box), polygon)
        self.elements.append(e)
        return e


# ---- glyph icons ------------------------------------------------------------------------------------------

def glyph(s: Screen, kind: str, cx: int, cy: int, r: int, color) -> None:
    """A simple icon of radius r centred at (cx, cy)."""
    d = s.draw
    if kind == "circle":
        d.ellipse((cx - r, cy - r, cx + r, cy + r), outline=color, width=2)
    elif kind == "square":
        d.rectangle((cx - r + 1, cy - r + 1, cx + r - 1, cy + r - 1), outline=color, width=2)
    elif kind == "triangle":
        d.polygon([(cx, cy - r), (cx + r, cy + r - 1), (cx - r, cy + r - 1)], outline=color, width=2)
    elif kind == "plus":
        d.line((cx - r, cy, cx + r, cy), fill=color, width=2)
        d.line((cx, cy - r, cx, cy + r), fill=color, width=2)
    elif kind == "lines":
        for dy in (-r + 2, 0, r - 2):
            d.line((cx - r, cy + dy, cx + r, cy + dy), fill=color, width=2)
    elif kind == "magnifier":
        d.ellipse((cx - r, cy - r, cx + r // 3, cy + r // 3), outline=color, width=2)
        d.line((cx + r // 6, cy + r // 6, cx + r, cy + r), fill=color, width=2)
    elif kind == "star":
        pts = [(cx + (r if i % 2 == 0 else r / 2.4) * math.sin(i * math.pi / 5),
                cy - (r if i % 2 == 0 else r / 2.4) * math.cos(i * math.pi / 5)) for i in range(10)]
        d.polygon(pts, fill=color)
    else:  # "dot"
        d.ellipse((cx - r // 2, cy - r // 2, cx + r // 2, cy + r // 2), fill=color)


GLYPHS = ("circle", "square", "triangle", "plus", "lines", "magnifier", "star", "dot")


def round_polygon(cx: float, cy: float, r: float, n: int = 16) -> list[int]:
    """A polygon just inside a circle (so every point of it is inside the drawn disc)."""
    out: list[int] = []
    for i in range(n):
        a = 2 * math.pi * i / n
        out += [int(round(cx + (r - 1) * math.cos(a))), int(round(cy + (r - 1) * math.sin(a)))]
    return out


def button(s: Screen, x: int, cy: int, label: str, font, h: int, primary: bool = False) -> int:
    w = s.width(label, font) + 24
    box = (x, cy - h // 2, x + w, cy - h // 2 + h)
    if primary:
        s.rect(box, fill=(38, 110, 220), radius=5)
        s.text(x + 12, cy, label, font, (255, 255, 255))
    else:
        s.rect(box, fill=s.theme["button"], outline=s.theme["border"], radius=5)
        s.text(x + 12, cy, label, font, s.theme["text"])
    s.add("button", label, box)
    return box[2]


def text_field(s: Screen, box, label: str, font, value: str | None = None, placeholder: str | None = None,
               kind: str = "field") -> None:
    s.rect(box, fill=s.theme["field"], outline=s.theme["border"], radius=3)
    cy = (box[1] + box[3]) // 2
    if value:
        s.text(box[0] + 8, cy, value, font, s.theme["text"])
    elif placeholder:
        s.text(box[0] + 8, cy, placeholder, font, s.theme["muted"])
    s.add(kind, label, box)
