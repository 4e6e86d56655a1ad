"""scripts/gpu-check.sh records a facts fixture and a report (here: on a machine without a GPU)."""

from __future__ import annotations

import json
import os
import shutil
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


RAW = Path(__file__).resolve().parents[1] / "scripts" / "gpu-record-raw.sh"


def _tool(bindir: Path, name: str, body: str) -> None:
    p = bindir / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)


def test_raw_recorder_writes_topology_kernel_log_and_holders(tmp_path):
    """gpu-record-raw.sh with scripted nvidia-smi / lspci / journalctl on PATH (the real ones elsewhere)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _tool(
        bindir,
        "nvidia-smi",
        'case "$1" in topo) printf "\\tGPU0\\tGPU1\\nGPU0\\t X \\tPIX\\nGPU1\\tPIX\\t X \\n";; '
        '-L) echo "GPU 0: NVIDIA H100";; *) echo "nvidia-smi $*";; esac\n',
    )
    _tool(
        bindir, "lspci", 'echo "00:01.0 PCI bridge: X"; printf "\\t\\tACSCtl:\\tSrcValid+ ReqRedir+ CmpltRedir+\\n"\n'
    )
    _tool(
        bindir,
        "journalctl",
        'case "$*" in *"-b -1"*) echo "2024-01-22T23:10:41+0000 n kernel: NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.";; '
        '*) echo "2024-01-23T08:00:00+0000 n kernel: usb 1-1: new device"; '
        'echo "2024-01-23T08:00:05+0000 n kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15";; esac\n',
    )
    out = tmp_path / "raw"
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", str(RAW), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "GPU0\t X \tPIX" in (out / "topo-m.txt").read_text()
    assert "ReqRedir+" in (out / "lspci-vvv.txt").read_text()
    assert (out / "kernel-b0.txt").read_text().strip().endswith("550.54.15")  # the usb line is filtered out
    assert "usb" not in (out / "kernel-b0.txt").read_text()
    assert "79, GPU has fallen off the bus" in (out / "kernel-b-1.txt").read_text()
    assert (out / "holders.txt").read_text().startswith("# pid ppid etime cgroup command")
    assert (out / "iommu.txt").read_text().startswith("cmdline: ")


def test_raw_recorder_notes_missing_tools(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in (
        "bash",
        "timeout",
        "grep",
        "awk",
        "ps",
        "tr",
        "cut",
        "head",
        "cat",
        "ls",
        "readlink",
        "basename",
        "cp",
        "mkdir",
    ):
        src = shutil.which(tool)
        if src:
            os.symlink(src, bindir / tool)
    out = tmp_path / "raw"
    r = subprocess.run(
        [shutil.which("bash") or "bash", str(RAW), str(out)],
        env={"PATH": str(bindir)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "topo-m.txt").read_text().startswith("# not recorded: nvidia-smi is not installed")
    assert "journalctl is not installed" in (out / "kernel-b-1.txt").read_text()
