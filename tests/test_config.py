"""Options from GPUDOCTOR_* variables and config files, with the documented precedence:
command line > environment > project file > user file > /etc/gpudoctor.toml > default.
The CLI tests run the real `gpudoctor` in a child process with a temporary HOME,
XDG_CONFIG_HOME and working directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from gpudoctor import config


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUDOCTOR_", "FAKE_CUDA"))}
    nolib = tmp_path / "nolib"
    nolib.mkdir(exist_ok=True)
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), LD_LIBRARY_PATH=str(nolib))
    env.update(extra)
    return env


def _run(tmp_path, *args, env=None):
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=proj,
        env=env or _env(tmp_path),
    )


def _required(proc):
    m = re.search(r"of the (\d+) required GPUs", proc.stderr)
    assert m, proc.stderr
    return int(m.group(1))


def test_precedence_cli_over_env_over_project_over_user(tmp_path):
    user = tmp_path / "xdg" / "gpudoctor"
    user.mkdir(parents=True)
    (user / "gpudoctor.toml").write_text("[gate]\nrequire-gpus = 5\nskip = ['dataloader.shm']\n")
    assert _required(_run(tmp_path, "gate")) == 5
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.gpudoctor.gate]\nrequire-gpus = 6\n")
    assert _required(_run(tmp_path, "gate")) == 6  # [tool.gpudoctor] in pyproject.toml is the project file
    (proj / "gpudoctor.toml").write_text("[gate]\nrequire_gpus = 4\n")
    proc = _run(tmp_path, "gate", "--format", "json")
    assert _required(proc) == 4  # gpudoctor.toml wins over pyproject.toml and the user file
    assert "dataloader.shm" not in json.loads(proc.stdout)["checks"]  # the user file's other keys still apply
    env = _env(tmp_path, GPUDOCTOR_REQUIRE_GPUS="3")
    assert _required(_run(tmp_path, "gate", env=env)) == 3
    assert _required(_run(tmp_path, "gate", "--require-gpus", "2", env=env)) == 2


def test_system_file_is_the_lowest_file(tmp_path, monkeypatch):
    etc = tmp_path / "etc.toml"
    etc.write_text("probe-timeout = 9\n[gate]\nrequire-gpus = 7\nwait = 30\n")
    monkeypatch.setattr(config, "SYSTEM_FILE", str(etc))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    assert config.load_config(str(proj), env).values("gate") == {"probe_timeout": 9, "require_gpus": 7, "wait": 30}
    user = tmp_path / "xdg" / "gpudoctor"
    user.mkdir(parents=True)
    (user / "gpudoctor.toml").write_text("[gate]\nrequire-gpus = 2\n")
    values = config.load_config(str(proj), env).values("gate")
    assert values["require_gpus"] == 2 and values["wait"] == 30  # merged per key
    assert config.load_config(str(proj), env).values("check") == {"probe_timeout": 9}
    assert [k for _p, k in config.config_paths(str(proj), env)] == ["pyproject", "user", "system"]


def test_explicit_config_file_and_none(tmp_path):
    f = tmp_path / "site.toml"
    f.write_text("[gate]\nrequire-gpus = 9\n")
    assert _required(_run(tmp_path, "gate", env=_env(tmp_path, GPUDOCTOR_CONFIG=str(f)))) == 9
    proc = _run(tmp_path, "gate", env=_env(tmp_path, GPUDOCTOR_CONFIG=str(tmp_path / "nope.toml")))
    assert proc.returncode == 2 and "nope.toml: no such file" in proc.stderr


def test_config_sets_skipped_checks_and_strictness_for_check(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    (proj / "gpudoctor.toml").write_text("[check]\nskip = ['dataloader.cpu']\n")
    proc = _run(tmp_path, "check", "dataloader", "--format", "json")
    checks = {f["check"] for f in json.loads(proc.stdout)["findings"]}
    assert "dataloader.shm" in checks and "dataloader.cpu" not in checks
    proc = _run(
        tmp_path,
        "check",
        "dataloader",
        "--format",
        "json",
        env=_env(tmp_path, GPUDOCTOR_SKIP="dataloader.shm dataloader.cpu"),
    )
    assert {f["check"] for f in json.loads(proc.stdout)["findings"]} == set()


@pytest.mark.parametrize(
    "text,message",
    [
        ("[gate]\nrequire-gpu-count = 2\n", "unknown option 'require-gpu-count' for `gpudoctor gate`"),
        ("[gate\n", "not valid TOML"),
        ("[gaet]\nwait = 1\n", "unknown table [gaet]"),
        ("[gate]\nrequire-gpus = 'many'\n", "require-gpus"),
    ],
)
def test_bad_config_is_one_line_and_exit_2(tmp_path, text, message):
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    (proj / "gpudoctor.toml").write_text(text)
    proc = _run(tmp_path, "gate")
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
