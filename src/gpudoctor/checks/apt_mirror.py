"""Check ``apt.mirror``: is the configured apt index reachable, healthy and not needlessly slow?

Reads the ``mirrors`` facts (probes of the configured indexes; rankings of
catalogue mirrors with ``--rank-mirrors``). Thresholds and verdicts:
:mod:`gpudoctor.checks._mirrors`.
"""

from __future__ import annotations

from gpudoctor.checks._mirrors import evaluate_ecosystem
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Finding

NOT_CONFIGURED = "no http(s) apt source is enabled"


def evaluate(facts: Facts) -> list[Finding]:
    return evaluate_ecosystem(CHECK, facts, "apt", NOT_CONFIGURED)


CHECK = Check(
    id="apt.mirror",
    title="apt mirrors reachable, serving this release, and not needlessly slow",
    needs=("mirrors",),
    evaluate=evaluate,
)
