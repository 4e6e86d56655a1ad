"""The entrypoint gate: blocks on failures, execs the job when healthy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpudoctor.gate import gate_checks, run_gate
from gpudoctor.model import Check, Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import fake_system


def _check(cid, status, tags=("gate",)):
    return Check(id=cid, title=cid, needs=(), tags=tags,
                 evaluate=lambda facts: [Check(cid, cid, (), lambda f: []).finding(status, f"{cid} says {status.value}")])


def test_gate_selects_only_tagged_checks():
    checks = {c.id: c for c in (_check("a.one", Status.OK), _check("b.two", Status.OK, tags=()))}
    assert [c.id for c in gate_checks(checks)] == ["a.one"]
    assert gate_checks(checks, skip=["a"]) == []


def test_builtin_gate_checks_are_the_fast_node_health_ones():
    ids = {c.id for c in gate_checks(load_registry().checks)}
    assert {"nvidia.driver", "torch.install", "dataloader.shm"} <= ids


def test_fail_blocks_and_warn_blocks_only_when_strict(tmp_path):
    system = fake_system(tmp_path)
    warn = [_check("x.warn", Status.WARN)]
    assert run_gate(warn, system).healthy
    strict = run_gate(warn, system, strict=True)
    assert not strict.healthy and [f.check for f in strict.blocking] == ["x.warn"]
    failed = run_gate([_check("x.ok", Status.OK), _check("x.fail", Status.FAIL)], system)
    assert not failed.healthy and [f.check for f in failed.blocking] == ["x.fail"]


def test_require_gpu_turns_a_missing_gpu_into_a_blocker(tmp_path):
    system = fake_system(tmp_path)
    no_gpu = [_check("nvidia.driver", Status.SKIP)]
    assert run_gate(no_gpu, system).healthy
    assert not run_gate(no_gpu, system, require_gpu=True).healthy


def _gate(*args):
    return subprocess.run([sys.executable, "-m", "gpudoctor", "gate", *args], capture_output=True, text=True,
                          timeout=120)


def test_gate_execs_the_job_when_healthy(tmp_path):
    marker = tmp_path / "ran"
    proc = _gate("--", sys.executable, "-c", f"import pathlib,sys; pathlib.Path({str(marker)!r}).write_text('x'); sys.exit(7)")
    # the job's own exit status comes back: the gate exec'd it
    assert proc.returncode == 7, proc.stderr
    assert marker.read_text() == "x"
    assert "healthy" in proc.stderr


def test_gate_does_not_start_the_job_when_a_gpu_is_required_and_missing(tmp_path):
    if Path("/proc/driver/nvidia/version").exists():  # a real GPU node: the opposite case is tested elsewhere
        return
    marker = tmp_path / "ran"
    proc = _gate("--require-gpu", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 1
    assert not marker.exists()
    assert "nvidia.driver" in proc.stderr and "job not started" in proc.stderr


def test_gate_reports_a_missing_command_with_127():
    proc = _gate("-q", "--", "/nonexistent/job")
    assert proc.returncode == 127
    assert "cannot start /nonexistent/job" in proc.stderr


def test_the_gate_does_not_look_for_jupyter_kernels():
    from gpudoctor.system import System
    checks = [c for c in gate_checks(load_registry().checks) if c.id == "torch.install"]
    result = run_gate(checks, System.live())
    jupyter = result.report.facts.get("jupyter")
    assert "gate leaves them out" in jupyter.reason
    assert "kernel" not in [t.kind for t in result.report.facts.get("targets").targets]
