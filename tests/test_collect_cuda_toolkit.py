"""Collector ``cuda_toolkit``: version files in fake roots, ``nvcc --version`` through the scripted runner."""

from __future__ import annotations

import json
import os

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.cuda_toolkit import collect
from gpudoctor.facts import Unavailable
from gpudoctor.testing import (
    ScriptedRunner,
    fake_system,
    not_found,
    ok,
    timed_out,
    write_tree,
)

NVCC_OUT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Jul_16_07:30:01_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.48
Build cuda_13.0.r13.0/compiler.36260728_0
"""


def version_json(v):
    return json.dumps({"cuda": {"name": "CUDA SDK", "version": v}, "cuda_nvcc": {"version": v}})


def run(root, env=None, runner=None):
    system = fake_system(root, env=env, runner=runner)
    return collect(CollectContext(system, CollectOptions())), system


# ----------------------------------------------------------------- image roots (nvcc is never run)


def test_usr_local_cuda_absolute_symlink_resolved_inside_root(tmp_path):
    write_tree(
        tmp_path,
        {"/usr/local/cuda-12.4/version.json": version_json("12.4.1"), "/usr/local/cuda-12.4/bin/nvcc": "#!/bin/sh\n"},
    )
    os.symlink("/usr/local/cuda-12.4", tmp_path / "usr" / "local" / "cuda")
    facts, system = run(tmp_path)
    assert facts.cuda_home is None
    assert facts.default_path == "/usr/local/cuda-12.4"
    assert facts.version == "12.4.1"
    assert facts.nvcc == "/usr/local/cuda-12.4/bin/nvcc"
    assert isinstance(facts.nvcc_version, Unavailable) and "--root" in facts.nvcc_version.reason
    assert system.runner.calls == []


def test_version_txt_of_old_toolkits(tmp_path):
    write_tree(tmp_path, {"/usr/local/cuda-10.2/version.txt": "CUDA Version 10.2.89\n"})
    os.symlink("cuda-10.2", tmp_path / "usr" / "local" / "cuda")
    facts, _ = run(tmp_path)
    assert facts.default_path == "/usr/local/cuda-10.2"
    assert facts.version == "10.2.89"
    assert facts.nvcc is None
    assert facts.nvcc_version == Unavailable("nvcc not found")


def test_cuda_home_wins_over_usr_local_cuda(tmp_path):
    write_tree(
        tmp_path,
        {
            "/opt/cuda-12.1/version.json": version_json("12.1.105"),
            "/usr/local/cuda/version.json": version_json("11.8.0"),
        },
    )
    facts, _ = run(tmp_path, env={"CUDA_HOME": "/opt/cuda-12.1"})
    assert facts.cuda_home == "/opt/cuda-12.1"
    assert facts.default_path == "/usr/local/cuda"
    assert facts.version == "12.1.105"


def test_broken_version_json_is_unavailable(tmp_path):
    write_tree(tmp_path, {"/usr/local/cuda/version.json": "{not json"})
    facts, _ = run(tmp_path)
    assert isinstance(facts.version, Unavailable)
    assert "no version.json or version.txt" in facts.version.reason


def test_no_toolkit(tmp_path):
    facts, system = run(tmp_path)
    assert (facts.cuda_home, facts.default_path, facts.nvcc) == (None, None, None)
    assert isinstance(facts.version, Unavailable) and "no CUDA toolkit found" in facts.version.reason
    assert system.runner.calls == []


# ----------------------------------------------------------------- live root: nvcc through the runner


def live_toolkit(tmp_path, response, version_file=True):
    """A toolkit in a real directory named by CUDA_HOME, judged on the live root (so nvcc is run)."""
    home = tmp_path / "cuda-13.0"
    write_tree(
        home, {"/bin/nvcc": "#!/bin/sh\n", **({"/version.json": version_json("13.0.0")} if version_file else {})}
    )
    runner = ScriptedRunner({(f"{home}/bin/nvcc", "--version"): response, ("g++", "--version"): not_found()})
    facts, system = run("/", env={"CUDA_HOME": str(home)}, runner=runner)
    return facts, runner, str(home)


def test_nvcc_version_parsed(tmp_path):
    facts, runner, home = live_toolkit(tmp_path, ok(NVCC_OUT))
    assert facts.nvcc == f"{home}/bin/nvcc"
    assert facts.nvcc_version == "13.0"
    assert facts.version == "13.0.0"
    (argv, timeout, _env), (gpp, _, _) = runner.calls  # nvcc, then its default host compiler
    assert argv == (f"{home}/bin/nvcc", "--version") and gpp == ("g++", "--version")
    assert 0 < timeout <= 15


def test_nvcc_version_used_when_no_version_file(tmp_path):
    facts, _, _ = live_toolkit(tmp_path, ok(NVCC_OUT), version_file=False)
    assert facts.version == "13.0"


def test_nvcc_that_hangs_is_unavailable_not_a_crash(tmp_path):
    facts, _, home = live_toolkit(tmp_path, timed_out(10.0))
    assert isinstance(facts.nvcc_version, Unavailable)
    assert facts.nvcc_version.reason == f"{home}/bin/nvcc did not answer within its timeout (10.0 s) and was killed"
    assert facts.version == "13.0.0"


def test_nvcc_missing_binary(tmp_path):
    facts, _, home = live_toolkit(tmp_path, not_found(), version_file=False)
    assert facts.nvcc_version == Unavailable(f"{home}/bin/nvcc is not installed (not found on PATH)")
    assert isinstance(facts.version, Unavailable)


def test_nvcc_without_release_line(tmp_path):
    facts, _, _ = live_toolkit(tmp_path, ok("nvcc: something unexpected\n"))
    assert facts.nvcc_version == Unavailable("nvcc --version printed no release number")


def test_alternatives_chain_of_absolute_links_inside_root(tmp_path):
    # nvidia/cuda images: /usr/local/cuda -> /etc/alternatives/cuda -> /usr/local/cuda-12.4
    write_tree(tmp_path, {"/usr/local/cuda-12.4/version.json": version_json("12.4.131")})
    (tmp_path / "etc" / "alternatives").mkdir(parents=True)
    os.symlink("/usr/local/cuda-12.4", tmp_path / "etc" / "alternatives" / "cuda")
    os.symlink("/etc/alternatives/cuda", tmp_path / "usr" / "local" / "cuda")
    facts, _ = run(tmp_path)
    assert facts.default_path == "/usr/local/cuda-12.4"
    assert facts.version == "12.4.131"


# ------------------------------------------- which nvcc wins (torch.utils.cpp_extension's order)


def several_toolkits(root, conda_nvcc=False):
    """/usr/local/cuda -> cuda-11.8, cuda-12.1 beside it; optionally a conda env's cuda-nvcc 12.4."""
    tree = {
        "/usr/local/cuda-11.8/version.json": version_json("11.8.0"),
        "/usr/local/cuda-11.8/bin/nvcc": "#!/bin/sh\n",
        "/usr/local/cuda-12.1/version.json": version_json("12.1.1"),
        "/usr/local/cuda-12.1/bin/nvcc": "#!/bin/sh\n",
        "/usr/local/cuda-12.1/bin/ptxas": "#!/bin/sh\n",
    }
    if conda_nvcc:
        tree["/home/user/miniconda3/envs/ml/bin/nvcc"] = "#!/bin/sh\n"
    write_tree(root, tree)
    os.symlink("/usr/local/cuda-11.8", root / "usr" / "local" / "cuda")


def test_first_nvcc_on_path_wins_over_usr_local_cuda_when_cuda_home_is_unset(tmp_path):
    several_toolkits(tmp_path, conda_nvcc=True)
    facts, _ = run(tmp_path, env={"PATH": "/home/user/miniconda3/envs/ml/bin:/usr/bin:/bin"})
    assert facts.nvcc == "/home/user/miniconda3/envs/ml/bin/nvcc" and facts.nvcc_source == "PATH"
    assert facts.default_path == "/usr/local/cuda-11.8"
    assert [(t.path, t.version) for t in facts.toolkits] == [
        ("/usr/local/cuda-11.8", "11.8.0"),
        ("/usr/local/cuda-12.1", "12.1.1"),
    ]


def test_neighbour_cuda_home_wins_over_the_nvcc_on_path(tmp_path):
    several_toolkits(tmp_path, conda_nvcc=True)
    env = {"CUDA_HOME": "/usr/local/cuda-12.1", "PATH": "/home/user/miniconda3/envs/ml/bin:/usr/bin"}
    facts, _ = run(tmp_path, env=env)
    assert facts.nvcc == "/usr/local/cuda-12.1/bin/nvcc" and facts.nvcc_source == "CUDA_HOME"
    assert facts.path_nvcc == "/home/user/miniconda3/envs/ml/bin/nvcc"
    assert facts.version == "12.1.1"


def test_neighbour_path_through_the_usr_local_cuda_link_resolves_to_the_toolkit(tmp_path):
    several_toolkits(tmp_path)
    facts, _ = run(tmp_path, env={"PATH": "/usr/local/cuda/bin:/usr/bin"})
    assert facts.nvcc == "/usr/local/cuda-11.8/bin/nvcc" and facts.nvcc_source == "PATH"
    assert facts.version == "11.8.0"


def test_healthy_twin_nothing_on_path_falls_back_to_usr_local_cuda(tmp_path):
    several_toolkits(tmp_path)
    facts, _ = run(tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert facts.nvcc == "/usr/local/cuda-11.8/bin/nvcc" and facts.nvcc_source == "/usr/local/cuda"
    assert facts.path_nvcc is None


def _torch_cuda_home(env):
    """CUDA_HOME as the real torch.utils.cpp_extension looks it up (``_find_cuda_home``; the CPU build's module-level
    ``CUDA_HOME`` is None whatever the machine), in a child process with ``env``."""
    import subprocess
    import sys

    code = "from torch.utils.cpp_extension import _find_cuda_home; print(_find_cuda_home())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_the_winner_is_the_cuda_home_real_torch_derives(tmp_path):
    from gpudoctor.system import System

    bin_dir = tmp_path / "envs" / "ml" / "bin"
    write_tree(tmp_path, {"/envs/ml/bin/nvcc": "#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n"})
    (bin_dir / "nvcc").chmod(0o755)
    home = {"HOME": str(tmp_path)}
    for env in (
        {"PATH": f"{bin_dir}:/usr/bin:/bin", **home},
        {"PATH": "/usr/bin:/bin", "CUDA_HOME": str(tmp_path / "envs" / "ml"), **home},
    ):
        torch_home = _torch_cuda_home(env).strip().splitlines()[-1]
        facts = collect(CollectContext(System(env=env), CollectOptions()))
        assert facts.nvcc == f"{torch_home}/bin/nvcc"
        assert facts.nvcc_version == "12.4"
