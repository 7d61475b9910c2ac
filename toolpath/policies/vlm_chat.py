"""A conversation as a vision-language model's processor takes it: content parts, images as pixels.

Every turn's content is a list of parts, `{"type": "image", "image": <PIL image>}` then `{"type": "text", ...}`
(images first: LLaVA, Idefics3 and Qwen2-VL all put the image before the question in their training data), so
the processor's chat template writes each image's placeholder where it belongs and the processor expands it
into the image's tokens, in the order the images appear in the conversation.

Templates differ in what they render, so a template is read once, by rendering probe conversations
(`read_template`): whether it writes the system text, whether a tool turn shows its text and its images, and
which placeholder it writes once per image (to check that no image was dropped). Images a role cannot show
(a tool result under a template without a tool role or without images in it, a picture attached to an
assistant turn) go into a user turn right after, so the model still sees them where they came in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..state import ArtifactRef
from .base import PolicyError


@dataclass
class Turn:
    """One turn before rendering: its role, text (the run's grammar already applied), images and where it came
    from (for error messages: "message 4, tool crop")."""

    role: str
    text: str
    images: list[ArtifactRef] = field(default_factory=list)
    name: str = ""
    source: str = ""


@dataclass(frozen=True)
class TemplateTraits:
    marker: str | None  # the image placeholder written once per image, or None when the template writes another
    system: bool        # the system text reaches the prompt (else it opens the first user turn)
    tool: str | None    # "images": a tool turn shows text and images; "parts"/"string": its text only, in that
                        # content form; None: no tool role (a tool result becomes a user turn)


def _text(s: str) -> dict:
    return {"type": "text", "text": s}


_IMAGE = {"type": "image"}


def read_template(render: Callable[[list[dict]], str], image_token: str, where: str,
                  tool_role: bool = True) -> TemplateTraits:
    """What a chat template renders, found by rendering probes with `render(chat) -> str` (tokenize=False);
    `tool_role`: whether the template names a tool role at all (one that only prints any role's name was not
    trained on tool turns, so its tool results go in user turns). PolicyError when it cannot show a user's image."""
    def attempt(chat: list[dict]) -> str | None:
        try:
            return render(chat)
        except Exception:  # a template may raise anything (jinja's raise_exception on roles it refuses)
            return None

    def shown(text: str | None, *marks: str) -> bool:
        return text is not None and "'type'" not in text and all(m in text for m in marks)

    opening = [{"role": "user", "content": [_text("PROBE-U1")]}, {"role": "assistant", "content": [_text("PROBE-A1")]}]
    one = attempt([{"role": "system", "content": [_text("PROBE-S")]},
                   {"role": "user", "content": [_IMAGE, _text("PROBE-U")]}])
    bare = attempt([{"role": "system", "content": [_text("PROBE-S")]}, {"role": "user", "content": [_text("PROBE-U")]}])
    if not shown(one, "PROBE-U") or one == bare:
        raise PolicyError(f"the chat template of {where} does not place an image given as a content part "
                          f"({{'type': 'image'}}) in a user turn, so no image could reach the model")
    two = attempt([{"role": "user", "content": [_IMAGE, _IMAGE, _text("PROBE-U")]}])
    marker = image_token if one.count(image_token) == 1 and two is not None and two.count(image_token) == 2 else None
    tool_text = attempt(opening + [{"role": "tool", "content": [_text("PROBE-T")]}])
    tool_image = attempt(opening + [{"role": "tool", "content": [_IMAGE, _text("PROBE-T")]}])
    if not tool_role:
        tool = None
    elif shown(tool_text, "PROBE-T") and shown(tool_image, "PROBE-T") and tool_image != tool_text:
        tool = "images"
    elif shown(tool_text, "PROBE-T"):
        tool = "parts"
    elif shown(attempt(opening + [{"role": "tool", "content": "PROBE-T"}]), "PROBE-T"):
        tool = "string"
    else:
        tool = None
    return TemplateTraits(marker=marker, system="PROBE-S" in one, tool=tool)


def open_image(ref: ArtifactRef, label: str) -> Any:
    """The image file as an RGB PIL image, or PolicyError naming it and why it cannot be read."""
    from PIL import Image

    try:
        with Image.open(ref.path) as im:
            im.load()
            return im.convert("RGB")
    except FileNotFoundError:
        raise PolicyError(f"image {label} cannot be read: no file {ref.path}") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise PolicyError(f"image {label} cannot be read from {ref.path}: {err}") from err


def image_label(ref: ArtifactRef, source: str) -> str:
    return f"{ref.name or ref.sha256[:12]!r} ({source})" if source else repr(ref.name or ref.sha256[:12])


def build_chat(turns: list[Turn], traits: TemplateTraits, render_observation: Callable[[str, str], str],
               load: Callable[[ArtifactRef, str], Any] = open_image) -> tuple[list[dict], list[str]]:
    """(chat of content parts, the label of each image in the order it appears). Images are read as they are
    met, so an unreadable one fails with its label before anything runs."""
    chat: list[dict] = []
    labels: list[str] = []
    pending_system = ""

    def parts(turn: Turn, text: str) -> list[dict]:
        out = []
        for ref in turn.images:
            label = image_label(ref, turn.source)
            out.append({"type": "image", "image": load(ref, label)})
            labels.append(label)
        return out + [_text(text)]

    def images_after(turn: Turn, intro: str) -> None:
        if turn.images:
            chat.append({"role": "user", "content": parts(turn, intro)})

    for t in turns:
        if t.role == "system":
            if traits.system:
                chat.append({"role": "system", "content": [_text(t.text)]})
            else:
                pending_system += t.text + "\n\n"
            images_after(t, "Image given with the instructions.")
        elif t.role == "assistant":
            chat.append({"role": "assistant", "content": [_text(t.text)]})
            images_after(t, "Image from the previous turn" + (f" ({t.name})." if t.name else "."))
        elif t.role == "tool" and traits.tool == "images":
            chat.append({"role": "tool", "content": parts(t, t.text)})
        elif t.role == "tool" and traits.tool is not None:
            chat.append({"role": "tool", "content": t.text if traits.tool == "string" else [_text(t.text)]})
            images_after(t, f"Images from {t.name}:" if t.name else "Images from the tool:")
        elif t.role == "tool":
            chat.append({"role": "user", "content": parts(t, render_observation(t.name, t.text))})
        else:
            chat.append({"role": "user", "content": parts(t, pending_system + t.text)})
            pending_system = ""
    return chat, labels


def control_tokens(processor: Any) -> list[str]:
    """The strings the tokenizer turns into special tokens (turn markers, image placeholders), longest first."""
    tok = processor.tokenizer
    found = {t.content for t in getattr(tok, "added_tokens_decoder", {}).values() if getattr(t, "special", False)}
    found |= {str(t) for t in getattr(tok, "all_special_tokens", [])}
    found |= {v for k in ("image_token", "boi_token", "eoi_token", "video_token")
              if isinstance(v := getattr(processor, k, None), str)}
    return sorted((t for t in found if t and not t.isspace()), key=len, reverse=True)


def escape_control_tokens(chat: list[dict], tokens: list[str]) -> list[dict]:
    """The chat with every special-token string inside its texts broken by a zero-width space: text a tool or a
    web page returned that contains `<image>` or `<|im_end|>` is read as text, never as an image slot (which
    would leave the processor one image short) or a turn boundary. (transformers' own sanitize_control_tokens
    does this inside the tokenizer, but refuses tokenizers that add a BOS and loses the character offsets some
    processors, Idefics3's, need.)"""
    if not tokens:
        return chat

    def clean(text: str) -> str:
        for t in tokens:
            if t in text:
                text = text.replace(t, t[0] + "\u200b" + t[1:])
        return text

    def content(c):
        if isinstance(c, str):
            return clean(c)
        return [{**p, "text": clean(p["text"])} if p.get("type") == "text" else p for p in c]

    return [{**m, "content": content(m["content"])} for m in chat]


def without_text(chat: list[dict]) -> list[dict]:
    """The chat with every text emptied: what a template writes for the images alone (text a tool returned may
    itself contain a placeholder string, which must not count as an image)."""
    def blank(content):
        if isinstance(content, str):
            return ""
        return [p if p.get("type") == "image" else _text("") for p in content]

    return [{**m, "content": blank(m["content"])} for m in chat]


def check_placeholders(rendered_without_text: str, traits: TemplateTraits, labels: list[str], where: str) -> None:
    """PolicyError when the template wrote fewer or more placeholders than there are images."""
    if traits.marker is None:
        return  # the processor counts them itself and its error is reported
    n = rendered_without_text.count(traits.marker)
    if n != len(labels):
        raise PolicyError(f"the chat template of {where} placed {n} image placeholders for {len(labels)} images "
                          f"({', '.join(labels)}): some turn does not show its images")


def as_plain_text(chat: list[dict], marker: str) -> list[dict]:
    """The chat with string contents, each image written as `marker` on its own line: for a model without a
    chat template, prompted as a plain transcript."""
    out = []
    for m in chat:
        content = m["content"]
        if not isinstance(content, str):
            content = "".join(marker + "\n" if p.get("type") == "image" else p.get("text", "") for p in content)
        out.append({"role": m["role"], "content": content})
    return out
