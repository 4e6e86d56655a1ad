"""Check ``uv.mirror``: is the configured uv index reachable, healthy and not needlessly slow?

Reads the ``mirrors`` facts (probes of the configured indexes; rankings of
catalogue mirrors with ``--rank-mirrors``). Thresholds and verdicts:
:mod:`gpudoctor.checks._mirrors`.
"""

from __future__ import annotations

from gpudoctor.checks._mirrors import evaluate_ecosystem
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Finding

NOT_CONFIGURED = "uv has no index configured (it uses PyPI); rank mirrors with --rank-mirrors"


def evaluate(facts: Facts) -> list[Finding]:
    return evaluate_ecosystem(CHECK, facts, "uv", NOT_CONFIGURED)


CHECK = Check(
    id="uv.mirror",
    title="uv index reachable and not needlessly slow",
    needs=("mirrors",),
    evaluate=evaluate,
)
