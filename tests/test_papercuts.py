"""Issue 19, newcomer papercuts: network line, contradictory flags, machine-fit DataLoader advice,
the probe's budget, old target Pythons, counting words.

CLI tests run the real command (click's runner, or the installed console script where the
process itself is measured) on temp HOMEs, fake roots and local servers on 127.0.0.1.
"""

from __future__ import annotations

import glob
import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from _foundation import GPUDOCTOR, run_gpudoctor
from gpudoctor.cli import cli
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.probe import _dataloader_report as report
from gpudoctor.words import noun, plural, verb

# --------------------------------------------------------------------------- 1. which hosts a run contacted


def _pip_root(tmp_path: Path, index: str) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/pip.conf").write_text(f"[global]\nindex-url = {index}/simple\n")
    return root


@pytest.fixture
def no_pip_env(monkeypatch):
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.slow
def test_report_names_the_hosts_contacted_and_offline_says_none(tmp_path, no_pip_env):
    with FakeMirror() as index:
        root = _pip_root(tmp_path, index.url)
        online = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root)])
        assert index.requests, "the configured pip index was not probed"
        lines = online.output.splitlines()
        assert "network: contacted 1 host: 127.0.0.1" in lines, online.output
        # after the closing count line, before the next steps
        count = next(i for i, ln in enumerate(lines) if re.match(r"\d+ findings? in \d+ areas?:", ln))
        assert lines[count + 1] == "network: contacted 1 host: 127.0.0.1"
        md = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--format", "markdown"])
        assert "Network: contacted 1 host: 127.0.0.1" in md.output
        sent = len(index.requests)
        offline = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--offline"])
        assert len(index.requests) == sent  # nothing was sent
        assert "network: none (--offline)" in offline.output.splitlines(), offline.output


def test_no_network_line_when_no_index_was_looked_at():
    result = CliRunner().invoke(cli, ["check", "dataloader.cpu", "--offline"])
    assert "1 finding in 1 area" in result.output
    assert "network:" not in result.output


def test_network_line_from_facts_counts_distinct_hosts_and_skips_local():
    from gpudoctor.facts.mirrors import MirrorProbe, MirrorsFacts
    from gpudoctor.render.layout import network_line
    from gpudoctor.testing import make_facts

    def p(url, status="ok", role="candidate"):
        return MirrorProbe("m", "pip", "pypi", url, url + "/six/", role, False, status)

    facts = make_facts(
        mirrors=MirrorsFacts(
            offline=False,
            ranked=True,
            budget_s=5.0,
            catalogue_origin="test",
            catalogue=(),
            configured=(p("https://a.example.org/simple", role="configured"), p("file:///srv/wheels", "local")),
            rankings={"pip": (p("https://b.example.org/pypi/simple", "timeout"), p("https://a.example.org/x"))},
        )
    )
    assert network_line(facts) == "contacted 2 hosts: a.example.org, b.example.org"
    assert network_line(facts, replayed=True).endswith("(when the snapshot was collected)")
    assert network_line(make_facts()) is None


# --------------------------------------------------------------------------- 2. contradictory flags


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


# --------------------------------------------------------------------------- 3. advice that fits the machine

#: A recorded measurement of a CPU-bound loader: both usable CPUs busy decoding, 40 % data stall.
CPU_BOUND = {
    "config": {"num_workers": 2, "prefetch_factor": 2, "persistent_workers": True, "pin_memory": False},
    "samples_per_s": 410.0,
    "stall_fraction": 0.4,
    "workers_cpu_busy": 0.96,
    "host_cpu_busy": 0.97,
}


def test_cpu_bound_without_a_gpu_advises_cpu_side_remedies_only():
    (lim,) = report.limits([CPU_BOUND], 0, {"usable": 2}, budget_exhausted=False, gpu_usable=False)
    assert lim["kind"] == "cpu-bound"
    detail = lim["detail"]
    for remedy in (
        "pre-process offline into ready tensors",
        "Pillow-SIMD",
        "reduced-size",
        "cache decoded samples",
        "cgroup quota",
    ):
        assert remedy in detail
    assert "DALI" not in detail and "device='cuda'" not in detail
    assert "no CUDA device is usable" in detail


def test_cpu_bound_with_a_gpu_advises_gpu_decoding_first():
    (lim,) = report.limits([CPU_BOUND], 0, {"usable": 2}, budget_exhausted=False, gpu_usable=True)
    assert lim["detail"].startswith("move decode/augmentation to the GPU")
    assert "DALI" in lim["detail"] and "device='cuda'" in lim["detail"]
    assert "pre-process offline" in lim["detail"]


def test_search_reports_whether_a_gpu_was_usable(monkeypatch):
    from gpudoctor.probe import _dataloader_search as search_mod

    monkeypatch.setattr(search_mod, "measure", lambda *a, **k: dict(CPU_BOUND, config=a[2]))
    doc = search_mod.search(
        None, 8, None, budget_s=2.0, config_s=0.3, cpus={"usable": 2, "logical": 2}, gpu_usable=False
    )
    assert doc["gpu_usable"] is False
    assert all("DALI" not in lim["detail"] for lim in doc["limits"])


# --------------------------------------------------------------------------- 4. the budget bounds the command

BUDGET_S = 6.0
#: Slack allowed over --budget-s on this loaded 2-core machine (interpreter start before
#: gpudoctor can measure anything, scheduling noise).
SLACK_S = 3.0


@pytest.mark.slow
def test_probe_budget_bounds_the_whole_command(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path))
    started = time.monotonic()
    proc = subprocess.run(
        [
            *GPUDOCTOR,
            "probe",
            "dataloader",
            "--synthetic",
            "image",
            "--cost-ms",
            "1",
            "--image-size",
            "16",
            "--batch-size",
            "4",
            "--step-ms",
            "5",
            "--budget-s",
            str(BUDGET_S),
            "--format",
            "json",
            "--no-save",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["budget_s"] == BUDGET_S
    # the target got what start-up left, minus the reserve for reporting
    assert doc["probe_budget_s"] < BUDGET_S - 0.6
    # the bound holds unless start-up alone ate the budget (a loaded machine can take seconds to
    # import torch): what gpudoctor used before starting the target (with the reporting reserve),
    # the target's own start-up, and the search's minimum (MIN_SEARCH_S)
    floor = (BUDGET_S - doc["probe_budget_s"]) + doc["startup_s"] + 1.0
    bound = max(BUDGET_S, floor) + SLACK_S
    assert doc["command_elapsed_s"] <= bound, (doc["command_elapsed_s"], doc["startup_s"])
    assert wall <= bound + 0.5, (wall, doc["command_elapsed_s"], doc["wall_s"], doc["startup_s"])
    import torch

    assert doc["gpu_usable"] is torch.cuda.is_available()


def test_budget_help_says_what_it_bounds():
    out = CliRunner().invoke(cli, ["probe", "dataloader", "--help"], terminal_width=200).output
    assert "Wall-clock budget of the whole command" in " ".join(out.split())
    assert "from gpudoctor's start to the printed result" in " ".join(out.split())


# --------------------------------------------------------------------------- 6. old target Pythons

FAKE_PY27 = """#!/bin/sh
# answers like a Python 2.7 interpreter: the version one-liner, and a SyntaxError for the probes
if [ "$1" = "-c" ]; then
  printf '2.7'
  exit 0
fi
echo "  File \\"$1\\", line 6" >&2
echo "SyntaxError: Non-ASCII character '\\xe2' in file $1 on line 6, but no encoding declared" >&2
exit 1
"""


def _fake_python27(tmp_path: Path) -> str:
    path = tmp_path / "py27" / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text(FAKE_PY27)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def _real(version: str) -> list:
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")))
    return found[:1] + sorted(glob.glob(f"/usr/bin/python{version}"))[:1]


def _py27_candidates(tmp_path: Path) -> list:
    return [_fake_python27(tmp_path)] + _real("2.7")


def test_python27_target_is_a_clear_finding(tmp_path):
    for py in _py27_candidates(tmp_path):
        result = CliRunner().invoke(cli, ["check", "torch.install", "--offline", "--python", py])
        out = " ".join(result.output.split())
        assert result.exit_code == 1, result.output
        assert "is Python 2.7: gpudoctor's probe needs Python 3.6 or newer" in out, py
        assert "the newest torch for Python 2.7 is 1.4.0" in out
        assert "AttributeError" not in out and "run the interpreter by hand" not in out
        assert "| 3.6 | 1.10.2 |" in result.output  # the table says what each Python can install


def test_python27_dataloader_probe_says_so(tmp_path):
    for py in _py27_candidates(tmp_path):
        result = CliRunner().invoke(
            cli, ["probe", "dataloader", "--synthetic", "image", "--python", py, "--budget-s", "3", "--no-save"]
        )
        assert result.exit_code == 2
        assert f"--python {py} is Python 2.7; the DataLoader probe runs on Python 3.7 or newer" in result.output
        assert "1.4.0" in result.output


def test_python36_without_torch_is_offered_a_torch_it_can_install():
    from gpudoctor.checks import torch_install
    from gpudoctor.facts.targets import TorchFacts
    from gpudoctor.testing import make_facts, probe_facts, target, targets

    for version, pin in (("3.6.15", "torch==1.10.2"), ("3.8.18", "torch==2.4.1"), ("3.9.18", "torch==2.8.0")):
        probe = probe_facts("/opt/old/bin/python", TorchFacts(installed=False), python_version=version)
        (f,) = torch_install.evaluate(make_facts(targets=targets(target(probe))))
        assert f"-m pip install --force-reinstall {pin} --index-url" in f.explanation, version
    probe = probe_facts("/opt/new/bin/python", TorchFacts(installed=False), python_version="3.11.7")
    (f,) = torch_install.evaluate(make_facts(targets=targets(target(probe))))
    assert "--force-reinstall torch --index-url" in f.explanation


def test_cuda_variants_offered_to_an_old_python_carry_its_torch():
    from packaging.version import Version

    from gpudoctor.checks._common import (
        best_variant_for_driver,
        pip_install_command,
        variant_fits_python,
    )

    for version, last in (("3.6", "1.10.2"), ("3.7", "1.13.1"), ("3.8", "2.4.1"), ("3.9", "2.8.0")):
        row = best_variant_for_driver("580.65.06", version)
        assert row is not None and variant_fits_python(row, version)
        assert Version(row["first_torch"]) <= Version(last)
        cmd = pip_install_command("py", row, None, python_version=version)
        assert f"torch=={last}" in cmd or Version(row["newest_torch"]) <= Version(last), cmd
        # a newer torch asked for explicitly is capped too
        assert f"torch=={last} " in pip_install_command("py", row, "2.13.0", python_version=version)
    assert "torch==2.13.0" in pip_install_command(
        "py", best_variant_for_driver("580.65.06", "3.12"), "2.13.0", python_version="3.12.1"
    )


# --------------------------------------------------------------------------- 7. counting words


def test_words():
    assert plural(1, "kernel") == "1 kernel" and plural(2, "kernel") == "2 kernels" and plural(0, "file") == "0 files"
    assert plural(2, "index", "indexes") == "2 indexes" and plural(1.0, "CPU") == "1 CPU"
    assert plural(1.5, "CPU") == "1.5 CPUs"
    assert noun(1, "file") == "file" and verb(1, "is", "are") == "is" and verb(2, "is", "are") == "are"


def _broken_kernels(home: Path, n: int) -> None:
    for i in range(n):
        d = home / ".local/share/jupyter/kernels" / f"gone{i}"
        d.mkdir(parents=True)
        (d / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [f"/nonexistent/env{i}/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": f"Gone {i}",
                    "language": "python",
                }
            )
        )


_KERNELS_RE = re.compile(r"(\d+) of (\d+) (Python kernels?) (is|are) broken or (does|do) not see")


@pytest.mark.parametrize("n", [1, 2])
def test_kernel_summary_agrees_with_its_counts(isolated_home, n):
    _broken_kernels(isolated_home, n)
    result = CliRunner().invoke(cli, ["check", "jupyter.kernels", "--offline"])
    m = _KERNELS_RE.search(" ".join(result.output.split()))
    assert m, result.output
    bad, total, noun_, is_are, do_does = m.groups()
    assert int(bad) == n
    assert noun_ == ("Python kernel" if total == "1" else "Python kernels")
    assert (is_are, do_does) == (("is", "does") if n == 1 else ("are", "do"))


@pytest.mark.parametrize("usable, text", [(1, "the only usable CPU busy"), (2, "all 2 usable CPUs busy")])
def test_probe_limits_count_cpus(usable, text):
    (lim,) = report.limits([CPU_BOUND], 0, {"usable": usable}, budget_exhausted=False, gpu_usable=False)
    assert text in lim["summary"]
    rec = dict(CPU_BOUND, workers_cpu_busy=0.9, host_cpu_busy=0.3)
    rec["config"] = dict(CPU_BOUND["config"], num_workers=1)
    (lim,) = report.limits([rec], 0, {"usable": usable + 4}, budget_exhausted=False)
    assert f"with 1 of {usable + 4} usable CPUs as workers" in lim["summary"]


def test_fix_history_and_undo_are_modes_of_their_own():
    """`fix --all --undo` used to undo silently, `--history --undo` to ignore --undo."""
    for args, named in (
        (["--all", "--undo"], "--undo and --all"),
        (["--history", "--undo"], "--history and --undo"),
        (["--history", "--all"], "--history and --all"),
    ):
        proc = run_gpudoctor("fix", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert named in proc.stderr and "contradict" in proc.stderr


def test_an_empty_snapshot_is_said_to_be_empty():
    proc = run_gpudoctor("check", "--facts", "-", input='{"schema_version": 2, "domains": {}}')
    assert proc.returncode == 4  # unknown, never OK (issue 32)
    assert proc.stdout.splitlines()[0].startswith(
        "[n/a] gpudoctor: UNKNOWN — the snapshot holds no facts: nothing was judged"
    )
