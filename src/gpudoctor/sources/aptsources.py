"""Parse and edit apt source files, one-line and deb822, keeping everything else as it is.

Formats (sources.list(5), apt 2.4-2.9):

- one-line (``/etc/apt/sources.list``, ``sources.list.d/*.list``):
  ``deb [opt=value ...] URI SUITE [COMPONENT ...]``, ``#`` starts a comment.
- deb822 (``sources.list.d/*.sources``): stanzas of ``Field: value`` lines
  separated by blank lines; continuation lines start with a space or tab;
  ``#`` lines are comments; ``Enabled: no`` disables a stanza.

The editors change only URI tokens, in place, so comments, field order,
options, ``Signed-By``, spacing and line endings stay byte-for-byte the
same. Written for gpudoctor (Apache-2.0); python-debian (GPL-2.0+) is not
used, and its comment-preserving parser is a private module anyway.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpudoctor import urls
from gpudoctor.facts.mirrors import AptRewrite, AptSource, SourceEdit

__all__ = [
    "DISTRO_COMPONENTS",
    "VALID_PART_NAME",
    "SourcesError",
    "classify_uri",
    "distro_archive",
    "find_rewrites",
    "is_distro_source",
    "parse_deb822",
    "parse_one_line",
    "replace_base",
    "rewrite_deb822",
    "rewrite_one_line",
]

#: sources.list.d names apt reads (sources.list(5)): letters, digits, ``_ - .``, ending .list or .sources.
VALID_PART_NAME = re.compile(r"^[A-Za-z0-9_.\-]+\.(list|sources)$")

_ONE_LINE = re.compile(
    r"^(?P<lead>\s*)(?P<type>deb|deb-src)(?P<sp1>\s+)(?:(?P<opts>\[[^\]]*\])(?P<sp2>\s+))?"
    r"(?P<uri>\S+)(?P<rest>.*)$"
)
_FIELD = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_-]*):(?P<value>.*)$")

#: uri -> new uri or None (keep); gets (uri, suites, components, enabled).
UriMapper = Callable[[str, tuple[str, ...], tuple[str, ...], bool], str | None]

#: Components of the Debian and Ubuntu archives; a repo with others (``stable``, ``main/debug``...) is third-party.
DISTRO_COMPONENTS = frozenset(
    {"main", "contrib", "non-free", "non-free-firmware", "restricted", "universe", "multiverse"}
)


class SourcesError(ValueError):
    """An apt source file is malformed in a way an editor must not guess about."""


# --------------------------------------------------------------------------- one-line


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0]


def _parse_opts(opts: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in opts.strip("[] \t").split():
        key, _, value = token.partition("=")
        out[key.lower().rstrip("+-")] = value
    return out


def parse_one_line(path: str, text: str) -> tuple[list[AptSource], list[str]]:
    """Entries of a one-line sources file and problems (``path:line: ...``)."""
    entries: list[AptSource] = []
    problems: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        m = _ONE_LINE.match(line)
        if not m:
            problems.append(f"{path}:{n}: not a 'deb'/'deb-src' line: {line!r}")
            continue
        words = m.group("rest").split()
        if not words:
            problems.append(f"{path}:{n}: no suite after the URI")
            continue
        suite, comps = words[0], tuple(words[1:])
        entries.append(
            AptSource(
                file=path,
                format="one-line",
                line=n,
                stanza=-1,
                types=(m.group("type"),),
                uris=(m.group("uri"),),
                suites=(suite,),
                components=comps,
                options=_parse_opts(m.group("opts") or ""),
                enabled=True,
            )
        )
    return entries, problems


def rewrite_one_line(text: str, mapper: UriMapper) -> str:
    """``text`` with the URI of every active ``deb``/``deb-src`` line passed through ``mapper``."""
    out = []
    for raw in text.splitlines(keepends=True):
        body = raw.rstrip("\r\n")
        ending = raw[len(body) :]
        code, hash_, comment = body.partition("#")
        m = _ONE_LINE.match(code)
        if m:
            words = m.group("rest").split()
            new = mapper(m.group("uri"), tuple(words[:1]), tuple(words[1:]), True)
            if new is not None and new != m.group("uri"):
                code = code[: m.start("uri")] + new + code[m.end("uri") :]
        out.append(code + hash_ + comment + ending)
    return "".join(out)


# --------------------------------------------------------------------------- deb822


@dataclass
class _Field:
    name: str
    first: int  # index into lines
    last: int
    value: str


@dataclass
class _Stanza:
    start: int
    fields: list[_Field] = field(default_factory=list)

    def get(self, name: str) -> _Field | None:
        for f in self.fields:
            if f.name.lower() == name.lower():
                return f
        return None


def _stanzas(lines: Sequence[str], path: str) -> tuple[list[_Stanza], list[str]]:
    stanzas: list[_Stanza] = []
    problems: list[str] = []
    cur: _Stanza | None = None
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if not line.strip():
            cur = None
            continue
        if line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            if cur is None or not cur.fields:
                problems.append(f"{path}:{i + 1}: continuation line outside a field")
                continue
            f = cur.fields[-1]
            f.last = i
            part = line.strip()
            f.value += "\n" + ("" if part == "." else part)
            continue
        m = _FIELD.match(line)
        if not m:
            problems.append(f"{path}:{i + 1}: not a 'Field: value' line: {line.strip()!r}")
            continue
        if cur is None:
            cur = _Stanza(start=i)
            stanzas.append(cur)
        cur.fields.append(_Field(m.group("name"), i, i, m.group("value").strip()))
    return stanzas, problems


def _words(f: _Field | None) -> tuple[str, ...]:
    return tuple(f.value.split()) if f else ()


def _enabled(stanza: _Stanza) -> bool:
    f = stanza.get("Enabled")
    return not (f and f.value.strip().lower() in ("no", "false", "0"))


_CORE = {"types", "uris", "suites", "components", "enabled"}


def parse_deb822(path: str, text: str) -> tuple[list[AptSource], list[str]]:
    """Stanzas of a deb822 ``.sources`` file and problems (``path:line: ...``)."""
    lines = text.splitlines(keepends=True)
    stanzas, problems = _stanzas(lines, path)
    entries: list[AptSource] = []
    for idx, st in enumerate(stanzas):
        types, uris, suites = _words(st.get("Types")), _words(st.get("URIs")), _words(st.get("Suites"))
        missing = [n for n, v in (("Types", types), ("URIs", uris), ("Suites", suites)) if not v]
        if missing:
            problems.append(f"{path}:{st.start + 1}: stanza {idx + 1} has no {', '.join(missing)}")
            continue
        opts: dict[str, str] = {}
        for f in st.fields:
            if f.name.lower() in _CORE:
                continue
            value = f.value
            if "BEGIN PGP PUBLIC KEY BLOCK" in value:
                value = "(inline key block)"
            opts[f.name.lower()] = value.strip()
        entries.append(
            AptSource(
                file=path,
                format="deb822",
                line=st.start + 1,
                stanza=idx,
                types=types,
                uris=uris,
                suites=suites,
                components=_words(st.get("Components")),
                options=opts,
                enabled=_enabled(st),
            )
        )
    return entries, problems


def rewrite_deb822(text: str, mapper: UriMapper) -> str:
    """``text`` with every URI token of every stanza passed through ``mapper``.

    Only the URI tokens change; spacing, comments, field order, other fields
    and line endings are kept. Raises :class:`SourcesError` for a file whose
    stanzas cannot be read (the editor never guesses).
    """
    lines = text.splitlines(keepends=True)
    stanzas, problems = _stanzas(lines, "<file>")
    if problems:
        raise SourcesError(problems[0])
    for st in stanzas:
        f = st.get("URIs")
        if f is None:
            continue
        suites = _words(st.get("Suites"))
        comps = _words(st.get("Components"))
        enabled = _enabled(st)

        seen: set[str] = set()

        def sub(
            m: re.Match[str],
            suites: tuple[str, ...] = suites,
            comps: tuple[str, ...] = comps,
            enabled: bool = enabled,
            seen: set[str] = seen,
        ) -> str:  # this stanza's values, bound now (B023)
            space, token = m.group(1), m.group(2)
            new = mapper(token, suites, comps, enabled)
            if new is None:
                seen.add(urls.parse(token).base)
                return m.group(0)
            if urls.parse(new).base in seen:
                return ""  # the same URI twice in one stanza: written once
            seen.add(urls.parse(new).base)
            return space + new

        for i in range(f.first, f.last + 1):
            raw = lines[i]
            body = raw.rstrip("\r\n")
            ending = raw[len(body) :]
            if i == f.first:
                head, _, value = body.partition(":")
                lines[i] = head + ":" + re.sub(r"(\s*)(\S+)", sub, value) + ending
            elif body.startswith("#"):  # a comment inside a multi-line field: apt skips it, so do we
                continue
            elif body.strip() != ".":
                new_body = re.sub(r"(\s*)(\S+)", sub, body)
                # a continuation line whose only URI was a duplicate goes: left blank it would end the stanza
                lines[i] = "" if body.strip() and not new_body.strip() else new_body + ending
    return "".join(lines)


# --------------------------------------------------------------------------- archives


def classify_uri(uri: str) -> str | None:
    """Catalogue archive key of a distro archive URI, or None for third-party repos.

    ``.../debian-security`` and ``security.debian.org`` -> ``debian_security``;
    ``.../debian`` -> ``debian``; ``.../ubuntu-ports`` -> ``ubuntu_ports``;
    ``.../ubuntu`` -> ``ubuntu`` (the Ubuntu security pocket lives there too).
    """
    parts = urls.parse(uri)
    path = parts.path
    if path.endswith("/debian-security") or parts.host.startswith("security.debian.org"):
        return "debian_security"
    if path.endswith("/debian"):
        return "debian"
    if path.endswith("/ubuntu-ports"):
        return "ubuntu_ports"
    if path.endswith("/ubuntu"):
        return "ubuntu"
    return None


def distro_archive(uri: str, components: Sequence[str]) -> str | None:
    """Archive key of ``uri`` when the entry is a Debian/Ubuntu archive, else None.

    Path alone is not enough (Docker's repo is ``.../linux/debian`` with
    component ``stable``): every component must be a distro component.
    """
    arch = classify_uri(uri)
    if arch is None or not components or not set(components) <= DISTRO_COMPONENTS:
        return None
    return arch


def is_distro_source(src: AptSource) -> bool:
    """True when every URI of ``src`` is a Debian/Ubuntu archive (see :func:`distro_archive`)."""
    return bool(src.uris) and all(distro_archive(u, src.components) for u in src.uris)


def replace_base(old_uri: str, new_base: str) -> str:
    """``new_base`` written in the style of ``old_uri`` (its trailing slash kept or left out)."""
    new = urls.parse(new_base).base
    return new + "/" if old_uri.endswith("/") else new


# --------------------------------------------------------------------------- build files


def find_rewrites(
    name: str, text: str, read: Callable[[str], str | None], glob: Callable[[str], list[str]]
) -> list[AptRewrite]:
    """``sed -i`` edits of apt source files in a Dockerfile or shell script.

    The build is read like a shell would (:mod:`gpudoctor.sources.dockerfile`)
    and replayed on the root's files (:mod:`gpudoctor.sources.buildwrites`):
    ``read(path)`` returns a file's text inside the inspected root (None when
    absent); ``glob(pattern)`` lists matching paths inside it. Each found edit
    says whether its target existed and whether its pattern matched there.
    """
    from gpudoctor.sources.buildwrites import replay
    from gpudoctor.sources.dockerfile import commands

    def listdir(directory: str) -> list[str]:
        return [p.rsplit("/", 1)[-1] for p in glob(directory.rstrip("/") + "/*")]

    edits, _ = replay(commands(name, text), read, listdir)
    return [rewrite_of(e) for e in edits if e.tool == "apt" and e.action == "sed"]


def rewrite_of(e: SourceEdit) -> AptRewrite:
    """The apt view of one replayed ``sed`` edit of a build file."""
    return AptRewrite(
        origin=e.origin,
        command=e.command,
        target=e.path,
        pattern=e.pattern,
        replacement=e.replacement,
        target_exists=e.target_exists,
        matches=e.changed,
    )
