"""A generated GUI-grounding suite: desktop- and web-like screenshots drawn with PIL, one instruction each,
written as OSWorld-G records so the same loader and scorer apply (osworld_g.py, scorers.grounding).

`generate(n, seed)` draws n screens, each deterministic from (seed, index):
  desktop  1280×800, 1440×900 or 1920×1080: a top panel, an application window (title bar with its
           controls, a menu bar, a toolbar of text buttons and glyph icons, one icon hovered with its
           tooltip shown, a search field), a sidebar, a form of text fields with their labels on the left,
           dialog buttons, paragraphs and a status bar; light or dark theme.
  web      1280×800, 1366×768 or 1536×864: a browser (tabs, address bar), a site header (name, nav links,
           nav menus with a caret, a button, a search field), a heading and paragraphs, cards with links,
           a form with labels above its fields and a submit button, share icons (one with its tooltip),
           a footer of links.
Fonts are the system's DejaVu Sans / Liberation Sans at UI sizes (12–15 px desktop, 14–17 px web).
The target of each screen is one of: a button, a menu, a link, a text field (named by its label, or "the
search field"), an icon (named by its tooltip), or, for about 10 % of screens, a refusal item: an element
of a named kind with a label that is nowhere on the screen. Instructions read like "click the 'Export'
button", "open the File menu", "the Email field", "the icon with the tooltip 'Zoom In'".

Fair by construction: every label on a screen is unique (the vocabularies of buttons, menus, links,
fields, tooltips and filler text share no word, and labels are drawn without replacement), an element's
box is the rectangle drawn for it (a menu item's highlight cell, a button's frame, a field's frame, a link's
text, an icon's hover background: a polygon when that is round), and nothing is drawn over a target.

GUI_types are [kind, screen] (e.g. ["Button", "desktop"]); the category is the first (osworld_g's rule).
The adapter writes the images and an OSWorld-G JSON file under $TOOLPATH_HOME/benchmarks/gui_grounding/
seed<seed>-n<n>/ once (reused while the generator's VERSION is the same) and runs them like OSWorld-G.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from ...paths import home
from ...spec import TaskSpec
from ...tools.image.fonts import font
from . import Record, pick
from .gui_screen import GLYPHS, Screen, button, glyph, round_polygon, text_field
from .osworld_g import OSWorldG, grounding_task, read_records

VERSION = 1
N_SCREENS = 200
REFUSAL_SHARE = 0.1
KINDS = ("button", "menu", "link", "field", "search", "icon")
GUI_TYPE = {"button": "Button", "menu": "Menu", "link": "Link", "field": "Text Field", "search": "Text Field",
            "icon": "Icon", "refusal": "Refusal"}
DESKTOP_SIZES = ((1280, 800), (1440, 900), (1920, 1080))
WEB_SIZES = ((1280, 800), (1366, 768), (1536, 864))

MENUS = ("File", "Edit", "View", "Insert", "Format", "Tools", "Window", "Help", "Selection", "Go", "Run",
         "Terminal", "Image", "Layers", "Table", "Options", "History", "Build", "Debug", "Navigate", "Code")
WEB_MENUS = ("Solutions", "Platform", "Learn", "Services", "Industries", "Explore", "Shop", "Why Us")
BUTTONS = ("Export", "Save", "Print", "Share", "Undo", "Redo", "Import", "Refresh", "Upload", "Download",
           "Delete", "Rename", "Preview", "Publish", "Sync", "Merge", "Archive", "Duplicate", "Apply", "Cancel",
           "Submit", "Continue", "Subscribe", "Register", "Send", "Confirm", "Reset", "Browse", "Attach",
           "Connect", "Install", "Update", "Compare", "Schedule", "Sign Up", "Get Started", "Checkout")
LINKS = ("Home", "Products", "Pricing", "Blog", "About", "Contact", "Careers", "Docs", "Support", "Community",
         "Partners", "Customers", "Resources", "Events", "Newsroom", "Privacy", "Terms", "Cookies", "Sitemap",
         "Accessibility", "Security", "Status", "Developers", "Enterprise", "Webinars", "Tutorials", "Gallery",
         "Features", "Integrations", "Changelog", "Read more")
FIELDS = ("Name", "Email", "Password", "Username", "Phone", "Address", "City", "Country", "Company", "Website",
          "Subject", "Birthday", "Postcode", "Department", "Coupon", "Nickname", "Occupation", "Street")
TOOLTIPS = ("Zoom In", "Zoom Out", "Bold", "Italic", "Underline", "Spell Check", "Align Left", "Add Comment",
            "Word Count", "Text Color", "Crop", "Rotate", "Brush", "Eraser", "Highlight", "Screenshot",
            "Microphone", "Fullscreen", "Strikethrough", "Ruler", "Gridlines", "Like", "Retweet", "Pin It")
SIDEBAR = ("Documents", "Downloads", "Music", "Pictures", "Videos", "Recent", "Starred", "Trash", "Desktop",
           "Network", "Templates", "Shared")
FILLER = ("quarterly revenue summary meeting notes draft team budget review planning garden river morning "
          "report customer growth forecast annual strategy market analysis roadmap spring launch weekly "
          "travel recipe journal invoice contract proposal agenda minutes design sketch chapter lecture "
          "holiday photos family backup notes ideas research paper figures results discussion methods "
          "overview onboarding handbook policy guide timetable calendar tasks goals metrics campaign").split()
SITES = ("northwind", "acmecorp", "bluepeak", "lumina", "cobalt", "greenleaf", "orbital", "sunrise")
APPS = ("Writer", "Sheets", "Studio", "Notes", "Mail", "Photos", "Editor", "Planner")
TEMPLATES = {
    "button": ("click the '{L}' button", "press the {L} button", "the '{L}' button", "{L} button"),
    "menu": ("open the {L} menu", "click the '{L}' menu", "the {L} menu"),
    "link": ("click the '{L}' link", "open the {L} link", "the '{L}' link"),
    "field": ("click the {L} field", "the {L} input field", "the text field for {L}"),
    "search": ("the search field", "click the search box", "the search bar"),
    "icon": ("the icon with the tooltip '{L}'", "click the {L} icon", "the '{L}' tool icon"),
}
FONT_FILES = {"ui": ("DejaVuSans.ttf", "LiberationSans-Regular.ttf"),
              "ui_bold": ("DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf"),
              "web": ("LiberationSans-Regular.ttf", "DejaVuSans.ttf"),
              "web_bold": ("LiberationSans-Bold.ttf", "DejaVuSans-Bold.ttf")}
THEMES = {
    "light": {"bg": (246, 245, 244), "bar": (235, 235, 235), "title": (222, 221, 218), "text": (36, 36, 36),
              "muted": (110, 110, 110), "border": (190, 190, 190), "field": (255, 255, 255),
              "button": (250, 250, 250), "hover": (214, 214, 214), "side": (236, 236, 236)},
    "dark": {"bg": (36, 36, 40), "bar": (48, 48, 52), "title": (30, 30, 33), "text": (230, 230, 230),
             "muted": (160, 160, 160), "border": (90, 90, 96), "field": (24, 24, 26), "button": (60, 60, 66),
             "hover": (80, 80, 88), "side": (42, 42, 46)},
}


def _words(label: str) -> set[str]:
    return set(re.findall(r"[a-z]+", label.lower()))


def _check_vocabularies() -> None:
    """No word is shared between two vocabularies (so a label is unique on any screen); run at import."""
    groups = {"menus": MENUS + WEB_MENUS, "buttons": BUTTONS, "links": LINKS, "fields": FIELDS,
              "tooltips": TOOLTIPS, "sidebar": SIDEBAR, "filler": tuple(FILLER) + SITES + APPS + ("search",)}
    seen: dict[str, str] = {}
    clashes = []
    for name, labels in groups.items():
        for w in sorted(set().union(*(_words(x) for x in labels))):
            if w in seen and seen[w] != name:
                clashes.append(f"{w!r} ({seen[w]}, {name})")
            seen[w] = name
    if clashes:
        raise AssertionError("gui_grounding: words in two vocabularies: " + ", ".join(clashes))


_check_vocabularies()


# ---- fonts ----------------------------------------------------------------------------------------------

def ui_font(kind: str, size: int):
    """A regular or bold sans of the system at `size` (FONT_FILES[kind], first found), else the tools' font
    (their bold sans, else PIL's built-in scalable one)."""
    return font(size, FONT_FILES[kind])


def _take(rng: random.Random, pool: tuple[str, ...], k: int, used: set[str]) -> list[str]:
    """k labels of the pool not used yet on this screen, marked used."""
    free = [p for p in pool if p not in used]
    out = rng.sample(free, min(k, len(free)))
    used.update(out)
    return out


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(FILLER) for _ in range(n)]
    return " ".join(words).capitalize() + "."


# ---- icons ----------------------------------------------------------------------------------------------

def icon_row(s: Screen, rng: random.Random, x: int, cy: int, count: int, used: set[str], size: int,
             tooltip_font, color) -> tuple[int, tuple[int, int, int, int] | None]:
    """`count` glyph icons from x on the line cy, one hovered with its tooltip drawn below it.
    Returns the row's right end and the tooltip's box (kept clear of other elements by the caller)."""
    hovered = rng.randrange(count)
    tip_box = None
    step = size + 8
    for i in range(count):
        cx = x + i * step + size // 2
        box = (cx - size // 2, cy - size // 2, cx + size // 2, cy + size // 2)
        if i == hovered:
            label = _take(rng, TOOLTIPS, 1, used)[0]
            round_ = rng.random() < 0.5
            if round_:
                s.draw.ellipse((box[0], box[1], box[2] - 1, box[3] - 1), fill=s.theme["hover"])
                poly = round_polygon((box[0] + box[2] - 1) / 2, (box[1] + box[3] - 1) / 2, size / 2)
            else:
                s.rect(box, fill=s.theme["hover"], radius=4)
                poly = None
            glyph(s, rng.choice(GLYPHS), cx, cy, size // 2 - 6, color)
            s.add("icon", label, box, poly)
            tw = s.width(label, tooltip_font)
            tx0, ty0 = max(4, cx - tw // 2 - 8), box[3] + 6
            tip_box = (tx0, ty0, tx0 + tw + 16, ty0 + tooltip_font.size + 12)
            s.rect(tip_box, fill=(50, 50, 54), radius=4)
            s.text(tip_box[0] + 8, (tip_box[1] + tip_box[3]) // 2, label, tooltip_font, (250, 250, 250))
        else:
            glyph(s, rng.choice(GLYPHS), cx, cy, size // 2 - 6, color)
    return x + count * step, tip_box


# ---- desktop --------------------------------------------------------------------------------------------

def draw_desktop(rng: random.Random, size: tuple[int, int]) -> Screen:
    W, H = size
    theme = THEMES["dark" if rng.random() < 0.25 else "light"]
    s = Screen("desktop", Image.new("RGB", size, (60, 80, 110)), theme)
    fs = rng.choice((12, 13, 13, 14, 15)) + (1 if W >= 1920 else 0)
    f, fb, fsm = ui_font("ui", fs), ui_font("ui_bold", fs), ui_font("ui", max(11, fs - 1))
    used: set[str] = set()
    # top panel
    s.rect((0, 0, W, 28), fill=(28, 28, 30))
    s.text(12, 14, "Activities", fsm, (235, 235, 235))
    s.text(W // 2, 14,
           f"{rng.choice(('Mon', 'Tue', 'Wed', 'Thu', 'Fri'))} {rng.randrange(24):02d}:{rng.randrange(60):02d}",
           fsm, (235, 235, 235), anchor="mm")
    # the window
    X0, Y0, X1, Y1 = rng.randint(20, 70), rng.randint(40, 56), W - rng.randint(20, 70), H - rng.randint(12, 40)
    s.rect((X0, Y0, X1, Y1), fill=theme["bg"])
    s.rect((X0, Y0, X1, Y0 + 36), fill=theme["title"])
    title = f"{rng.choice(FILLER)}_{rng.choice(FILLER)}.txt — {rng.choice(APPS)}"
    s.text((X0 + X1) // 2, Y0 + 18, title, fb, theme["text"], anchor="mm")
    for i, g in enumerate(("dot", "square", "plus")):  # window controls, drawn as glyphs (not targets)
        glyph(s, g, X1 - 20 - i * 28, Y0 + 18, 6, theme["muted"])
    # menu bar
    y = Y0 + 36
    s.rect((X0, y, X1, y + 26), fill=theme["bar"])
    x = X0 + 6
    chosen = set(_take(rng, MENUS, rng.randint(5, 8), used))
    labels = [m for m in MENUS if m in chosen]  # in the usual order
    hovered = rng.randrange(len(labels))
    for i, m in enumerate(labels):
        w = s.width(m, f) + 16
        if i == hovered:
            s.rect((x, y, x + w, y + 26), fill=theme["hover"])
        s.text(x + 8, y + 13, m, f, theme["text"])
        s.add("menu", m, (x, y, x + w, y + 26))
        x += w
    # toolbar: text buttons, icons (one with its tooltip), a search field on the right
    y += 26
    s.rect((X0, y, X1, y + 44), fill=theme["bar"])
    s.draw.line((X0, y, X1, y), fill=theme["border"])
    cy, x = y + 22, X0 + 10
    for label in _take(rng, BUTTONS, rng.randint(3, 5), used):
        x = button(s, x, cy, label, f, 30) + 8
    x, tip = icon_row(s, rng, x + 12, cy, rng.randint(3, 6), used, 30, fsm, theme["text"])
    sw = rng.randint(180, 260)
    if X1 - 12 - sw > x + 20:
        box = (X1 - 12 - sw, cy - 14, X1 - 12, cy + 14)
        text_field(s, box, "search", fsm, placeholder=rng.choice(("Search", "Search files", "Search…")),
                   kind="search")
        glyph(s, "magnifier", box[2] - 16, cy, 6, theme["muted"])
    y += 44
    # a strip under the toolbar where the tooltip hangs (a breadcrumb on its right, away from the icons)
    strip = max(40, (tip[3] - y + 6) if tip else 0)
    s.text(X1 - 16, y + strip // 2, " › ".join(rng.sample(FILLER, 3)), fsm, theme["muted"], anchor="rm")
    y += strip
    # sidebar
    sbw = rng.randint(170, 230)
    s.rect((X0, y, X0 + sbw, Y1 - 26), fill=theme["side"])
    for i, item in enumerate(rng.sample(SIDEBAR, rng.randint(5, 8))):
        s.text(X0 + 18, y + 24 + i * 30, item, f, theme["text"])
    # form: labels on the left, fields to their right
    fx, fy = X0 + sbw + rng.randint(30, 70), y + rng.randint(24, 40)
    s.text(fx, fy, " ".join(rng.sample(FILLER, 2)).title(), ui_font("ui_bold", fs + 3), theme["text"])
    fy += 40
    labels = _take(rng, FIELDS, rng.randint(2, 4), used)
    lw = max(s.width(lb + ":", f) for lb in labels) + 14
    fw = rng.randint(220, 340)
    for lb in labels:
        s.text(fx, fy, lb + ":", f, theme["text"])
        box = (fx + lw, fy - 14, fx + lw + fw, fy + 14)
        value = rng.choice(FILLER) if rng.random() < 0.3 else None
        text_field(s, box, lb, f, value=value)
        fy += 42
    x = fx + lw
    for j, label in enumerate(_take(rng, BUTTONS, 2, used)):
        x = button(s, x, fy + 4, label, f, 30, primary=j == 0) + 10
    fy += 44
    # paragraphs
    for _ in range(rng.randint(2, 5)):
        if fy > Y1 - 60:
            break
        line = _sentence(rng, rng.randint(6, 12))
        while s.width(line, f) > X1 - fx - 30 and " " in line:
            line = line.rsplit(" ", 1)[0]
        s.text(fx, fy, line, f, theme["muted"])
        fy += 26
    # status bar
    s.rect((X0, Y1 - 26, X1, Y1), fill=theme["bar"])
    s.text(X0 + 12, Y1 - 13, f"{rng.choice(('Ready', 'Saved', 'Idle'))} · {rng.randint(100, 9999)} words", fsm,
           theme["muted"])
    return s


# ---- web ------------------------------------------------------------------------------------------------

def draw_web(rng: random.Random, size: tuple[int, int]) -> Screen:
    W, H = size
    theme = THEMES["light"]
    s = Screen("web", Image.new("RGB", size, (255, 255, 255)), theme)
    fs = rng.choice((14, 15, 16, 17))
    f, fb, fsm = ui_font("web", fs), ui_font("web_bold", fs), ui_font("web", 13)
    link_color = rng.choice(((26, 95, 200), (10, 110, 160), (90, 60, 180)))
    used: set[str] = set()
    site = rng.choice(SITES)
    # browser chrome
    s.rect((0, 0, W, 36), fill=(222, 225, 230))
    x = 8
    for i in range(rng.randint(1, 3)):
        t = f"{rng.choice(FILLER).title()} {rng.choice(FILLER)} - {site.title()}"
        w = min(220, s.width(t, fsm) + 40)
        if i == 0:
            s.rect((x, 6, x + w, 36), fill=(255, 255, 255), radius=8)
        while s.width(t, fsm) > w - 30 and len(t) > 4:
            t = t[:-2]
        s.text(x + 14, 21, t, fsm, (40, 40, 40))
        x += w + 4
    s.rect((0, 36, W, 76), fill=(255, 255, 255))
    for i, g in enumerate(("triangle", "triangle", "circle")):
        glyph(s, g, 20 + i * 28, 56, 7, (95, 99, 104))
    s.rect((100, 42, W - 60, 70), fill=(241, 243, 244), radius=14)
    s.text(120, 56, f"https://www.{site}.com/{rng.choice(FILLER)}/{rng.choice(FILLER)}", fsm, (60, 60, 60))
    s.draw.line((0, 76, W, 76), fill=(210, 210, 210))
    # site header: name, nav links and menus, a search field, a button
    top = 76
    s.rect((0, top, W, top + 64), fill=rng.choice(((255, 255, 255), (248, 249, 251))))
    s.text(28, top + 32, site.title(), ui_font("web_bold", 22), (30, 30, 30))
    x = 28 + s.width(site.title(), ui_font("web_bold", 22)) + 40
    nav = [("link", lb) for lb in _take(rng, LINKS, rng.randint(2, 4), used)]
    nav += [("menu", lb) for lb in _take(rng, WEB_MENUS, rng.randint(1, 2), used)]
    rng.shuffle(nav)
    for kind, lb in nav:
        x0, y0, x1, y1 = s.text(x, top + 32, lb, f, (50, 50, 50))
        if kind == "menu":  # a caret after the name, inside the item's box
            s.draw.polygon([(x1 + 6, top + 29), (x1 + 14, top + 29), (x1 + 10, top + 35)], fill=(80, 80, 80))
            s.add("menu", lb, (x - 6, top + 16, x1 + 20, top + 48))
            x = x1 + 40
        else:
            s.add("link", lb, (x0 - 2, y0 - 2, x1 + 2, y1 + 2))
            x = x1 + 30
    bx = W - 28
    label = _take(rng, BUTTONS, 1, used)[0]
    bw = s.width(label, fb) + 32
    box = (bx - bw, top + 14, bx, top + 50)
    s.rect(box, fill=(38, 110, 220), radius=6)
    s.text(box[0] + 16, top + 32, label, fb, (255, 255, 255))
    s.add("button", label, box)
    if rng.random() < 0.7 and box[0] - 260 > x + 20:
        sbox = (box[0] - 250, top + 15, box[0] - 20, top + 49)
        text_field(s, sbox, "search", f, placeholder=rng.choice(("Search", "Search the site", "Search…")),
                   kind="search")
        glyph(s, "magnifier", sbox[2] - 18, top + 32, 7, (120, 120, 120))
    s.draw.line((0, top + 64, W, top + 64), fill=(225, 225, 225))
    # heading and paragraphs
    y = top + 64 + rng.randint(30, 50)
    hf = ui_font("web_bold", rng.choice((28, 32, 36)))
    s.text(60, y, " ".join(rng.sample(FILLER, 3)).title(), hf, (20, 20, 20))
    y += hf.size + 18
    for _ in range(2):
        line = _sentence(rng, rng.randint(8, 14))
        while s.width(line, f) > W // 2 and " " in line:
            line = line.rsplit(" ", 1)[0]
        s.text(60, y, line, f, (85, 85, 85))
        y += fs + 12
    # cards with links (left), the form (right)
    y += 20
    col = W // 2 + 20
    cy = y
    for _ in range(rng.randint(1, 2)):
        if cy + 120 > H - 80:
            break
        s.rect((60, cy, col - 60, cy + 110), outline=(225, 225, 225), radius=8)
        s.text(80, cy + 24, " ".join(rng.sample(FILLER, 2)).title(), fb, (30, 30, 30))
        line = _sentence(rng, 8)
        while s.width(line, fsm) > col - 160 and " " in line:
            line = line.rsplit(" ", 1)[0]
        s.text(80, cy + 52, line, fsm, (100, 100, 100))
        lb = _take(rng, LINKS, 1, used)[0]
        x0, y0, x1, y1 = s.text(80, cy + 84, lb, f, link_color)
        s.draw.line((x0, y1 + 2, x1, y1 + 2), fill=link_color)
        s.add("link", lb, (x0 - 2, y0 - 2, x1 + 2, y1 + 4))
        cy += 130
    # share icons, one with its tooltip, under the cards
    if cy + 80 < H - 70:
        icon_row(s, rng, 60, cy + 20, rng.randint(3, 5), used, 32, fsm, (90, 90, 90))
    fy = y
    for lb in _take(rng, FIELDS, rng.randint(2, 3), used):
        if fy + 90 > H - 70:
            break
        s.text(col, fy + 8, lb + rng.choice(("", " *")), fsm if rng.random() < 0.5 else f, (50, 50, 50))
        box = (col, fy + 22, col + rng.randint(280, 380), fy + 58)
        text_field(s, box, lb, f, value=rng.choice(FILLER) if rng.random() < 0.25 else None)
        fy += 76
    if fy + 50 < H - 70:
        button(s, col, fy + 18, _take(rng, BUTTONS, 1, used)[0], fb, 38, primary=True)
    # footer
    s.rect((0, H - 56, W, H), fill=(33, 37, 41))
    x = 60
    for lb in _take(rng, LINKS, rng.randint(3, 5), used):
        x0, y0, x1, y1 = s.text(x, H - 28, lb, fsm, (200, 205, 210))
        s.add("link", lb, (x0 - 2, y0 - 2, x1 + 2, y1 + 2))
        x = x1 + 28
    s.text(W - 40, H - 28, f"© 20{rng.randint(18, 25)} {site.title()}", fsm, (150, 155, 160), anchor="rm")
    return s


# ---- items ----------------------------------------------------------------------------------------------

@dataclass
class Item:
    id: str
    index: int
    platform: str
    size: tuple[int, int]
    instruction: str
    kind: str  # the target's kind, or "refusal"
    named_kind: str  # the kind the instruction names (a refusal names one too)
    label: str
    box_type: str
    box_coordinates: list
    screen: Screen


def _instruction(rng: random.Random, kind: str, label: str) -> str:
    t = rng.choice(TEMPLATES[kind]).format(L=label)
    return t[0].upper() + t[1:] if rng.random() < 0.5 else t


KIND_WEIGHT = {"button": 1.0, "menu": 1.0, "link": 2.0, "field": 1.0, "search": 0.5, "icon": 1.0}  # links: web only
POOLS = {"button": BUTTONS, "menu": MENUS, "link": LINKS, "field": FIELDS, "icon": TOOLTIPS}


def make_item(seed: int, index: int) -> Item:
    rng = random.Random(f"gui_grounding:{seed}:{index}")
    platform = "desktop" if index % 2 == 0 else "web"
    size = rng.choice(DESKTOP_SIZES if platform == "desktop" else WEB_SIZES)
    screen = (draw_desktop if platform == "desktop" else draw_web)(rng, size)
    drawn = set().union(*(_words(t) for t in screen.texts))
    if rng.random() < REFUSAL_SHARE:
        kind = rng.choice(tuple(POOLS))
        pool = (MENUS + WEB_MENUS) if kind == "menu" else POOLS[kind]
        absent = [p for p in pool if not (_words(p) & drawn)]
        label = rng.choice(absent)
        return Item(f"gui-{seed}-{index:04d}", index, platform, size, _instruction(rng, kind, label), "refusal", kind,
                    label, "refusal", [-1, -1, -1, -1], screen)
    kinds = [k for k in KINDS if any(e.kind == k for e in screen.elements)]
    kind = rng.choices(kinds, weights=[KIND_WEIGHT[k] for k in kinds])[0]
    e = rng.choice([e for e in screen.elements if e.kind == kind])
    x0, y0, x1, y1 = e.box
    if e.polygon:
        box_type, coords = "polygon", list(e.polygon)
    else:
        box_type, coords = "bbox", [x0, y0, x1 - x0 - 1, y1 - y0 - 1]  # [x, y, w, h] of the pixels drawn
    return Item(f"gui-{seed}-{index:04d}", index, platform, size, _instruction(rng, kind, e.label), kind, kind,
                e.label, box_type, coords, screen)


def generate(n: int = N_SCREENS, seed: int = 0) -> list[Item]:
    return [make_item(seed, i) for i in range(n)]


def to_osworld(item: Item, image_path: str) -> dict:
    return {"id": item.id, "image_path": image_path, "image_size": list(item.size), "instruction": item.instruction,
            "box_type": item.box_type, "box_coordinates": item.box_coordinates,
            "GUI_types": [GUI_TYPE[item.kind], item.platform]}


def write_suite(folder: Path, n: int = N_SCREENS, seed: int = 0) -> Path:
    """The suite as OSWorld-G data in `folder` (images/ and OSWorld-G.json); kept when already written by
    this VERSION with the same n and seed. Returns the JSON file."""
    folder = Path(folder)
    stamp = {"generator": "gui_grounding", "version": VERSION, "seed": seed, "n": n}
    file, stamp_file = folder / "OSWorld-G.json", folder / "suite.json"
    try:
        if json.loads(stamp_file.read_text()) == stamp and file.is_file():
            records = json.loads(file.read_text())
            if len(records) == n and all((folder / r["image_path"]).is_file() for r in records):
                return file
    except (OSError, ValueError, KeyError, TypeError):
        pass
    (folder / "images").mkdir(parents=True, exist_ok=True)
    records = []
    for item in generate(n, seed):
        rel = f"images/{item.id}.png"
        tmp = folder / f"{rel}.{os.getpid()}.tmp"
        item.screen.image.save(tmp, format="PNG")
        tmp.replace(folder / rel)
        records.append(to_osworld(item, rel))
    tmp = file.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(records, indent=1))
    tmp.replace(file)
    stamp_file.write_text(json.dumps(stamp))
    return file


class GUIGrounding(OSWorldG):
    name = "gui_grounding"
    description = "generated desktop and web screenshots: ground a button, menu, link, field or icon, or refuse"

    def __init__(self, n: int = N_SCREENS, folder: Path | None = None):
        self.n, self.folder = n, Path(folder) if folder else None

    def suite_folder(self, seed: int) -> Path:
        return self.folder or home() / "benchmarks" / "gui_grounding" / f"seed{seed}-n{self.n}"

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        # the seed makes the suite; pick() then keeps file order (seed 0 or not: the suite is already drawn)
        records = read_records(write_suite(self.suite_folder(seed), self.n, seed))
        for r in records:
            r.data["platform"] = r.data["types"][1] if len(r.data["types"]) > 1 else "desktop"
        return pick(records, limit, 0)

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        return grounding_task(self.name, record, model, record.data.get("platform", "desktop"),
                              self.task_options(record))
