"""cuda.driver judges every framework that brings its own CUDA runtime, not only torch: the
instance (CuPy for CUDA 11 on a CUDA 10.1 driver), neighbours (ONNX Runtime's CUDA 13 build; JAX
whose pip CUDA 12.6 runs through minor-version compatibility), the healthy twin, and the runs
where there is nothing more to say (no cuda_libraries domain: torch only, as in the gate)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gpudoctor.checks.cuda_driver import CHECK, framework_cuda
from gpudoctor.cli import cli
from gpudoctor.facts.libraries import CudaLibrariesFacts, FrameworkInstall, TargetLibraries
from gpudoctor.facts.loader import CudaWheelsFacts, TargetWheels, WheelDist
from gpudoctor.model import Status
from gpudoctor.testing import (
    make_facts,
    nvidia_facts,
    nvml_device,
    pci_gpus,
    probe_facts,
    target,
    targets,
    torch_facts,
)

PY = "/home/user/venv/bin/python"


def run(driver, cuda_max, frameworks, wheels=(), torch=None, libraries=True):
    domains = dict(
        nvidia=nvidia_facts(driver, cuda_max, [nvml_device(0, "Tesla V100-PCIE-32GB", "7.0")]),
        gpu=pci_gpus(1),
        targets=targets(target(probe_facts(PY, torch or torch_facts(installed=False)))),
        cuda_wheels=CudaWheelsFacts((TargetWheels("current", (), tuple(WheelDist(n, v) for n, v in wheels), ()),)),
    )
    if libraries:
        domains["cuda_libraries"] = CudaLibrariesFacts(
            (TargetLibraries("current"),),
            tuple(FrameworkInstall("current", n, d, v, m, None, "test") for n, d, v, m in frameworks),
        )
    return CHECK.evaluate(make_facts(**domains))


def test_cupy_cuda11_build_on_a_cuda_10_driver_fails_with_the_floor_and_the_older_build():
    (f,) = run("418.87.01", "10.1", [("cupy", "cupy-cuda11x", "13.4.1", 11)])
    assert f.status is Status.FAIL
    assert "cupy-cuda11x 13.4.1" in f.summary and "450.80.02" in f.summary and "418.87.01" in f.summary
    assert "cudaErrorInsufficientDriver" in f.explanation
    assert "pytorch.org" not in f.explanation  # never torch's index for another framework


def test_onnxruntime_cuda13_build_on_a_cuda_12_driver_offers_the_cuda_12_build():
    (f,) = run("550.163.01", "12.4", [("onnxruntime-gpu", "onnxruntime-gpu", "1.24.1", 13)])
    assert f.status is Status.FAIL and "580" in f.summary
    assert "for CUDA 12" in f.explanation


def test_jax_with_a_newer_pip_cuda_than_the_driver_runs_by_minor_version_compatibility():
    wheels = [
        ("nvidia-cuda-nvcc-cu12", "12.6.20"),
        ("nvidia-cuda-runtime-cu12", "12.6.37"),
        ("nvidia-cudnn-cu12", "9.1"),
    ]
    (f,) = run("550.78", "12.4", [("jax", "jax-cuda12-plugin", "0.4.31", 12)], wheels)
    assert f.status is Status.OK and "minor-version" in f.summary
    assert "12.6" in f.summary and "PTX" in f.explanation
    assert f.evidence["cuda_from"] == "nvidia-cuda-runtime-cu12 12.6.37"


def test_twin_driver_new_enough_is_ok_without_a_note():
    wheels = [("nvidia-cuda-runtime-cu12", "12.6.37")]
    (f,) = run("560.35.03", "12.6", [("jax", "jax-cuda12-plugin", "0.4.31", 12)], wheels)
    assert f.status is Status.OK and f.explanation == ""


def test_unknown_cuda_major_and_torch_itself_are_left_to_their_own_rules():
    assert framework_cuda(make_facts(), "current") == []
    facts_fw = [("ctranslate2", "ctranslate2", "4.3.1", None), ("torch", "torch", "2.5.1+cu124", 12)]
    findings = run("418.87.01", "10.1", facts_fw, torch=torch_facts("2.5.1+cpu"))
    assert [f.status for f in findings] == [Status.SKIP]  # the CPU torch's skip; nothing else judged


def test_without_the_libraries_domain_only_torch_is_judged():
    findings = run("418.87.01", "10.1", [("cupy", "cupy-cuda11x", "13.4.1", 11)], libraries=False)
    assert [f.status for f in findings] == [Status.SKIP]


def test_a_cpu_torch_skip_gives_way_to_the_framework_that_was_judged():
    findings = run("418.87.01", "10.1", [("cupy", "cupy-cuda11x", "13.4.1", 11)], torch=torch_facts("2.5.1+cpu"))
    assert [f.status for f in findings] == [Status.FAIL]


def test_the_headline_names_the_framework_and_its_driver_cause():
    """cuda.available for an environment without torch: the cuda.driver failure of its framework is the
    root cause (not a skip, and never 'torch is not installed'); a healthy one stays a skip."""
    from gpudoctor.checks.cuda_available import CHECK as HEADLINE

    def headline(driver, cuda_max):
        facts = make_facts(
            nvidia=nvidia_facts(driver, cuda_max, [nvml_device(0, "Tesla V100-PCIE-32GB", "7.0")]),
            gpu=pci_gpus(1),
            targets=targets(
                target(probe_facts(PY, torch_facts(installed=False), distributions={"cupy-cuda11x": "13.4.1"}))
            ),
            cuda_libraries=CudaLibrariesFacts(
                (TargetLibraries("current"),),
                (FrameworkInstall("current", "cupy", "cupy-cuda11x", "13.4.1", 11, None, "test"),),
            ),
        )
        (f,) = HEADLINE.evaluate(facts)
        return f

    bad = headline("418.87.01", "10.1")
    assert bad.status is Status.FAIL and "cupy-cuda11x 13.4.1" in bad.summary and "450.80.02" in bad.summary
    assert "torch is not installed" not in bad.summary
    assert headline("470.182.03", "11.4").status is Status.SKIP


# ----------------------------------------------------------------- the advice, through the real CLI

GPU = Path(__file__).resolve().parent / "fixtures" / "facts" / "gpu"


def _cli(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_driver_upgrade_advice_names_no_branch_below_the_floor():
    code, out = _cli("check", "cuda.driver", "--facts", str(GPU / "driver-too-old-a100.json"))
    assert code == 1
    assert "550/570" not in out  # a fixed example branch could be below the floor (e.g. 580 for CUDA 13)
    assert "to 525.60.13 or newer" in out and "nvidia-driver-535" in out
