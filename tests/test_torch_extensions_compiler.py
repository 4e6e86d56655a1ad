"""``torch.extensions.compiler`` (issue 25): the host compiler vs the range of the nvcc that wins, each kind
with a neighbour and the healthy twin; the range table's rows and the collector on fake roots."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from gpudoctor.checks.torch_extensions_compiler import CHECK, accepting_releases, range_row
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.cuda_toolkit import collect, parse_compiler_version
from gpudoctor.data import load_table
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts, HostCompiler
from gpudoctor.model import Status
from gpudoctor.testing import (
    ScriptedRunner,
    fake_system,
    make_facts,
    ok,
    os_facts,
    probe_facts,
    target,
    targets,
    torch_facts,
    write_tree,
)

NVCC = "/usr/local/cuda-12.1/bin/nvcc"


def toolkit(release="12.1", *compilers, nvcc=NVCC):
    return CudaToolkitFacts(None, nvcc.rsplit("/bin/", 1)[0], release, nvcc, release, host_compilers=tuple(compilers))


def judge(tk, distro="ubuntu", env=None):
    facts = make_facts(
        cuda_toolkit=tk,
        os=os_facts(id=distro, version="24.04"),
        targets=targets(target(probe_facts(torch=torch_facts("2.5.1+cu121", "12.1"), env=env or {}))),
    )
    (f,) = evaluate([CHECK], facts)
    return f


def gxx(version, source="PATH", command="g++"):
    return HostCompiler(command, source, "gcc", version)


def test_gcc_newer_than_the_nvcc_range_fails_with_the_remedy_in_apt_words():
    f = judge(toolkit("12.1", gxx("13.2.0")))
    assert f.status is Status.FAIL
    assert "g++ (gcc 13.2.0) is outside nvcc 12.1's range (gcc 6..12)" in f.summary
    assert "gcc versions later than 12 are not supported" in f.explanation
    assert "https://docs.nvidia.com/cuda/archive/12.1.0/cuda-installation-guide-linux/" in f.explanation
    texts = [c.text for c in f.commands]
    assert texts[0] == "sudo apt-get install gcc-12 g++-12"
    assert texts[1] == "export CC=gcc-12 CXX=g++-12 NVCC_CCBIN=g++-12 CUDAHOSTCXX=g++-12"
    assert "-allow-unsupported-compiler" in f.explanation and "escape hatch" in f.explanation
    # the CUDA 12 releases that accept gcc 13 as it is
    assert "CUDA 12.4, 12.5, 12.6, 12.8, 12.9" in f.explanation


def test_healthy_twin_gcc_inside_the_range():
    f = judge(toolkit("12.1", gxx("12.3.0")))
    assert f.status is Status.OK
    assert "g++ (gcc 12.3.0) is inside the range of nvcc 12.1 (gcc 6..12)" in f.summary


def test_neighbour_cc_wins_over_path_as_cpp_extension_passes_ccbin():
    f = judge(toolkit("11.8", gxx("11.4.0", "CC", "gcc-11"), gxx("13.2.0")))
    assert f.status is Status.OK and "gcc-11" in f.summary
    f = judge(toolkit("11.8", gxx("12.3.0", "CC", "gcc-12"), gxx("11.4.0")))
    assert f.status is Status.FAIL and "gcc-12 (gcc 12.3.0)" in f.summary and "`$CC`" in f.explanation


def test_neighbour_conda_compiler_gets_the_conda_forge_remedy():
    tk = toolkit("11.8", gxx("13.3.0", "CC", "x86_64-conda-linux-gnu-cc"), nvcc="/opt/conda/envs/ml/bin/nvcc")
    f = judge(tk)
    assert f.status is Status.FAIL
    assert f.commands[0].text == 'conda install -c conda-forge "gcc_linux-64=11" "gxx_linux-64=11"'
    assert "CC=x86_64-conda-linux-gnu-cc CXX=x86_64-conda-linux-gnu-c++" in f.commands[1].text


def test_neighbour_rhel_uses_gcc_toolset():
    f = judge(toolkit("12.4", gxx("14.2.1")), distro="rocky")
    assert f.status is Status.FAIL and f.commands[0].text == "sudo dnf install gcc-toolset-13"
    assert "/opt/rh/gcc-toolset-13/root/usr/bin/g++" in f.commands[1].text


def test_neighbour_another_release_accepts_the_same_compiler():
    assert judge(toolkit("12.8", gxx("14.2.0"))).status is Status.OK
    assert judge(toolkit("12.6", gxx("14.2.0"))).status is Status.FAIL
    assert judge(toolkit("13.0", gxx("15.1.0"))).status is Status.OK


def test_neighbour_clang_is_judged_by_the_clang_range():
    clang = HostCompiler("clang++", "CC", "clang", "18.1.3")
    f = judge(toolkit("12.5", clang))
    assert f.status is Status.FAIL and "clang 18.1.3" in f.summary and "(clang 7..17)" in f.summary
    assert judge(toolkit("12.5", HostCompiler("clang++", "CC", "clang", "17.0.6"))).status is Status.OK


def test_neighbour_gcc_older_than_the_minimum():
    f = judge(toolkit("12.4", gxx("5.4.0")))
    assert f.status is Status.FAIL and "older than the oldest gcc (6)" in f.explanation


def test_cudahostcxx_outside_the_range_warns_when_the_cpp_extension_compiler_is_fine():
    f = judge(toolkit("12.1", gxx("12.3.0"), gxx("13.2.0", "CUDAHOSTCXX", "g++-13")))
    assert f.status is Status.WARN and "g++-13 (gcc 13.2.0, from CUDAHOSTCXX)" in f.summary
    assert "export CUDAHOSTCXX=g++" in f.explanation


@pytest.mark.parametrize(
    "tk",
    [
        CudaToolkitFacts(None, None, Unavailable("none"), None, Unavailable("none")),
        toolkit("12.3", gxx("13.2.0")),  # the sources disagree on 12.3: no row, no verdict
        toolkit("12.1", gxx(Unavailable("g++: not found"))),
        toolkit("12.4", HostCompiler("clang++", "CC", "clang", "17.0.6")),  # no agreed clang range for 12.4
    ],
)
def test_without_a_sourced_range_or_a_known_compiler_it_is_skipped(tk):
    assert judge(tk).status is Status.SKIP


def test_every_row_cites_its_archived_guide_and_the_host_config_bound():
    rows = load_table("host_compilers")["release"]
    releases = [r["cuda"] for r in rows]
    assert releases == sorted(releases, key=lambda x: tuple(map(int, x.split("."))))
    assert {"11.0", "11.8", "12.0", "12.9", "13.0"} <= set(releases)
    for r in rows:
        assert (
            r["guide"]
            == f"https://docs.nvidia.com/cuda/archive/{r['cuda'] if r['cuda'] == '11.0' else r['cuda'] + '.0'}/cuda-installation-guide-linux/"
        )
        lo, hi = r["gcc"]
        assert lo <= hi and r["host_config"].endswith(f"gcc versions later than {hi} are not supported!")
    # the maximum never falls from one release to the next
    highs = [r["gcc"][1] for r in rows]
    assert highs == sorted(highs)
    assert range_row("11.4") is None and accepting_releases("gcc", 14) == ["12.8", "12.9", "13.0"]


# -- the collector: which compiler, from where, and its version (fake roots, scripted commands)

GCC13 = "g++ (Ubuntu 13.2.0-23ubuntu4) 13.2.0\nCopyright (C) 2023 Free Software Foundation, Inc.\n"
GCC11 = "gcc-11 (Ubuntu 11.4.0-9ubuntu1) 11.4.0\nCopyright (C) 2021 Free Software Foundation, Inc.\n"
NVCC_OUT = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.1, V12.1.105\n"


def _collect(tmp_path, env, script):
    write_tree(
        tmp_path,
        {
            "/usr/local/cuda-12.1/version.json": json.dumps({"cuda": {"version": "12.1.1"}}),
            "/usr/local/cuda-12.1/bin/nvcc": "#!/bin/sh\n",
        },
    )
    runner = ScriptedRunner({("/usr/local/cuda-12.1/bin/nvcc", "--version"): ok(NVCC_OUT), **script})
    system = fake_system(tmp_path, env=env, runner=runner, host_commands=True)
    return collect(CollectContext(system, CollectOptions()))


def test_collector_reads_the_default_gpp_and_an_explicit_cc(tmp_path):
    env = {"CUDA_HOME": "/usr/local/cuda-12.1", "CC": "ccache gcc-11"}
    tk = _collect(tmp_path, env, {("g++", "--version"): ok(GCC13), ("gcc-11", "--version"): ok(GCC11)})
    assert tk.nvcc_version == "12.1"
    assert tk.host_compilers == (gxx("11.4.0", "CC", "gcc-11"), gxx("13.2.0"))
    (f,) = evaluate([CHECK], make_facts(cuda_toolkit=tk))
    assert f.status is Status.OK and "gcc-11" in f.summary


def test_collector_healthy_twin_and_instance_through_the_check(tmp_path):
    tk = _collect(tmp_path, {"CUDA_HOME": "/usr/local/cuda-12.1"}, {("g++", "--version"): ok(GCC13)})
    (f,) = evaluate([CHECK], make_facts(cuda_toolkit=tk))
    assert f.status is Status.FAIL and "nvcc 12.1" in f.summary


def test_parse_compiler_version_of_gcc_clang_and_conda():
    assert parse_compiler_version(GCC13) == ("gcc", "13.2.0")
    assert parse_compiler_version("Ubuntu clang version 18.1.3 (1ubuntu1)\nTarget: x86_64-pc-linux-gnu\n") == (
        "clang",
        "18.1.3",
    )
    conda = "x86_64-conda-linux-gnu-c++ (conda-forge gcc 11.4.0-13) 11.4.0\nCopyright (C) 2021 Free Software Foundation"
    assert parse_compiler_version(conda) == ("gcc", "11.4.0")
    fedora = "g++ (GCC) 12.2.1 20221121 (Red Hat 12.2.1-4)\nCopyright (C) 2022 Free Software Foundation, Inc.\n"
    assert parse_compiler_version(fedora) == ("gcc", "12.2.1")
    assert parse_compiler_version("") == (None, None)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on this machine")
def test_parse_compiler_version_of_the_real_gpp():
    out = subprocess.run(["g++", "--version"], capture_output=True, text=True, check=True).stdout
    full = subprocess.run(["g++", "-dumpfullversion"], capture_output=True, text=True, check=True).stdout.strip()
    assert parse_compiler_version(out) == ("gcc", full)


def test_neighbour_fedora_gets_no_invented_package_but_the_conda_forge_compilers():
    f = judge(toolkit("11.7", gxx("12.2.1")), distro="fedora")
    assert f.status is Status.FAIL and "(gcc 6..11)" in f.summary
    assert [c.text for c in f.commands] == ["export CC=gcc-11 CXX=g++-11 NVCC_CCBIN=g++-11 CUDAHOSTCXX=g++-11"]
    assert 'conda install -c conda-forge "gxx_linux-64=11"' in f.explanation and "dnf" not in f.explanation


def test_the_table_agrees_with_the_bounds_the_installed_torch_enforces():
    """Every row PyTorch also bounds (torch/utils/cpp_extension.py CUDA_GCC_VERSIONS / CUDA_CLANG_VERSIONS, read
    from the real installed torch in a child process) gives the same majors."""
    import sys

    code = (
        "import json; from torch.utils import cpp_extension as c; "
        "print(json.dumps({'gcc': c.CUDA_GCC_VERSIONS, 'clang': c.CUDA_CLANG_VERSIONS}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    torch_bounds = json.loads(out.strip().splitlines()[-1])
    compared = []
    for row in load_table("host_compilers")["release"]:
        for kind in ("gcc", "clang"):
            bound = torch_bounds[kind].get(row["cuda"])
            if kind not in row or bound is None:
                continue
            (lo, *_), (hi_excl, *_) = bound
            assert row[kind][1] == hi_excl - 1, (row["cuda"], kind)
            if row[kind][0]:
                assert row[kind][0] == lo, (row["cuda"], kind)
            compared.append((row["cuda"], kind))
    assert len(compared) >= 20


def test_neighbour_cxx_outside_the_range_warns_as_torch_checks_it_first():
    # torchsparse#189: the default gcc is 10.4 (update-alternatives), but the C++ compiler of the build is 11.3
    f = judge(toolkit("11.3", gxx("10.4.0"), gxx("11.3.0", "CXX", "x86_64-linux-gnu-g++")))
    assert f.status is Status.WARN and "x86_64-linux-gnu-g++ (gcc 11.3.0, from CXX)" in f.summary
    assert "PyTorch binary build checks" in f.explanation


def test_collector_records_cxx_after_the_default(tmp_path):
    env = {"CUDA_HOME": "/usr/local/cuda-12.1", "CXX": "g++-13"}
    tk = _collect(tmp_path, env, {("g++", "--version"): ok(GCC11), ("g++-13", "--version"): ok(GCC13)})
    assert [(h.command, h.source) for h in tk.host_compilers] == [("g++", "PATH"), ("g++-13", "CXX")]
