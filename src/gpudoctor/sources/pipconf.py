"""pip.conf reading and comment-preserving editing (pure functions on text).

Reading follows pip exactly: pip loads each file with
``configparser.RawConfigParser`` (pip ``_internal/configuration.py``): keys
are lower-cased, ``=`` or ``:`` separate key and value, whole-line comments
start with ``#`` or ``;`` (no inline comments), an indented line continues
the previous value, duplicate sections/options in one file are errors, and a
key before any ``[section]`` header makes the whole file unreadable (pip then
aborts every command). pip then normalises names (``index_url`` ->
``index-url``, leading ``--`` dropped). :func:`parse` runs that very parser
and turns its exception into a :class:`ParseProblem` with the line number.

Editing never goes through configparser (it drops comments and reorders).
:func:`set_option` is a small line editor of our own, built on
:func:`scan`, a re-implementation of configparser's line rules that records
where each option starts and ends. We chose our own ~150 lines over
``configupdater`` (MIT) because (a) pip's name normalisation (``index_url``
is the same key as ``index-url``) and the repair of a file that has *no*
section header are outside what configupdater parses, (b) configupdater 4.x
needs Python >= 3.11 while gpudoctor supports 3.10, and (c) the editor's
guarantee — only the lines of the edited key change, every other byte is
kept — is checked by property-based tests against configparser itself.

Line endings: like pip (``open()`` in text mode), ``\\n``, ``\\r\\n`` and a
lone ``\\r`` all end a line; edits reuse the file's own line ending.
"""

from __future__ import annotations

import configparser
import re

from gpudoctor.records import frozen_dataclass

__all__ = [
    "Entry",
    "ParseProblem",
    "Scan",
    "Unrepairable",
    "normalize_name",
    "parse",
    "remove_option",
    "repair_header",
    "scan",
    "set_option",
    "split_lines",
]

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_OPT_RE = re.compile(r"(?P<option>.*?)\s*(?P<vi>[=:])\s*(?P<value>.*)$")
_SECT_RE = re.compile(r"\[(?P<header>.+)\]")
_COMMENT_PREFIXES = ("#", ";")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, splitting on ``\\n``, ``\\r\\n`` and ``\\r`` only (as ``open()`` does)."""
    return _LINE_RE.findall(text)


def normalize_name(name: str) -> str:
    """pip's option-name normalisation: lower case, ``_`` -> ``-``, leading ``--`` dropped."""
    name = name.lower().replace("_", "-")
    return name.removeprefix("--")


@frozen_dataclass
class ParseProblem:
    """Why pip cannot read a configuration file.

    Attributes:
        line: 1-based line number (0 when the whole file is affected, e.g. encoding).
        kind: ``no-section-header``, ``syntax``, ``duplicate-section``,
            ``duplicate-option`` or ``encoding``.
        message: one line in operator terms.
        text: the offending line as written (without its line ending).
    """

    line: int
    kind: str
    message: str
    text: str = ""


def _universal(text: str) -> str:
    return "".join(ln.rstrip("\r\n") + "\n" for ln in split_lines(text))


def parse(text: str) -> tuple[dict[str, str], ParseProblem | None]:
    """Read ``text`` as pip does. Returns ``({"section.key": value}, problem)``.

    Keys are normalised (``global.index-url``); values empty in the file are
    kept (pip ignores them when merging). On a problem the mapping is empty,
    as pip loads nothing from a file it cannot parse.
    """
    parser = configparser.RawConfigParser()
    lines = split_lines(text)
    try:
        parser.read_string(_universal(text))
    except configparser.MissingSectionHeaderError as exc:
        line = lines[exc.lineno - 1].rstrip("\r\n") if exc.lineno <= len(lines) else ""
        return {}, ParseProblem(
            exc.lineno,
            "no-section-header",
            "no section header: the first setting is not under a [section] such as [global]",
            line,
        )
    except configparser.DuplicateSectionError as exc:
        line = lines[exc.lineno - 1].rstrip("\r\n") if exc.lineno and exc.lineno <= len(lines) else ""
        return {}, ParseProblem(
            exc.lineno or 0, "duplicate-section", f"section [{exc.section}] appears twice in one file", line
        )
    except configparser.DuplicateOptionError as exc:
        line = lines[exc.lineno - 1].rstrip("\r\n") if exc.lineno and exc.lineno <= len(lines) else ""
        return {}, ParseProblem(
            exc.lineno or 0, "duplicate-option", f"option {exc.option!r} is set twice in [{exc.section}]", line
        )
    except configparser.ParsingError as exc:
        lineno = exc.errors[0][0] if exc.errors else 0
        line = lines[lineno - 1].rstrip("\r\n") if 0 < lineno <= len(lines) else ""
        return {}, ParseProblem(
            lineno, "syntax", "line is neither a [section] header nor a `key = value` setting", line
        )
    except configparser.Error as exc:  # pragma: no cover - other configparser errors
        return {}, ParseProblem(0, "syntax", str(exc).splitlines()[0])
    values: dict[str, str] = {}
    for section in parser.sections():
        for key, value in parser.items(section):
            values[f"{section}.{normalize_name(key)}"] = value
    return values, None


@frozen_dataclass
class Entry:
    """One option as written in the file.

    Attributes:
        section: its section name (as written between the brackets).
        name: the key as written (before the delimiter, stripped).
        key: pip's normalised name (``index-url``).
        start: index (0-based) of the key line in :attr:`Scan.lines`.
        end: index after the last line of its value (continuation lines
            included; trailing blank and comment lines excluded).
        value: the value with configparser semantics (continuations joined by
            newlines, trailing blank lines dropped).
    """

    section: str
    name: str
    key: str
    start: int
    end: int
    value: str


@frozen_dataclass
class Scan:
    """The structure of a pip.conf text.

    Attributes:
        lines: the text split by :func:`split_lines` (``"".join(lines) == text``).
        sections: ``(name, header line index)`` in file order.
        entries: every option in file order.
        preamble_entries: True when an option appears before any section
            (the file has no section header; pip cannot read it).
    """

    lines: tuple[str, ...]
    sections: tuple[tuple[str, int], ...]
    entries: tuple[Entry, ...]
    preamble_entries: bool = False

    def section_end(self, name: str) -> int | None:
        """Index after the last option line of the first section ``name`` (its header line + 1
        when it has no options); None when there is no such section."""
        for i, (sect, header) in enumerate(self.sections):
            if sect == name:
                mine = [
                    e.end
                    for e in self.entries
                    if e.section == name
                    and e.start > header
                    and (i + 1 >= len(self.sections) or e.start < self.sections[i + 1][1])
                ]
                return max(mine) if mine else header + 1
        return None


def scan(text: str) -> Scan:
    """Split ``text`` into sections and options using configparser's line rules (never raises)."""
    lines = split_lines(text)
    sections: list[tuple[str, int]] = []
    entries: list[dict] = []
    current: str | None = None
    open_entry: dict | None = None
    indent_level = 0
    preamble = False
    for idx, line in enumerate(lines):
        stripped = line.strip()
        is_comment = any(stripped.startswith(p) for p in _COMMENT_PREFIXES)
        value = "" if is_comment else stripped
        if not value:
            if not is_comment and open_entry is not None:
                open_entry["parts"].append("")
            continue
        first = re.search(r"\S", line)
        cur_indent = first.start() if first else 0
        if open_entry is not None and cur_indent > indent_level:
            open_entry["parts"].append(value)
            open_entry["end"] = idx + 1
            continue
        indent_level = cur_indent
        mo = _SECT_RE.match(value)
        if mo:
            current = mo.group("header")
            sections.append((current, idx))
            open_entry = None
            continue
        mo = _OPT_RE.match(value)
        if mo and mo.group("option").rstrip():
            name = mo.group("option").rstrip()
            if current is None:
                preamble = True
            open_entry = {
                "section": current if current is not None else "",
                "name": name,
                "key": normalize_name(name),
                "start": idx,
                "end": idx + 1,
                "parts": [mo.group("value").strip()],
            }
            entries.append(open_entry)
        else:
            open_entry = None
    out = tuple(
        Entry(e["section"], e["name"], e["key"], e["start"], e["end"], "\n".join(e["parts"]).rstrip()) for e in entries
    )
    return Scan(tuple(lines), tuple(sections), out, preamble)


def _eol(lines: tuple[str, ...]) -> str:
    for line in lines:
        for ending in ("\r\n", "\n", "\r"):
            if line.endswith(ending):
                return ending
    return "\n"


def set_option(text: str | None, key: str, value: str, section: str = "global") -> str:
    """Return ``text`` with option ``key`` set to ``value``, everything else kept byte for byte.

    - Every existing occurrence of ``key`` (by pip's normalised name, in any
      section) gets the new value on its key line, keeping the key's spelling,
      indentation and delimiter; its continuation lines are removed (comment
      and blank lines among them are kept).
    - Otherwise ``key = value`` is added after the last option of the first
      ``[section]``, or a new ``[section]`` is appended at the end.
    - An occurrence that already has exactly ``value`` is left as it is, so
      setting the current value returns ``text`` unchanged.

    ``text`` None (or empty) creates the file. Raises ``ValueError`` when
    ``value`` spans lines, or when ``text`` has options before any section
    (repair it with :func:`repair_header` first).
    """
    if "\n" in value or "\r" in value:
        raise ValueError("a pip option value must be one line")
    if not text:
        return f"[{section}]\n{key} = {value}\n"
    doc = scan(text)
    if doc.preamble_entries:
        raise ValueError("the file has settings before any [section] header; repair it first")
    eol = _eol(doc.lines)
    lines = list(doc.lines)
    target = normalize_name(key)
    hits = [e for e in doc.entries if e.key == target]
    if hits:
        for e in sorted(hits, key=lambda e: -e.start):
            if e.value == value and e.end == e.start + 1:
                continue
            line = lines[e.start]
            body = line.rstrip("\r\n")
            ending = line[len(body) :] or ""
            mo = re.match(r"(?P<prefix>\s*" + re.escape(e.name) + r"\s*[=:]\s*)", body)
            prefix = mo.group("prefix") if mo else f"{e.name} = "
            kept = [
                ln
                for ln in lines[e.start + 1 : e.end]
                if not ln.strip() or any(ln.strip().startswith(p) for p in _COMMENT_PREFIXES)
            ]
            lines[e.start : e.end] = [prefix + value + (ending or (eol if e.end < len(lines) else ""))] + kept
        return "".join(lines)
    end = doc.section_end(section)
    new_line = f"{key} = {value}{eol}"
    if end is not None:
        if end > 0 and not lines[end - 1].endswith(("\n", "\r")):
            lines[end - 1] += eol
        lines.insert(end, new_line)
        return "".join(lines)
    if not lines[-1].endswith(("\n", "\r")):
        lines[-1] += eol
    sep = eol if lines[-1].strip() else ""
    return "".join(lines) + f"{sep}[{section}]{eol}{new_line}"


def remove_option(text: str, section: str, key: str) -> str:
    """``text`` without option ``key`` (pip's normalised name) of ``section``: its key line and
    continuation lines go, every other byte (comments, the section header) stays."""
    doc = scan(text)
    lines = list(doc.lines)
    target = normalize_name(key)
    hits = sorted((e for e in doc.entries if e.section == section and e.key == target), key=lambda e: -e.start)
    if not hits:
        return text
    for e in hits:
        del lines[e.start : e.end]
    # a section header left with nothing under it (no option, no comment) goes too, with its blank lines
    after = scan("".join(lines))
    for i, (name, header) in enumerate(after.sections):
        if name != section:
            continue
        end = after.sections[i + 1][1] if i + 1 < len(after.sections) else len(after.lines)
        if all(not ln.strip() for ln in after.lines[header + 1 : end]):
            rest = list(after.lines)
            del rest[header:end]
            return "".join(rest)
    return "".join(lines)


class Unrepairable(ValueError):
    """The parse problem has more than one plausible repair; the message says what to edit by hand."""


def repair_header(text: str, path: str = "pip.conf", section: str = "global") -> tuple[str, str]:
    """Repair a file whose settings start before any section header.

    Two unambiguous cases, decided on the first line pip rejected:

    - a damaged header (a line with no ``=``/``:`` that ends with ``]`` or
      starts with ``[``, e.g. ``tall]`` left of ``[install]``) is replaced
      by ``[global]``;
    - a ``key = value`` line (the header is missing) gets ``[global]``
      inserted above it.

    Returns ``(new_text, one-line description)``. Raises :class:`Unrepairable`
    for any other problem, or when the result still would not parse, with
    what to edit by hand. ``[global]`` applies to every pip command.
    """
    _, problem = parse(text)
    if problem is None:
        return text, "nothing to repair"
    where = f"{path} line {problem.line}"
    if problem.kind != "no-section-header":
        raise Unrepairable(manual_instructions(problem, path))
    lines = split_lines(text)
    idx = problem.line - 1
    line = lines[idx]
    body = line.rstrip("\r\n")
    ending = line[len(body) :] or _eol(tuple(lines))
    stripped = body.strip()
    if "=" not in stripped and ":" not in stripped and (stripped.endswith("]") or stripped.startswith("[")):
        lines[idx] = f"[{section}]{ending}"
        description = f"replace the damaged section header {stripped!r} on {where} by [{section}]"
        shift = 0
    elif (m := _OPT_RE.match(stripped)) and m.group("option").strip():
        lines.insert(idx, f"[{section}]{ending}")
        description = f"add the missing [{section}] header above {where}"
        shift = 1
    else:
        raise Unrepairable(manual_instructions(problem, path))
    new = "".join(lines)
    _, still = parse(new)
    if still is not None:
        still = ParseProblem(max(still.line - shift, 0), still.kind, still.message, still.text)
        raise Unrepairable(f"after restoring the header, {manual_instructions(still, path)}")
    return new, description


def manual_instructions(problem: ParseProblem, path: str) -> str:
    """One line telling the user exactly what to edit by hand for ``problem`` in ``path``."""
    where = f"{path} line {problem.line}"
    text = f" ({problem.text.strip()!r})" if problem.text.strip() else ""
    if problem.kind == "no-section-header":
        return (
            f"{where}{text} comes before any section header: put a [global] line above the first "
            f"setting (or move the file aside), then check with `pip config list`"
        )
    if problem.kind == "duplicate-section":
        return f"{where}{text}: {problem.message}; merge the two sections into one, then run `pip config list`"
    if problem.kind == "duplicate-option":
        return f"{where}{text}: {problem.message}; delete one of the two lines, then run `pip config list`"
    if problem.kind == "encoding":
        return f"{path}: {problem.message}; save it as UTF-8, then run `pip config list`"
    return (
        f"{where}{text} is neither a [section] header nor `key = value`: fix or delete that line, "
        f"then run `pip config list`"
    )
