"""The System bundle: the real SubprocessRunner, Files rooted at --root, and the scripted runner."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from gpudoctor.system import CommandResult, Files, SubprocessRunner, System
from gpudoctor.testing import (
    ScriptedRunner,
    UnexpectedCommand,
    exits,
    not_found,
    ok,
    timed_out,
    write_tree,
)


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# ----------------------------------------------------------------- SubprocessRunner


def test_runner_captures_output_and_status():
    r = SubprocessRunner().run(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]
    )
    assert (r.returncode, r.stdout, r.stderr, r.error) == (3, "out\n", "err\n", None)
    assert not r.ok
    assert r.describe_failure().endswith("exited with status 3: err")


def test_runner_passes_env_and_stdin():
    r = SubprocessRunner().run(
        [sys.executable, "-c", "import os, sys; print(os.environ['GD_X'] + sys.stdin.read())"],
        env={"GD_X": "a", "PATH": os.environ["PATH"]},
        input_text="b",
    )
    assert r.ok and r.stdout == "ab\n"


def test_runner_timeout_kills_the_whole_process_group():
    # the shell starts a grandchild that would outlive a plain kill of the child
    script = "sleep 30 & echo $!; wait"
    r = SubprocessRunner().run(["sh", "-c", script], timeout_s=2.0)  # long enough for `echo $!` on a loaded machine
    assert r.error == "timeout"
    assert r.returncode is None
    assert not r.ok
    assert r.duration_ms < 30_000  # returned at the timeout, not when sleep would have ended
    grandchild = int(r.stdout.split()[0])
    deadline = time.monotonic() + 5  # SIGKILL is delivered asynchronously; it must be gone soon, not at 30 s
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert "did not answer within its timeout" in r.describe_failure()


def test_runner_missing_executable_is_a_result():
    r = SubprocessRunner().run(["gpudoctor-no-such-tool-xyz", "--version"])
    assert (r.returncode, r.error) == (None, "not-found")
    assert r.describe_failure() == "gpudoctor-no-such-tool-xyz is not installed (not found on PATH)"


def test_runner_non_executable_file_is_an_os_error(tmp_path):
    f = tmp_path / "tool"
    f.write_text("#!/bin/sh\n")
    r = SubprocessRunner().run([str(f)])
    assert r.error is not None and r.error.startswith("os-error: ")
    assert "could not be started" in r.describe_failure()


def test_runner_never_uses_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    r = SubprocessRunner().run(["echo", f"$(touch {marker})"])
    assert r.ok and "$(touch" in r.stdout
    assert not marker.exists()


# ----------------------------------------------------------------- Files


def test_files_are_read_inside_the_root(tmp_path):
    write_tree(
        tmp_path,
        {"/etc/pip.conf": "[global]\n", "/etc/apt/sources.list.d/a.list": "", "/etc/apt/sources.list.d/b.sources": ""},
    )
    files = Files(tmp_path)
    assert files.host_path("/etc/pip.conf") == tmp_path / "etc" / "pip.conf"
    assert files.read_text("/etc/pip.conf") == "[global]\n"
    assert files.read_text_or_none("/etc/missing") is None
    assert files.is_file("/etc/pip.conf") and files.is_dir("/etc") and not files.exists("/nope")
    assert files.listdir("/etc/apt/sources.list.d") == ["a.list", "b.sources"]
    assert list(files.glob("/etc/apt/sources.list.d", "*.sources")) == ["/etc/apt/sources.list.d/b.sources"]
    assert not files.is_live


def test_files_dotdot_cannot_climb_out_of_the_root(tmp_path):
    root = tmp_path / "root"
    write_tree(tmp_path, {"/secret": "host file", "/root/etc/hosts": "inside"})
    files = Files(root)
    assert files.host_path("/../secret") == root / "secret"
    assert files.host_path("../../etc/hosts") == root / "etc" / "hosts"
    assert files.read_text_or_none("/../secret") is None


def test_files_invalid_utf8_is_replaced(tmp_path):
    write_tree(tmp_path, {"/f": b"ok \xff\xfe"})
    assert Files(tmp_path).read_text("/f") == "ok \ufffd\ufffd"


def test_realpath_resolves_links_inside_the_root(tmp_path):
    (tmp_path / "usr" / "local" / "cuda-12.4").mkdir(parents=True)
    (tmp_path / "etc" / "alternatives").mkdir(parents=True)
    os.symlink("/usr/local/cuda-12.4", tmp_path / "etc" / "alternatives" / "cuda")
    os.symlink("/etc/alternatives/cuda", tmp_path / "usr" / "local" / "cuda")
    os.symlink("../lib", tmp_path / "usr" / "lib64")
    files = Files(tmp_path)
    assert files.readlink("/usr/local/cuda") == "/etc/alternatives/cuda"
    assert files.readlink("/usr/local/cuda-12.4") is None
    assert files.realpath("/usr/local/cuda") == "/usr/local/cuda-12.4"
    assert files.realpath("/usr/local/cuda/bin/../version.json") == "/usr/local/cuda-12.4/version.json"
    assert files.realpath("/usr/lib64/x") == "/lib/x"


def test_realpath_link_loop_raises(tmp_path):
    os.symlink("/b", tmp_path / "a")
    os.symlink("/a", tmp_path / "b")
    with pytest.raises(OSError, match="too many levels"):
        Files(tmp_path).realpath("/a")


def test_live_system():
    system = System.live("/")
    assert system.files.is_live
    assert isinstance(system.runner, SubprocessRunner)
    assert system.clock.now().tzinfo is not None


# ----------------------------------------------------------------- ScriptedRunner


def test_scripted_runner_answers_and_records():
    runner = ScriptedRunner(
        {
            ("nvidia-smi", "-L"): ok("GPU 0: H200\n"),
            ("nvcc", "--version"): exits(1, stderr="x"),
            ("ldconfig", "-p"): not_found(),
            ("hang",): timed_out(2.0),
            ("fixed",): CommandResult(("fixed",), 0, "fixed\n"),
        }
    )
    assert runner.run(["nvidia-smi", "-L"], timeout_s=5).stdout == "GPU 0: H200\n"
    assert runner.run(["nvcc", "--version"]).returncode == 1
    assert runner.run(["ldconfig", "-p"]).error == "not-found"
    hang = runner.run(["hang"])
    assert (hang.error, hang.duration_ms) == ("timeout", 2000.0)
    assert runner.run(["fixed"]).stdout == "fixed\n"
    assert runner.calls[0] == (("nvidia-smi", "-L"), 5, None)
    with pytest.raises(UnexpectedCommand, match="unexpected command"):
        runner.run(["rm", "-rf", "/"])


def test_scripted_runner_default():
    runner = ScriptedRunner(default=not_found())
    assert runner.run(["anything"]).error == "not-found"


def test_after_an_interrupt_no_command_starts(tmp_path):
    """Ctrl-C: the CLI stops new commands before it kills the running ones, so a worker thread
    still finishing cannot start a process nothing would kill (it hung the exit for 10 s)."""
    from gpudoctor.system import stop_new_commands

    marker = tmp_path / "ran"
    argv = ["sh", "-c", f"touch {marker}; sleep 30"]
    stop_new_commands()
    try:
        r = SubprocessRunner().run(argv, timeout_s=60)
        assert r.error == "interrupted" and "gpudoctor was interrupted" in r.describe_failure()
        assert r.duration_ms < 20_000  # killed at once, not waited for (a hang would take 30 s)
    finally:
        stop_new_commands(False)
    r = SubprocessRunner().run(["sh", "-c", "echo again"], timeout_s=60)
    assert r.ok and r.stdout == "again\n"
