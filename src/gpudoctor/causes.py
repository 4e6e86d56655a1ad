"""The cause graph over the findings of one run: root causes, the headline, what was ruled out.

Checks run once and never call each other. A finding may name the checks whose findings explain it
(:attr:`~gpudoctor.model.Finding.caused_by`). After evaluation, :func:`derive` turns the provisional
``cuda.available`` findings (what the target's own probe says: torch missing, CUDA available or not)
into the headline, from the other findings of the same run:

- the candidates are the findings of the checks with a headline priority in the catalogue
  (``data/checks.toml``) for the same target or for the whole machine;
- a root cause is a failing candidate that no other failing candidate explains (``caused_by``);
  ties are broken by the catalogue's headline priority (lower: more fundamental);
- the headline names the first root cause, carries its remedy (``commands``), what was ruled out
  (the candidates that were checked and are fine) and a command to verify the diagnosis by hand;
- its status is never better than the worst candidate it summarises: "CUDA works" cannot stand
  beside a finding that the frameworks see no GPU.

Pure: findings in, findings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpudoctor import catalogue
from gpudoctor.model import Command, Finding, Status

__all__ = ["HEADLINE", "candidate_ids", "candidates", "derive", "root_causes", "ruled_out", "verify_command"]

#: the check whose findings are the headline
HEADLINE = "cuda.available"
#: candidates at or below this priority are driver-level: fixed before a framework is chosen
_DRIVER_LEVEL = "torch.install"


def candidate_ids() -> list[str]:
    """Ids of the checks that can be the headline's root cause, most fundamental first."""
    rows = [r for r in catalogue.rows().values() if r.headline is not None]
    return [r.id for r in sorted(rows, key=lambda r: (r.headline, r.order))]


def _priority(f: Finding) -> tuple[int, int]:
    p = catalogue.headline_priority(f.check)
    return (p if p is not None else 10**6, catalogue.sort_key(f.check)[0])


def candidates(head: Finding, findings: Sequence[Finding]) -> list[Finding]:
    """The findings ``head`` summarises: candidate checks', for its target or machine-wide. A headline
    that found no NVIDIA GPU (``evidence["headline"] == "nogpu"``) summarises only the machine-wide
    ones (a container not given the GPU, a driver that is not loaded): a target's torch is not a
    CUDA fault on a machine without a GPU."""
    ids = set(candidate_ids())
    where = (None,) if head.evidence.get("headline") == "nogpu" else (head.target, None)
    return [f for f in findings if f.check in ids and f.target in where]


def root_causes(found: Sequence[Finding]) -> list[Finding]:
    """The failing findings that no other failing finding of ``found`` explains, most fundamental first.

    A finding explained only by findings that themselves name it (a cycle) stays a root cause."""
    failing = [f for f in found if f.status is Status.FAIL]
    present = {f.check for f in failing}
    roots = []
    for f in failing:
        explained = [c for c in f.caused_by if c in present and c != f.check]
        cyclic = all(any(o.check == c and f.check in o.caused_by for o in failing) for c in explained)
        if not explained or cyclic:
            roots.append(f)
    return sorted(roots, key=_priority)


def ruled_out(found: Sequence[Finding]) -> list[str]:
    """Ids of the candidate checks that ran and found nothing wrong (ok or info), in causal order."""
    fine = [f for f in found if f.status in (Status.OK, Status.INFO)]
    bad = {f.check for f in found if f.status not in (Status.OK, Status.INFO)}
    return list(dict.fromkeys(f.check for f in sorted(fine, key=_priority) if f.check not in bad))


def verify_command(check: str, python: str) -> Command | None:
    """The catalogue's command that confirms ``check``'s diagnosis by hand, for ``python``."""
    r = catalogue.row(check)
    if r is None or not r.verify:
        return None
    return Command(r.verify.replace("{python}", python), f"verify by hand what {check} found")


def derive(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with every ``cuda.available`` finding replaced by the headline derived from the others."""
    return [_headline(f, findings) if f.check == HEADLINE else f for f in findings]


def _with_diagnosis(f: Finding, cause: Finding | None, found: Sequence[Finding], python: str) -> Finding:
    """``f`` with the ruled-out candidates and the verify command in its evidence, explanation and commands."""
    out = ruled_out(found)
    evidence = dict(f.evidence)
    lines = []
    commands = tuple(f.commands)
    if out:
        evidence["ruled_out"] = out
        lines.append(f"Ruled out (checked, fine): {', '.join(out)}.")
    verify = verify_command(cause.check, python) if cause is not None else None
    if verify is not None:
        evidence["verify"] = verify.text
        lines.append(f"Verify by hand: `{verify.text}`")
        commands = (*commands, verify)
    if not lines:
        return f
    explanation = (f.explanation + "\n\n" if f.explanation else "") + "\n\n".join(lines)
    return replace(f, evidence=evidence, explanation=explanation, commands=commands)


def _headline(head: Finding, findings: Sequence[Finding]) -> Finding:
    found = [f for f in candidates(head, findings) if f is not head]
    ev = dict(head.evidence)
    subject = ""
    if ev.pop("without_torch", False):
        if head.summary.startswith("CUDA is unavailable to "):  # the framework it was decided from stays named
            subject = head.summary.split(": ", 1)[0]
        # decided from the driver API and the other frameworks (issue 25): torch's absence is a fact about
        # torch (torch.install says it), never the cause of CUDA being unusable
        found = [f for f in found if f.check != "torch.install"]
    if not found:
        return replace(head, evidence=ev)
    python = str(ev.get("python") or head.target or "python")
    kind = str(ev.get("headline", ""))
    what = str(ev.pop("torch_problem", ""))
    roots = root_causes(found)
    cause = roots[0] if roots else None
    if kind == "torch" and cause is not None and cause.check != _DRIVER_LEVEL:
        if _priority(cause) < _priority(Finding(_DRIVER_LEVEL, Status.FAIL, "")) and cause.target is None:
            # both stand in the way: the driver first (a wheel is chosen for the driver)
            later = " once the driver works: the CUDA build is chosen for the driver" if "installed" in what else ""
            ev.update({"root_cause_check": cause.check, "then_check": _DRIVER_LEVEL})
            head = replace(
                head,
                status=Status.FAIL,
                summary=f"CUDA is unavailable in {python}: {cause.summary}; and {what}",
                explanation=f"Two things stand in the way, the driver first:\n\n1. The driver (from `{cause.check}`): "
                f"{cause.explanation}\n\n2. torch: see `torch.install` for the cause and the command{later}.",
                evidence=ev,
                commands=cause.commands,
            )
            return _with_diagnosis(head, cause, found, python)
        return _rooted(head, cause, ev, python, "unavailable", found, subject)
    if kind == "torch" or cause is None:
        head = replace(head, evidence=ev)
        worst = _worst(found)
        if worst is not None and worst.status > head.status and head.status is not Status.FAIL:
            head = _escalated(head, worst)
        return _with_diagnosis(head, cause, found, python) if head.status is Status.FAIL else head
    verb = "unusable" if kind == "works" else "unavailable"
    return _rooted(head, cause, ev, python, verb, found, subject)


def _rooted(
    head: Finding, cause: Finding, ev: dict, python: str, verb: str, found: Sequence[Finding], subject: str = ""
) -> Finding:
    ev["root_cause_check"] = cause.check
    ev.update({f"{cause.check}.{k}": val for k, val in dict(cause.evidence).items()})
    head = replace(
        head,
        status=Status.FAIL,
        summary=f"{subject or f'CUDA is {verb} in {python}'}: {cause.summary}",
        # a headline decided from another framework keeps its own account (which framework, and that a
        # missing torch is no fault) before the root cause
        explanation=(f"{head.explanation}\n\n" if subject and head.explanation else "")
        + f"Root cause (from `{cause.check}`; the failing finding no other explains, in the order "
        f"platform → driver → libcuda → framework → arch → libraries → visibility → initialisation):\n\n"
        f"{cause.explanation}",
        evidence=ev,
        commands=cause.commands,
    )
    return _with_diagnosis(head, cause, found, python)


def _worst(found: Sequence[Finding]) -> Finding | None:
    """The most severe warn/fail/error candidate, most fundamental first among equals."""
    bad = [f for f in found if f.status in (Status.WARN, Status.FAIL, Status.ERROR)]
    return min(bad, key=lambda f: (-f.status.severity, _priority(f))) if bad else None


def _escalated(head: Finding, worst: Finding) -> Finding:
    """``head`` raised to ``worst``'s status, its summary naming it (a warning or a broken check), with its
    remedy commands."""
    return replace(
        head,
        status=worst.status,
        summary=f"{head.summary}; but {worst.check}: {worst.summary}",
        evidence={**head.evidence, "worst_check": worst.check},
        commands=worst.commands or head.commands,
    )
