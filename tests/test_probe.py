"""The probe, run for real in target interpreters: the test venv's torch 2.13.0, a bare venv,
fake torch packages that fail or hang at import, and interpreters that do not exist."""

from __future__ import annotations

import glob
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from _foundation import (  # noqa: F401
    CUDNN_ERROR,
    GPUDOCTOR,
    bare_python,
    cudnn_broken_torch,
    env_with,
    fake_torch,
    hanging_torch,
    run_gpudoctor,
)
from gpudoctor.cli import cli
from gpudoctor.facts import Unavailable
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.probe import (
    MARKER,
    ProbeError,
    parse_probe_output,
    probe_argv,
    probe_target,
)
from gpudoctor.system import System
from gpudoctor.testing import ScriptedRunner, not_found, ok, timed_out


@pytest.fixture(scope="module")
def real_torch_probe():
    return probe_target(System(), sys.executable, timeout_s=120)


@pytest.mark.slow  # the first real `import torch` takes ~5 s on a busy 2-core machine
def test_probe_real_torch_cpu_build(real_torch_probe):
    p = real_torch_probe
    assert isinstance(p, ProbeFacts), p
    assert p.probe_version == 1
    assert p.executable == sys.executable
    assert p.python_version == "{}.{}.{}".format(*sys.version_info[:3])
    assert p.implementation == "cpython"
    assert p.prefix == sys.prefix and p.base_prefix == sys.base_prefix
    assert p.is_venv is (sys.prefix != sys.base_prefix)
    assert p.is_conda is False
    assert p.include_dir.endswith("python{}.{}".format(*sys.version_info[:2]))
    t = p.torch
    assert t.installed and t.import_ok and t.import_error is None
    assert t.dist_version.startswith("2.13.0") and t.version.startswith("2.13.0")
    assert t.cuda is None and t.hip is None
    assert t.is_cpu_build
    assert t.cuda_available is False
    assert t.device_count == 0
    assert t.arch_list == ()
    assert t.location and t.location.endswith("torch")
    assert p.duration_ms > 0


@pytest.mark.slow
def test_probe_reports_relevant_environment_only():
    env = env_with(
        CUDA_VISIBLE_DEVICES="1,0",
        PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
        LD_LIBRARY_PATH="/opt/lib",
        GD_UNRELATED="x",
    )
    p = probe_target(System(env=env), sys.executable, timeout_s=120)
    assert isinstance(p, ProbeFacts), p
    assert p.env["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert p.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert p.env["LD_LIBRARY_PATH"] == "/opt/lib"
    assert "GD_UNRELATED" not in p.env


def test_probe_bare_venv_without_torch(bare_python):
    p = probe_target(System(env=env_with()), bare_python, timeout_s=60)
    assert isinstance(p, ProbeFacts), p
    assert p.executable.startswith(bare_python.rsplit("/bin/", 1)[0])
    assert p.is_venv is True
    assert p.torch.installed is False
    assert p.torch.import_ok is False
    assert p.torch.version is None


def test_probe_torch_import_oserror_comes_back_as_data(bare_python, cudnn_broken_torch):
    p = probe_target(System(env=env_with(PYTHONPATH=cudnn_broken_torch)), bare_python, timeout_s=60)
    assert isinstance(p, ProbeFacts), p
    assert p.torch.installed is True  # importable from PYTHONPATH, even without metadata
    assert p.torch.import_ok is False
    assert p.torch.import_error == f"OSError: {CUDNN_ERROR}"


def test_probe_torch_import_systemexit_comes_back_as_data(bare_python, tmp_path):
    path = fake_torch(tmp_path, "import sys\nsys.exit('torch refuses to load')\n")
    p = probe_target(System(env=env_with(PYTHONPATH=path)), bare_python, timeout_s=60)
    assert isinstance(p, ProbeFacts), p
    assert p.torch.import_error == "SystemExit: torch refuses to load"


def test_probe_noise_on_stdout_does_not_corrupt_the_document(bare_python, tmp_path):
    path = fake_torch(tmp_path, "print('hello from torch', '@@', '{')\n__version__ = '9.9.9'\n")
    p = probe_target(System(env=env_with(PYTHONPATH=path)), bare_python, timeout_s=60)
    assert isinstance(p, ProbeFacts), p
    assert p.torch.import_ok is True and p.torch.version == "9.9.9"
    assert p.torch.cuda is None  # no torch.version module: guarded, not a crash


def test_probe_hanging_target_is_killed_and_reported(bare_python, hanging_torch):
    p = probe_target(System(env=env_with(PYTHONPATH=hanging_torch)), bare_python, timeout_s=1.5)
    assert isinstance(p, Unavailable)
    assert p.reason == (
        f"the probe in {bare_python} did not finish within 1.5 s and was killed (a hung import or CUDA initialisation)"
    )


def test_probe_missing_interpreter(tmp_path):
    missing = str(tmp_path / "nope" / "bin" / "python")
    p = probe_target(System(), missing)
    assert p == Unavailable(f"the interpreter {missing} does not exist")


def test_probe_interpreter_not_on_path():
    p = probe_target(System(), "python-gpudoctor-missing-3.99")
    assert p == Unavailable("the interpreter python-gpudoctor-missing-3.99 was not found")


def test_probe_target_that_is_not_python():
    p = probe_target(System(), "/bin/false")
    assert isinstance(p, Unavailable)
    assert p.reason.startswith("the probe in /bin/false failed (exit status 1): the probe printed no result document")


# ----------------------------------------------------------------- parsing and the runner contract


def test_probe_uses_argv_env_and_timeout_through_the_runner():
    runner = ScriptedRunner({tuple(probe_argv("pyfake")): timed_out(7)})
    p = probe_target(System(runner=runner, env={"A": "1"}), "pyfake", env={"B": "2"}, timeout_s=7)
    assert isinstance(p, Unavailable) and "did not finish within 7 s" in p.reason
    ((argv, timeout, env),) = runner.calls
    assert argv[0] == "pyfake" and argv[3].endswith("_script.py") and list(argv[4:]) == ["--level", "full"]
    assert (timeout, env) == (7, {"B": "2"})


def test_probe_crash_reports_stderr_tail():
    from gpudoctor.system import CommandResult

    crash = CommandResult(("pyfake",), 139, "", "line1\nline2\nline3\nSegmentation fault\n")
    p = probe_target(System(runner=ScriptedRunner({tuple(probe_argv("pyfake")): crash})), "pyfake")
    assert isinstance(p, Unavailable)
    assert "exit status 139" in p.reason and p.reason.endswith("stderr: line2 | line3 | Segmentation fault")


def test_probe_not_found_through_runner():
    p = probe_target(System(runner=ScriptedRunner({tuple(probe_argv("pyfake")): not_found()})), "pyfake")
    assert p == Unavailable("the interpreter pyfake was not found")


@pytest.mark.parametrize(
    "stdout, message",
    [
        ("", "printed no result document"),
        (f"{MARKER}{{not json{MARKER}", "not valid JSON"),
        (f'{MARKER}{{"probe_version": 1}}{MARKER}', "does not match this gpudoctor"),
    ],
)
def test_parse_probe_output_errors(stdout, message):
    with pytest.raises(ProbeError, match=message):
        parse_probe_output(stdout)


def test_parse_probe_output_takes_the_last_document(real_torch_probe):
    import json

    from gpudoctor.facts.base import to_jsonable

    doc = json.dumps(to_jsonable(real_torch_probe))
    noisy = f"{MARKER}garbage{MARKER}\nwarning\n{MARKER}{doc}{MARKER}\n"
    assert parse_probe_output(noisy) == real_torch_probe
    assert parse_probe_output(ok(noisy)(("x",)).stdout) == real_torch_probe


def test_a_probe_killed_at_its_timeout_is_not_asked_its_python_version_again(tmp_path):
    """A hung interpreter would hang the version query too (10 s more than --probe-timeout); a probe
    that failed another way is still asked (its Python version explains an unsupported target)."""
    import gpudoctor.probe as probe_mod
    from gpudoctor.collect.targets import failed_version
    from gpudoctor.testing import fake_system

    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    result = probe_mod.probe_target(System.live(), str(hang), timeout_s=1.0)
    assert probe_mod.timed_out(result), result
    asked = ScriptedRunner(default=ok("3.11"))
    assert failed_version(fake_system(tmp_path, runner=asked), str(hang), result) == ""
    assert asked.calls == []
    # the twin: a probe that crashed is asked, once
    crashed = Unavailable(f"the probe in {hang} crashed with SIGSEGV")
    assert not probe_mod.timed_out(crashed)
    probe_mod._VERSIONS.clear()
    assert failed_version(fake_system(tmp_path, runner=asked), str(hang), crashed) == "3.11"
    assert len(asked.calls) == 1


# --------------------------------------------------------------------------- (issue 19) 6. old target Pythons

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
