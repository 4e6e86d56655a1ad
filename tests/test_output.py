"""The one output writer (gpudoctor.output): regular files only, atomic, redacted; device nodes
(made with mknod in a temporary directory), FIFOs, sockets and directories refused, through the
module and through every CLI flag that writes a file."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from _foundation import run_gpudoctor
from gpudoctor import output

FACTS = Path(__file__).resolve().parent / "fixtures" / "facts" / "case01-driver-470-torch-cu121.json"
ROOT = os.geteuid() == 0


def char_device(tmp_path: Path) -> Path:
    """A character device with /dev/null's numbers, in a temporary directory (needs root)."""
    node = tmp_path / "nulldev"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return node


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def unix_socket(tmp_path: Path) -> Path:
    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return path


SPECIALS = [
    pytest.param(char_device, "a character device", marks=pytest.mark.skipif(not ROOT, reason="mknod needs root")),
    pytest.param(fifo, "a FIFO"),
    pytest.param(unix_socket, "a socket"),
    pytest.param(lambda p: p, "a directory"),
]


@pytest.mark.parametrize(("make", "kind"), SPECIALS)
def test_a_path_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, make, kind):
    path = make(tmp_path)
    before = os.stat(path)
    with pytest.raises(output.OutputRefused, match=kind):
        output.write_text(str(path), "report\n")
    after = os.stat(path)
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gpudoctor-")] == []


@pytest.mark.parametrize(("make", "kind"), SPECIALS)
def test_a_link_to_a_special_file_is_refused(tmp_path, make, kind):
    target = make(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(output.OutputRefused, match=kind):
        output.write_text(str(link), "x")
    assert link.is_symlink()


def test_a_link_to_a_regular_file_replaces_that_file_and_keeps_the_link(tmp_path):
    real = tmp_path / "reports" / "node.json"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    output.write_text(str(link), "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600  # an existing file keeps its mode


def test_the_text_is_redacted_and_a_new_file_gets_the_given_mode(tmp_path):
    path = tmp_path / "out.txt"
    output.write_text(str(path), "index-url = https://user:s3cret@mirror.example.org/simple\n", mode=0o640)
    assert "s3cret" not in path.read_text() and "mirror.example.org" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "status.json"
    path.write_text("old")

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "replace", broken)
    with pytest.raises(OSError, match="No space"):
        output.write_text(str(path), "new")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--facts", str(FACTS), "-o", "{path}"],
        ["check", "--facts", str(FACTS), "--format", "json", "-o", "{path}"],
        ["check", "--facts", str(FACTS), "--format", "prometheus", "-o", "{path}"],
        ["gate", "--status-file", "{path}"],
        ["explain", "--no-check", "{log}", "-o", "{path}"],
    ],
    ids=["check-console", "check-json", "check-prometheus", "gate-status-file", "explain"],
)
@pytest.mark.parametrize("make", [fifo, pytest.param(char_device, marks=pytest.mark.skipif(not ROOT, reason="root"))])
def test_every_cli_flag_that_writes_refuses_a_special_file_before_running(tmp_path, argv, make):
    special = make(tmp_path)
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n")
    args = [a.format(path=special, log=log) for a in argv]
    proc = run_gpudoctor(*args, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
    mode = os.stat(special).st_mode
    assert stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def test_stdout_is_dash(tmp_path):
    proc = run_gpudoctor("check", "--facts", str(FACTS), "--format", "json", "-o", "-")
    assert proc.returncode == 1 and proc.stdout.lstrip().startswith("{")
