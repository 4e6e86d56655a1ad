"""The cause graph (issue 23): the headline is derived from the findings of the run, once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor import causes
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.model import Command, Finding, Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import headline_problems

FACTS = Path(__file__).parent / "fixtures" / "facts"
FIXTURES = sorted(p for p in FACTS.rglob("*.json"))


@pytest.fixture(scope="module")
def checks():
    return list(load_registry(load_fixes=False).checks.values())


@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(FACTS)) for p in FIXTURES])
def test_the_headline_is_never_better_than_what_it_summarises(path, checks):
    """Every facts fixture: no "CUDA works" beside a failing finding, the headline's status at least the
    worst of its candidates, and a root cause with what was ruled out and how to verify it."""
    findings = evaluate(checks, Facts.from_json(json.loads(path.read_text())))
    assert headline_problems(findings) == []


def _f(check, status=Status.FAIL, target=None, **kw):
    return Finding(check=check, status=status, summary=f"{check} says so", target=target, **kw)


def test_the_root_cause_is_the_failing_finding_nothing_else_explains():
    driver = _f("nvidia.driver")
    libcuda = _f("cuda.libcuda", target="current", caused_by=("nvidia.driver",))
    context = _f("cuda.context", target="current")
    assert causes.root_causes([context, libcuda, driver]) == [driver, context]  # priority breaks the tie
    assert causes.root_causes([libcuda]) == [libcuda]  # its cause is not in this run: it is a root
    a, b = _f("cuda.arch", caused_by=("cudnn.load",)), _f("cudnn.load", caused_by=("cuda.arch",))
    assert causes.root_causes([b, a]) == [a, b]  # a cycle explains nothing


def test_a_working_cuda_is_not_the_headline_when_the_devices_check_finds_no_gpu():
    head = _f(
        "cuda.available",
        Status.OK,
        target="current",
        evidence={"python": "/venv/bin/python", "headline": "works"},
    )
    hidden = _f("cuda.devices", target="current", commands=(Command("unset CUDA_VISIBLE_DEVICES", "show the GPUs"),))
    fine = _f("nvidia.driver", Status.OK)
    (derived, _, _) = causes.derive([head, hidden, fine])
    assert derived.status is Status.FAIL
    assert derived.summary == "CUDA is unusable in /venv/bin/python: cuda.devices says so"
    assert derived.evidence["root_cause_check"] == "cuda.devices"
    assert derived.evidence["ruled_out"] == ["nvidia.driver"]
    assert [c.text for c in derived.commands] == ["unset CUDA_VISIBLE_DEVICES", "nvidia-smi -L"]
    assert "Ruled out (checked, fine): nvidia.driver." in derived.explanation
    assert headline_problems([derived, hidden, fine]) == []


def test_a_warning_it_summarises_lowers_a_working_headline():
    head = _f("cuda.available", Status.OK, target="t", evidence={"python": "p", "headline": "works"})
    warn = _f("cuda.devices", Status.WARN, target="t")
    (derived, _) = causes.derive([head, warn])
    assert derived.status is Status.WARN and derived.summary.endswith("; but cuda.devices: cuda.devices says so")
    other_target = _f("cuda.devices", Status.FAIL, target="u")
    assert causes.derive([head, other_target])[0] == head  # another target's finding is not summarised


def test_without_a_torch_the_driver_comes_first():
    head = _f(
        "cuda.available",
        target="t",
        evidence={"python": "p", "headline": "torch", "torch_problem": "torch is not installed"},
    )
    (derived, _, _) = causes.derive([head, _f("nvidia.driver"), _f("torch.install", target="t")])
    assert derived.summary == "CUDA is unavailable in p: nvidia.driver says so; and torch is not installed"
    assert (derived.evidence["root_cause_check"], derived.evidence["then_check"]) == ("nvidia.driver", "torch.install")


def test_the_check_alone_still_finds_the_root_cause(checks):
    """``gpudoctor check cuda.available``: the candidates it summarises run for it, and stay out of the report."""
    facts = Facts.from_json(json.loads((FACTS / "case01-driver-470-torch-cu121.json").read_text()))
    alone = evaluate([c for c in checks if c.id == "cuda.available"], facts)
    assert [f.check for f in alone] == ["cuda.available"]
    assert alone[0].evidence["root_cause_check"] == "cuda.driver" and alone[0].status is Status.FAIL
