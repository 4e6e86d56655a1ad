"""kernel.json editing that keeps the file's key order and indentation (shared by the Jupyter fixes).

Parsing keeps key order (``json`` keeps insertion order); writing re-uses the
file's own indentation (ipykernel writes ``indent=1``), separators,
``ensure_ascii`` and trailing-newline convention, so a diff shows only the
values that changed. Malformed input raises :class:`~gpudoctor.model.FixRefused`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpudoctor.model import FixRefused
from gpudoctor.records import frozen_dataclass

__all__ = ["JsonStyle", "dump_kernel_json", "kernel_scope", "load_kernel_json", "require_scope", "scope_kernels_dir"]

#: where Jupyter's system-wide kernelspecs live (``jupyter --paths``: ``/usr/local/share/jupyter``,
#: ``/usr/share/jupyter``); ``--scope global`` writes the first
SYSTEM_DATA_DIRS = ("/usr/local/share/jupyter", "/usr/share/jupyter")


def _under(path: str, directory: str) -> bool:
    return bool(directory) and path.startswith(directory.rstrip("/") + "/")


def kernel_scope(path: str, user_data_dir: str) -> str:
    """The ``--scope`` a kernelspec file belongs to: ``user`` (the user data directory, where
    ``ipykernel install --user`` writes), ``global`` (the system data directories) or ``site``
    (an environment's ``<prefix>/share/jupyter``, a ``JUPYTER_PATH`` entry)."""
    if _under(path, user_data_dir):
        return "user"
    if any(_under(path, d) for d in SYSTEM_DATA_DIRS):
        return "global"
    return "site"


def require_scope(path: str, user_data_dir: str, scope: str | None) -> None:
    """Refuse to edit the kernelspec ``path`` when ``--scope`` names another scope than its own."""
    if scope and kernel_scope(path, user_data_dir) != scope:
        raise FixRefused(
            f"{path} is a {kernel_scope(path, user_data_dir)}-scope kernelspec; --scope {scope} leaves it "
            f"alone, so nothing was written. Rerun without --scope (or with --scope "
            f"{kernel_scope(path, user_data_dir)}) to edit it"
        )


def scope_kernels_dir(scope: str, user_data_dir: str, prefix: str) -> str:
    """The ``kernels`` directory a new kernelspec goes to for ``--scope`` (as ``ipykernel install``:
    ``--user``, ``--sys-prefix`` for ``site``, the default system prefix for ``global``)."""
    if scope == "site":
        if not prefix:
            raise FixRefused("--scope site writes into the environment's share/jupyter, but its prefix is unknown")
        return f"{prefix.rstrip('/')}/share/jupyter/kernels"
    if scope == "global":
        return f"{SYSTEM_DATA_DIRS[0]}/kernels"
    return f"{user_data_dir.rstrip('/')}/kernels"


_FIRST_INDENT = re.compile(r"[\[{][ \t]*\r?\n([ \t]+)\S")


@frozen_dataclass
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
