"""The CLI under hostile conditions: broken pipes, full disks, Ctrl-C, bad combinations."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _foundation import GPUDOCTOR, env_with, run_gpudoctor
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.pip import site_prefix
from gpudoctor.engine import Report
from gpudoctor.facts import Facts
from gpudoctor.model import Finding, Status
from gpudoctor.probe import probe_target
from gpudoctor.system import System

FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def test_a_reader_that_goes_away_gives_141_not_the_fail_code(tmp_path):
    snap = sorted(FIXTURES.glob("*.json"))[0]
    proc = subprocess.Popen(
        [*GPUDOCTOR, "check", "-v", "--facts", str(snap)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_with(),
    )
    proc.stdout.close()  # the reader is gone before anything is written: every write gets EPIPE
    assert proc.wait(timeout=60) == 141
    assert b"Traceback" not in proc.stderr.read()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_full_disk_is_one_line_and_exit_2(fmt):
    snap = sorted(FIXTURES.glob("*.json"))[0]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*GPUDOCTOR, "check", "--facts", str(snap), "--format", fmt],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env_with(),
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "gpudoctor: error: cannot write the output: No space left on device"


def test_python_that_is_a_directory_is_a_usage_error(tmp_path):
    proc = run_gpudoctor("check", "torch.install", "--python", str(tmp_path))
    assert proc.returncode == 2
    assert f"--python {tmp_path}: is a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_facts_replay_refuses_collection_options(tmp_path):
    snap = sorted(FIXTURES.glob("*.json"))[0]
    proc = run_gpudoctor("check", "--facts", str(snap), "--root", str(tmp_path))
    assert proc.returncode == 2 and "--facts replays a snapshot" in proc.stderr


def test_an_empty_root_is_accepted_with_a_warning(tmp_path):
    proc = run_gpudoctor("check", "dataloader", "--offline", "--root", str(tmp_path))
    assert proc.returncode == 4  # every dataloader check was not applicable: nothing judged (issue 32)
    assert "has no etc/ or usr/: is it a root filesystem?" in proc.stderr
    # CPU counts and /dev/shm belong to a running machine, not to an image root: skipped, not invented
    assert (
        "2 not applicable: " in proc.stdout and "(dataloader.cpu)" in proc.stdout and "(dataloader.shm)" in proc.stdout
    )


def test_ctrl_c_kills_a_hanging_probe_and_exits_130(tmp_path):
    hang = tmp_path / "python-that-hangs"
    marker = hang  # the shell running the script keeps its path in its command line
    hang.write_text("#!/bin/sh\nsleep 300\n")
    hang.chmod(0o755)
    proc = subprocess.Popen(
        [*GPUDOCTOR, "check", "torch.install", "--python", str(hang)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_with(),
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _running(str(marker)):
        time.sleep(0.1)
    assert _running(str(marker)), "the probe never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip() == "gpudoctor: interrupted"
    assert not _running(str(marker)), "the probe's process group survived Ctrl-C"


def _running(needle: str) -> bool:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        # the shell running the fake interpreter, not gpudoctor itself (whose --python names it too)
        if cmd.startswith(b"/bin/sh\0") and needle.encode() in cmd and state != "Z":
            return True
    return False


def test_a_probe_killed_by_a_signal_is_named(tmp_path):
    crash = tmp_path / "python-that-crashes"
    crash.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crash.chmod(0o755)
    result = probe_target(System.live(), str(crash), timeout_s=30)
    assert "crashed with SIGSEGV" in result.reason


def test_pip_site_file_is_the_running_interpreters_prefix_by_default(tmp_path):
    ctx = CollectContext(System(env={}), CollectOptions())
    assert site_prefix(ctx) == (sys.prefix, "sys.prefix")


def test_verdict_is_ok_when_only_info_and_skip():
    def report(*statuses):
        return Report(tuple(Finding("x.y", s, "s") for s in statuses), Facts())

    assert report(Status.OK, Status.INFO, Status.SKIP).verdict is Status.OK
    assert report(Status.SKIP, Status.WARN).verdict is Status.WARN
    assert report(Status.FAIL, Status.ERROR).verdict is Status.ERROR
    # nothing judged is not OK (issue 32): "unknown", exit 4
    assert report(Status.SKIP).verdict is Status.SKIP and report(Status.SKIP).to_json()["status"] == "unknown"
    assert report(Status.SKIP).exit_code() == 4 and report(Status.SKIP, Status.INFO).exit_code() == 0
