"""Remedies are data (DESIGN.md, 0.3): every warn/fail finding of a built-in check carries its remedy
as ``Finding.commands`` or fix ids, on every facts fixture and every field case the project has.

A finding whose remedy is not a command (an edit of code or of a configuration file no command
writes) is named in :data:`NOT_A_COMMAND` with the reason; a finding another finding of the run
explains (``caused_by``) takes its remedy from that cause, as the report's next steps do.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.model import SAFETY, Finding, Status

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "field"))

from field_replay import case_dirs, load_case, registry, replay

FACTS = HERE / "fixtures" / "facts"
FIXTURES = sorted(FACTS.rglob("*.json"))
CASES = case_dirs()

#: (check id, summary pattern) -> why that finding's remedy is not a command
NOT_A_COMMAND: dict[tuple[str, str], str] = {
    ("amp.readiness", r"is asked for .* but the .* has no \w+ Tensor Cores|on the .*, which has no fp16 Tensor"): (
        "the remedy is another precision in the training code or config (named in the explanation)"
    ),
    ("jupyter.kernels", r"Python kernels? (is|are) broken"): (
        "the roll-up of the per-kernel findings, which carry each kernel's remedy"
    ),
    ("jupyter.running-kernels", r"the change has no effect"): (
        "restart the kernel from the notebook and set the variable in its first cell: no shell command"
    ),
    ("platform.launcher", r"JupyterHub|single-user server"): (
        "an edit of jupyterhub_config.py and a restart of the hub or server, whose names gpudoctor does not know"
    ),
    ("cuda.arch", r"is not supported by torch"): (
        "no official wheel both covers this GPU and runs on this Python and driver: build from source or "
        "change the environment (the explanation says which)"
    ),
}


def _allowed(f: Finding) -> bool:
    return any(check == f.check and re.search(pattern, f.summary) for (check, pattern) in NOT_A_COMMAND)


def unremedied(findings: Sequence[Finding]) -> list[str]:
    """The warn/fail findings with neither commands nor fix ids, no allow-list entry and no cause in the run
    that carries the remedy."""
    remedied = {f.check for f in findings if f.commands or f.fixes}
    return [
        f"{f.check} [{f.status.value}]: {f.summary}"
        for f in findings
        if f.status in (Status.WARN, Status.FAIL)
        and not (f.commands or f.fixes)
        and not _allowed(f)
        and not any(c in remedied for c in f.caused_by)
    ]


def _inputs() -> list:
    return [pytest.param("facts", p, id=f"facts/{p.relative_to(FACTS)}") for p in FIXTURES] + [
        pytest.param("case", p, id=f"case/{p.parent.name}/{p.name}") for p in CASES
    ]


@pytest.mark.parametrize(("kind", "path"), _inputs())
def test_every_warning_and_failure_carries_its_remedy_as_data(kind, path):
    if kind == "facts":
        findings = evaluate(list(registry().checks.values()), Facts.from_json(json.loads(path.read_text())))
    else:
        findings = replay(load_case(path))
    assert unremedied(findings) == []
    for f in findings:
        for c in f.commands:
            assert c.text.strip() and c.purpose.strip() and c.safety in SAFETY, (f.check, c)


def test_the_allow_list_is_short_and_every_entry_still_matches_a_finding():
    """An entry no fixture or case reaches any more is stale: remove it."""
    assert len(NOT_A_COMMAND) <= 6
    checks = list(registry().checks.values())
    seen: set[tuple[str, str]] = set()
    runs = [evaluate(checks, Facts.from_json(json.loads(p.read_text()))) for p in FIXTURES]
    runs += [replay(load_case(p)) for p in CASES]
    for findings in runs:
        for f in findings:
            if f.status in (Status.WARN, Status.FAIL) and not (f.commands or f.fixes):
                seen |= {key for key in NOT_A_COMMAND if key[0] == f.check and re.search(key[1], f.summary)}
    assert seen == set(NOT_A_COMMAND)
