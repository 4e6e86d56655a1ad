"""check -> fix -> check on real files: the harness of tests/test_fix_cycle.py.

:func:`cycle` runs the named checks on a fake root through the engine (real
collectors, a scripted runner that knows no command), asks the fix's planner
for a plan for every finding that offers it, writes the plans through
:mod:`gpudoctor.apply` (prepare, journal, atomic write), and runs the checks
again on the same root. The caller asserts what the second run says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor import apply as ap
from gpudoctor import engine
from gpudoctor.collect import CollectOptions
from gpudoctor.model import Finding, FixPlan, FixRefused, Status
from gpudoctor.registry import load_registry
from gpudoctor.system import System
from gpudoctor.testing import ScriptedRunner, fake_system, not_found


@dataclass
class Cycle:
    before: list[Finding]
    plans: list[FixPlan]
    refused: list[str]
    after: list[Finding]
    root: Path
    #: per plan, what the fix's verifier says after writing (None: the tool resolves what was set)
    verdicts: list[str | None] = field(default_factory=list)

    def offering(self, fix_id: str, findings: Sequence[Finding] | None = None) -> list[Finding]:
        return [
            f for f in (self.before if findings is None else findings) if fix_id in f.fixes and f.status >= Status.WARN
        ]

    def gone(self, before: Finding) -> bool:
        """True when no finding of the second run has ``before``'s check and summary at warn or worse."""
        return not any(f.check == before.check and f.summary == before.summary for f in self.problems())

    def problems(self) -> list[Finding]:
        return [f for f in self.after if f.status >= Status.WARN]

    def text(self, fix_id: str) -> str:
        return "\n".join(f"{f.check} {f.status.value}: {f.summary}" for f in self.after)


def _run(
    root: Path, checks: Sequence[str], env: Mapping[str, str], home: str, offline: bool, extra: dict, live, pythons=()
):
    registry = load_registry()
    if live is not None:
        system = live()
    else:
        system = fake_system(root, env=env, runner=ScriptedRunner(default=not_found()), home=home)
    opts = CollectOptions(pythons=tuple(pythons), offline=offline, kernels=live is not None, extra=dict(extra))
    return engine.run([registry.checks[c] for c in checks], system, opts), system, registry


def cycle(
    root: Path,
    checks: Sequence[str],
    fix_id: str,
    options: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    home: str = "/home/user",
    offline: bool = True,
    extra: dict | None = None,
    journal: Path | None = None,
    live: Callable[[], System] | None = None,
    pythons: Sequence[str] = (),
) -> Cycle:
    """``live``: a factory of a live System (real files, real commands) for collectors that refuse an
    image root (Jupyter); ``root`` then only names where the journal goes."""
    env = dict(env or {})
    report, system, registry = _run(root, checks, env, home, offline, extra or {}, live, pythons)
    fix = registry.fixes[fix_id]
    plans: list[FixPlan] = []
    refused: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for finding in report.findings:
        if fix_id not in finding.fixes or finding.status < Status.WARN:
            continue
        try:
            plan = fix.plan(report.facts, finding, dict(options or {}))
        except FixRefused as exc:
            refused.append(str(exc))
            continue
        if plan is None or not plan.changes_anything:
            continue
        paths = tuple(e.path for e in plan.edits if e.changes_anything)
        if paths in seen:  # one plan per file set, as `gpudoctor fix` does
            continue
        seen.add(paths)
        plans.append(plan)
    if plans:
        writes = ap.prepare(plans, system.files)
        ap.apply(writes, system.files, ap.Journal(journal or root.parent / f"{root.name}-journal"))
    after, _, _ = _run(root, checks, env, home, offline, extra or {}, live, pythons)
    verdicts = [fix.verify(after.facts, p) if fix.verify is not None else None for p in plans]
    return Cycle(list(report.findings), plans, refused, list(after.findings), root, verdicts)
