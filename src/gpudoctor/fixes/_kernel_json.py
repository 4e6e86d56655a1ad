"""kernel.json editing that keeps the file's key order and indentation (shared by the Jupyter fixes).

Parsing keeps key order (``json`` keeps insertion order); writing re-uses the
file's own indentation (ipykernel writes ``indent=1``), separators,
``ensure_ascii`` and trailing-newline convention, so a diff shows only the
values that changed. Malformed input raises :class:`~gpudoctor.model.FixRefused`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gpudoctor.model import FixRefused

__all__ = ["JsonStyle", "dump_kernel_json", "load_kernel_json"]

_FIRST_INDENT = re.compile(r"[\[{][ \t]*\r?\n([ \t]+)\S")


@dataclass(frozen=True)
class JsonStyle:
    """How a JSON file is laid out: ``indent`` (spaces count, a tab string, or None for one line),
    item/key separators, whether non-ASCII is escaped, and whether it ends with a newline."""

    indent: int | str | None = 1
    item_sep: str = ","
    key_sep: str = ": "
    ensure_ascii: bool = True
    trailing_newline: bool = False
    inline_arrays: tuple[str, ...] = ()

    @classmethod
    def detect(cls, text: str) -> JsonStyle:
        m = _FIRST_INDENT.search(text)
        indent: int | str | None
        if m:
            ws = m.group(1)
            indent = len(ws) if set(ws) == {" "} else ws
            item_sep = ","
        else:
            indent = None
            item_sep = ", " if re.search(r",\s", text) or "," not in text else ","
        key_sep = ": " if re.search(r'":\s', text) or '":' not in text else ":"
        # arrays/objects written on one line in an indented file (`"argv": ["python", "-m", ...]`) stay on one line
        inline = (
            tuple(m.group(1) for m in re.finditer(r'"((?:[^"\\]|\\.)*)"\s*:\s*(?:\[[^\]\n]*\]|\{[^}\n]*\})', text))
            if m
            else ()
        )
        return cls(
            indent,
            item_sep,
            key_sep,
            ensure_ascii=text.isascii(),
            trailing_newline=text.endswith("\n"),
            inline_arrays=inline,
        )


def load_kernel_json(text: str | None, path: str) -> dict[str, Any]:
    """Parse kernel.json text (order kept). Raises FixRefused when it is missing or not a JSON object."""
    if text is None:
        raise FixRefused(f"{path} could not be read; edit it by hand")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FixRefused(f"{path} is not valid JSON ({exc}); fix it by hand or re-register the kernel") from None
    if not isinstance(data, dict):
        raise FixRefused(f"{path} is not a JSON object; fix it by hand or re-register the kernel")
    return data


def dump_kernel_json(data: dict[str, Any], style: JsonStyle) -> str:
    """Serialise ``data`` in ``style``."""
    text = json.dumps(
        data, indent=style.indent, separators=(style.item_sep, style.key_sep), ensure_ascii=style.ensure_ascii
    )
    for key in style.inline_arrays:
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, (list, dict)):
            continue
        one_line = json.dumps(value, separators=(", ", ": "), ensure_ascii=style.ensure_ascii)
        head = json.dumps(key, ensure_ascii=style.ensure_ascii) + style.key_sep
        pretty = json.dumps(
            value, indent=style.indent, separators=(style.item_sep, style.key_sep), ensure_ascii=style.ensure_ascii
        )
        # the top-level key's array, re-indented by one level in the pretty text
        pad = style.indent if isinstance(style.indent, str) else " " * (style.indent or 0)
        nested = pretty.replace("\n", "\n" + pad)
        text = text.replace(head + nested, head + one_line, 1)
    return text + "\n" if style.trailing_newline else text
