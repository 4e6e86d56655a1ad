"""The container entrypoint health gate.

``gpudoctor gate -- python train.py``: run the checks tagged ``gate`` with
short timeouts; if any fails, print one line per failure to stderr and exit 1
without starting the job; if healthy, replace this process with the job
(``os.execvp``), so signals and the exit status are the job's own. With no
command it is a probe for Docker HEALTHCHECK / Kubernetes: exit 0 healthy, 1 not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpudoctor.collect import CollectOptions
from gpudoctor.engine import Report, run, select_checks
from gpudoctor.model import Check, Finding, Status
from gpudoctor.system import System

__all__ = ["GATE_TAG", "GateResult", "gate_checks", "run_gate"]

GATE_TAG = "gate"


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: ``healthy`` plus the findings that decided it.

    Attributes:
        healthy: no blocking finding.
        blocking: findings with status ``fail`` or ``error`` (a broken check cannot
            vouch for the node), ``warn`` when strict, and the
            ``nvidia.driver`` skip when a GPU is required).
        report: the full report.
    """

    healthy: bool
    blocking: tuple[Finding, ...]
    report: Report


def gate_checks(checks: dict, skip: Sequence[str] = ()) -> list[Check]:
    """The checks tagged ``gate``, minus ``skip`` (ids or prefixes)."""
    tagged = {cid: c for cid, c in checks.items() if GATE_TAG in c.tags}
    return select_checks(tagged, (), [s for s in skip if any(cid == s or cid.startswith(s.rstrip(".") + ".")
                                                             for cid in tagged)])


def run_gate(checks: Sequence[Check], system: System, probe_timeout_s: float = 20.0,
             strict: bool = False, require_gpu: bool = False) -> GateResult:
    """Evaluate the gate checks offline with a short probe timeout, without Jupyter kernels."""
    report = run(checks, system, CollectOptions(offline=True, probe_timeout_s=probe_timeout_s, kernels=False))
    blocking = []
    for f in report.findings:
        if f.status in (Status.FAIL, Status.ERROR) or (strict and f.status == Status.WARN):
            blocking.append(f)
        elif require_gpu and f.check == "nvidia.driver" and f.status == Status.SKIP:
            blocking.append(f)
    return GateResult(not blocking, tuple(blocking), report)
