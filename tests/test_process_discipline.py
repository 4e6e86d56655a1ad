"""Process discipline (issue 32, item 5): `explain -- CMD` returns when CMD exits (its background
children are not waited for), forwards SIGINT/SIGTERM/SIGHUP to CMD's process group and ends
with CMD's status; the gate execs the job with the default dispositions of SIGPIPE and SIGXFSZ."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from _foundation import GPUDOCTOR, env_with

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
