"""``cuda.jit`` (issue 25): the ptxas JAX compiles with at run time vs the driver's CUDA, each kind with a
neighbour and the healthy twin."""

from __future__ import annotations

import pytest

from gpudoctor.checks.cuda_jit import CHECK
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts
from gpudoctor.facts.libraries import CudaLibrariesFacts, FrameworkInstall
from gpudoctor.facts.loader import CudaWheelsFacts, TargetWheels, WheelDist
from gpudoctor.model import Status
from gpudoctor.testing import make_facts, nvidia_facts, nvml_device, probe_facts, target, targets, torch_facts

SITE = "/home/user/venv/lib/python3.12/site-packages"
PY = "/home/user/venv/bin/python"


def facts(driver: str, cuda: str, wheels=(), toolkit=None, framework="jax"):
    fws = (FrameworkInstall("current", framework, "jax-cuda12-plugin", "0.4.35", 12, 9),) if framework else ()
    return make_facts(
        targets=targets(target(probe_facts(PY, torch_facts(installed=False), site_packages=(SITE,)))),
        nvidia=nvidia_facts(driver, cuda, [nvml_device(name="NVIDIA A100-SXM4-80GB", cc="8.0")]),
        cuda_wheels=CudaWheelsFacts((TargetWheels("current", (SITE,), tuple(WheelDist(n, v) for n, v in wheels)),)),
        cuda_toolkit=toolkit or CudaToolkitFacts(None, None, Unavailable("no toolkit"), None, Unavailable("no nvcc")),
        cuda_libraries=CudaLibrariesFacts((), fws),
    )


def judge(f):
    (finding,) = evaluate([CHECK], f)
    return finding


def test_wheel_ptxas_newer_minor_than_the_driver_warns_with_both_versions_and_the_choices():
    f = judge(facts("535.154.05", "12.2", [("nvidia-cuda-nvcc-cu12", "12.3.107")]))
    assert f.status is Status.WARN
    assert "ptxas 12.3.107, newer than the driver 535.154.05's CUDA 12.2" in f.summary
    assert f'{PY} -m pip install "nvidia-cuda-nvcc-cu12==12.2.*"' in f.explanation
    assert "Upgrade the driver** to one that supports CUDA 12.3 (≥ 545.23.06)" in f.explanation
    assert "parallel compilation" in f.summary


def test_healthy_twin_ptxas_pinned_to_the_drivers_cuda():
    f = judge(facts("535.154.05", "12.2", [("nvidia-cuda-nvcc-cu12", "12.2.140")]))
    assert f.status is Status.OK and "not newer than the driver's CUDA 12.2" in f.summary


def test_neighbour_ptxas_of_a_newer_major_fails():
    f = judge(facts("535.154.05", "12.2", [("nvidia-cuda-nvcc-cu13", "13.0.48")]))
    assert f.status is Status.FAIL
    assert "ptxas 13.0.48 (CUDA 13) but the driver 535.154.05 supports only CUDA 12.2" in f.summary
    assert "nvidia-cuda-nvcc-cu13==" not in f.explanation  # no pin of another major is offered


def test_neighbour_toolkit_ptxas_when_no_wheel_is_installed():
    tk = CudaToolkitFacts(
        "/usr/local/cuda-12.4", "/usr/local/cuda-12.4", "12.4", "/usr/local/cuda-12.4/bin/nvcc", "12.4"
    )
    f = judge(facts("535.154.05", "12.2", toolkit=tk))
    assert f.status is Status.WARN
    assert "`/usr/local/cuda-12.4/bin/ptxas` (CUDA 12.4)" in f.explanation
    assert "bin` first on `PATH`" in f.explanation


@pytest.mark.parametrize("framework", [None, "torch"])
def test_without_a_framework_that_runs_ptxas_it_is_skipped(framework):
    f = judge(facts("535.154.05", "12.2", [("nvidia-cuda-nvcc-cu12", "12.6.85")], framework=framework))
    assert f.status is Status.SKIP


# -- Numba: NVVM's PTX is JIT-linked by the driver (NVIDIA/numba-cuda#163), so a newer minor already fails


def numba_facts(driver: str, cuda: str, wheels=(), toolkit=None, dist="numba-cuda", version="0.4.0"):
    return make_facts(
        targets=targets(
            target(probe_facts(PY, torch_facts(installed=False), site_packages=(SITE,), distributions={dist: version}))
        ),
        nvidia=nvidia_facts(driver, cuda, [nvml_device(name="NVIDIA A40", cc="8.6")]),
        cuda_wheels=CudaWheelsFacts((TargetWheels("current", (SITE,), tuple(WheelDist(n, v) for n, v in wheels)),)),
        cuda_toolkit=toolkit or CudaToolkitFacts(None, None, Unavailable("no toolkit"), None, Unavailable("no nvcc")),
        cuda_libraries=CudaLibrariesFacts((), ()),
    )


def test_numba_nvvm_of_a_newer_minor_than_the_driver_fails_with_the_ptx_version_error():
    f = judge(numba_facts("550.54.15", "12.4", [("nvidia-cuda-nvcc-cu12", "12.8.93")]))
    assert f.status is Status.FAIL
    assert "numba-cuda 0.4.0 compiles with NVVM 12.8.93 (CUDA 12.8)" in f.summary
    assert "driver 550.54.15 supports only CUDA 12.4" in f.summary
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in f.explanation
    assert f'{PY} -m pip install "nvidia-cuda-nvcc-cu12==12.4.*"' in f.explanation
    assert "pin the NVVM to its CUDA" in f.explanation


def test_numba_healthy_twin_nvvm_pinned_to_the_drivers_cuda():
    f = judge(numba_facts("550.54.15", "12.4", [("nvidia-cuda-nvcc-cu12", "12.4.131")]))
    assert f.status is Status.OK and "NVVM 12.4.131 is not newer than the driver's CUDA 12.4" in f.summary


def test_numba_neighbour_classic_numba_with_the_toolkits_nvvm():
    tk = CudaToolkitFacts(
        "/usr/local/cuda-11.7", "/usr/local/cuda-11.7", "11.7", "/usr/local/cuda-11.7/bin/nvcc", "11.7"
    )
    f = judge(numba_facts("470.129.06", "11.4", toolkit=tk, dist="numba", version="0.55.2"))
    assert f.status is Status.FAIL and "numba 0.55.2 compiles with NVVM 11.7" in f.summary
    assert "`/usr/local/cuda-11.7/nvvm/lib64/libnvvm.so`" in f.explanation
    assert "CUDA 11.4 toolkit's `bin` first on `PATH`" in f.explanation


def test_numba_without_an_nvvm_is_skipped():
    assert judge(numba_facts("550.54.15", "12.4")).status is Status.SKIP
