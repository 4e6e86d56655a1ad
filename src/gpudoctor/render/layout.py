"""The shape of a report a person reads, shared by the console and markdown formats.

:func:`layout` turns a :class:`~gpudoctor.engine.Report` into plain data:

- ``headline``: the first line: the overall verdict and the ``cuda.available``
  summary (the question most people come with), or the counts when that
  check was not selected;
- ``targets``: each probed interpreter named once with a short label; the
  summaries below use the label instead of the long path (explanations keep
  full paths, because their commands must stay copy-pasteable);
- ``areas``: one :class:`AreaView` per area (:mod:`gpudoctor.areas`) in a
  stable order, with its worst status, its counts, the findings that need
  attention (warn, fail, error), the info findings (each distinct summary
  once), and the folded ``ok``/``skip`` findings (a skip reason shared by
  several checks is said once);
- ``network``: one line saying which hosts the run contacted, from the
  ``mirrors`` facts (the configured package indexes and, with
  ``--rank-mirrors``, the catalogue's mirrors): ``None`` when that domain was
  not collected;
- ``next_steps``: the commands to type next, in order (failures first):
  ``gpudoctor fix ID`` for a fixable finding, else the first of its
  ``commands`` (:class:`~gpudoctor.model.Command`), else a pointer to the
  finding to read; a ``gpudoctor check``
  or ``gpudoctor fix`` step carries the ``--root DIR`` and ``--python PATH``
  the report was collected with (:func:`rerun_flags`), so it acts on what
  the report examined and not on the machine's own configuration.

Everything here is pure: no I/O, no styling.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import field, replace

from gpudoctor.areas import area_for, area_rank, area_title
from gpudoctor.model import Finding, Status
from gpudoctor.records import frozen_dataclass
from gpudoctor.words import plural

__all__ = ["AreaView", "Layout", "NextStep", "SkipGroup", "area_size", "layout", "plural", "status_counts_text"]

#: Statuses shown one finding a line (with their explanation).
ATTENTION = (Status.WARN, Status.FAIL, Status.ERROR)

#: status -> (singular, plural) words for counts in headers.
_COUNT_WORDS = {
    Status.FAIL: ("failed", "failed"),
    Status.ERROR: ("error", "errors"),
    Status.WARN: ("warning", "warnings"),
    Status.INFO: ("info", "info"),
    Status.OK: ("ok", "ok"),
    Status.SKIP: ("not applicable", "not applicable"),
}


def status_counts_text(findings: Sequence[Finding]) -> str:
    """``"1 failed, 2 warnings, 3 ok, 4 not applicable"``, most severe first, zeros left out."""
    parts = []
    for status in (Status.FAIL, Status.ERROR, Status.WARN, Status.INFO, Status.OK, Status.SKIP):
        n = sum(1 for f in findings if f.status is status)
        if n:
            one, many = _COUNT_WORDS[status]
            parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts) or "nothing to report"


@frozen_dataclass
class SkipGroup:
    """One skip reason and the checks that gave it."""

    reason: str
    checks: tuple[str, ...]


@frozen_dataclass
class AreaView:
    """One area of the report.

    Attributes:
        key, title: the area (:mod:`gpudoctor.areas`).
        worst: the area's mark: the most severe status of its findings, with
            ``info`` read as ``ok`` and ``skip`` only when nothing applied.
        checks: number of distinct checks that reported in it.
        counts_text: status counts in words.
        attention: warn/fail/error findings, most severe first, then report order.
        info: info findings, each distinct (target-shortened) summary once.
        ok: ok findings (folded unless verbose).
        skipped: skip findings grouped by reason (folded unless verbose).
        findings: all findings of the area in report order (for ``-v``).
    """

    key: str
    title: str
    worst: Status
    checks: int
    counts_text: str
    attention: tuple[Finding, ...]
    info: tuple[Finding, ...]
    ok: tuple[Finding, ...]
    skipped: tuple[SkipGroup, ...]
    findings: tuple[Finding, ...]

    @property
    def skip_count(self) -> int:
        """Number of skip findings folded into this area."""
        return sum(len(g.checks) for g in self.skipped)


def area_size(area: AreaView) -> str:
    """``"8 checks"``, or ``"8 checks, 20 findings"`` when checks report per target."""
    text = plural(area.checks, "check")
    if len(area.findings) != area.checks:
        text += f", {plural(len(area.findings), 'finding')}"
    return text


@frozen_dataclass
class NextStep:
    """A command to type next, and the finding it answers."""

    command: str
    check: str
    status: Status
    is_command: bool = True
    #: ``"needs root"``, ``"changes the system"`` or ``""`` (:attr:`Command.note`)
    note: str = ""


@frozen_dataclass
class Layout:
    """The whole report's shape; see the module docstring."""

    verdict: Status  # SKIP: nothing was judged (written "unknown", see verdict_word)
    headline: str
    targets: tuple[tuple[str, str], ...]
    areas: tuple[AreaView, ...]
    next_steps: tuple[NextStep, ...]
    counts_text: str
    total: int
    path_labels: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    rerun: tuple[str, str] = ("", "")

    def fix_command(self, f: Finding) -> str:
        """``gpudoctor fix ID...`` for ``f``'s fixes, with the report's ``--root``/``--python`` (:func:`rerun_flags`)."""
        return with_rerun_flags(f"gpudoctor fix {' '.join(f.fixes)}", flags_for(f, self.rerun))

    def short(self, text: str) -> str:
        """``text`` with every target interpreter path replaced by its label in brackets."""
        for path in sorted(self.path_labels, key=len, reverse=True):
            text = text.replace(path, f"[{self.path_labels[path]}]")
        return text

    def title_of(self, f: Finding) -> str:
        """A finding's one-line summary, shortened, prefixed by its target unless it already names it."""
        summary = self.short(f.summary)
        if f.target and (f.target != "current" or len(self.targets) > 1):
            label = self.path_labels.get(f.target, f.target)
            if f"[{label}]" not in summary:
                return f"[{label}] {summary}"
        return summary


def _target_paths(report_facts: object, kinds: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(label, interpreter path) of every probed target (of these ``kinds``, when
    given), from the ``targets`` facts."""
    out: list[tuple[str, str]] = []
    get = getattr(report_facts, "get", None)
    if get is None:
        return out
    targets = get("targets")
    for t in getattr(targets, "targets", ()) or ():
        label = getattr(t, "label", "")
        python = getattr(t, "python", "")
        if kinds and getattr(t, "kind", "") not in kinds:
            continue
        if label and python:
            out.append((label, python))
    return out


#: check families that judge the target interpreters (their follow-up commands need ``--python``)
_TARGET_FAMILIES = ("cuda", "cudnn", "torch", "jupyter")


def rerun_flags(report_facts: object) -> tuple[str, str]:
    """The options a follow-up ``gpudoctor check``/``fix`` needs to examine what
    this report examined, shell-quoted: (``--root DIR`` when the facts were
    collected under an image root (``Facts.root`` is not ``/``), ``--python PATH``
    for every ``--python`` target (``kind == "python"`` in the ``targets``
    facts)); ``""`` for the live machine and its current interpreter. Without
    them ``gpudoctor fix`` would plan against the machine's own configuration
    files (its HOME, its /etc) and gpudoctor's own interpreter instead."""
    root = getattr(report_facts, "root", "/") or "/"
    root_flags = f"--root {shlex.quote(root)}" if root.rstrip("/") else ""
    pythons = dict.fromkeys(path for _label, path in _target_paths(report_facts, kinds=("python",)))
    return root_flags, " ".join(f"--python {shlex.quote(p)}" for p in pythons)


def flags_for(f: Finding, rerun: tuple[str, str]) -> str:
    """The :func:`rerun_flags` a follow-up command for ``f`` needs: ``--root`` always,
    ``--python`` only for a finding about a target interpreter (a ``target``, or a
    check of the cuda, cudnn, torch or jupyter families)."""
    root_flags, python_flags = rerun
    bound = f.target is not None or f.check.split(".", 1)[0] in _TARGET_FAMILIES
    return " ".join(x for x in (root_flags, python_flags if bound else "") if x)


def with_rerun_flags(command: str, flags: str) -> str:
    """``command`` with ``flags`` appended when it is a one-line ``gpudoctor check``
    or ``gpudoctor fix`` command that sets neither ``--root`` nor ``--python`` itself."""
    if not flags or "\n" in command or not command.startswith(("gpudoctor check", "gpudoctor fix")):
        return command
    words = command.split()
    if "--root" in words or "--python" in words or "--facts" in words:
        return command
    return f"{command} {flags}"


#: Probe statuses that mean no request left this machine (``local``: a file:// index; ``offline``).
_NOT_SENT = ("local", "offline")


def network_line(report_facts: object, replayed: bool = False) -> str | None:
    """Which hosts the run contacted, from the ``mirrors`` facts
    (:class:`~gpudoctor.facts.mirrors.MirrorsFacts`): the host names of the
    ``probe_url`` (else ``base_url``) of every configured probe and ranked
    candidate whose status is not ``local``/``offline`` (nor ``refused`` before
    any request: no ``http_status``), in first-contact order.

    Returns ``None`` when the mirrors domain was not collected (nothing in this
    run used the network), ``"none (--offline)"`` for an offline run,
    ``"none"`` when there was nothing to probe (file:// indexes only), else
    ``"contacted 2 hosts: a.example.org, b.example.org"``; a replayed
    snapshot says the hosts were contacted when it was collected.
    """
    get = getattr(report_facts, "get", None)
    mirrors = get("mirrors") if get is not None else None
    if mirrors is None or not hasattr(mirrors, "configured"):
        return None
    if getattr(mirrors, "offline", False):
        return "none (--offline)"
    from urllib.parse import urlsplit

    hosts: list[str] = []
    probes = list(mirrors.configured) + [p for rows in (mirrors.rankings or {}).values() for p in rows]
    for p in probes:
        if p.status in _NOT_SENT or (p.status == "refused" and p.http_status is None):
            continue  # a refused first URL sends nothing; a refused redirect target was reached via a redirect
        try:
            host = urlsplit(p.probe_url or p.base_url).hostname
        except ValueError:
            host = None
        if host and host not in hosts:
            hosts.append(host)
    if not hosts:
        return "none"
    text = f"contacted {plural(len(hosts), 'host')}: {', '.join(hosts)}"
    return text + " (when the snapshot was collected)" if replayed else text


def _labels(pairs: list[tuple[str, str]]) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """Short display labels: a label that is itself a path becomes ``python-N``."""
    shown: list[tuple[str, str]] = []
    mapping: dict[str, str] = {}
    n = 0
    for label, python in pairs:
        display = label
        if "/" in label:
            n += 1
            display = f"python-{n}"
            mapping[label] = display
        if python not in mapping and len(python) > 12:
            mapping[python] = display
        shown.append((display, python))
    return tuple(shown), mapping


def root_cause_shown(f: Finding, findings: Sequence[Finding]) -> str | None:
    """The id of the check a headline finding borrowed its explanation from
    (``evidence["root_cause_check"]``), when that check's own finding is in the
    report too, for the same target or for the whole machine (``target`` None:
    the driver, the platform); ``None`` otherwise. With
    ``evidence["then_check"]`` shown too (a second fault to repair after the
    first), ``"first, then second"``."""
    evidence = f.evidence or {}
    cause = evidence.get("root_cause_check")
    if not _shown(cause, f, findings):
        return None
    for o in findings:  # the cause itself follows from a third finding: point there
        if o.check == cause and o.target in (f.target, None):
            cause = consequence_of(o, findings) or cause
            break
    then = evidence.get("then_check")
    if then and not _shown(then, f, findings):
        return None  # the second part of the explanation is nowhere else: print it
    return f"{cause}, then {then}" if then else str(cause)


def diagnosis_lines(f: Finding) -> list[str]:
    """For a headline with a root cause (:mod:`gpudoctor.causes`): ``ruled out: ...`` (the candidate
    checks that ran and are fine) and ``verify: <command>`` (confirm the diagnosis by hand)."""
    evidence = f.evidence or {}
    out = []
    if evidence.get("ruled_out"):
        out.append(f"ruled out: {', '.join(map(str, evidence['ruled_out']))}")
    if evidence.get("verify"):
        out.append(f"verify: {evidence['verify']}")
    return out


#: the line a renderer prints instead of the explanation of a finding that follows from another
CONSEQUENCE = "same cause as {check}: its remedy repairs this too"


def consequence_of(f: Finding, findings: Sequence[Finding]) -> str | None:
    """The id of the check whose finding names the cause and remedy of ``f``
    (:attr:`Finding.caused_by`: libcuda missing in a container started
    without the NVIDIA runtime follows from ``nvidia.driver``), when that
    finding is in the report too (same target or machine-wide); ``None``
    otherwise. The renderers then print a pointer instead of the same remedy
    twice, and the next steps skip ``f``."""
    for cause in f.caused_by:
        if not _shown(cause, f, findings):
            continue
        if any(o.check == cause and f.check in o.caused_by for o in findings):
            continue  # two findings naming each other: neither is folded, so the remedy is still shown
        return cause
    return None


def _shown(check: object, f: Finding, findings: Sequence[Finding]) -> bool:
    """Whether ``check`` has a finding needing attention for ``f``'s target or the whole machine."""
    return bool(check) and any(
        o.check == check and o.target in (f.target, None) and o.status in ATTENTION for o in findings
    )


def _next_steps(
    findings: Sequence[Finding], labels: dict[str, str], rerun: tuple[str, str] = ("", "")
) -> tuple[NextStep, ...]:
    rank = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2}
    order = sorted((f for f in findings if f.status in ATTENTION), key=lambda f: rank[f.status])
    steps: list[NextStep] = []
    seen: set[str] = set()
    summaries: set[str] = set()
    for f in order:
        if f.summary in summaries:
            continue  # two checks that reached the same verdict need one step
        summaries.add(f.summary)
        if f.check == "cuda.available" and any(o.check != "cuda.available" for o in order):
            continue  # the headline check: its root cause has a step of its own
        if consequence_of(f, findings):
            continue  # repaired by its cause's step
        is_command = True
        note = ""
        if f.fixes:
            cmd: str | None = f"gpudoctor fix {' '.join(f.fixes)}"
        elif f.commands:
            cmd, note = f.commands[0].text, f.commands[0].note
        else:
            cmd = None
        if cmd is None:
            is_command = False
            where = f" [{labels.get(f.target, f.target)}]" if f.target and f.target != "current" else ""
            cmd = f"read {f.check}{where} above"
        else:
            cmd = with_rerun_flags(cmd, flags_for(f, rerun))
        if cmd in seen:
            continue
        seen.add(cmd)
        steps.append(NextStep(cmd, str(f.evidence.get("root_cause_check") or f.check), f.status, is_command, note))
    return tuple(steps)


def _area_mark(fs: Sequence[Finding]) -> Status:
    """An area's mark: its worst status, where ``info`` reads as ``ok`` and
    ``skip`` only shows when nothing in the area applied."""
    applied = [f.status for f in fs if f.status is not Status.SKIP]
    if not applied:
        return Status.SKIP
    worst = Status.worst(applied)
    return Status.OK if worst is Status.INFO else worst


def _skip_reason(text: str) -> str:
    return re.sub(r"^(not applicable|skipped)\s*:\s*", "", text, flags=re.IGNORECASE)


def _headline(findings: Sequence[Finding], proto: Layout) -> str:
    """The first line's text: the worst problem first, then what ``cuda.available`` says.

    - Something warned, failed or errored that ``cuda.available`` does not
      already say: that finding (``check: summary``), ``+N more`` when several
      share its status, then the ``cuda.available`` verdict in brackets.
    - Otherwise the worst ``cuda.available`` finding (with ``+N more`` when
      several targets share that status).
    - Neither: the counts.
    """
    rank = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2}
    cuda = [f for f in findings if f.check == "cuda.available" and f.status is not Status.SKIP]
    top_cuda = max(cuda, key=lambda f: f.status.severity) if cuda else None
    # a finding with the same cause as another one shown is not the headline: its cause is
    problems = sorted(
        (f for f in findings if f.status in rank and not consequence_of(f, findings)), key=lambda f: rank[f.status]
    )
    if problems and (
        top_cuda is None or top_cuda.status.severity < problems[0].status.severity or top_cuda.status is Status.ERROR
    ):
        worst = problems[0]
        same = [f for f in problems if f.status is worst.status]
        more = f" (+{len(same) - 1} more)" if len(same) > 1 else ""
        text = f"{worst.check}: {proto.title_of(worst)}{more}"
        if top_cuda is not None:
            text += f"; {proto.title_of(top_cuda)}"
        return text
    if top_cuda is not None:
        same = [f for f in cuda if f.status is top_cuda.status]
        more = f" (+{len(same) - 1} more target{'s' if len(same) > 2 else ''})" if len(same) > 1 else ""
        return proto.title_of(top_cuda) + more
    counts = status_counts_text(findings)
    return f"{counts} ({plural(len({f.check for f in findings}), 'check')})"


def layout(report: object) -> Layout:
    """The report's shape (see the module docstring). ``report`` is an
    :class:`~gpudoctor.engine.Report` (typed loosely to keep this module free
    of an import of the engine)."""
    findings: tuple[Finding, ...] = tuple(getattr(report, "findings", ()))
    verdict: Status = getattr(report, "verdict", Status.worst([f.status for f in findings]))
    targets, mapping = _labels(_target_paths(getattr(report, "facts", None)))
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.area or area_for(f.check), []).append(f)
    proto = Layout(verdict, "", targets, (), (), "", len(findings), mapping)
    areas: list[AreaView] = []
    for key in sorted(groups, key=area_rank):
        fs = groups[key]
        attention = tuple(sorted((f for f in fs if f.status in ATTENTION), key=lambda f: -f.status.severity))
        info: list[Finding] = []
        seen_info: set[str] = set()
        for f in fs:
            if f.status is Status.INFO and f.check != "cuda.available":  # the headline already says it
                t = proto.title_of(f)
                if t not in seen_info:
                    seen_info.add(t)
                    info.append(f)
        reasons: dict[str, list[str]] = {}
        for f in fs:
            if f.status is Status.SKIP:
                ids = reasons.setdefault(proto.title_of(replace(f, summary=_skip_reason(f.summary))), [])
                if f.check not in ids:
                    ids.append(f.check)
        areas.append(
            AreaView(
                key=key,
                title=area_title(key),
                worst=_area_mark(fs),
                checks=len({f.check for f in fs}),
                counts_text=status_counts_text(fs),
                attention=attention,
                info=tuple(info),
                ok=tuple(f for f in fs if f.status is Status.OK),
                skipped=tuple(SkipGroup(r, tuple(ids)) for r, ids in reasons.items()),
                findings=tuple(fs),
            )
        )
    headline = _headline(findings, proto)
    facts = getattr(report, "facts", None)
    if getattr(report, "replayed", False) and facts is not None and not getattr(facts, "domains", True):
        # an OK from nothing must not read like a healthy machine
        headline = f"the snapshot holds no facts: nothing was judged ({headline})"
    elif verdict is Status.SKIP and "nothing was judged" not in headline:
        headline = f"nothing was judged: every check was not applicable ({headline})"
    counts = status_counts_text(findings)
    rerun = rerun_flags(facts)
    return Layout(
        verdict,
        headline,
        targets,
        tuple(areas),
        _next_steps(findings, mapping, rerun),
        counts,
        len(findings),
        mapping,
        network_line(facts, bool(getattr(report, "replayed", False))),
        rerun,
    )
