"""Every editor re-parses what it is about to write (DESIGN.md: editors never corrupt).

:func:`verified_edit` takes the old and new text of one file, keeps the old
file's line endings and byte-order mark, refuses binary or non-UTF-8 text,
re-parses the new text with the SAME parser the tool reads that kind of file
with (pip INI: :func:`gpudoctor.sources.pipconf.parse`; apt one-line and deb822:
:mod:`gpudoctor.sources.aptsources`; uv TOML: :mod:`tomllib`; ``.condarc``:
PyYAML's ``safe_load``; ``kernel.json``: :mod:`json`) and, when the planner
says what it meant (``meaning``: parsed old, parsed new -> problem or None),
checks that the new file means exactly that. Any failure raises
:class:`~gpudoctor.model.FixRefused` with the manual edit to make instead.
"""

from __future__ import annotations

import json
import posixpath
import sys
from collections.abc import Callable
from typing import Any

from gpudoctor.model import FileEdit, FixRefused

__all__ = ["file_kind", "parse_as", "verified_edit", "keep_style", "duplicate_keys", "NotParsable"]


class NotParsable(ValueError):
    """The text does not parse as its kind of file; the message says where."""


def file_kind(path: str) -> str | None:
    """``pip``, ``apt-list``, ``apt-deb822``, ``toml``, ``condarc``, ``json`` or None (unknown)."""
    name = posixpath.basename(path)
    if name in ("pip.conf", "pip.ini"):
        return "pip"
    if name.endswith(".sources"):
        return "apt-deb822"
    if name == "sources.list" or (name.endswith(".list") and "/apt/" in path):
        return "apt-list"
    if name.endswith(".toml"):
        return "toml"
    if name in (".condarc", "condarc") or name.endswith((".condarc", "condarc.yml", "condarc.yaml")):
        return "condarc"
    if name.endswith(".json"):
        return "json"
    return None


def parse_as(kind: str, text: str, path: str = "") -> Any:
    """Parse ``text`` as the tool reads a ``kind`` file; raises :class:`NotParsable`."""
    if kind == "pip":
        from gpudoctor.sources.pipconf import parse

        values, problem = parse(text)
        if problem is not None:
            where = f" (line {problem.line})" if problem.line else ""
            raise NotParsable(f"{problem.message}{where}")
        return values
    if kind in ("apt-list", "apt-deb822"):
        from gpudoctor.sources.aptsources import SourcesError, parse_deb822, parse_one_line

        try:
            sources, errors = (parse_deb822 if kind == "apt-deb822" else parse_one_line)(path or "sources", text)
        except SourcesError as exc:
            raise NotParsable(str(exc)) from None
        return {
            "sources": [(s.types, s.uris, s.suites, s.components, s.enabled) for s in sources],
            "errors": list(errors),
        }
    if kind == "toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # 3.10: the tomli backport (a dependency there)
            import tomli as tomllib
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise NotParsable(f"not valid TOML: {exc}") from None
    if kind == "condarc":
        import yaml

        try:
            data = yaml.safe_load(text) if text.strip() else {}
            twice = duplicate_keys(text)
        except yaml.YAMLError as exc:
            raise NotParsable(f"not valid YAML: {str(exc).splitlines()[0]}") from None
        if twice:
            key, lines = twice[0]
            raise NotParsable(
                f"the key `{key}` appears {len(lines)} times (lines {', '.join(map(str, lines))}); YAML readers "
                f"disagree on which one counts (PyYAML keeps the last, ruamel.yaml refuses the file), so "
                f"gpudoctor does not choose: merge them into one"
            )
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise NotParsable(f"its top level is a {type(data).__name__}, not a mapping of settings")
        return data
    if kind == "json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise NotParsable(f"not valid JSON: {exc}") from None
    return text


def duplicate_keys(text: str) -> list[tuple[str, list[int]]]:
    """``(key, 1-based lines)`` for every key that appears more than once in one YAML mapping
    (at any depth), in file order; raises ``yaml.YAMLError`` for text that is not YAML."""
    import yaml

    out: list[tuple[str, list[int]]] = []
    stack = [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    seen: set[int] = set()  # an alias repeats a node (and may point back at its own anchor)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            lines: dict[str, list[int]] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    lines.setdefault(str(k.value), []).append(k.start_mark.line + 1)
                stack.append(v)
            out += [(k, ls) for k, ls in lines.items() if len(ls) > 1]
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return sorted(out, key=lambda kv: kv[1][0])


def _is_binary(text: str) -> str | None:
    """Why ``text`` (decoded with ``surrogateescape``) is not UTF-8 text, naming where; None when it is."""
    if text.startswith(("\udcff\udcfe", "\udcfe\udcff")):
        return "it is UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8"
    bad = next((i for i, c in enumerate(text) if "\udc80" <= c <= "\udcff" or c == "\ufffd"), None)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        col = bad - (text.rfind("\n", 0, bad) + 1) + 1
        byte = f" (0x{ord(text[bad]) - 0xDC00:02x})" if text[bad] != "\ufffd" else ""
        return (
            f"it is not valid UTF-8 text: a byte{byte} at line {line}, column {col} is not UTF-8 (another "
            f"encoding such as Latin-1, or binary)"
        )
    if "\x00" in text:
        return "it holds NUL bytes (a binary file, or UTF-16 text)"
    return None


def keep_style(old: str | None, new: str) -> str:
    """``new`` with the line endings of ``old`` when ``old`` used CRLF throughout. (A UTF-8
    byte-order mark stays wherever the editor kept it: the readers do not skip one, so a
    repair that drops it must not get it back.)"""
    if not old:
        return new
    if "\r\n" in old and old.count("\r\n") == old.count("\n"):
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    return new


def verified_edit(
    path: str,
    old: str | None,
    new: str,
    manual: str,
    meaning: Callable[[Any, Any], str | None] | None = None,
    mode: int = 0o644,
    kind: str | None = None,
    repairs: bool = False,
) -> FileEdit:
    """A :class:`FileEdit` of ``path`` from ``old`` to ``new`` that is known to parse and to
    mean what was intended, or :class:`FixRefused`.

    ``manual`` is the exact edit to make by hand, quoted in every refusal.
    ``meaning(parsed_old, parsed_new)`` returns None when the new file means what was
    intended (and nothing else changed), else the difference in words; ``parsed_old`` is
    None for a created file (or one that did not parse, when ``repairs``: the edit is a
    repair of that file). ``kind`` overrides :func:`file_kind`.
    """
    kind = kind or file_kind(path)
    text_old = old
    if old is not None:
        why = _is_binary(old)
        if why:
            raise FixRefused(f"{path}: {why}; gpudoctor does not rewrite it. Edit it by hand: {manual}")
    new = keep_style(old, new)
    if kind is None:
        return FileEdit(path, old, new, mode)
    parsed_old = None
    if text_old is not None:
        try:
            parsed_old = parse_as(kind, text_old, path)
        except NotParsable as exc:
            if repairs:
                parsed_old = None
            else:
                raise FixRefused(
                    f"{path} does not parse ({exc}), so it cannot be edited safely. Fix it by hand: {manual}"
                ) from None
    try:
        parsed_new = parse_as(kind, new, path)
    except NotParsable as exc:
        raise FixRefused(
            f"{path}: the edited file would not parse ({exc}), so nothing was planned. Edit it by hand: {manual}"
        ) from None
    if kind.startswith("apt") and parsed_old is not None and len(parsed_new["errors"]) > len(parsed_old["errors"]):
        raise FixRefused(
            f"{path}: the edited file would have entries apt cannot read "
            f"({parsed_new['errors'][-1]}). Edit it by hand: {manual}"
        )
    if meaning is not None:
        problem = meaning(parsed_old, parsed_new)
        if problem:
            raise FixRefused(
                f"{path}: the edited file would not mean what was intended ({problem}), so nothing "
                f"was planned. Edit it by hand: {manual}"
            )
    return FileEdit(path, old, new, mode)
