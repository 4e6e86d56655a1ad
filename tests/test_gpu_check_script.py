"""scripts/gpu-check.sh records a facts fixture and a report (here: on a machine without a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import ProbeFacts

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check.sh"


def test_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


@pytest.mark.slow
def test_script_records_facts_and_report(tmp_path):
    out = tmp_path / "recorded"
    env = dict(os.environ, PYTHON=sys.executable, NO_COLOR="1")
    r = subprocess.run(
        ["bash", str(SCRIPT), "--no-tests", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert r.returncode == 0, r.stdout + r.stderr
    facts_files = [p for p in out.glob("*.json") if not p.name.endswith(".report.json")]
    assert len(facts_files) == 1
    facts = Facts.from_json(json.loads(facts_files[0].read_text()))
    probe = facts.domains["targets"].targets[0].probe
    assert isinstance(probe, ProbeFacts)
    assert isinstance(probe.smoke, Unavailable) and "no CUDA device" in probe.smoke.reason  # --deep ran
    report = json.loads(facts_files[0].with_suffix(".report.json").read_text())
    assert {f["check"] for f in report["findings"]} >= {"devices.ecc", "devices.smoke", "nvidia.driver"}
    assert "Traceback" not in r.stderr
