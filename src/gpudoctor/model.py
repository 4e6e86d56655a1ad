"""Core values of gpudoctor: statuses, findings, checks, fixes and fix plans.

Everything here is plain data (frozen dataclasses and an enum). Nothing in
this module touches the machine, prints, or writes: collectors gather facts,
checks turn facts into :class:`Finding` values, fix planners turn a finding
into a :class:`FixPlan`, and only :mod:`gpudoctor.apply` writes files.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from gpudoctor.areas import area_for
from gpudoctor.records import frozen_dataclass

if TYPE_CHECKING:  # pragma: no cover
    from gpudoctor.facts import Facts

__all__ = [
    "CHECK_ID_RE",
    "SAFETY",
    "Check",
    "Command",
    "fenced",
    "FileEdit",
    "Finding",
    "Fix",
    "FixPlan",
    "FixRefused",
    "Status",
]

#: Check and fix ids are dotted, lowercase names such as ``cuda.driver`` or
#: ``pip.index-url``.
CHECK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")


class Status(enum.Enum):
    """Outcome of a check, ordered by severity (``ok`` < ... < ``error``).

    - ``ok``: the thing checked is healthy.
    - ``info``: nothing wrong, but worth knowing (e.g. a CPU-only torch on a
      machine without a GPU).
    - ``skip``: the check does not apply here; the summary says why.
    - ``warn``: works, but slower or riskier than it should be.
    - ``fail``: broken; the explanation says what to do.
    - ``error``: the check (or a collector it needs) itself broke: a bug in
      gpudoctor or a plug-in, not a verdict on the machine.
    """

    OK = "ok"
    INFO = "info"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"

    @property
    def severity(self) -> int:
        """Rank of this status: 0 for ``ok`` up to 5 for ``error``."""
        return _SEVERITY[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.severity < other.severity

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.severity <= other.severity

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.severity > other.severity

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.severity >= other.severity

    @classmethod
    def worst(cls, statuses: Sequence[Status]) -> Status:
        """The most severe of ``statuses``; ``ok`` for an empty sequence."""
        return max(statuses, default=cls.OK)


_SEVERITY = {s: i for i, s in enumerate(Status)}

#: How a :class:`Command` may be run: ``safe`` as is (it only reads), ``root`` needs root
#: (``sudo``), ``changes`` changes the system (installs, edits, restarts) without needing root.
SAFETY = ("safe", "root", "changes")


@frozen_dataclass
class Command:
    """One remedy or verification command, as data (nothing parses Markdown for commands).

    Attributes:
        text: the exact command line to type (may span lines with ``\\`` continuations).
        purpose: one line: what running it does or shows.
        safety: ``safe`` (read-only, run as is), ``root`` (needs root) or ``changes``
            (changes the system: installs, edits, restarts).
    """

    text: str
    purpose: str = ""
    safety: str = "safe"

    def __post_init__(self) -> None:
        if self.safety not in SAFETY:
            raise ValueError(f"Command safety must be one of {', '.join(SAFETY)}, not {self.safety!r}")

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "purpose": self.purpose, "safety": self.safety}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Command:
        return cls(
            text=str(data["text"]), purpose=str(data.get("purpose") or ""), safety=str(data.get("safety") or "safe")
        )

    @property
    def note(self) -> str:
        """``"needs root"``, ``"changes the system"`` or ``""`` (safe as is)."""
        return {"root": "needs root", "changes": "changes the system"}.get(self.safety, "")


def fenced(*commands: Command) -> str:
    """The commands as a fenced Markdown block, for an explanation that shows them in place."""
    return "```\n" + "\n".join(c.text for c in commands) + "\n```"


@frozen_dataclass
class Finding:
    """One verdict of one check.

    Attributes:
        check: id of the check that produced it (e.g. ``cuda.driver``).
        status: the verdict.
        summary: one line, the root cause in operator terms.
        explanation: Markdown: cause, evidence in words, and what to type next.
        evidence: key -> JSON-serialisable value (strings, numbers, lists)
            that supports the verdict; shown with ``-v`` and in JSON.
        fixes: ids of fixes (``gpudoctor fix ID``) that address it.
        doc_url: optional link to documentation about the fault.
        target: the target interpreter the finding concerns (its label), if any.
        duration_ms: wall time of the check that produced it, in ms (set by
            the engine; 0.0 when replayed from JSON without timings).
        area: the report area (:mod:`gpudoctor.areas`) it is shown under; set
            by the engine from the check's declared area or its id prefix.
        commands: the remedy as data, preferred first (the explanation may show
            them too); next steps and the gate's lines read the first.
        caused_by: ids of the checks whose findings explain this one (the cause
            graph: a finding nothing explains is a root cause).
    """

    check: str
    status: Status
    summary: str
    explanation: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fixes: tuple[str, ...] = ()
    doc_url: str | None = None
    target: str | None = None
    duration_ms: float = 0.0
    area: str = ""
    commands: tuple[Command, ...] = ()
    caused_by: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The report-schema form of this finding (see ``report.schema.json``)."""
        return {
            "check": self.check,
            "status": self.status.value,
            "summary": self.summary,
            "explanation": self.explanation,
            "evidence": dict(self.evidence),
            "fixes": list(self.fixes),
            "doc_url": self.doc_url,
            "target": self.target,
            "duration_ms": round(self.duration_ms, 3),
            "area": self.area or area_for(self.check),
            "commands": [c.to_json() for c in self.commands],
            "caused_by": list(self.caused_by),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        """Inverse of :meth:`to_json`. Raises ``KeyError``/``ValueError`` on bad input.

        A schema-2 finding (no ``caused_by`` field) keeps its cause in ``evidence["caused_by"]``:
        it is read from there."""
        evidence = dict(data.get("evidence") or {})
        caused_by = data.get("caused_by")
        if caused_by is None:
            old = evidence.get("caused_by")
            caused_by = [old] if isinstance(old, str) else list(old or ())
        return cls(
            check=data["check"],
            status=Status(data["status"]),
            summary=data["summary"],
            explanation=data.get("explanation", ""),
            evidence=evidence,
            fixes=tuple(data.get("fixes") or ()),
            doc_url=data.get("doc_url"),
            target=data.get("target"),
            duration_ms=float(data.get("duration_ms") or 0.0),
            area=str(data.get("area") or ""),
            commands=tuple(Command.from_json(c) for c in data.get("commands") or ()),
            caused_by=tuple(str(c) for c in caused_by),
        )


@frozen_dataclass
class Check:
    """A pluggable diagnosis: a pure function from facts to findings.

    Attributes:
        id: dotted lowercase id, e.g. ``nvidia.driver``; must equal the
            entry-point name it is registered under.
        title: one line shown by ``gpudoctor list``.
        needs: fact domains the check reads (e.g. ``("gpu", "nvidia")``);
            the engine collects only those.
        evaluate: ``(facts) -> list[Finding]``; must not do I/O or print.
            An exception becomes an ``error`` finding.
        tags: free labels, e.g. ``gate`` for checks the entrypoint gate runs.
        doc_url: documentation for the check as a whole.
        area: the report area it belongs to (a key of
            :data:`gpudoctor.areas.AREAS`, or a plug-in's own name); empty
            means "from the id prefix" (:func:`gpudoctor.areas.area_for`).
        probe_level: the cheapest target probe whose facts the check reads
            correctly: ``light`` (metadata, version files, CUDA driver API; no
            ``import torch``) or ``full`` (the default, safe for plug-ins). Only
            matters for checks that need ``targets``; the engine runs the
            cheapest level that serves every selected check.
    """

    id: str
    title: str
    needs: tuple[str, ...]
    evaluate: Callable[[Facts], Sequence[Finding]]
    tags: tuple[str, ...] = ()
    doc_url: str | None = None
    area: str = ""
    probe_level: str = "full"

    def finding(self, status: Status, summary: str, explanation: str = "", **kwargs: Any) -> Finding:
        """Shorthand for ``Finding(check=self.id, ...)``."""
        return Finding(check=self.id, status=status, summary=summary, explanation=explanation, **kwargs)


@frozen_dataclass
class FileEdit:
    """One whole-file change that :mod:`gpudoctor.apply` may write.

    Attributes:
        path: absolute path as seen inside the inspected root (``/etc/pip.conf``),
            never the host path of a ``--root`` directory.
        old_text: the file's full text when the plan was made, or ``None``
            when the file must not exist yet (it is created). The writer
            refuses the edit when the file on disk no longer matches.
        new_text: the full text to write.
        mode: permission bits for a newly created file (octal int); an
            existing file keeps its own mode and owner.
    """

    path: str
    old_text: str | None
    new_text: str
    mode: int = 0o644

    @property
    def changes_anything(self) -> bool:
        """False when writing would leave the file as it is."""
        return self.old_text != self.new_text


@frozen_dataclass
class FixPlan:
    """What a fix would do, as data: file edits plus words for the user.

    Attributes:
        fix: id of the fix that made the plan.
        description: one line, what the plan does.
        edits: whole-file edits, applied as one transaction.
        addresses: check ids to re-run after applying.
        notes: things to tell the user afterwards (commands to run by hand,
            e.g. ``apt-get update``), printed, never executed.
        intent: what the tool must resolve once the edits are written, for the
            fix's :attr:`Fix.verify` (e.g. ``{"index-url": URL}``); keys are the fix's own.
    """

    fix: str
    description: str
    edits: tuple[FileEdit, ...] = ()
    addresses: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    intent: Mapping[str, str] = field(default_factory=dict)

    @property
    def changes_anything(self) -> bool:
        """False when every edit is a no-op ("already fixed")."""
        return any(e.changes_anything for e in self.edits)


@frozen_dataclass
class Fix:
    """A pluggable repair planner.

    Attributes:
        id: dotted lowercase id, e.g. ``pip.index-url``; equals its entry-point name.
        title: one line shown by ``gpudoctor list``.
        addresses: ids of the checks whose findings it can repair.
        plan: ``(facts, finding, options) -> FixPlan | None``; pure. ``options``
            holds user choices such as ``scope`` or ``mirror`` (strings).
            Returns ``None`` when it has nothing to offer for that finding.
            Raises :class:`FixRefused` with a one-line reason when the input is
            malformed in a way it must not guess about.
        verify: ``(facts, plan) -> problem | None``, run on facts collected again
            after the plan was written: re-reads the configuration the way the tool
            resolves it (every layer, with its precedence) and returns None when the
            tool now resolves what ``plan.intent`` says, else one line naming what
            still wins (``/venv/pip.conf still wins (index-url = ...)``). None: the
            fix is judged by its re-run checks only.
    """

    id: str
    title: str
    addresses: tuple[str, ...]
    plan: Callable[[Facts, Finding, Mapping[str, str]], FixPlan | None]
    verify: Callable[[Facts, FixPlan], str | None] | None = None


class FixRefused(Exception):
    """A fix planner declines to plan; the message tells the user what to edit by hand."""
