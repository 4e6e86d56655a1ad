"""Collector ``kernel_log``: XID lines from dmesg / journalctl -k, read-only, bounded, timed out."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.kernel_log import (
    MAX_BYTES,
    PREVIOUS_ARGV,
    TIMEOUT_S,
    collect_kernel_log,
    parse_xid_lines,
)
from gpudoctor.facts import Unavailable
from gpudoctor.facts.kernel_log import MAX_EVENTS
from gpudoctor.system import Files, System
from gpudoctor.testing import (
    ScriptedRunner,
    exits,
    fake_system,
    not_found,
    ok,
    timed_out,
)

DMESG = """\
[    0.000000] Linux version 6.1.0-18-amd64
[    4.120553] nvidia: loading out-of-tree module taints kernel.
[    5.998001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024
[ 5031.112233] NVRM: Xid (PCI:0000:18:00): 79, pid=2271, name=python3, GPU has fallen off the bus.
[ 5031.112301] NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.
[ 6000.000001] NVRM: Xid (PCI:0000:3b:00): 13, pid=9921, name=python, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address
"""
JOURNAL = """\
[ 77.300000] gpu01 kernel: NVRM: Xid (PCI:0000:18:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.
"""
JOURNAL_ARGV = ("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic")
#: journald without the previous boot (and no syslog files on this root)
NO_PREVIOUS = {PREVIOUS_ARGV: exits(1, stderr="Data from the specified boot (-1) is not available: No such boot ID")}


def live(runner: ScriptedRunner) -> CollectContext:
    return CollectContext(System(runner=runner, files=Files(Path("/")), env={}), CollectOptions())


def test_parse_xid_lines_from_dmesg():
    events, count = parse_xid_lines(DMESG)
    assert count == 6
    assert [(e.xid, e.pci, e.timestamp) for e in events] == [
        (79, "0000:18:00", "[ 5031.112233]"),
        (13, "0000:3b:00", "[ 6000.000001]"),
    ]
    assert events[0].text == "pid=2271, name=python3, GPU has fallen off the bus."


def test_dmesg_is_read_first_without_clearing_it():
    runner = ScriptedRunner({**NO_PREVIOUS, ("dmesg",): ok(DMESG)})
    facts = collect_kernel_log(live(runner))
    assert (facts.source, facts.readable, facts.lines_read) == ("dmesg", True, 6)
    assert [e.xid for e in facts.events] == [79, 13]
    assert [(argv, t) for argv, t, _ in runner.calls] == [(("dmesg",), TIMEOUT_S), (PREVIOUS_ARGV, TIMEOUT_S)]


def test_journalctl_when_dmesg_is_restricted():
    runner = ScriptedRunner(
        {
            **NO_PREVIOUS,
            ("dmesg",): exits(1, stderr="dmesg: read kernel buffer failed: Operation not permitted"),
            JOURNAL_ARGV: ok(JOURNAL),
        }
    )
    facts = collect_kernel_log(live(runner))
    assert facts.source == "journalctl -k -b"
    assert [(e.xid, e.pci) for e in facts.events] == [(63, "0000:18:00")]


def test_neither_readable_says_why_for_each():
    runner = ScriptedRunner(
        {
            **NO_PREVIOUS,
            ("dmesg",): exits(1, stderr="dmesg: read kernel buffer failed: Operation not permitted"),
            JOURNAL_ARGV: not_found(),
        }
    )
    facts = collect_kernel_log(live(runner))
    assert isinstance(facts.readable, Unavailable)
    assert "Operation not permitted" in facts.readable.reason and "journalctl is not installed" in facts.readable.reason


def test_a_hanging_dmesg_is_a_reason_not_a_hang():
    runner = ScriptedRunner({**NO_PREVIOUS, ("dmesg",): timed_out(TIMEOUT_S), JOURNAL_ARGV: ok("")})
    facts = collect_kernel_log(live(runner))
    assert isinstance(facts.readable, Unavailable)
    assert "did not answer" in facts.readable.reason and "printed nothing" in facts.readable.reason


def test_output_is_bounded_to_the_newest_bytes_and_events():
    noise = "[    1.0] usb 1-1: new device\n" * (MAX_BYTES // 30 + 10)
    old = "[ 2.0] NVRM: Xid (PCI:0000:18:00): 48, pid=0, DBE\n"
    many = "".join(f"[ 9.{i}] NVRM: Xid (PCI:0000:18:00): 43, pid={i}, Ch 8\n" for i in range(MAX_EVENTS + 50))
    facts = collect_kernel_log(live(ScriptedRunner({**NO_PREVIOUS, ("dmesg",): ok(old + noise + many)})))
    assert len(facts.events) == MAX_EVENTS
    assert all(e.xid == 43 for e in facts.events)  # the old XID 48 is beyond the bounded tail
    assert facts.events[-1].text.startswith(f"pid={MAX_EVENTS + 49},")


def test_image_root_reads_no_kernel_log(tmp_path):
    facts = collect_kernel_log(CollectContext(fake_system(tmp_path), CollectOptions()))
    assert isinstance(facts.readable, Unavailable) and "--root" in facts.readable.reason


def test_real_dmesg_binary_on_path(tmp_path, monkeypatch):
    """A scripted fake ``dmesg`` executable run by the real runner."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "dmesg.txt").write_text(DMESG)
    script = bindir / "dmesg"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -c ] && exit 9; done\ncat {tmp_path}/dmesg.txt\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    journal = bindir / "journalctl"
    journal.write_text(
        "#!/bin/sh\necho 'Specifying boot ID or boot offset has no effect, no persistent journal was found.' >&2\n"
    )
    journal.chmod(journal.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    facts = collect_kernel_log(CollectContext(System(files=Files(Path("/"))), CollectOptions()))
    assert facts.source == "dmesg" and [e.xid for e in facts.events] == [79, 13]


def test_the_light_gate_reads_no_kernel_log_without_an_nvidia_driver(monkeypatch):
    """No NVIDIA kernel driver loaded: no NVRM line to find, so the entrypoint gate (light level) spawns
    no dmesg; with a driver, and at the full level, the log is read as before."""
    import gpudoctor.collect.nvidia as nvidia

    light = CollectOptions(probe_level="light")
    runner = ScriptedRunner({**NO_PREVIOUS, ("dmesg",): ok(DMESG)})
    monkeypatch.setattr(nvidia, "kernel_driver_absent", lambda files: True)
    facts = collect_kernel_log(CollectContext(System(runner=runner, files=Files(Path("/")), env={}), light))
    assert isinstance(facts.readable, Unavailable) and "no NVIDIA kernel driver" in facts.readable.reason
    assert runner.calls == []
    assert [e.xid for e in collect_kernel_log(live(runner)).events] == [79, 13]  # full level: read
    monkeypatch.setattr(nvidia, "kernel_driver_absent", lambda files: False)
    facts = collect_kernel_log(CollectContext(System(runner=runner, files=Files(Path("/")), env={}), light))
    assert [e.xid for e in facts.events] == [79, 13]


def test_kernel_driver_absent_reads_the_driver_signs(tmp_path):
    from gpudoctor.collect.nvidia import kernel_driver_absent

    assert kernel_driver_absent(Files(tmp_path))
    for sign in ("proc/driver/nvidia", "dev/nvidiactl", "dev/dxg", "sys/module/nvidia"):
        root = tmp_path / sign.replace("/", "_")
        (root / sign).mkdir(parents=True)
        assert not kernel_driver_absent(Files(root)), sign
