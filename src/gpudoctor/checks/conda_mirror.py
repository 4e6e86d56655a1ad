"""Check ``conda.mirror``: is the configured conda index reachable, healthy and not needlessly slow?

Reads the ``mirrors`` facts (probes of the configured indexes; rankings of
catalogue mirrors with ``--rank-mirrors``). Thresholds and verdicts:
:mod:`gpudoctor.checks._mirrors`.
"""

from __future__ import annotations

from gpudoctor.checks._mirrors import evaluate_ecosystem
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Finding

NOT_CONFIGURED = "conda is not configured here (no .condarc)"


def evaluate(facts: Facts) -> list[Finding]:
    return evaluate_ecosystem(CHECK, facts, "conda", NOT_CONFIGURED)


CHECK = Check(
    id="conda.mirror",
    title="conda channels reachable and not needlessly slow",
    needs=("mirrors",),
    evaluate=evaluate,
)
