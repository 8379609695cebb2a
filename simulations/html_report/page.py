"""Building blocks of the self-contained HTML reports: escaped text, tables, embedded
images and a page with its own stylesheet.

Every piece of text goes through :func:`esc` (``html.escape``, quotes included) unless it
is an :class:`Html` value built by the helpers here, so nothing read from a results folder
(design names, config values, file contents) can inject markup. Images are embedded as
``data:`` URIs; the page names no external resource (no scripts, fonts, links or CDN), so
it opens from disk with no server.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Html", "count", "esc", "fmt", "image", "note", "page", "read_json", "section", "table", "tag", "tree"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Html(str):
    """Markup that is already safe (built from escaped parts); :func:`esc` leaves it as is."""

    __slots__ = ()


def esc(x: Any) -> Html:
    """``x`` as HTML text: :class:`Html` unchanged, anything else ``html.escape(str(x))``."""
    if isinstance(x, Html):
        return x
    return Html(html.escape("" if x is None else str(x), quote=True))


def tag(element: str, *children: Any, cls: str | None = None, **attrs: Any) -> Html:
    """``<element class=cls attrs>children</element>``; children and attribute values escaped
    (``id_`` for ``id``, ``http_equiv`` for ``http-equiv``)."""
    attr = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items() if v is not None)
    if cls:
        attr = f' class="{esc(cls)}"' + attr
    return Html(f"<{element}{attr}>" + "".join(esc(c) for c in children) + f"</{element}>")


def join(parts: Iterable[Any], sep: str = "") -> Html:
    return Html(esc(sep).join(esc(p) for p in parts))


def fmt(x: Any, spec: str = ".4f", signed: bool = False) -> str:
    """A number as text in ``spec`` (``-`` for missing or non-finite), as the terminal summary."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return "-"
    return format(x, ("+" if signed else "") + spec)


def count(x: Any) -> str:
    """A sample size as ``1,234``; ``not reachable`` when missing or infinite."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return "not reachable"
    return f"{x:,.0f}"


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], *, cls: str | None = None,
          row_classes: Sequence[str | None] | None = None, caption: Any = None, id_: str | None = None,
          text_columns: Iterable[int] = (0,), wrap_columns: Iterable[int] = ()) -> Html:
    """A table in a horizontally scrolling box (a wide table never widens the page); every
    cell escaped (or :class:`Html`). Columns in ``text_columns`` are left-aligned, the
    others (numbers) right-aligned; cells of ``wrap_columns`` (long text) wrap."""
    text, wrap = set(text_columns), set(wrap_columns)

    def cell_class(j: int) -> str | None:
        return " ".join(c for c, on in (("text", j in text or j in wrap), ("wrap", j in wrap)) if on) or None

    head = tag("thead", tag("tr", *(tag("th", h, cls=cell_class(j)) for j, h in enumerate(header))))
    body = []
    for k, row in enumerate(rows):
        rc = row_classes[k] if row_classes is not None and k < len(row_classes) else None
        body.append(tag("tr", *(tag("td", c, cls=cell_class(j)) for j, c in enumerate(row)), cls=rc))
    parts: list[Any] = [tag("caption", caption)] if caption is not None else []
    return tag("div", tag("table", *parts, head, tag("tbody", *body), cls=cls, id=id_), cls="scroll")


def image(path: Path, alt: str, caption: Any = None) -> Html:
    """A PNG embedded as a ``data:`` URI in a figure; a note instead when the file is missing
    or is not a PNG."""
    try:
        data = path.read_bytes()
    except OSError:
        return note(f"{path.name}: not in the results folder")
    if not data.startswith(PNG_SIGNATURE):
        return note(f"{path.name}: not a PNG file, not shown")
    src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    parts: list[Any] = [tag_void("img", src=src, alt=alt)]
    if caption is not None:
        parts.append(tag("figcaption", caption))
    return tag("figure", *parts)


def tag_void(element: str, **attrs: Any) -> Html:
    """A void element (``img``, ``meta``): attributes only, escaped."""
    attr = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items() if v is not None)
    return Html(f"<{element}{attr}>")


def breakable(name: str) -> Html:
    """A dotted key path (``users.click_model.preset``) that may wrap after its dots."""
    return Html("<wbr>".join(esc(part + ".") for part in name.split(".")[:-1]) + ("<wbr>" if "." in name else "")
                + esc(name.split(".")[-1]))


def note(*text: Any) -> Html:
    return tag("p", *text, cls="note")


def section(id_: str, title: str, *body: Any) -> Html:
    return tag("section", tag("h2", title), *body, id=id_)


def biased_mark(text: str = "biased") -> Html:
    return tag("span", text, cls="biased")


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return fmt(v, ".6g")
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return json.dumps(v)


def tree(value: Any, depth: int = 0, max_depth: int = 6) -> Html:
    """Any JSON value as nested definition lists and tables (escaped): a list of mappings
    with the same keys is a table, a list of scalars one line."""
    if isinstance(value, Mapping):
        if not value:
            return esc("(empty)")
        if depth >= max_depth:
            return tag("code", json.dumps(value, default=str)[:2000])
        items = []
        for k, v in value.items():
            items += [tag("dt", str(k)), tag("dd", tree(v, depth + 1, max_depth))]
        return tag("dl", *items)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Mapping) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            if all(not isinstance(v.get(k), (Mapping, list)) for v in value for k in keys):
                return table(keys, [[_scalar(v.get(k)) for k in keys] for v in value], cls="tree")
            return tag("ol", *(tag("li", tree(v, depth + 1, max_depth)) for v in value))
        if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            return esc("[" + ", ".join(_scalar(v) for v in value) + "]")
        return tag("ol", *(tag("li", tree(v, depth + 1, max_depth)) for v in value))
    return esc(_scalar(value))


def read_json(path: Path) -> dict[str, Any]:
    """A results folder's JSON file as a mapping.

    Raises
    ------
    InputError
        naming the file (and the line) when it is missing, unreadable, not JSON or not an object.
    """
    from onlineeval.errors import InputError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the results file: {exc.strerror or exc}", str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text; expected the summary.json a run writes", str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", str(path), exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object (the summary.json a run writes), got {type(data).__name__}",
                         str(path))
    return data


_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif; margin: 0;
       color: #1d2733; background: #ffffff; font-size: 14px; line-height: 1.4; }
main { margin: 0 auto; padding: 14px 20px 40px; }  /* no max-width: a wide table uses the window (review 12) */
header h1 { font-size: 20px; margin: 0 0 2px; }
header p { margin: 2px 0; color: #44505c; }
nav { margin: 6px 0 0; font-size: 13px; }
nav a { margin-right: 12px; color: #1f5fa8; }
h2 { font-size: 17px; margin: 22px 0 6px; padding-bottom: 3px; border-bottom: 2px solid #d5dde6; }
h3 { font-size: 15px; margin: 14px 0 4px; }
table { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
caption { text-align: left; font-weight: 600; padding: 2px 0 4px; }
th, td { border: 1px solid #c9d2dc; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #dbe8f5; font-weight: 600; white-space: normal; vertical-align: bottom; }
td.text, th.text { text-align: left; }
td.wrap { white-space: normal; min-width: 320px; }
tr.secondary td { color: #5c6670; }
tr.primary td { font-weight: 600; }
table.answer th { background: #1f5fa8; color: #ffffff; }
table.answer td { font-size: 14px; white-space: normal; }
@media (max-width: 1000px) { table.answer td { font-size: 12.5px; } th, td { padding: 2px 4px; }
                             th, table.answer td.text { overflow-wrap: anywhere; } }
ul.legend { margin: 4px 0; padding-left: 18px; color: #44505c; font-size: 12.5px; max-width: 1180px; }
table.tree td, table.tree th { font-size: 12px; }
.biased { color: #ffffff; background: #b3261e; border-radius: 3px; padding: 0 4px; font-weight: 600;
          font-size: 12px; }
.flag { color: #b3261e; font-weight: 600; }
p.note, .note { color: #44505c; font-size: 12.5px; max-width: 1180px; margin: 4px 0; }
p.lead { font-size: 15px; margin: 8px 0; max-width: 1180px; }
figure { margin: 8px 0 14px; }
figure img { max-width: 100%; height: auto; border: 1px solid #e1e6eb; }
figcaption { font-size: 12.5px; color: #44505c; }
dl { margin: 2px 0 2px 0; }
dt { font-weight: 600; font-size: 12.5px; margin-top: 4px; }
dd { margin: 0 0 0 18px; font-size: 12.5px; }
pre { background: #f4f6f8; border: 1px solid #dde3e9; padding: 8px; font-size: 12px; overflow-x: auto;
      white-space: pre-wrap; overflow-wrap: anywhere; max-width: 1400px; }
.scroll { overflow-x: auto; }
details { margin: 8px 0; }
summary { cursor: pointer; color: #1f5fa8; }
ul.sentences { margin: 4px 0 10px; padding-left: 18px; font-size: 14px; }
"""


def page(title: str, header: Any, sections: Sequence[tuple[str, str, Html]]) -> str:
    """A whole HTML document: the header, a table of contents and the sections
    ``(id, title, body)`` in order."""
    nav = tag("nav", *(tag("a", t, href=f"#{i}") for i, t, _ in sections))
    body = [section(i, t, b) for i, t, b in sections]
    return ("<!DOCTYPE html>\n" + tag(
        "html",
        tag("head", tag_void("meta", charset="utf-8"),
            tag_void("meta", name="viewport", content="width=device-width, initial-scale=1"),
            tag("title", title), Html(f"<style>{_CSS}</style>")),
        tag("body", tag("main", tag("header", header, nav), *body)),
        lang="en",
    ) + "\n")
