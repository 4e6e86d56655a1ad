"""Snapshots with 1,000 and 10,000 GPUs (issue 32, item 10): judged within the per-check budget
(no check abandoned), and the report summarises GPUs per model instead of naming every device.
Timings are measured by benchmarks/many_gpus.py (ratios, no timed asserts here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.words import models

_spec = importlib.util.spec_from_file_location("many_gpus", Path(__file__).parents[1] / "benchmarks" / "many_gpus.py")
many_gpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(many_gpus)


def test_models_counts_repeated_names_only():
    assert models(["NVIDIA L4"]) == "NVIDIA L4"
    assert models(["NVIDIA A100", "NVIDIA L4"]) == "NVIDIA A100, NVIDIA L4"  # the twin: no counts
    assert models(["H100"] * 8) == "8x H100"
    assert models(["H100", "L4", "H100"]) == "2x H100, L4"
    assert models([]) == ""


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_thousands_of_gpus_are_judged_and_summarised_per_model(tmp_path, n):
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(many_gpus.snapshot(n)))
    proc = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "check", "--facts", str(snap), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPUDOCTOR_CONFIG": ""},
    )
    doc = json.loads(proc.stdout)
    errors = [f["summary"] for f in doc["findings"] if f["status"] == "error"]
    assert errors == [] and proc.returncode == 0, (errors, proc.stderr[-500:])
    by_check = {f["check"]: f for f in doc["findings"]}
    per_model = f"{-(-n // 3)}x NVIDIA H100 80GB HBM3, {n // 3}x NVIDIA A100-SXM4-80GB, {n // 3}x NVIDIA L4"
    assert by_check["cuda.available"]["summary"].endswith(f"{n} GPUs ({per_model})")
    assert by_check["cuda.devices"]["summary"].startswith(f"{n} CUDA devices ({per_model})")
    console = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "check", "--facts", str(snap)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPUDOCTOR_CONFIG": "", "NO_COLOR": "1"},
    )
    headline = console.stdout.splitlines()[0]
    assert len(headline) < 400 and per_model in headline, headline
