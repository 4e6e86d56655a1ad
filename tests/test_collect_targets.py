"""The targets collector: which interpreters get probed."""

from __future__ import annotations

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
        if str(argv[-1]).endswith("_script.py"):
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
