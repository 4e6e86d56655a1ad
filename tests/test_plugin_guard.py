"""gpudoctor.plugin_guard: a plug-in's os._exit, raw stdout writes and forks are contained."""

from __future__ import annotations

import os
import time

import pytest

from gpudoctor.plugin_guard import PluginExit, guarded, run_with_timeout


def test_os_exit_inside_the_guard_raises_and_is_restored_after():
    real = os._exit
    with pytest.raises(PluginExit) as info, guarded():
        os._exit(0)
    assert info.value.code == 0 and os._exit is real


def test_raw_writes_to_stdout_go_to_stderr_redacted(capfd):
    with guarded():
        os.write(1, b"RAW {{{ ghp_QzPastedGithub0123456789abcdefghij\n")
    out, err = capfd.readouterr()
    assert out == ""  # the report's stream stays clean
    assert "RAW {{{" in err and "ghp_QzPasted" not in err  # passed on, through redaction


def test_the_twin_without_the_guard_stdout_is_stdout(capfd):
    os.write(1, b"plain\n")
    out, _err = capfd.readouterr()
    assert out == "plain\n"


def test_guards_nest_and_only_the_outer_one_restores(capfd):
    with guarded():
        with guarded():
            os.write(1, b"inner\n")
        os.write(1, b"outer\n")
    out, err = capfd.readouterr()
    assert out == "" and err.splitlines() == ["inner", "outer"]


def test_a_forked_child_may_still_exit():
    with guarded():
        pid = os.fork()
        if pid == 0:
            os._exit(7)  # the real exit in the child, not PluginExit
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7


def test_a_hang_is_abandoned_after_the_budget():
    start = time.monotonic()
    kind, value = run_with_timeout(lambda: time.sleep(30), 0.5)
    assert kind == "timeout" and value is None and time.monotonic() - start < 10
    assert run_with_timeout(lambda: 42, 5) == ("ok", 42)
