"""From an error message to its cause: the error-signature knowledge base and its matcher.

The knowledge base is ``data/errors.toml``: one ``[[signature]]`` table per known
error message of the GPU, PyTorch, NCCL, container, pip, uv, conda and apt worlds
(see ``docs/explain.md`` for the format). This module

- loads and validates it once per process (:func:`load_signatures`; a malformed
  table raises :class:`SignatureError` naming the signature and the key);
- matches a text stream line by line (:class:`Matcher`): single-line signatures
  see one line, multi-line ones (``lines = N``) a sliding window of the last N
  lines, so memory stays bounded however long the log is; a regex runs only on
  lines that hold the literal text it needs (its *needles*, derived from the
  pattern);
- ranks the matches by specificity (explicit ``priority``, then the length of the
  pattern's literal text, then its number of named groups), folds repeats and
  lets generic signatures step aside for specific ones (:func:`rank`);
- turns matches into :class:`~gpudoctor.model.Finding` values (cause + remedy)
  and names the checks that confirm them on this machine
  (:func:`resolve_checks`).

Nothing here touches the machine, imports a GPU library or prints: the CLI
(``gpudoctor explain``) feeds text in, runs the confirming checks through the
engine and renders the result.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from gpudoctor.model import Command, Finding, Status
from gpudoctor.records import frozen_dataclass
from gpudoctor.redact import redact_text, redact_value
from gpudoctor.versions import cuda_from_int, from_tuple_text, underscore

__all__ = [
    "MAX_LINE_CHARS",
    "Explanation",
    "Match",
    "Matcher",
    "Signature",
    "SignatureError",
    "explain_lines",
    "explain_text",
    "load_signatures",
    "match_finding",
    "merge",
    "parse_signatures",
    "rank",
    "resolve_checks",
]

#: Lines longer than this (characters) are cut before matching: a minified JSON blob or
#: a progress bar without newlines must not make a regex search quadratic.
MAX_LINE_CHARS = 4096
#: At most this many distinct matches are kept (further occurrences of known ones are still
#: counted): a log that repeats one error with a new value on every line stays bounded.
MAX_MATCHES = 500
#: The widest multi-line window a signature may ask for (``lines``).
MAX_WINDOW_LINES = 12

_SIG_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")
_FAMILY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*$")
_REQUIRED = ("id", "title", "regex", "meaning", "remedy", "checks", "source", "example")
_OPTIONAL = (
    "groups",
    "expect",
    "priority",
    "lines",
    "status",
    "derive",
    "flags",
    "yields_to",
    "require",
    "instance",
    "read",
    "unless",
    "commands",
)
_FLAGS = {"i": re.IGNORECASE}
#: ``{name}`` or ``{name|text used when the value is absent}`` in titles, meanings and remedies
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\|([^{}]*))?\}")


class SignatureError(ValueError):
    """The knowledge base is malformed: the message names the signature and the key."""


@frozen_dataclass
class Signature:
    """One known error message.

    Attributes:
        id: dotted lowercase id, e.g. ``cuda.driver-too-old`` (never a check id).
        title: one-line summary template; ``{group}`` placeholders are filled
            with the values the regex extracted (and the derived values).
        pattern: the compiled regular expression (searched, not anchored).
        regex: its source text.
        groups: named group -> what it captures (every named group documented).
        meaning: Markdown template: what the message means, in operator terms.
        remedy: Markdown template: what to do, with the exact commands.
        checks: ids or id prefixes (families such as ``platform``) of the checks
            that confirm or rule out the diagnosis on this machine.
        source: the project docs or code that emit the message (URL or file path).
        example: a message written for this project that the signature must match.
        expect: named values the example must yield (tested).
        priority: explicit ranking bonus (default 0); more specific signatures
            that share text with a generic one carry a higher priority.
        lines: window height in lines (1 = the pattern sees one line at a time).
        status: the verdict its finding carries (``fail`` by default).
        derive: derived value name -> (kind, source group); see :data:`DERIVATIONS`.
        yields_to: ids of more specific signatures: when one of them matched the same
            text, this (generic) match is left out (``BackendCompilerFailed`` yields to
            the compiler error it wraps).
        require: conditions ``(name, operator, name)`` between two extracted (or derived)
            values that must all hold for a match to count (see :func:`_holds`):
            fragmentation is the cause of an out-of-memory error only when the memory
            reserved but unallocated is at least the failed request.
        instance: named groups that tell one occurrence from another (a rank, a sequence
            number, a URL) rather than the fault: matches that differ only in them are one
            diagnosis, counted (eight ranks timing out on one collective are one timeout).
        read: the name of a reader in :data:`READERS` that reads the whole matched text
            after the regex: it may replace values or reject the match (an out-of-memory
            message lists every process on the GPU, the failing one included).
        unless: a regex that, found on any line of the same text, shows the fault did not
            happen after all (a loader's warning about the unversioned ``libcuda.so``
            followed by the framework's own "GPU Compute Capability ..., Driver API
            Version" line: the GPU was initialised); the match is then dropped.
        commands: the remedy as data (text and purpose are templates like ``remedy``):
            the diagnosis carries them as :attr:`Finding.commands`, preferred first.
    """

    id: str
    title: str
    pattern: re.Pattern[str]
    regex: str
    groups: Mapping[str, str]
    meaning: str
    remedy: str
    checks: tuple[str, ...]
    source: str
    example: str
    expect: Mapping[str, str] = field(default_factory=dict)
    priority: int = 0
    lines: int = 1
    status: Status = Status.FAIL
    derive: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    needles: tuple[str, ...] = ()
    any_needles: tuple[str, ...] = ()
    yields_to: tuple[str, ...] = ()
    literal_chars: int = 0
    require: tuple[tuple[str, str, str], ...] = ()
    instance: tuple[str, ...] = ()
    read: str = ""
    unless: re.Pattern[str] | None = None
    commands: tuple[Command, ...] = ()

    @property
    def specificity(self) -> tuple[int, int, int]:
        """Ranking key: (priority, literal characters in the pattern, named groups); higher wins."""
        return (self.priority, self.literal_chars, len(self.groups))

    def describe(self) -> str:
        """What the signature matches, for ``explain --list``: its title with the
        placeholders shown as ``<name>``."""
        return _PLACEHOLDER.sub(lambda m: f"<{m.group(1)}>", self.title)


# --------------------------------------------------------------------------- derived values


def _capability_arch(value: str) -> str | None:
    """Compute capability ``8.6`` -> arch name ``sm_86``."""
    m = re.fullmatch(r"(\d+)\.(\d+)", value)
    return f"sm_{m.group(1)}{m.group(2)}" if m else None


#: PTX ISA version -> the CUDA release that introduced it (PTX ISA reference, "Release Notes" table);
#: ISA 7.N is CUDA 11.N, 8.0-8.5 are CUDA 12.0-12.5, then 8.6 = 12.7 and 8.7 = 12.8
_PTX_ISA_CUDA = (
    {f"7.{n}": f"11.{n}" for n in range(9)}
    | {f"8.{n}": f"12.{n}" for n in range(6)}
    | {
        "8.6": "12.7",
        "8.7": "12.8",
    }
)


def _wheel_python(value: str) -> str | None:
    """A wheel's CPython tag ``cp311`` (``cp35m``) -> the Python release ``3.11`` (``3.5``) it is for."""
    m = re.fullmatch(r"cp(\d)(\d+)[dmu]*", value)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _ptx_isa_cuda(value: str) -> str | None:
    """PTX ISA ``8.4`` (``.version`` of a PTX file) -> the CUDA release ``12.4`` that emits it."""
    return _PTX_ISA_CUDA.get(value)


#: kind -> function(str) -> derived str (or None when the value does not fit)
DERIVATIONS = {
    "cuda_int": cuda_from_int,
    "underscore_version": underscore,
    "tuple_version": from_tuple_text,
    "capability_arch": _capability_arch,
    "ptx_isa_cuda": _ptx_isa_cuda,
    "wheel_python": _wheel_python,
}


# --------------------------------------------------------------------------- conditions

_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?)B")
_NUMBERS_RE = re.compile(r"\d+(?:\.\d+)*")
_REQUIRE_RE = re.compile(r"^\s*(\w+)\s*(<=|>=|==|!=|<|>)\s*(\w+)\s*$")
_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _quantity(value: str) -> tuple[float, ...] | None:
    """A value as a comparable quantity: a memory size (``1.50 GiB``, ``512 MB``) -> (bytes,);
    a number or dotted version (``12.4``) -> its numbers; anything else -> None."""
    m = _SIZE_RE.fullmatch(value.strip())
    if m:
        base = 1024 if m.group(3) or m.group(2) == "" else 1000
        return (float(m.group(1)) * base ** " KMGTP".index(m.group(2) or " "),)
    if _NUMBERS_RE.fullmatch(value.strip()):
        return tuple(float(x) for x in value.strip().split("."))
    return None


def _holds(values: Mapping[str, str], require: Sequence[tuple[str, str, str]]) -> bool:
    """Whether every condition ``(a, op, b)`` holds between the quantities of values ``a``
    and ``b`` (see :func:`_quantity`); a condition on a missing or non-numeric value fails."""
    for a, op, b in require:
        qa, qb = _quantity(values.get(a, "")), _quantity(values.get(b, ""))
        if qa is None or qb is None or not _COMPARE[op](qa, qb):
            return False
    return True


_SIZE = r"\d+(?:\.\d+)? [KMGT]i?B"
_OOM_PROCESS_RE = re.compile(rf"Process (\d+) has ({_SIZE}) memory in use")
_OOM_SELF_RE = re.compile(rf"this process has ({_SIZE}) memory in use")
_OOM_TORCH_RE = re.compile(rf"Of the allocated memory ({_SIZE}) is allocated by PyTorch, and ({_SIZE}) is reserved")


def _bytes(value: str) -> float:
    q = _quantity(value)
    return q[0] if q else 0.0


def _read_oom_processes(values: Mapping[str, str], text: str) -> dict[str, str] | None:
    """PyTorch's out-of-memory message lists every process that holds memory on the GPU
    (``Process <pid> has <size> memory in use``), its own included: it names its own
    ``this process`` only when the PID it sees is the one the driver reports, which a
    container's PID namespace breaks. So a listed process is *another* one when the
    message also says ``this process has ...``, or when it holds less than what PyTorch
    itself has allocated and reserved (then it cannot be the failing process). Returns the
    values with ``pid``/``other_used`` set to the largest other process, or None when
    every listed process may be the failing one."""
    listed = [(pid, used) for pid, used in _OOM_PROCESS_RE.findall(text)]
    torch = _OOM_TORCH_RE.search(text)
    own = None if _OOM_SELF_RE.search(text) else (_bytes(torch.group(1)) + _bytes(torch.group(2)) if torch else None)
    others = []
    for pid, used in listed:
        if own is not None and _bytes(used) >= 0.95 * own:
            own = None  # the failing process itself, seen under another PID: only one can be
            continue
        others.append((pid, used))
    if not others:
        return None
    pid, used = max(others, key=lambda o: _bytes(o[1]))
    return {**values, "pid": pid, "other_used": used}


_GLIBC_NEED_RE = re.compile(r"__glibc\[version='([^']+)'\]")
_BOUND_RE = re.compile(r"(>=|<=|==|<|>)\s*(\d+(?:\.\d+)*)")


def _version_tuple(value: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", value))


def _read_glibc_satisfied(values: Mapping[str, str], text: str) -> dict[str, str] | None:
    """conda's classic solver names ``__glibc`` whenever it gives up. Keep the match only when
    every ``__glibc[version='...']`` requirement it prints is met by the installed glibc
    (``values['installed']``): then glibc is not the cause. A requirement is ``|``-separated
    alternatives of ``,``-joined bounds (``>=2.17,<3.0.a0``); one satisfied alternative suffices."""
    installed = _version_tuple(values.get("installed", ""))
    if not installed:
        return None
    for spec in _GLIBC_NEED_RE.findall(text):
        alternatives = [alt for alt in spec.split("|") if alt.strip()]
        if alternatives and not any(
            all(_COMPARE[op](installed, _version_tuple(v)) for op, v in _BOUND_RE.findall(alt)) for alt in alternatives
        ):
            return None
    return dict(values)


#: reader name -> function(values, matched text) -> values (possibly changed) or None (no match)
READERS = {"oom-processes": _read_oom_processes, "glibc-satisfied": _read_glibc_satisfied}


# --------------------------------------------------------------------------- pattern analysis


def _analyse(regex: str) -> tuple[int, tuple[str, ...]]:
    """(number of literal characters, required literal needles) of a regex.

    A literal character is a plain character or an escaped punctuation mark
    (``\\.``) outside character classes, quantifier braces and group headers.
    Needles are literal runs of at least 4 characters at the top level of the
    pattern that no quantifier makes optional; a pattern with a top-level ``|``
    has none (it is tried on every line). Case-insensitive patterns get
    lower-cased needles. This is a conservative pre-filter: a line that holds
    none of a signature's needles cannot match it.
    """
    literal = 0
    needles: list[str] = []
    run: list[str] = []
    depth = 0
    top_alt = False
    i, n = 0, len(regex)

    def flush(optional: bool = False) -> None:
        if run and depth == 0:
            text = "".join(run[:-1] if optional else run)
            if len(text) >= 4:
                needles.append(text)
        run.clear()

    while i < n:
        c = regex[i]
        if c == "\\" and i + 1 < n:
            nxt = regex[i + 1]
            if nxt.isalnum():  # \d, \s, \b, \1 ... : not a literal
                flush()
                i += 2
                continue
            literal += 1
            if depth == 0:
                run.append(nxt)
            i += 2
            continue
        if c == "[":  # character class: skip to its end
            flush()
            j = i + 1
            if j < n and regex[j] == "^":
                j += 1
            if j < n and regex[j] == "]":
                j += 1
            while j < n and regex[j] != "]":
                j += 2 if regex[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            flush()
            depth += 1
            if regex.startswith("(?P<", i):
                i = regex.index(">", i) + 1
            elif regex.startswith("(?", i):
                m = re.match(r"\(\?(?:[:=!]|<[=!]|[aiLmsux-]+[:)])", regex[i:])
                i += len(m.group(0)) if m else 2
                if m and m.group(0).endswith(")"):
                    depth -= 1  # an inline flag group such as (?i) holds nothing
            else:
                i += 1
            continue
        if c == ")":
            flush()
            depth = max(0, depth - 1)
            i += 1
            continue
        if c in "?*":
            flush(optional=True)
            i += 1
            continue
        if c == "{" and re.match(r"\{\d*,?\d*\}", regex[i:]):
            m = re.match(r"\{(\d*),?\d*\}", regex[i:])
            flush(optional=m is not None and m.group(1) in ("", "0"))
            i += len(re.match(r"\{\d*,?\d*\}", regex[i:]).group(0))
            continue
        if c == "+":
            flush()
            i += 1
            continue
        if c == "|":
            flush()
            if depth == 0:
                top_alt = True
            i += 1
            continue
        if c in ".^$":
            flush()
            i += 1
            continue
        literal += 1
        if depth == 0:
            run.append(c)
        i += 1
    flush()
    return literal, (() if top_alt else tuple(needles))


def _top_level_branches(regex: str) -> list[str]:
    """``regex`` split at its top-level ``|`` (not inside groups or classes, not escaped)."""
    branches, depth, start, i = [], 0, 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            j = i + 1
            if j < len(regex) and regex[j] == "^":
                j += 1
            if j < len(regex) and regex[j] == "]":
                j += 1
            while j < len(regex) and regex[j] != "]":
                j += 2 if regex[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            branches.append(regex[start:i])
            start = i + 1
        i += 1
    branches.append(regex[start:])
    return branches


def _prefilter(regex: str) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """(literal characters, needles that must all occur, needles of which one must occur).

    Without a top-level ``|`` the first set comes from :func:`_analyse`. With one, every
    branch must have a needle of its own; the second set then holds each branch's first
    needle (a line with none of them cannot match). Otherwise both are empty: the pattern
    is searched on every line.
    """
    literal, needles = _analyse(regex)
    branches = _top_level_branches(regex)
    if len(branches) == 1:
        return literal, needles, ()
    firsts = []
    for branch in branches:
        _, branch_needles = _analyse(branch)
        if not branch_needles:
            return literal, (), ()
        firsts.append(branch_needles[0])
    return literal, (), tuple(dict.fromkeys(firsts))


# --------------------------------------------------------------------------- loading


def _fail(sig_id: str, message: str) -> SignatureError:
    return SignatureError(f"errors.toml: signature {sig_id!r}: {message}")


def _parse_one(raw: Mapping[str, Any], index: int) -> Signature:
    sig_id = raw.get("id") if isinstance(raw.get("id"), str) else f"#{index + 1}"
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise _fail(sig_id, f"unknown key(s) {', '.join(sorted(unknown))}")
    for key in _REQUIRED:
        if key not in raw:
            raise _fail(sig_id, f"missing required key {key!r}")
    for key in ("id", "title", "regex", "meaning", "remedy", "source", "example"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise _fail(sig_id, f"{key!r} must be a non-empty string")
    if not _SIG_ID_RE.match(raw["id"]):
        raise _fail(sig_id, "id must be dotted lowercase, e.g. 'cuda.driver-too-old'")
    flags = 0
    for f in str(raw.get("flags", "")):
        if f not in _FLAGS:
            raise _fail(sig_id, f"unknown flag {f!r} (known: {''.join(_FLAGS)})")
        flags |= _FLAGS[f]
    try:
        pattern = re.compile(raw["regex"], flags)
    except re.error as exc:
        raise _fail(sig_id, f"regex does not compile: {exc}") from None
    groups = raw.get("groups", {})
    if not isinstance(groups, Mapping) or not all(isinstance(v, str) and v.strip() for v in groups.values()):
        raise _fail(sig_id, "'groups' must map each named group to a description")
    named = set(pattern.groupindex)
    if named != set(groups):
        missing, extra = sorted(named - set(groups)), sorted(set(groups) - named)
        raise _fail(sig_id, f"named groups and 'groups' differ (undocumented: {missing}, not in regex: {extra})")
    derive: dict[str, tuple[str, str]] = {}
    for name, spec in dict(raw.get("derive", {})).items():
        if not (isinstance(spec, Mapping) and spec.get("kind") in DERIVATIONS and spec.get("from") in named):
            raise _fail(sig_id, f"derive.{name} needs kind (one of {sorted(DERIVATIONS)}) and from (a named group)")
        derive[name] = (spec["kind"], spec["from"])
    checks = raw["checks"]
    if not isinstance(checks, list) or not all(isinstance(c, str) and _FAMILY_RE.match(c) for c in checks):
        raise _fail(sig_id, "'checks' must be a list of check ids or id prefixes")
    try:
        status = Status(raw.get("status", "fail"))
    except ValueError:
        raise _fail(sig_id, f"status {raw.get('status')!r} is not a status") from None
    lines = raw.get("lines", 1)
    if not isinstance(lines, int) or not 1 <= lines <= MAX_WINDOW_LINES:
        raise _fail(sig_id, f"lines must be an integer 1..{MAX_WINDOW_LINES}")
    if lines == 1 and "\\n" in re.sub(r"\[(?:\\.|[^\]])*\]", "", raw["regex"]):
        raise _fail(sig_id, "regex spans lines (\\n) but 'lines' is 1")
    priority = raw.get("priority", 0)
    if not isinstance(priority, int):
        raise _fail(sig_id, "priority must be an integer")
    expect = raw.get("expect", {})
    if not isinstance(expect, Mapping) or not set(expect) <= named | set(derive):
        raise _fail(sig_id, "'expect' may only name the regex's named groups or derived values")
    usable = named | set(derive)
    for key in ("title", "meaning", "remedy"):
        for ph, _default in _PLACEHOLDER.findall(raw[key]):
            if ph not in usable:
                raise _fail(sig_id, f"{key} uses {{{ph}}}, which is neither a named group nor a derived value")
    yields_to = raw.get("yields_to", [])
    if not isinstance(yields_to, list) or not all(isinstance(y, str) and _SIG_ID_RE.match(y) for y in yields_to):
        raise _fail(sig_id, "'yields_to' must be a list of signature ids")
    require = []
    raw_require = raw.get("require", [])
    if not isinstance(raw_require, list):
        raise _fail(sig_id, "'require' must be a list of conditions such as 'unallocated >= size'")
    for cond in raw_require:
        m = _REQUIRE_RE.match(cond) if isinstance(cond, str) else None
        if not m or not {m.group(1), m.group(3)} <= usable:
            raise _fail(sig_id, f"require {cond!r} must compare two named groups or derived values (a >= b)")
        require.append((m.group(1), m.group(2), m.group(3)))
    instance = raw.get("instance", [])
    if not isinstance(instance, list) or not set(instance) <= named:
        raise _fail(sig_id, "'instance' must list named groups of the regex")
    read = raw.get("read", "")
    if read and read not in READERS:
        raise _fail(sig_id, f"read {read!r} is not a reader (known: {', '.join(sorted(READERS))})")
    unless = None
    if "unless" in raw:
        try:
            unless = re.compile(str(raw["unless"]))
        except re.error as exc:
            raise _fail(sig_id, f"'unless' does not compile: {exc}") from None
    commands = []
    raw_commands = raw.get("commands", [])
    if not isinstance(raw_commands, list):
        raise _fail(sig_id, "'commands' must be a list of tables with text, purpose and safety")
    for spec in raw_commands:
        try:
            commands.append(Command(text=spec["text"], purpose=spec["purpose"], safety=spec.get("safety", "safe")))
        except (TypeError, KeyError, ValueError) as exc:
            raise _fail(sig_id, f"commands: each needs text, purpose and safety (safe, root, changes): {exc}") from None
        for ph, _default in _PLACEHOLDER.findall(spec["text"] + spec["purpose"]):
            if ph not in usable:
                raise _fail(sig_id, f"commands use {{{ph}}}, which is neither a named group nor a derived value")
    literal, needles, any_needles = _prefilter(raw["regex"])
    if pattern.flags & re.IGNORECASE:
        needles = tuple(x.lower() for x in needles)
        any_needles = tuple(x.lower() for x in any_needles)
    return Signature(
        id=raw["id"],
        title=raw["title"].strip(),
        pattern=pattern,
        regex=raw["regex"],
        groups=dict(groups),
        meaning=raw["meaning"].strip(),
        remedy=raw["remedy"].strip(),
        checks=tuple(checks),
        source=raw["source"].strip(),
        example=raw["example"].strip("\n"),
        expect=dict(expect),
        priority=priority,
        lines=lines,
        status=status,
        derive=derive,
        needles=needles,
        any_needles=any_needles,
        yields_to=tuple(yields_to),
        literal_chars=literal,
        require=tuple(require),
        instance=tuple(instance),
        read=read,
        unless=unless,
        commands=tuple(commands),
    )


def parse_signatures(doc: Mapping[str, Any]) -> tuple[Signature, ...]:
    """Validate a parsed ``errors.toml`` document and compile its signatures.

    Raises :class:`SignatureError` for a missing or unknown key, a regex that does not
    compile, undocumented named groups, placeholders that name no group, a duplicate id.
    """
    rows = doc.get("signature")
    if not isinstance(rows, list) or not rows:
        raise SignatureError("errors.toml: no [[signature]] tables")
    out: list[Signature] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(rows):
        sig = _parse_one(raw, i)
        if sig.id in seen:
            raise _fail(sig.id, f"duplicate id (also signature #{seen[sig.id] + 1})")
        seen[sig.id] = i
        out.append(sig)
    for sig in out:
        unknown = [y for y in sig.yields_to if y not in seen or y == sig.id]
        if unknown:
            raise _fail(sig.id, f"yields_to names no other signature: {', '.join(unknown)}")
    return tuple(out)


@functools.lru_cache(maxsize=1)
def load_signatures() -> tuple[Signature, ...]:
    """The shipped knowledge base (``data/errors.toml``), parsed and compiled once per process."""
    from gpudoctor.data import load_table

    return parse_signatures(load_table("errors"))


# --------------------------------------------------------------------------- matching


@frozen_dataclass
class Match:
    """One occurrence of a signature in the text.

    Attributes:
        signature: the signature that matched.
        values: named group -> extracted text (groups that took part), plus derived values.
        line: 1-based number of the first line of the match.
        text: the matched text (the whole line(s) it sits on), not yet redacted.
        count: how many times the same signature with the same values was seen.
        stream: where the text came from (``stdout``/``stderr`` of a command, else ``""``).
    """

    signature: Signature
    values: Mapping[str, str]
    line: int
    text: str
    count: int = 1
    stream: str = ""

    def fill(self, template: str) -> str:
        """``template`` with ``{name}`` replaced by extracted values; an absent value becomes the
        default of ``{name|default}``, else ``<name>``."""

        def one(m: re.Match[str]) -> str:
            value = self.values.get(m.group(1))
            if value:
                return value
            return m.group(2) if m.group(2) is not None else f"<{m.group(1)}>"

        return _PLACEHOLDER.sub(one, template)

    @property
    def summary(self) -> str:
        """The filled-in one-line title."""
        return self.fill(self.signature.title)


def _icase(sig: Signature) -> bool:
    return bool(sig.pattern.flags & re.IGNORECASE)


def _values(sig: Signature, m: re.Match[str]) -> dict[str, str]:
    values = {k: v.strip() for k, v in m.groupdict().items() if v is not None and v.strip()}
    for name, (kind, src) in sig.derive.items():
        if src in values:
            derived = DERIVATIONS[kind](values[src])
            if derived:
                values[name] = derived
    return values


_WORD = re.compile(r"\w+")


def _key_word(needle: str) -> str | None:
    """The longest word (run of ``\\w``) lying wholly inside ``needle``, bounded by non-word
    characters of the needle itself, so that it is a whole word of any line that holds the
    needle. None when the needle has no such word of 3+ characters."""
    best = None
    for m in _WORD.finditer(needle):
        if m.start() == 0 or m.end() == len(needle) or len(m.group()) < 3:
            continue  # may be part of a longer word in the line
        if best is None or len(m.group()) > len(best):
            best = m.group()
    return best


class Matcher:
    """Feeds lines, collects :class:`Match` values; memory bounded by the widest window.

    ``feed(line)`` takes one line (without its newline); ``matches()`` returns what was
    found so far, ranked and de-duplicated (see :func:`rank`). Lines are cut to
    :data:`MAX_LINE_CHARS` characters before matching.

    Speed: a signature's regex runs only on lines that hold its needles (literal text the
    pattern cannot match without). Each needle is indexed by a whole word inside it, and a
    line's words are intersected with that index in one set operation, so a line that
    holds no key word (most lines of a healthy log) costs one ``findall`` and no regex.
    """

    def __init__(self, signatures: Sequence[Signature] | None = None, stream: str = ""):
        self.stream = stream
        self.signatures = tuple(load_signatures() if signatures is None else signatures)
        self._by_word: dict[str, list[tuple[Signature, tuple[str, ...]]]] = {}
        # signatures with no whole word in their needles: first needle -> [(signature, other
        # needles)], each distinct needle tested once per line however many signatures share it
        plain: dict[str, list[tuple[Signature, tuple[str, ...]]]] = {}
        icase: dict[str, list[tuple[Signature, tuple[str, ...]]]] = {}
        self._bare: list[Signature] = []  # no needle at all: searched on every line
        for sig in self.signatures:
            if sig.lines > 1:
                continue
            # (needles that must all be in the line) for each way the signature can match
            options = [sig.needles] if sig.needles else [(n,) for n in sig.any_needles]
            if not options:
                self._bare.append(sig)
                continue
            keyed = [(next((k for k in map(_key_word, needles) if k), None), needles) for needles in options]
            if _icase(sig) or any(k is None for k, _ in keyed):
                target = icase if _icase(sig) else plain
                for opt in options:
                    target.setdefault(opt[0], []).append((sig, opt[1:]))
                continue
            for key, needles in keyed:
                self._by_word.setdefault(key, []).append((sig, needles))
        self._plain_needles = list(plain.items())
        self._icase_needles = list(icase.items())
        self._keys = frozenset(self._by_word)
        # a multi-line signature is armed by its longest needle (the rarest, as a rule): every
        # needle lies on one line of any match, so a match ending at this line has it in the window
        self._multi = [
            (s, max(s.needles, key=len) if s.needles else None, _icase(s)) for s in self.signatures if s.lines > 1
        ]
        self._armed: dict[str, int] = {}  # multi-line signature -> last line that held its arming needle
        self._any_icase = bool(self._icase_needles) or any(icase for _, _, icase in self._multi)
        width = max((s.lines for s, _, _ in self._multi), default=1)
        self._window: deque[str] = deque(maxlen=width)
        self._found: dict[tuple[str, tuple[tuple[str, str], ...]], Match] = {}
        self._unless = [(s.id, s.unless) for s in self.signatures if s.unless is not None]
        #: signatures whose ``unless`` line was seen: their matches do not count
        self.refuted: set[str] = set()
        self.lines_read = 0

    def _record(self, sig: Signature, m: re.Match[str], first_line: int, text: str) -> None:
        values: Mapping[str, str] | None = _values(sig, m)
        if sig.read and values is not None:
            values = READERS[sig.read](values, text)
        if values is None or (sig.require and not _holds(values, sig.require)):
            return
        # one error repeated with a new size on every line (5,000 OOMs, each "Tried to allocate N MiB")
        # is one diagnosis with a count: sizes are not part of what tells two diagnoses apart
        key = (sig.id, tuple(sorted((k, v) for k, v in values.items() if not _SIZE_RE.fullmatch(v.strip()))))
        old = self._found.get(key)
        if old is None:
            if len(self._found) < MAX_MATCHES:
                self._found[key] = Match(sig, values, first_line, text, 1, self.stream)
        else:
            self._found[key] = Match(sig, old.values, old.line, old.text, old.count + 1, old.stream)

    def feed(self, line: str) -> None:
        """Match one line (and the window ending at it)."""
        line = line.rstrip("\r\n")[:MAX_LINE_CHARS]
        self.lines_read += 1
        self._window.append(line)
        for sig_id, refute in self._unless:
            if sig_id not in self.refuted and refute.search(line):
                self.refuted.add(sig_id)
        searched = set()
        lower = line.lower() if self._any_icase else line
        for needles, hay in ((self._plain_needles, line), (self._icase_needles, lower)):
            for needle, candidates in needles:
                if needle not in hay:
                    continue
                for sig, option in candidates:
                    if sig.id in searched or not all(n in hay for n in option):
                        continue
                    searched.add(sig.id)
                    m = sig.pattern.search(line)
                    if m:
                        self._record(sig, m, self.lines_read, line)
        for sig in self._bare:
            m = sig.pattern.search(line)
            if m:
                self._record(sig, m, self.lines_read, line)
        words = self._keys.intersection(_WORD.findall(line))
        for word in words:
            for sig, needles in self._by_word[word]:
                if sig.id in searched or not all(n in line for n in needles):
                    continue
                searched.add(sig.id)
                m = sig.pattern.search(line)
                if m:
                    self._record(sig, m, self.lines_read, line)
        for sig, first, icase in self._multi:
            if first is not None:
                if first in (lower if icase else line):
                    self._armed[sig.id] = self.lines_read
                if self.lines_read - self._armed.get(sig.id, -MAX_WINDOW_LINES) >= sig.lines:
                    continue  # its arming needle is not in the window: it cannot match
            lines = list(self._window)[-sig.lines :]
            text = "\n".join(lines)
            start_of_last = len(text) - len(line)
            for m in sig.pattern.finditer(text):
                # only a match that reaches the newest line is new (older ones were seen before)
                if m.end() <= start_of_last and m.end() != len(text):
                    continue
                first = self.lines_read - len(lines) + 1 + text.count("\n", 0, m.start())
                line_start = text.rfind("\n", 0, m.start()) + 1
                line_end = text.find("\n", m.end())
                self._record(sig, m, first, text[line_start : None if line_end < 0 else line_end])

    def feed_text(self, text: str) -> None:
        """Feed every line of ``text``."""
        for line in text.splitlines():
            self.feed(line)

    def matches(self) -> list[Match]:
        """The matches so far, ranked (see :func:`rank`); signatures refuted by an ``unless``
        line are left out."""
        return rank(_unrefuted(self._found.values(), self.refuted))


def _unrefuted(found: Iterable[Match], refuted: set[str]) -> list[Match]:
    """``found`` less the matches of refuted signatures and of the less specific signatures that
    read the same line (the specific reading said the line is benign: a generic one must not
    bring it back)."""
    found = list(found)
    gone = [m for m in found if m.signature.id in refuted]
    return [
        m
        for m in found
        if m.signature.id not in refuted
        and not any(
            g.line == m.line and g.stream == m.stream and g.signature.specificity >= m.signature.specificity
            for g in gone
        )
    ]


def rank(matches: Iterable[Match]) -> list[Match]:
    """Order matches best first and drop redundant ones.

    - Best first: higher :attr:`Signature.specificity`, then earlier in the text.
    - Matches of one signature that differ only in its ``instance`` values (the rank, the
      URL) are one diagnosis: the first occurrence, counting the others (values it lacks are
      taken from them).
    - A match whose values are a subset of another match of the same signature is
      folded into it (the same error told twice, once with fewer details).
    - A generic signature is left out when one it ``yields_to`` matched too.
    - On the same line, only the best signature is kept: a generic signature
      (``unhandled system error``) that matches the very line a specific one
      explains adds nothing.
    """
    occurrences: dict[tuple[str, tuple[tuple[str, str], ...]], Match] = {}
    for m in sorted(matches, key=lambda m: m.line):
        key = (m.signature.id, tuple(sorted((k, v) for k, v in m.values.items() if k not in m.signature.instance)))
        first = occurrences.get(key)
        if first is None:
            occurrences[key] = m
        else:
            # the first occurrence stands for all; a later one fills the values it lacks
            values = {**{k: v for k, v in m.values.items() if v}, **{k: v for k, v in first.values.items() if v}}
            occurrences[key] = Match(
                first.signature, values, first.line, first.text, first.count + m.count, first.stream
            )
    matches = list(occurrences.values())
    folded: list[Match] = []
    for m in matches:
        items = set(m.values.items())
        richer = [
            o for o in matches if o is not m and o.signature.id == m.signature.id and items < set(o.values.items())
        ]
        if richer:
            continue
        # occurrences of the poorer twins count towards the richer match
        twins = [o for o in matches if o.signature.id == m.signature.id and set(o.values.items()) < items]
        if twins:
            m = Match(m.signature, m.values, m.line, m.text, m.count + sum(t.count for t in twins), m.stream)
        folded.append(m)
    present = {m.signature.id for m in folded}
    folded = [m for m in folded if not present.intersection(m.signature.yields_to)]
    ordered = sorted(folded, key=lambda m: (tuple(-x for x in m.signature.specificity), m.line))
    kept: list[Match] = []
    for m in ordered:
        if any(k.line == m.line and k.stream == m.stream for k in kept):
            continue
        kept.append(m)
    return kept


# --------------------------------------------------------------------------- explanations


@frozen_dataclass
class Explanation:
    """The result of explaining a text: ranked matches and their findings.

    Attributes:
        matches: ranked best first (empty: nothing recognised).
        lines_read: how many lines were read.
    """

    matches: tuple[Match, ...]
    lines_read: int

    @property
    def findings(self) -> list[Finding]:
        """One finding per match, redacted (values extracted from a log may hold secrets)."""
        return [match_finding(m) for m in self.matches]

    @property
    def check_refs(self) -> list[str]:
        """Confirming check ids/prefixes of all matches, in rank order, without repeats."""
        return list(dict.fromkeys(c for m in self.matches for c in m.signature.checks))


def match_finding(m: Match) -> Finding:
    """The finding for one match: title as summary, meaning + remedy + source as explanation."""
    sig = m.signature
    parts = [m.fill(sig.meaning), "", "**What to do**", "", m.fill(sig.remedy)]
    parts += ["", f"Source: {sig.source}"]
    evidence: dict[str, Any] = {"line": m.line, "matched": m.text}
    if m.stream:
        evidence["stream"] = m.stream
    if m.count > 1:
        evidence["occurrences"] = m.count
    evidence.update({f"value.{k}": v for k, v in m.values.items()})
    return Finding(
        check=sig.id,
        status=sig.status,
        summary=redact_text(m.summary),
        explanation=redact_text("\n".join(parts)),
        evidence=redact_value(evidence),
        commands=tuple(
            Command(redact_text(m.fill(c.text)), redact_text(m.fill(c.purpose)), c.safety) for c in sig.commands
        ),
    )


def explain_lines(lines: Iterable[str], signatures: Sequence[Signature] | None = None) -> Explanation:
    """Match an iterable of lines (a file object streams; nothing is kept but the window)."""
    matcher = Matcher(signatures)
    for line in lines:
        matcher.feed(line)
    return Explanation(tuple(matcher.matches()), matcher.lines_read)


def merge(matchers: Sequence[Matcher]) -> Explanation:
    """One explanation from several matchers (a command's stdout and stderr), ranked together."""
    refuted = set().union(*(mt.refuted for mt in matchers)) if matchers else set()
    found = _unrefuted([m for mt in matchers for m in mt._found.values()], refuted)
    return Explanation(tuple(rank(found)), sum(mt.lines_read for mt in matchers))


def explain_text(text: str, signatures: Sequence[Signature] | None = None) -> Explanation:
    """Match a whole text (convenience for tests and short messages)."""
    return explain_lines(text.splitlines(), signatures)


def resolve_checks(refs: Sequence[str], known: Iterable[str]) -> tuple[list[str], list[str]]:
    """Turn confirming-check references into installed check ids.

    A reference is an exact check id or, when no check has that id, an id prefix
    (``platform`` selects every ``platform.*`` check; ``torch.compile`` is the check of that
    id, not ``torch.compile.cache`` too). Returns (check ids in reference order without repeats,
    references that matched no installed check: they are dropped, not an error,
    so the knowledge base can name checks that a plug-in or a newer release adds).
    """
    known = list(known)
    ids: list[str] = []
    unresolved: list[str] = []
    for ref in refs:
        hit = [ref] if ref in known else [k for k in known if k.startswith(ref + ".")]
        if not hit:
            unresolved.append(ref)
        ids.extend(hit)
    return list(dict.fromkeys(ids)), unresolved
