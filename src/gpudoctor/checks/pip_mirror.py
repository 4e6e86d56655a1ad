"""Check ``pip.mirror``: is the configured pip index reachable, healthy and not needlessly slow?

Reads the ``mirrors`` facts (probes of the configured indexes; rankings of
catalogue mirrors with ``--rank-mirrors``). Thresholds and verdicts:
:mod:`gpudoctor.checks._mirrors`.
"""

from __future__ import annotations

from gpudoctor.checks._mirrors import evaluate_ecosystem
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Finding

NOT_CONFIGURED = "pip's index configuration is not collected yet (no pip facts)"


def evaluate(facts: Facts) -> list[Finding]:
    return evaluate_ecosystem(CHECK, facts, "pip", NOT_CONFIGURED)


CHECK = Check(
    id="pip.mirror",
    title="pip index reachable and not needlessly slow",
    needs=("mirrors",),
    evaluate=evaluate,
)
