"""A small SVG writer for vmrt's pictures (partition schedules, execution timelines):
groups with a tooltip, rectangles, text and lines, escaped, coordinates rounded to
0.01 px. Plain SVG 1.1 that any browser or image viewer shows; no dependency."""

from __future__ import annotations

import contextlib
import zlib


def escape(text: str) -> str:
    """Text as XML character data. (xml.sax.saxutils would do, but importing it pulls
    in urllib, which every `vmrt run` would then pay to import.)"""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoteattr(text: str) -> str:
    """Text as a double-quoted XML attribute value."""
    return '"' + escape(text).replace('"', "&quot;").replace("\n", "&#10;") \
        .replace("\r", "&#13;").replace("\t", "&#9;") + '"'

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


def number(value: float) -> str:
    """`value` rounded to 0.01, without trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def hsl_color(hue: float, saturation: float, lightness: float) -> str:
    """`#rrggbb` of a hue (degrees), saturation and lightness (percent). Written as hex
    because some SVG renderers (cairosvg among them) paint `hsl(...)` fills black."""
    import colorsys  # (vmrt.svg is imported on `vmrt run`'s start path; this is not)
    red, green, blue = colorsys.hls_to_rgb(hue % 360 / 360, lightness / 100, saturation / 100)
    return "#" + "".join(f"{round(channel * 255):02x}" for channel in (red, green, blue))


def color_for(name: str, saturation: int = 55, lightness: int = 62) -> str:
    """A stable colour per name (the same kernel has the same colour everywhere)."""
    hue = zlib.crc32(name.encode("utf-8")) % 360
    return hsl_color(hue, saturation, lightness)


def palette(names) -> dict[str, str]:
    """Distinct colours for a few names: hues a golden angle apart, in sorted order."""
    return {name: hsl_color(round(index * 137.508 % 360), 55 if index % 2 else 65,
                            60 if index % 2 else 66) for index, name in enumerate(sorted(names))}


def _attributes(attrs: dict) -> str:
    out = []
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = number(value)
        out.append(f" {key.rstrip('_').replace('_', '-')}={quoteattr(str(value))}")
    return "".join(out)


class Svg:
    """An SVG document built element by element; `str(svg)` is the file."""

    def __init__(self, width: float, height: float, title: str = ""):
        self.width = width
        self.height = height
        self.parts: list[str] = []
        if title:
            self.parts.append(f"<title>{escape(title)}</title>")

    @contextlib.contextmanager
    def group(self, class_: str, title: str | None = None, **attrs):
        """A <g class=...> (with a <title> tooltip) around what the block adds."""
        self.parts.append(f"<g{_attributes({'class': class_, **attrs})}>")
        if title:
            self.parts.append(f"<title>{escape(title)}</title>")
        try:
            yield self
        finally:
            self.parts.append("</g>")

    def rect(self, x: float, y: float, width: float, height: float, fill: str,
             **attrs) -> None:
        attrs = dict(x=x, y=y, width=width, height=height, fill=fill, **attrs)
        self.parts.append(f"<rect{_attributes(attrs)}/>")

    def text(self, x: float, y: float, content: str, size: float = 11, **attrs) -> None:
        attrs = dict(x=x, y=y, font_size=size, **attrs)
        self.parts.append(f"<text{_attributes(attrs)}>{escape(content)}</text>")

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#888",
             **attrs) -> None:
        attrs = dict(x1=x1, y1=y1, x2=x2, y2=y2, stroke=stroke, **attrs)
        self.parts.append(f"<line{_attributes(attrs)}/>")

    def __str__(self) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{number(self.width)}" '
                f'height="{number(self.height)}" viewBox="0 0 {number(self.width)} '
                f'{number(self.height)}" font-family={quoteattr(FONT)}>')
        background = '<rect width="100%" height="100%" fill="white"/>'
        return "\n".join([head, background] + self.parts + ["</svg>"]) + "\n"

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(str(self))


def fits(text: str, width: float, size: float = 11) -> bool:
    """Whether `text` at font `size` fits in `width` px (an average glyph ~0.6 em)."""
    return len(text) * size * 0.6 <= width
