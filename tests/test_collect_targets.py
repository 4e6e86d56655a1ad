"""The targets collector: which interpreters get probed."""

from __future__ import annotations

import json
import subprocess
import sys

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.targets import active_env_pythons, collect
from gpudoctor.facts import Unavailable
from gpudoctor.system import System
from gpudoctor.testing import fake_system


def test_active_env_is_added_only_when_it_is_another_environment(tmp_path):
    other = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    assert active_env_pythons({"VIRTUAL_ENV": str(other)}) == [str(other / "bin" / "python")]
    assert active_env_pythons({"VIRTUAL_ENV": sys.prefix}) == []
    assert active_env_pythons({"CONDA_PREFIX": str(tmp_path / "missing")}) == []


def test_explicit_pythons_replace_the_current_interpreter(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    py = str(bare / "bin" / "python")
    facts = collect(CollectContext(System.live(), CollectOptions(pythons=(py,), probe_timeout_s=60)))
    [t] = facts.targets
    assert (t.label, t.kind, t.python) == (py, "python", py)
    assert t.probe.executable == py and t.probe.is_venv and not t.probe.torch.installed


def test_no_interpreter_is_run_inside_an_image_root(tmp_path):
    facts = collect(CollectContext(fake_system(tmp_path), CollectOptions()))
    assert isinstance(facts, Unavailable) and "--root" in facts.reason


class _CountingRunner:
    """The real runner, counting the probes it starts."""

    def __init__(self):
        from gpudoctor.system import SubprocessRunner

        self.inner, self.probes = SubprocessRunner(), []

    def run(self, argv, timeout_s=10.0, env=None, input_text=None):
        if len(argv) > 3 and str(argv[3]).endswith("_script.py"):
            self.probes.append(argv[0])
        return self.inner.run(argv, timeout_s, env, input_text)


def test_an_early_probe_is_picked_up_not_repeated(tmp_path):
    from gpudoctor.collect.targets import start_early

    runner = _CountingRunner()
    system = System(runner=runner, env={"PATH": "/usr/bin:/bin"})
    options = CollectOptions(probe_timeout_s=60)
    start_early(system, options)
    facts = collect(CollectContext(system, options, {"jupyter": Unavailable("not collected in this test")}))
    assert [t.label for t in facts.targets] == ["current"]
    assert runner.probes == [sys.executable], "the collector started a second probe instead of using the early one"
    assert facts.targets[0].probe.torch.installed


_LOAD_MARK = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void gpudoctor_mark(void) {
    const char *path = getenv("GPUDOCTOR_TEST_MARKS");
    FILE *fh = path ? fopen(path, "a") : NULL;
    if (fh) { fprintf(fh, "lib %d\n", (int)getpid()); fclose(fh); }
}
"""

_IMPORT_MARK = (
    "import os as _o, sys as _s\n"
    "with open(_o.environ['GPUDOCTOR_TEST_MARKS'], 'a') as _fh:\n"
    "    _fh.write('import %d %s\\n' % (_o.getpid(), _s.executable))\n"
    "import ctypes as _c\n"
    "_c.CDLL(_o.path.join(_o.path.dirname(_o.path.abspath(__file__)), 'lib', 'libtorch_cuda.so'))\n"
)


def test_check_imports_and_loads_the_framework_once_per_target(tmp_path):
    """`gpudoctor check` on two targets: in each target the framework is imported by exactly one probe
    process, and its GPU library (torch/lib/libtorch_cuda.so, marked by a constructor) is loaded by that
    process only, not a second time by the framework load test."""
    import os

    import pytest

    from _fakecuda import GccMissing, build_fake_cuda

    try:
        site, libdir = build_fake_cuda(tmp_path / "fake")
    except GccMissing:
        pytest.skip("gcc is not installed: cannot build the fake CUDA libraries")
    (site / "torch" / "lib").mkdir()
    src = tmp_path / "mark.c"
    src.write_text(_LOAD_MARK)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(site / "torch/lib/libtorch_cuda.so"), str(src)], check=True)
    init = site / "torch" / "__init__.py"
    init.write_text(_IMPORT_MARK + init.read_text())
    other = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    pythons = [sys.executable, str(other / "bin" / "python")]
    marks = tmp_path / "marks.txt"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_CUDA", "VIRTUAL_ENV", "CONDA_"))}
    env.update(
        PYTHONPATH=str(site),
        LD_LIBRARY_PATH=str(libdir),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        JUPYTER_PATH=str(tmp_path / "no-kernels"),
        GPUDOCTOR_TEST_MARKS=str(marks),
    )
    args = ["check", "torch.install", "cuda.frameworks", "--offline", "--format", "json"]
    for python in pythons:
        args += ["--python", python]
    proc = subprocess.run(
        [sys.executable, "-m", "gpudoctor", *args], capture_output=True, text=True, env=env, timeout=300
    )
    report = json.loads(proc.stdout)
    assert {f["check"] for f in report["findings"]} >= {"torch.install", "cuda.frameworks"}, proc.stderr
    lines = [line.split(" ", 2) for line in marks.read_text().splitlines()]
    imports = [(int(pid), exe) for kind, pid, *rest in lines if kind == "import" for exe in rest]
    loads = [int(pid) for kind, pid, *_rest in lines if kind == "lib"]
    assert sorted(exe for _pid, exe in imports) == sorted(pythons), lines  # one importing probe per target
    assert sorted(loads) == sorted(pid for pid, _exe in imports), lines  # loaded by the importer only


def test_two_spellings_of_one_interpreter_are_probed_once_and_two_venvs_twice(tmp_path):
    """``venv/bin/python`` and ``venv/bin/python3`` are one interpreter: one probe serves both targets;
    another venv (whose interpreter links to the same base one) is another target, probed on its own."""
    from gpudoctor.collect.targets import interpreter_identity

    one, two = tmp_path / "one", tmp_path / "two"
    for venv in (one, two):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    a, a3, b = str(one / "bin/python"), str(one / "bin/python3"), str(two / "bin/python")
    assert interpreter_identity(a) == interpreter_identity(a3) != interpreter_identity(b)
    assert interpreter_identity("python3") == "python3"
    runner = _CountingRunner()
    system = System(runner=runner, env={"PATH": "/usr/bin:/bin"})
    options = CollectOptions(pythons=(a, a3, b), probe_timeout_s=60, kernels=False)
    facts = collect(CollectContext(system, options, {"jupyter": Unavailable("not collected in this test")}))
    assert [t.python for t in facts.targets] == [a, a3, b]
    assert sorted(runner.probes) == sorted([a, b]), runner.probes
    assert all(t.probe.is_venv for t in facts.targets)
    assert facts.targets[0].probe == facts.targets[1].probe and facts.targets[2].probe.prefix == str(two)
