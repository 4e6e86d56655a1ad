"""check -> fix -> check for the Jupyter fixes, on real kernelspecs and real interpreters.

The terminal is this test venv (the reference target); kernels live in a
temporary JUPYTER_PATH directory. Each scenario: ``jupyter.kernels`` offers
the fix, the plan is written through gpudoctor.apply, and the second run no
longer carries the finding (the probe runs the real interpreters both times).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tests._fixcycle import cycle

from gpudoctor.system import System

pytestmark = pytest.mark.slow
#: the fix ids these scenarios clear (tests/test_fix_cycle.py checks every registered fix is covered)
FIXES = ("jupyter.kernel-argv", "jupyter.kernel-env", "jupyter.register")


def ipk(python: str) -> list[str]:
    return [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]


def kernel(jp: Path, name: str, argv: list[str], env: dict | None = None) -> Path:
    d = jp / "kernels" / name
    d.mkdir(parents=True)
    spec = {"argv": argv, "display_name": name, "language": "python"}
    if env is not None:
        spec["env"] = env
    (d / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
    return d / "kernel.json"


def live(home: Path, jp: Path):
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "JUPYTER_PATH": str(jp),
        "JUPYTER_PREFER_ENV_PATH": "0",
    }
    return lambda: System(env=dict(env), home=str(home))


def run(tmp_path: Path, fix_id: str, options: dict | None = None, setup=None):
    jp = tmp_path / "jp"
    home = tmp_path / "home"
    home.mkdir()
    setup(jp)
    return cycle(
        tmp_path / "root",
        ["jupyter.kernels"],
        fix_id,
        options or {},
        extra={"jupyter_python": sys.executable},
        live=live(home, jp),
        journal=tmp_path / "journal",
    )


def kernel_findings(c, name: str, after: bool = False):
    return [f for f in (c.after if after else c.before) if f.evidence.get("kernel") == name and f.status.severity >= 3]


def test_kernel_argv_clears_a_kernel_whose_python_is_gone(tmp_path):
    c = run(tmp_path, "jupyter.kernel-argv", setup=lambda jp: kernel(jp, "gone", ipk(str(tmp_path / "no" / "python"))))
    (f,) = kernel_findings(c, "gone")
    assert "does not exist" in f.summary and c.plans
    assert kernel_findings(c, "gone", after=True) == []


def test_kernel_env_clears_a_kernel_that_hides_every_gpu(tmp_path):
    c = run(
        tmp_path,
        "jupyter.kernel-env",
        {"kernel": "hidden"},
        setup=lambda jp: kernel(jp, "hidden", ipk(sys.executable), env={"CUDA_VISIBLE_DEVICES": ""}),
    )
    (f,) = kernel_findings(c, "hidden")
    assert "hides every GPU" in f.summary and c.plans
    assert kernel_findings(c, "hidden", after=True) == []
    spec = json.loads((tmp_path / "jp" / "kernels" / "hidden" / "kernel.json").read_text())
    assert "env" not in spec


def test_register_replaces_the_broken_kernel_named_after_this_environment(tmp_path):
    # the kernel named as `ipykernel install` would name this environment, pointing at a deleted venv
    name = Path(sys.prefix).name.lstrip(".").lower() or "python"

    def setup(jp: Path) -> None:
        kernel(jp, name, ipk(str(tmp_path / "deleted-venv" / "bin" / "python")))

    c = run(tmp_path, "jupyter.register", {"name": name}, setup=setup)
    (f,) = kernel_findings(c, name)
    assert "jupyter.register" in f.fixes and c.plans
    assert kernel_findings(c, name, after=True) == []
    spec = json.loads((tmp_path / "jp" / "kernels" / name / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
