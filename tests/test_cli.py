"""The CLI end to end: exit codes, formats, snapshot and replay, bad input (one line, exit 2)."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from _foundation import (  # noqa: F401
    GPUDOCTOR,
    bare_python,
    cudnn_broken_torch,
    env_with,
    run_gpudoctor,
    validator,
)
from conftest import FIXTURES
from gpudoctor import __version__
from gpudoctor.cli import cli, main
from gpudoctor.model import Check, Status
from gpudoctor.registry import Registry
from gpudoctor.system import SubprocessRunner

SNAP = FIXTURES / "facts"


def one_error_line(proc):
    """stderr is exactly one ``gpudoctor: error: ...`` line, with no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpudoctor: error: ")
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    return lines[0]


# ----------------------------------------------------------------- live runs on this machine


@pytest.fixture(scope="module")
def live_json():
    proc = run_gpudoctor("check", "--format", "json")
    return proc


def test_live_check_json_validates_and_exits_by_findings(live_json):
    assert live_json.returncode in (0, 1), live_json.stderr
    doc = json.loads(live_json.stdout)
    validator("report.schema.json").validate(doc)
    assert doc["gpudoctor_version"] == __version__
    checks = [f["check"] for f in doc["findings"]]
    assert {"nvidia.driver", "torch.install"} <= set(checks)
    assert live_json.returncode == (1 if doc["counts"]["fail"] else 0)
    torch = next(f for f in doc["findings"] if f["check"] == "torch.install")
    assert "2.13.0" in torch["summary"]  # the test venv's torch, probed for real
    assert live_json.stderr == ""  # no spinner or noise when piped


def test_snapshot_then_replay_gives_the_same_findings(tmp_path, live_json):
    snap = tmp_path / "f.json"
    made = run_gpudoctor("facts", "-o", str(snap))
    assert made.returncode == 0, made.stderr
    validator("facts.schema.json").validate(json.loads(snap.read_text()))
    replay = run_gpudoctor("check", "--facts", str(snap), "--format", "json")
    assert replay.returncode == live_json.returncode, replay.stderr
    live, again = json.loads(live_json.stdout), json.loads(replay.stdout)
    key = lambda d: [(f["check"], f["status"], f["summary"], f["target"]) for f in d["findings"]]
    assert key(again) == key(live)
    assert again["counts"] == live["counts"] and again["status"] == live["status"]
    # replay works from stdin too, and needs nothing from this machine
    piped = run_gpudoctor("check", "--facts", "-", "--format", "json", input=snap.read_text())
    assert key(json.loads(piped.stdout)) == key(live)


def test_check_python_bare_venv_fails_torch_missing(bare_python):
    proc = run_gpudoctor("check", "torch.install", "--python", bare_python, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    (f,) = [f for f in json.loads(proc.stdout)["findings"] if not f["target"].startswith("kernel:")]  # kernels too
    assert f["status"] == "fail" and f["summary"].startswith("PyTorch is not installed in ")
    assert f["target"] == bare_python
    assert "-m pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/" in f["explanation"]


def test_check_python_with_broken_torch_import(bare_python, cudnn_broken_torch):
    proc = run_gpudoctor("check", "torch", "--python", bare_python, env=env_with(PYTHONPATH=cudnn_broken_torch))
    assert proc.returncode == 1, proc.stderr
    assert "OSError: libcudnn.so.8: cannot open shared object file" in proc.stdout
    assert "[FAIL] torch.install" in proc.stdout


def test_check_root_inspects_an_image_root(tmp_path):
    from gpudoctor.testing import write_tree

    case = (FIXTURES / "cases" / "01-driver-470-vs-torch-cu121" / "proc-driver-nvidia-version.txt").read_text()
    write_tree(
        tmp_path,
        {
            "/proc/driver/nvidia/version": case,
            "/sys/bus/pci/devices/0000:01:00.0/vendor": "0x10de\n",
            "/sys/bus/pci/devices/0000:01:00.0/device": "0x25a2\n",
            "/sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
        },
    )
    proc = run_gpudoctor("check", "nvidia", "torch", "--root", str(tmp_path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {f["check"]: f for f in json.loads(proc.stdout)["findings"]}
    assert rows["nvidia.driver"]["status"] == "ok" and rows["nvidia.driver"]["summary"] == "NVIDIA driver 470.86"
    assert rows["torch.install"]["status"] == "skip" and "--root" in rows["torch.install"]["summary"]


# ----------------------------------------------------------------- exit codes from snapshots


@pytest.mark.parametrize(
    "fixture, code",
    [
        ("no-gpu-cpu-torch.json", 0),
        ("gpu-driver-550-cpu-torch.json", 1),
        ("empty.json", 4),  # nothing judged: unknown (issue 32)
    ],
)
def test_exit_code_follows_findings(fixture, code):
    proc = run_gpudoctor("check", "nvidia", "torch", "--facts", str(SNAP / fixture))
    assert proc.returncode == code, proc.stderr


def _fake_registry(monkeypatch, *checks):
    from gpudoctor.cli import check as check_command

    reg = Registry(checks={c.id: c for c in checks}, providers={f"check:{c.id}": "test 0" for c in checks})
    monkeypatch.setattr(check_command, "load_registry", lambda: reg)


def _status_check(id_, status, summary="x", **kw):
    return Check(
        id=id_, title=id_, needs=(), evaluate=lambda facts: [Check(id_, "", (), None).finding(status, summary, **kw)]
    )


def _main(*args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


def test_strict_turns_warnings_into_exit_1(monkeypatch, capsys):
    _fake_registry(monkeypatch, _status_check("a.warn", Status.WARN, "slow data loading"))
    args = ("check", "--facts", str(SNAP / "empty.json"))
    assert _main(*args) == 0
    assert _main(*args, "--strict") == 1
    assert "slow data loading" in capsys.readouterr().out


def test_crashing_check_is_an_error_finding_with_traceback_under_verbose(monkeypatch, capsys):
    def boom(facts):
        raise RuntimeError("kaboom in check")

    _fake_registry(monkeypatch, Check("a.crash", "crash", (), boom), _status_check("b.fine", Status.OK, "fine"))
    assert _main("check", "--facts", str(SNAP / "empty.json")) == 3  # the verdict is incomplete
    out = capsys.readouterr().out
    assert "[ERROR] a.crash  the check itself failed: RuntimeError: kaboom in check" in out
    assert "[ok] b.fine  fine" not in out and "1 error, 1 ok" in out  # ok is folded into its area
    assert "Traceback" not in out
    assert _main("check", "-v", "--facts", str(SNAP / "empty.json")) == 3
    out = capsys.readouterr().out
    assert "Traceback (most recent call last)" in out and "kaboom in check" in out


def test_internal_error_is_one_line_exit_3_with_a_crash_log(monkeypatch, capsys, tmp_path):
    import tempfile

    from gpudoctor import engine

    def broken_run(*a, **kw):
        raise AttributeError("'NoneType' object has no attribute 'findings'")

    monkeypatch.setattr(engine, "run", broken_run)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert _main("check", "--facts", str(SNAP / "empty.json")) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gpudoctor: internal error: AttributeError: 'NoneType' object has no attribute")
    assert "this is a bug" in err[0]
    (log,) = tmp_path.glob("gpudoctor-crash-*.log")
    assert str(log) in err[0]
    assert "Traceback" in log.read_text() and "broken_run" in log.read_text()


def test_interrupt_exits_130(monkeypatch, capsys):
    from gpudoctor import engine

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "run", interrupted)
    assert _main("check", "--facts", str(SNAP / "empty.json")) == 130
    assert "interrupted" in capsys.readouterr().err


# ----------------------------------------------------------------- bad input: one line, exit 2


def test_snapshot_that_is_not_json(tmp_path):
    bad = tmp_path / "f.json"
    bad.write_text("NVRM version: not json at all\n")
    line = one_error_line(run_gpudoctor("check", "--facts", str(bad)))
    assert f"--facts {bad}: not JSON" in line


def test_snapshot_that_is_binary(tmp_path):
    import gzip

    bad = tmp_path / "f.json.gz"
    bad.write_bytes(gzip.compress(b'{"schema_version": 1, "domains": {}}'))
    proc = run_gpudoctor("check", "--facts", str(bad))
    assert proc.returncode == 2
    assert f"--facts {bad}" in one_error_line(proc)


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"schema_version": 99, "domains": {}}, "reads facts schemas 1, 2, the file has 99"),
        ({"domains": {}}, "the file has none"),
        ([1, 2], "a facts snapshot is a JSON object"),
        ({"schema_version": 1, "domains": []}, "$.domains: expected an object"),
        ({"schema_version": 1, "domains": {"shm": {"path": "/dev/shm"}}}, "$.domains.shm"),
        (
            {
                "schema_version": 1,
                "domains": {"cpu": {"logical_cpus": "eight", "affinity_cpus": 8, "cgroup_version": 2, "quota": None}},
            },
            "$.domains.cpu.logical_cpus",
        ),
        ({"schema_version": 1, "domains": {}, "durations_ms": [1, 2]}, "durations_ms"),
    ],
)
def test_snapshot_that_does_not_match(tmp_path, doc, message):
    f = tmp_path / "f.json"
    f.write_text(json.dumps(doc))
    proc = run_gpudoctor("check", "--facts", str(f))
    assert proc.returncode == 2, proc.stderr
    assert message in one_error_line(proc)


def test_missing_snapshot(tmp_path):
    proc = run_gpudoctor("check", "--facts", str(tmp_path / "nope.json"))
    assert proc.returncode == 2
    assert "No such file or directory" in one_error_line(proc)


@pytest.mark.parametrize(
    "args, message",
    [
        (["check", "cuda.nonexistent"], "no check matches 'cuda.nonexistent'"),
        (["check", "--skip", "nope"], "no check matches 'nope'"),
        (["facts", "nope"], "no check matches 'nope'"),
        (["check", "--python", "/nonexistent/bin/python"], "--python /nonexistent/bin/python: no such file"),
        (["check", "--python", "python-gpudoctor-missing"], "not found on PATH"),
        (["check", "--root", "/nonexistent-root-dir"], "--root /nonexistent-root-dir: not a directory"),
        (["check", "--format", "yaml"], "'yaml' is not one of"),
        (["check", "--probe-timeout", "0"], "--probe-timeout"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_errors(args, message):
    proc = run_gpudoctor(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in one_error_line(proc)


def test_root_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    proc = run_gpudoctor("check", "--root", str(f), "--skip", "torch")
    assert proc.returncode == 2
    assert "not a directory" in one_error_line(proc)


def test_python_that_is_not_executable(tmp_path):
    f = tmp_path / "python"
    f.write_text("")
    assert "not executable" in one_error_line(run_gpudoctor("check", "--python", str(f)))


@pytest.mark.parametrize("fmt", ["json", "markdown", "console"])
def test_output_into_a_missing_directory(tmp_path, fmt):
    target = tmp_path / "no" / "such" / "report.json"
    proc = run_gpudoctor("check", "--facts", str(SNAP / "empty.json"), "--format", fmt, "-o", str(target))
    assert proc.returncode == 2
    assert str(target) in one_error_line(proc)


# ----------------------------------------------------------------- formats


def test_console_plain_when_piped():
    proc = run_gpudoctor("check", "nvidia", "torch.install", "--facts", str(SNAP / "gpu-driver-550-cpu-torch.json"))
    assert proc.returncode == 1
    out = proc.stdout
    assert "\x1b[" not in out
    assert "[ok] nvidia.driver" not in out  # ok findings are folded into their area ...
    assert "[FAIL] GPU stack (2 checks): 1 failed, 1 ok" in out
    assert "  [FAIL] torch.install  torch 2.5.1+cpu in [current] is a CPU-only build" in out
    assert "  target: [current] /home/user/venv/bin/python" in out  # the long path is named once
    assert (
        "      /home/user/venv/bin/python -m pip install --force-reinstall torch --index-url "
        "https://download.pytorch.org/whl/cu126" in out
    )  # the explanation, indented, full paths kept
    assert "2 findings in 1 area: 1 failed, 1 ok" in out
    lines = out.rstrip().splitlines()
    assert lines[-2] == "Next steps:"
    assert lines[-1].startswith("  1. /home/user/venv/bin/python -m pip install --force-reinstall torch")
    verbose = run_gpudoctor(
        "check", "nvidia", "torch.install", "-v", "--facts", str(SNAP / "gpu-driver-550-cpu-torch.json")
    ).stdout
    assert (
        "  [ok] nvidia.driver  NVIDIA driver 550.54.15 (supports CUDA up to 12.4), 1 GPU" in verbose
    )  # ... not with -v
    assert proc.stderr == ""


def test_console_verbose_shows_evidence():
    proc = run_gpudoctor("check", "nvidia", "--facts", str(SNAP / "no-gpu-cpu-torch.json"), "-v")
    assert "attempts:" in proc.stdout and "nvml: failed: libnvidia-ml.so.1 could not be loaded" in proc.stdout
    assert "Looked at:" in proc.stdout  # skip explanations appear with -v only
    quiet = run_gpudoctor("check", "nvidia", "--facts", str(SNAP / "no-gpu-cpu-torch.json"))
    assert "Looked at:" not in quiet.stdout and "attempts:" not in quiet.stdout


def _run_in_pty(args, env):
    master, slave = pty.openpty()
    proc = subprocess.Popen([*GPUDOCTOR, *args], stdout=slave, stderr=slave, stdin=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_console_colour_on_a_terminal_and_plain_with_no_color():
    args = ["check", "nvidia", "torch", "--facts", str(SNAP / "gpu-driver-550-cpu-torch.json")]
    env = env_with(TERM="xterm-256color", COLUMNS="120")
    env.pop("NO_COLOR", None)
    code, out = _run_in_pty(args, env)
    assert code == 1
    assert "\x1b[" in out and "✗" in out
    # a command to copy is never broken by the renderer (the terminal soft-wraps it)
    assert "install --force-reinstall torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124" in out
    code, out = _run_in_pty(args, env_with(TERM="xterm-256color", NO_COLOR="1"))
    assert code == 1
    assert "\x1b[" not in out
    assert "[FAIL] torch.install" in out


def test_markdown_format():
    proc = run_gpudoctor(
        "check", "nvidia", "torch", "--facts", str(SNAP / "three-targets.json"), "--format", "markdown"
    )
    assert proc.returncode == 1
    md = proc.stdout
    assert md.startswith(f"## gpudoctor {__version__} report\n")
    assert md.splitlines()[2].startswith("✗ **fail** — torch.install: `import torch` fails in [python-1]")
    assert md.splitlines()[2].endswith("(+1 more)")
    assert "Targets: `[current]` `/home/user/venv/bin/python`; `[python-1]` `/opt/envs/old/bin/python`" in md
    assert "<details open><summary>✗ <b>GPU stack</b>" in md  # one collapsible block per area
    assert md.count("<details") == md.count("</details>")
    assert "- i **info** `torch.install` — [current] torch 2.13.0+cpu is a CPU-only build" in md
    assert "- ✗ **fail** `torch.install` — `import torch` fails in [python-1]" in md
    # remedies are data: the step is the finding's first command, with its check
    assert "### Next steps" in md and "1. `/opt/envs/old/bin/python -c 'import torch'` (torch.install)" in md


def test_json_format_to_file(tmp_path):
    out = tmp_path / "r.json"
    proc = run_gpudoctor("check", "--facts", str(SNAP / "three-targets.json"), "--format", "json", "-o", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    doc = json.loads(out.read_text())
    validator("report.schema.json").validate(doc)
    assert doc["status"] == "fail"
    assert [f["target"] for f in doc["findings"] if f["check"] == "torch.install"] == [
        "current",
        "/opt/envs/old/bin/python",
        "/opt/envs/hang/bin/python",
    ]


# ----------------------------------------------------------------- version and help


def test_version_via_module_and_script():
    for argv in ([sys.executable, "-m", "gpudoctor", "--version"], [*GPUDOCTOR, "-V"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0
        assert proc.stdout.strip() == f"gpudoctor, version {__version__}"


def test_help_lists_commands_in_order():
    proc = run_gpudoctor("--help")
    assert proc.returncode == 0
    lines = [ln.split()[0] for ln in proc.stdout.split("Commands:")[1].strip().splitlines()]
    assert lines[:3] == ["check", "facts", "list"]


HERE = Path(__file__).resolve().parent


def test_no_finding_suggests_a_command_that_does_not_exist():
    sources = [p.read_text() for p in (HERE.parent / "src" / "gpudoctor").rglob("*.py")]
    # `gpudoctor report` exists since issue 14 with the one subcommand `merge`: any other is made up
    import re

    from gpudoctor.cli import cli

    report = cli.get_command(None, "report")
    assert report is not None and set(report.commands) == {"merge"}
    assert {m for s in sources for m in re.findall(r"gpudoctor report ([a-z-]+)", s)} <= {"merge"}


# --------------------------------------------------------------------------- (issue 19) 2. contradictory flags


@pytest.mark.parametrize(
    "args, a, b",
    [
        (["check", "--offline", "--rank-mirrors"], "--offline", "--rank-mirrors"),
        (["check", "--offline", "--mirror-budget", "3"], "--offline", "--mirror-budget"),
        (["check", "--facts", "snapshot.json", "--rank-mirrors"], "--facts", "--rank-mirrors"),
        (["check", "--facts", "snapshot.json", "--deep"], "--facts", "--deep"),
        (["mirrors", "--offline", "--budget", "2"], "--offline", "--budget"),
        (["mirrors", "--offline", "--timeout", "1"], "--offline", "--timeout"),
        (["fix", "--offline", "--rank-mirrors", "apt.mirror"], "--offline", "--rank-mirrors"),
        (["fix", "--offline", "--mirror", "fastest", "apt.mirror"], "--offline", "--mirror fastest"),
    ],
)
def test_contradictory_flags_are_a_usage_error_naming_both(tmp_path, args, a, b):
    (tmp_path / "snapshot.json").write_text("{}")
    proc = subprocess.run([*GPUDOCTOR, *args], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"{a} and {b} contradict each other" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_compatible_neighbours_are_still_accepted():
    # --offline alone, and --mirror-budget without --offline, are fine
    assert CliRunner().invoke(cli, ["check", "dataloader.cpu", "--offline"]).exit_code in (0, 1)
    ok = CliRunner().invoke(cli, ["mirrors", "pip", "--offline"])
    assert ok.exit_code == 0, ok.output


# --------------------------------------------------------------------------- (hardening) (hardening) main() called in process


def test_main_called_in_process_gives_the_callers_signal_handlers_back():
    """An in-process main() used to leave SIGTERM/SIGHUP ignored: every process the caller
    started afterwards inherited SIG_IGN and could no longer be terminated."""
    from gpudoctor.cli import main

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for argv in (["--version"], ["check", "--facts", "/nonexistent.json"], ["list"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert {s: signal.getsignal(s) for s in before} == before, argv


def test_an_interrupted_in_process_main_lets_the_caller_run_commands_afterwards():
    """An interrupt stops new commands until that main() ends (so its own worker threads start
    nothing more); the caller's later commands run as before."""
    from gpudoctor.cli import main

    interrupt_parent = "import os, signal; os.kill(os.getppid(), signal.SIGINT)"
    with pytest.raises(SystemExit) as exited:
        main(["explain", "--no-check", "--", sys.executable, "-c", interrupt_parent])
    assert exited.value.code == 130
    r = SubprocessRunner().run([sys.executable, "-c", "print('after')"], timeout_s=60)
    assert r.ok and r.stdout == "after\n", r
