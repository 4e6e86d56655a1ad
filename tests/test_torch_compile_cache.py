"""``torch.compile.cache`` (issue 25): the probe's real look at the Triton/Inductor cache directories
(real directories, a real mounts table format) and the verdicts, each kind with a neighbour and the twin."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpudoctor.checks.torch_compile_cache import CHECK
from gpudoctor.engine import evaluate
from gpudoctor.facts.base import from_jsonable
from gpudoctor.facts.targets import CompileCache
from gpudoctor.model import Status
from gpudoctor.probe import PROBE_SCRIPT
from gpudoctor.testing import make_facts, probe_facts, target, targets, torch_facts


def _probe_in_child(env: dict, mounts: str | None = None) -> list[CompileCache]:
    """Run the probe's section in a child process with ``env`` (as the target would)."""
    arg = repr(mounts) if mounts else ""
    code = (
        "import importlib.util, json\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(PROBE_SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"print(json.dumps(m.probe_compile_caches({arg})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return [from_jsonable(CompileCache, d) for d in json.loads(out.stdout.strip().splitlines()[-1])]


def _judge(caches, torch_installed=True):
    probe = probe_facts(
        torch=torch_facts("2.5.1+cu124", "12.4") if torch_installed else torch_facts(installed=False),
        compile_caches=tuple(caches),
    )
    (f,) = evaluate([CHECK], make_facts(targets=targets(target(probe))))
    return f


def _env(tmp_path, **kw):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")}
    env.update(kw)
    return env


def test_defaults_are_where_torch_and_triton_put_them_and_a_writable_local_twin_is_ok(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    caches = _probe_in_child(_env(tmp_path))
    by = {c.name: c for c in caches}
    assert by["triton"].path == str(tmp_path / "home/.triton/cache") and by["triton"].source == "default"
    assert by["inductor"].path.startswith(str(tmp_path / "tmp/torchinductor_"))
    assert by["triton"].checked == str(tmp_path / "home") and by["triton"].writable
    assert by["inductor"].free_bytes and by["inductor"].free_bytes > 0
    f = _judge(caches)
    assert (
        f.status is Status.OK
        and f.summary == "torch.compile caches are local and writable (triton: default place, inductor: default place)"
    )


def test_a_cache_dir_below_a_file_cannot_be_created(tmp_path):
    """TRITON_CACHE_DIR under a regular file: nothing can be created there (root or not) -> fail, naming the
    variable and a local directory to use."""
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    caches = _probe_in_child(_env(tmp_path, TRITON_CACHE_DIR=str(blocker / "cache")))
    triton = next(c for c in caches if c.name == "triton")
    assert triton.source == "TRITON_CACHE_DIR" and not triton.writable and triton.checked == str(blocker)
    f = _judge(caches)
    assert f.status is Status.FAIL
    assert f"cannot write its triton cache {blocker}/cache (TRITON_CACHE_DIR)" in f.summary
    assert "export TRITON_CACHE_DIR=/var/tmp/$USER/triton-cache" in f.explanation


def test_a_cache_on_nfs_is_found_from_the_mounts_table(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw,relatime 0 0\n"
        f"fileserver.example.org:/export/home {tmp_path / 'home'} nfs4 rw,relatime,vers=4.2 0 0\n"
    )
    caches = _probe_in_child(_env(tmp_path), str(mounts))
    triton = next(c for c in caches if c.name == "triton")
    inductor = next(c for c in caches if c.name == "inductor")
    assert triton.fstype == "nfs4" and triton.mount == str(tmp_path / "home")
    assert inductor.fstype == "ext4"  # the neighbour on the local disk
    f = _judge(caches)
    assert f.status is Status.WARN and "is on nfs4" in f.summary
    assert "export TRITON_CACHE_DIR=" in f.explanation


@pytest.mark.parametrize("free,status", [(200 << 20, Status.WARN), (50 << 30, Status.OK)])
def test_free_space(free, status):
    caches = [
        CompileCache(
            "triton", "/home/u/.triton/cache", "default", True, "/home/u/.triton/cache", True, "ext4", "/", free
        ),
        CompileCache(
            "inductor", "/tmp/torchinductor_u", "default", True, "/tmp/torchinductor_u", True, "ext4", "/", 50 << 30
        ),
    ]
    f = _judge(caches)
    assert f.status is status
    if status is Status.WARN:
        assert "only 0.2 GiB free" in f.summary


def test_skipped_without_torch():
    assert _judge([], torch_installed=False).status is Status.SKIP
