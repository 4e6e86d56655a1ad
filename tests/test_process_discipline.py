"""Process discipline (issue 32, item 5): `explain -- CMD` returns when CMD exits (its background
children are not waited for), forwards SIGINT/SIGTERM/SIGHUP to CMD's process group and ends
with CMD's status; the gate execs the job with the default dispositions of SIGPIPE and SIGXFSZ."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _foundation import GPUDOCTOR, env_with
from gpudoctor.collect import CollectOptions, Collector
from gpudoctor.engine import collect_facts
from gpudoctor.system import Files, SubprocessRunner, System
from gpudoctor.testing import ScriptedRunner, not_found

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_explain_returns_when_the_command_exits_not_when_its_background_child_does(tmp_path):
    pidfile = tmp_path / "bg.pid"
    script = f"sleep 60 & echo $! > {pidfile}; echo 'RuntimeError: CUDA error: out of memory' >&2; exit 3"
    start = time.monotonic()
    proc = subprocess.run(
        [*GPUDOCTOR, "explain", "--no-check", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=50,
        env=env_with(GPUDOCTOR_CONFIG=""),
    )
    took = time.monotonic() - start
    bg = int(pidfile.read_text())
    try:
        assert proc.returncode == 3, proc.stderr
        assert took < 45  # it once waited for the 60 s background sleep that held the pipes
        assert "out of memory" in proc.stdout + proc.stderr  # read before the command exited, and explained
        assert "Traceback" not in proc.stderr
    finally:
        os.kill(bg, signal.SIGKILL)


def test_the_healthy_twin_a_command_without_children_is_read_to_the_end(tmp_path):
    script = "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; exit 0"
    proc = subprocess.run(
        [*GPUDOCTOR, "explain", "--no-check", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_with(GPUDOCTOR_CONFIG=""),
    )
    assert proc.returncode == 0 and proc.stdout.count("\n") >= 2000 and "line 1999" in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signals_reach_the_command_and_its_process_group(tmp_path, sig):
    """The command's own child (same group) gets the signal too, and explain ends with the
    command's status without running anything more."""
    child_pid = tmp_path / "child.pid"
    got = tmp_path / "got"
    code = (
        "import os, signal, subprocess, sys, time\n"
        f"child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(child_pid)!r}, 'w').write(str(child.pid))\n"
        f"signal.signal({int(sig)}, lambda *a: (open({str(got)!r}, 'w').write('yes'), sys.exit(42)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen(
        [*GPUDOCTOR, "explain", "--", PY, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_with(GPUDOCTOR_CONFIG=""),
    )
    assert proc.stdout.readline() == b"ready\n"
    child = int(child_pid.read_text())
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    try:
        assert proc.returncode == 42, err
        assert got.read_text() == "yes"
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child)  # the sleep in the command's group got the signal as well
        assert b"Traceback" not in err
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_command_that_ignores_the_signal_is_killed_and_that_is_not_its_exit(monkeypatch):
    """SIGINT forwarded, the command ignores it: after the grace period gpudoctor kills the
    group, and the outcome says so instead of passing the SIGKILL off as the command's exit."""
    import threading

    from gpudoctor import explain_run

    monkeypatch.setattr(explain_run, "KILL_GRACE_S", 0.5)
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)\n"
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        outcome = explain_run.run_command([PY, "-c", code], None, None)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 20
    assert outcome.signalled == signal.SIGINT and outcome.killed_after_s == 0.5
    assert outcome.returncode == 128 + signal.SIGKILL  # what the process died of, kept as data


def test_the_twin_a_command_that_ends_on_the_signal_is_not_reported_killed(monkeypatch):
    import threading

    from gpudoctor import explain_run

    monkeypatch.setattr(explain_run, "KILL_GRACE_S", 5.0)
    code = "import sys, signal, time\nsignal.signal(signal.SIGINT, lambda *a: sys.exit(3))\ntime.sleep(30)\n"
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        outcome = explain_run.run_command([PY, "-c", code], None, None)
    finally:
        timer.cancel()
    assert outcome.signalled == signal.SIGINT and outcome.killed_after_s is None and outcome.returncode == 3


def test_the_gate_execs_the_job_with_default_sigpipe_and_sigxfsz(tmp_path):
    # the job's view, read from /proc: 'SigIgn' must have neither bit set
    shell = "grep SigIgn /proc/self/status"
    for job in (["sh", "-c", shell],):
        proc = subprocess.run(
            [*GPUDOCTOR, "gate", "-q", "--require-gpus", "0", "--", *job],
            capture_output=True,
            text=True,
            timeout=120,
            env=env_with(GPUDOCTOR_CONFIG=""),
        )
        assert proc.returncode == 0, proc.stderr
        mask = int(proc.stdout.split()[-1], 16)
        assert not mask & (1 << (signal.SIGPIPE - 1)), proc.stdout
        assert not mask & (1 << (signal.SIGXFSZ - 1)), proc.stdout
        assert not mask & (1 << (signal.SIGTERM - 1)) and not mask & (1 << (signal.SIGINT - 1))
    # the neighbour: `yes | head` in the job ends by SIGPIPE, as in a shell, not with an error
    proc = subprocess.run(
        [*GPUDOCTOR, "gate", "-q", "--require-gpus", "0", "--", "sh", "-c", "yes | head -1; echo done"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_with(GPUDOCTOR_CONFIG=""),
    )
    assert proc.returncode == 0 and proc.stdout == "y\ndone\n" and "Broken pipe" not in proc.stderr


def _wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


# --------------------------------------------------------------------------- (hardening) signals


@pytest.mark.parametrize(
    "sig, code, word",
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "hung up"), (signal.SIGINT, 130, "interrupted")],
)
def test_termination_signals_kill_every_probe_group(tmp_path, sig, code, word):
    pidfile = tmp_path / "pids"
    hang = tmp_path / "python-that-hangs"
    # the fake interpreter starts a grandchild and records both pids, then hangs
    hang.write_text(f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pidfile}\nwait\n")
    hang.chmod(0o755)
    proc = subprocess.Popen(
        [*GPUDOCTOR, "check", "torch.install", "--python", str(hang)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_with(),
        # the default disposition, however the suite was started: under `nohup` SIGHUP arrives
        # ignored, and gpudoctor rightly keeps an inherited SIG_IGN (it then ends normally, exit 1)
        preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),
    )
    pids = [int(p) for p in _wait_for(pidfile).split()]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)  # a generous bound on "ends at all" (loaded CI machines)
    assert proc.returncode == code, err
    assert word in err and "Traceback" not in err + out
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), "a probe process survived the doctor"


def test_a_grandchild_holding_the_pipe_is_not_a_hang(tmp_path):
    # the command exits at once but leaves a daemon holding stdout: not a timeout
    script = (
        "import os, subprocess, sys; subprocess.Popen(['sleep', '60']); print('done'); sys.stdout.flush(); os._exit(0)"
    )
    start = time.monotonic()
    r = SubprocessRunner().run([sys.executable, "-c", script], timeout_s=30)
    assert r.error is None and r.returncode == 0 and r.stdout == "done\n"
    assert time.monotonic() - start < 20


# --------------------------------------------------------------------------- (hardening) probe budget


def test_a_collector_waiting_for_the_probe_waits_as_long_as_probe_timeout(tmp_path):
    def slow_probe(ctx):
        time.sleep(1.5)  # stands in for a 25 s torch import
        return {"ok": True}

    collectors = {
        "targets": Collector("targets", slow_probe, timeout_s=0.5, runs_probes=True),
        "loader": Collector("loader", lambda ctx: dict(ctx.facts["targets"]), requires=("targets",), timeout_s=0.5),
    }
    system = System(runner=ScriptedRunner(default=not_found()), files=Files(tmp_path), env={})
    facts, errors = collect_facts(["targets", "loader"], system, CollectOptions(probe_timeout_s=5.0), collectors)
    assert errors == []
    assert facts.domains["loader"] == {"ok": True}
    # with the default probe timeout too short, the same probe is an error naming the budget
    facts, errors = collect_facts(
        ["targets"],
        system,
        CollectOptions(probe_timeout_s=0.0),
        {"targets": Collector("targets", lambda c: time.sleep(40), timeout_s=0.5, runs_probes=True)},
    )
    assert [e.check for e in errors] == ["collect.targets"] and "30 s" in errors[0].summary
