"""GPU stack, by kind: neighbours of the field cases (other driver/CUDA pairs, other GPU
generations, other loader and visibility faults) and the healthy twin of each.

Every machine is built with the public facts builders of :mod:`gpudoctor.testing` from the
facts of a public report (named per test); the checks run through the engine as in
``gpudoctor check --facts``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

from _fakecuda import GccMissing, build_fake_cuda
from gpudoctor.checks._gpu import _expand
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, SourceAttempt
from gpudoctor.facts.targets import CudaDevice, CudaDriverDevice, CudaDriverProbe, LibcudaProbe
from gpudoctor.model import Finding, Status
from gpudoctor.probe import parse_probe_output, probe_argv
from gpudoctor.registry import load_registry
from gpudoctor.testing import (
    make_facts,
    no_nvidia,
    nvidia_facts,
    nvml_device,
    os_facts,
    pci_gpus,
    probe_facts,
    target,
    targets,
    torch_facts,
)

PY = "/home/user/venv/bin/python"
SYSLIB = "/usr/lib/x86_64-linux-gnu"


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def machine(
    driver: str,
    max_cuda: str,
    gpus: list[tuple[str, str]],
    torch: str,
    cuda: str | None,
    *,
    arch: str = "",
    available: bool = True,
    env: dict[str, str] | None = None,
    libcuda: LibcudaProbe | None = None,
    cuda_driver: CudaDriverProbe | None = None,
    mig: bool = False,
    nvidia: NvidiaDriverFacts | None = None,
    cuda_error: str | None = None,
) -> Facts:
    """One host: ``gpus`` as (name, compute capability), the driver, and one venv with ``torch``."""
    nvml = [
        nvml_device(i, name, cc, uuid=f"GPU-{i:08x}-1111-2222-3333-444455556666", mig=mig)
        for i, (name, cc) in enumerate(gpus)
    ]
    visible = list(nvml)
    cvd = (env or {}).get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:  # what CUDA enumerates (PCI order here: the GPUs are of one speed)
        picked = []
        for entry in cvd.split(","):
            hit = [g for g in nvml if (entry.isdigit() and g.index == int(entry)) or g.uuid.startswith(entry)]
            if not hit:
                break
            picked += hit
        visible = picked
    devices = (
        tuple(
            CudaDevice(i, g.name, g.compute_capability, f"0000:{g.index + 1:02x}:00.0", g.uuid)
            for i, g in enumerate(visible)
        )
        if available
        else ()
    )
    major, minor = (int(x) for x in max_cuda.split("."))
    tf = torch_facts(
        torch,
        cuda,
        cuda_available=available,
        device_count=len(devices),
        arch_list=tuple(_expand(arch)) if arch and available else (),
        devices=devices,
        cuda_error=cuda_error,
    )
    probe = probe_facts(
        PY,
        tf,
        env=env or {"PATH": "/usr/bin:/bin"},
        libcuda=libcuda or LibcudaProbe(True, f"{SYSLIB}/libcuda.so.{driver}", None, major * 1000 + minor * 10),
        cuda_driver=cuda_driver or Unavailable("not probed"),
    )
    return make_facts(
        nvidia=nvidia or nvidia_facts(driver, max_cuda, nvml),
        gpu=pci_gpus(len(gpus)),
        os=os_facts("ubuntu", "22.04", "jammy"),
        targets=targets(target(probe)),
    )


def run(facts: Facts, registry, *ids: str) -> dict[str, Finding]:
    found: dict[str, Finding] = {}
    for f in evaluate([registry.checks[i] for i in ids], facts):
        found.setdefault(f.check, f)
    return found


# --------------------------------------------------------------------------- driver vs the torch build


@pytest.mark.parametrize(
    "driver, max_cuda, torch, cuda, floor, command",
    [
        # Fooocus #1313 kind at other versions: an 11.0-era driver under a cu121 wheel
        (
            "450.80.02",
            "11.0",
            "2.1.0+cu121",
            "12.1",
            "525.60.13",
            "torch==2.1.0 --index-url https://download.pytorch.org/whl/cu118",
        ),
        # R510 (CUDA 11.6) under a cu124 wheel
        (
            "510.47.03",
            "11.6",
            "2.4.0+cu124",
            "12.4",
            "525.60.13",
            "torch==2.4.0 --index-url https://download.pytorch.org/whl/cu118",
        ),
        # R535 LTSB under a CUDA 13.0 wheel: the 13.x floor is R580
        (
            "535.104.05",
            "12.2",
            "2.9.0+cu130",
            "13.0",
            "580.65.06",
            "torch==2.9.0 --index-url https://download.pytorch.org/whl/cu128",
        ),
        # the PyPI torch 2.11.0 (no local tag) is a CUDA 13.0 build; R570 stops at 12.8
        (
            "570.133.07",
            "12.8",
            "2.11.0",
            "13.0",
            "580.65.06",
            "torch==2.11.0 --index-url https://download.pytorch.org/whl/cu128",
        ),
    ],
)
def test_driver_below_the_cuda_major_floor_names_the_floor_and_a_build_it_runs(
    driver, max_cuda, torch, cuda, floor, command, registry
):
    facts = machine(driver, max_cuda, [("NVIDIA GeForce RTX 3090", "8.6")], torch, cuda, available=False)
    found = run(facts, registry, "cuda.driver", "cuda.available")
    f = found["cuda.driver"]
    assert f.status is Status.FAIL
    assert f"the NVIDIA driver {driver} (CUDA ≤ {max_cuda}) is too old for torch {torch}" in f.summary
    assert f"needs ≥ {floor}" in f.summary
    assert f"{PY} -m pip install --force-reinstall {command}" in f.explanation
    assert found["cuda.available"].status is Status.FAIL
    assert found["cuda.available"].evidence["root_cause_check"] == "cuda.driver"


@pytest.mark.parametrize(
    "driver, max_cuda, torch, cuda, how",
    [
        ("525.60.13", "12.0", "2.4.0+cu124", "12.4", "minor-version compatibility"),  # exactly the 12.x floor
        ("580.95.05", "13.0", "2.9.0+cu130", "13.0", "needs ≥ 580.65.06"),
        ("470.256.02", "11.4", "2.0.1+cu118", "11.8", "minor-version compatibility"),
    ],
)
def test_driver_at_or_above_the_floor_is_fine(driver, max_cuda, torch, cuda, how, registry):
    facts = machine(driver, max_cuda, [("NVIDIA GeForce RTX 3090", "8.6")], torch, cuda, arch="8.0;8.6;9.0")
    found = run(facts, registry, "cuda.driver", "cuda.available")
    assert found["cuda.driver"].status is Status.OK
    assert how in found["cuda.driver"].summary
    assert found["cuda.available"].status is Status.OK


# --------------------------------------------------------------------------- GPU generation vs the wheel's arch list


@pytest.mark.parametrize(
    "gpu, cc, driver, max_cuda, torch, cuda, arch, says, command",
    [
        # pytorch/pytorch #157517: Pascal dropped from the CUDA 12.8 builds of 2.8
        (
            "NVIDIA GeForce GTX 1080 Ti",
            "6.1",
            "570.133.07",
            "12.8",
            "2.8.0+cu128",
            "12.8",
            "7.0;7.5;8.0;8.6;9.0;10.0;12.0",
            "newest official build that still covers it is **torch 2.14 with cu126**",
            "torch --index-url https://download.pytorch.org/whl/cu126",
        ),
        # Kepler K80 (last driver R470): only the cu118 builds kept sm_37
        (
            "Tesla K80",
            "3.7",
            "470.256.02",
            "11.4",
            "2.1.0+cu121",
            "12.1",
            "5.0;6.0;7.0;7.5;8.0;8.6;9.0",
            "newest official build that still covers it is **torch 2.6 with cu118**",
            "'torch==2.6.*' --index-url https://download.pytorch.org/whl/cu118",
        ),
        # Maxwell M40 on a CUDA 13.0 wheel (CUDA 13 dropped sm_5x-7x)
        (
            "Tesla M40 24GB",
            "5.2",
            "580.95.05",
            "13.0",
            "2.9.0+cu130",
            "13.0",
            "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
            "still covers it",
            "torch --index-url https://download.pytorch.org/whl/cu126",
        ),
        # data-center Blackwell on a cu126 wheel: too new, not too old
        (
            "NVIDIA B200",
            "10.0",
            "570.133.20",
            "12.8",
            "2.6.0+cu126",
            "12.6",
            "5.0;6.0;7.0;7.5;8.0;8.6;9.0",
            "first official build that covers it is **torch 2.7 with cu128**",
            "torch --index-url https://download.pytorch.org/whl/cu128",
        ),
    ],
)
def test_gpu_outside_the_wheels_arch_list_names_the_build_that_covers_it(
    gpu, cc, driver, max_cuda, torch, cuda, arch, says, command, registry
):
    facts = machine(driver, max_cuda, [(gpu, cc)], torch, cuda, arch=arch)
    found = run(facts, registry, "cuda.arch", "cuda.available")
    f = found["cuda.arch"]
    assert f.status is Status.FAIL
    assert f"{gpu} (sm_{cc.replace('.', '')}) is not supported by torch {torch}" in f.summary
    assert says in f.explanation
    assert f"{PY} -m pip install --force-reinstall {command}" in f.explanation
    # the K80's R470 cannot run the cu121 build at all: the headline names the driver first, whose
    # remedy (the same torch from cu118) also brings sm_37 back
    root = "cuda.driver" if driver.startswith("470") else "cuda.arch"
    assert found["cuda.available"].evidence["root_cause_check"] == root


@pytest.mark.parametrize(
    "gpu, cc, torch, arch, runs",
    [
        ("NVIDIA GB10", "12.1", "2.9.0+cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "sm_121 runs the sm_120 kernels"),
        ("Tesla T4", "7.5", "2.8.0+cu128", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "Tesla T4: sm_75"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1", "2.8.0+cu126", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "sm_61 runs the sm_60"),
    ],
)
def test_gpu_covered_by_a_cubin_of_its_major_is_fine(gpu, cc, torch, arch, runs, registry):
    cuda = "12.8" if "cu128" in torch else "12.6"
    facts = machine("580.95.05", "13.0", [(gpu, cc)], torch, cuda, arch=arch)
    f = run(facts, registry, "cuda.arch")["cuda.arch"]
    assert f.status is Status.OK
    assert runs in f.summary


def test_two_gpus_of_one_model_are_named_once(registry):
    gpus = [("NVIDIA GeForce RTX 4090", "8.9")] * 2
    facts = machine("550.54.15", "12.4", gpus, "2.6.0+cu124", "12.4", arch="8.0;8.6;9.0")
    f = run(facts, registry, "cuda.arch")["cuda.arch"]
    assert f.summary.count("RTX 4090") == 1


# --------------------------------------------------------------------------- the toolkit's stub libcuda
# NVIDIA/warp #219, xmake-io/xmake #4686, pytorch/tensorpipe #294: the stubs directory on the loader path


STUB = "/usr/local/cuda-12.4/targets/x86_64-linux/lib/stubs/libcuda.so"


@pytest.mark.parametrize(
    "ld_library_path, remedy",
    [
        ("/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib64", "export LD_LIBRARY_PATH=/usr/local/cuda/lib64\n"),
        ("/usr/local/cuda/lib64/stubs/", "unset LD_LIBRARY_PATH"),
        (None, "grep -r stubs /etc/ld.so.conf.d/"),
    ],
)
def test_stub_libcuda_on_the_loader_path_fails_with_the_path_without_it(ld_library_path, remedy, registry):
    env = {"PATH": "/usr/bin"} | ({"LD_LIBRARY_PATH": ld_library_path} if ld_library_path is not None else {})
    facts = machine(
        "550.54.15",
        "12.4",
        [("NVIDIA GeForce RTX 4090", "8.9")],
        "2.6.0+cu124",
        "12.4",
        available=False,
        env=env,
        libcuda=LibcudaProbe(True, STUB, None, 12040),
        cuda_error="CUDA driver is a stub library",
    )
    found = run(facts, registry, "cuda.libcuda", "cuda.available")
    f = found["cuda.libcuda"]
    assert f.status is Status.FAIL
    assert "stub libcuda" in f.summary and STUB in f.summary
    assert "CUDA_ERROR_STUB_LIBRARY" in f.explanation
    assert remedy in f.explanation
    assert found["cuda.available"].evidence["root_cause_check"] == "cuda.libcuda"


def test_stub_libcuda_without_a_gpu_is_not_a_fault(registry):
    # an image build on a CPU host links against the stub; nothing runs on a GPU there
    facts = machine(
        "550.54.15",
        "12.4",
        [],
        "2.6.0+cu124",
        "12.4",
        libcuda=LibcudaProbe(True, STUB, None, 12040),
        nvidia=no_nvidia(),
    )
    assert run(facts, registry, "cuda.libcuda")["cuda.libcuda"].status is Status.SKIP


def test_the_drivers_libcuda_is_fine(registry):
    facts = machine("550.54.15", "12.4", [("NVIDIA GeForce RTX 4090", "8.9")], "2.6.0+cu124", "12.4", arch="8.6")
    f = run(facts, registry, "cuda.libcuda")["cuda.libcuda"]
    assert f.status is Status.OK
    assert f"{SYSLIB}/libcuda.so.550.54.15" in f.summary


# --------------------------------------------------------------------------- cuInit failures


def _cuinit(error: str | None) -> CudaDriverProbe:
    if error is None:
        return CudaDriverProbe(
            True, None, True, None, 12040, 1, (CudaDriverDevice(0, "NVIDIA GeForce RTX 3060", "8.6", context_ok=True),)
        )
    return CudaDriverProbe(True, None, False, error, 12040, 0)


@pytest.mark.parametrize(
    "error, summary, remedy, owner",
    [
        # pytorch/pytorch #88639, #49081: CUDA unknown error after suspend/resume
        (
            "CUDA_ERROR_UNKNOWN (999): unknown error",
            "nvidia_uvm",
            "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm",
            None,
        ),
        # NVSwitch systems without the Fabric Manager ("system not yet initialized")
        (
            "CUDA_ERROR_SYSTEM_NOT_READY (802): system not yet initialized",
            "Fabric Manager",
            "sudo systemctl enable --now nvidia-fabricmanager",
            None,
        ),
        ("CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library", "stub", "stubs", "cuda.libcuda"),
    ],
)
def test_cuinit_failure_names_its_cause_and_the_headline_follows(error, summary, remedy, owner, registry):
    facts = machine(
        "550.54.15",
        "12.4",
        [("NVIDIA GeForce RTX 3060", "8.6")],
        "2.6.0+cu124",
        "12.4",
        available=False,
        cuda_driver=_cuinit(error),
        cuda_error="CUDA unknown error - this may be due to an incorrectly set up environment",
    )
    found = run(facts, registry, "cuda.context", "cuda.available")
    f = found["cuda.context"]
    assert f.status is Status.FAIL
    assert error.split(":")[0] in f.summary and summary in f.summary
    assert remedy in f.explanation
    assert f.caused_by == ((owner,) if owner else ())
    assert found["cuda.available"].evidence["root_cause_check"] == "cuda.context"
    assert summary in found["cuda.available"].summary


def test_cuinit_failure_without_a_known_cause_keeps_the_generic_advice(registry):
    facts = machine(
        "550.54.15",
        "12.4",
        [("NVIDIA GeForce RTX 3060", "8.6")],
        "2.6.0+cu124",
        "12.4",
        available=False,
        cuda_driver=_cuinit("CUDA_ERROR_OPERATING_SYSTEM (304): OS call failed"),
    )
    f = run(facts, registry, "cuda.context")["cuda.context"]
    assert f.status is Status.FAIL
    assert f.summary.endswith("CUDA_ERROR_OPERATING_SYSTEM (304): OS call failed")
    assert "nvidia-smi -q -d ECC,PERFORMANCE,COMPUTE" in f.explanation


def test_cuinit_that_works_is_fine(registry):
    facts = machine(
        "550.54.15",
        "12.4",
        [("NVIDIA GeForce RTX 3060", "8.6")],
        "2.6.0+cu124",
        "12.4",
        arch="8.6",
        cuda_driver=_cuinit(None),
    )
    found = run(facts, registry, "cuda.context", "cuda.available")
    assert found["cuda.context"].status is Status.OK
    assert found["cuda.context"].summary == "a CUDA context opens on the GPU"
    assert found["cuda.available"].status is Status.OK


# --------------------------------------------------------------------------- CUDA_VISIBLE_DEVICES and MIG

MIG_A = "MIG-4f2d1a6e-aaaa-bbbb-cccc-000011112222"
MIG_B = "MIG-5f2d1a6e-aaaa-bbbb-cccc-000011112222"
A100 = [("NVIDIA A100-SXM4-80GB", "8.0")]


def test_mig_device_on_a_gpu_without_mig_mode_hides_every_gpu(registry):
    facts = machine(
        "550.54.15", "12.4", A100, "2.6.0+cu124", "12.4", available=False, env={"CUDA_VISIBLE_DEVICES": MIG_A}
    )
    found = run(facts, registry, "cuda.devices", "cuda.available")
    f = found["cuda.devices"]
    assert f.status is Status.FAIL
    assert "names a MIG device, but no GPU here is in MIG mode, so CUDA sees no GPU" in f.summary
    assert "sudo nvidia-smi -i N -mig 1" in f.explanation
    # platform.visibility judges the same value and explains cuda.devices' finding (the cause graph)
    assert found["cuda.available"].evidence["root_cause_check"] == "platform.visibility"


def test_one_mig_device_on_a_mig_gpu_is_fine(registry):
    facts = machine(
        "550.54.15", "12.4", A100, "2.6.0+cu124", "12.4", arch="8.0", mig=True, env={"CUDA_VISIBLE_DEVICES": MIG_A}
    )
    assert run(facts, registry, "cuda.devices")["cuda.devices"].status is Status.OK


def test_two_mig_devices_warn_that_one_process_uses_one(registry):
    # pytorch/pytorch #130181, #102715: a CUDA process enumerates a single MIG device
    facts = machine(
        "550.54.15",
        "12.4",
        A100,
        "2.6.0+cu124",
        "12.4",
        arch="8.0",
        mig=True,
        env={"CUDA_VISIBLE_DEVICES": f"{MIG_A},{MIG_B}"},
    )
    f = run(facts, registry, "cuda.devices")["cuda.devices"]
    assert f.status is Status.WARN
    assert "lists 2 MIG devices, but a CUDA process uses only one" in f.summary
    assert f"CUDA_VISIBLE_DEVICES={MIG_A} python train.py" in f.explanation


@pytest.mark.parametrize(
    "entry, status", [("GPU-00000001", Status.OK), ("GPU-ffff", Status.FAIL), ("1", Status.OK), ("2", Status.FAIL)]
)
def test_gpu_uuid_prefixes_and_indices(entry, status, registry):
    gpus = [("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA GeForce RTX 4090", "8.9")]
    facts = machine("550.54.15", "12.4", gpus, "2.6.0+cu124", "12.4", arch="8.6", env={"CUDA_VISIBLE_DEVICES": entry})
    assert run(facts, registry, "cuda.devices")["cuda.devices"].status is status


# --------------------------------------------------------------------------- driver/library version mismatch


def _nvml_failed(reason: str) -> NvidiaDriverFacts:
    return NvidiaDriverFacts(
        "550.127.05",
        "proc",
        Unavailable("NVML is needed for the driver's CUDA version: " + reason),
        Unavailable(reason),
        (),
        (SourceAttempt("nvml", False, reason), SourceAttempt("proc", True, "read 550.127.05")),
        "init-failed",
    )


def test_nvml_version_mismatch_says_reboot(registry):
    # the classic `Failed to initialize NVML: Driver/library version mismatch` after an unattended upgrade
    facts = machine(
        "550.127.05",
        "12.4",
        [("NVIDIA GeForce RTX 3090", "8.6")],
        "2.6.0+cu124",
        "12.4",
        available=False,
        nvidia=_nvml_failed("nvmlInit failed: Driver/library version mismatch"),
    )
    found = run(facts, registry, "nvidia.driver", "cuda.available")
    f = found["nvidia.driver"]
    assert f.status is Status.FAIL
    assert f.summary.startswith("driver/library version mismatch: the loaded kernel module is 550.127.05")
    assert "sudo reboot" in f.explanation and "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia" in f.explanation
    assert found["cuda.available"].summary.endswith(f.summary)
    # a mismatch that survives the reboot: a module built from source next to another user space
    # (tinygrad/open-gpu-kernel-modules#47): the user space of the module's exact version
    assert "sudo sh NVIDIA-Linux-x86_64-550.127.05.run --no-kernel-modules" in f.explanation


def test_other_nvml_failures_keep_the_general_diagnosis(registry):
    facts = machine(
        "550.127.05",
        "12.4",
        [("NVIDIA GeForce RTX 3090", "8.6")],
        "2.6.0+cu124",
        "12.4",
        available=False,
        nvidia=_nvml_failed("libnvidia-ml.so.1 could not be loaded"),
    )
    f = run(facts, registry, "nvidia.driver")["nvidia.driver"]
    assert f.status is Status.FAIL
    assert "kernel module 550.127.05 is loaded" in f.summary


# --------------------------------------------------------------------------- a CPU-only torch on a GPU machine
# pytorch/pytorch #26340 (a CPU index in pip.conf / requirements wins), tonybaloney/CSnakes #750


@pytest.mark.parametrize(
    "version, keep",
    [
        ("2.5.1+cpu", "torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124"),
        ("2.13.0+cpu", "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"),
        ("2.1.2+cpu", "torch==2.1.2 --index-url https://download.pytorch.org/whl/cu121"),
    ],
)
def test_cpu_build_on_a_gpu_machine_keeps_its_release_and_names_the_cpu_index(version, keep, registry):
    facts = machine("550.54.15", "12.4", [("NVIDIA GeForce RTX 3090", "8.6")], version, None, available=False)
    found = run(facts, registry, "torch.install", "cuda.available")
    f = found["torch.install"]
    assert f.status is Status.FAIL
    assert f"torch {version} in {PY} is a CPU-only build, but this machine has 1 NVIDIA GPU" == f.summary
    assert "https://download.pytorch.org/whl/cpu" in f.explanation and "torchvision/torchaudio" in f.explanation
    assert f"{PY} -m pip install --force-reinstall {keep}" in f.explanation
    # and the newest release for this driver stays on offer
    assert (
        f"{PY} -m pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu126"
        in f.explanation
    )
    assert found["cuda.available"].evidence["root_cause_check"] == "torch.install"


def test_cpu_build_without_a_gpu_is_expected(registry):
    facts = machine("550.54.15", "12.4", [], "2.13.0+cpu", None, available=False, nvidia=no_nvidia())
    f = run(facts, registry, "torch.install")["torch.install"]
    assert f.status is Status.INFO
    assert "--index-url" not in (f.explanation or "")


# --------------------------------------------------------------------------- cuDNN from a conda env's lib
# the neighbour of case 05: TensorFlow's pip guide had conda users export $CONDA_PREFIX/lib in an
# activation script; the env's conda cuDNN 8.5 then shadows the 8.9.2 that torch 2.1 was built with

CONDA = "/opt/conda/envs/ml"
SITE = f"{CONDA}/lib/python3.11/site-packages"


def _conda_cudnn(ld_library_path: str | None, loaded_dir: str, runtime: int) -> Facts:
    from gpudoctor.facts.loader import CudaWheelsFacts, LibraryDir, LibraryFile, TargetWheels, WheelDist
    from gpudoctor.facts.targets import CudnnProbe

    wheel_lib = f"{SITE}/nvidia/cudnn/lib"
    loaded = f"{loaded_dir}/libcudnn.so.8"
    env = {"PATH": f"{CONDA}/bin:/usr/bin", "CONDA_PREFIX": CONDA}
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    tf = torch_facts(
        "2.1.2+cu121",
        "12.1",
        cuda_available=True,
        device_count=1,
        cudnn_compile_version="8.9.2",
        cudnn_version=runtime,
    )
    probe = probe_facts(
        f"{CONDA}/bin/python",
        tf,
        env=env,
        is_conda=True,
        cudnn=CudnnProbe(True, "", 8, loaded, (loaded,), runtime, None, (loaded_dir,)),
    )
    wheels = CudaWheelsFacts(
        (
            TargetWheels(
                "current",
                (SITE,),
                (WheelDist("nvidia-cudnn-cu12", "8.9.2.26"),),
                (LibraryDir(wheel_lib, "wheel", True, (LibraryFile("libcudnn.so.8", f"{wheel_lib}/libcudnn.so.8"),)),),
            ),
        )
    )
    return make_facts(
        nvidia=nvidia_facts("550.54.15", "12.4", [nvml_device()]),
        gpu=pci_gpus(1),
        os=os_facts("ubuntu", "22.04", "jammy"),
        targets=targets(target(probe)),
        cuda_wheels=wheels,
    )


def test_conda_env_lib_on_ld_library_path_shadows_the_wheels_cudnn(registry):
    facts = _conda_cudnn(f"{CONDA}/lib:/usr/local/cuda/lib64", f"{CONDA}/lib", 8500)
    f = run(facts, registry, "cudnn.load")["cudnn.load"]
    assert f.status is Status.FAIL
    assert f.summary == (
        f"cuDNN 8.5.0 loaded from {CONDA}/lib/libcudnn.so.8 is older than the 8.9.2 torch 2.1.2+cu121 was built with"
    )
    assert "found runtime version (8, 5, 0)" in f.explanation
    assert f"grep -r LD_LIBRARY_PATH {CONDA}/etc/conda/activate.d/" in f.explanation
    assert "export LD_LIBRARY_PATH=/usr/local/cuda/lib64\n" in f.explanation
    assert f"The copy that belongs to this torch is `{SITE}/nvidia/cudnn/lib/libcudnn.so.8`" in f.explanation


def test_conda_env_loading_the_wheels_cudnn_is_fine(registry):
    facts = _conda_cudnn(None, f"{SITE}/nvidia/cudnn/lib", 8902)
    f = run(facts, registry, "cudnn.load")["cudnn.load"]
    assert f.status is Status.OK
    assert f.summary.startswith("cuDNN 8.9.2 loaded from")


# --------------------------------------------------------------------------- toolkit vs torch CUDA major
# "The detected CUDA version (11.8) mismatches the version that was used to compile PyTorch (12.4)"
# (icip-cas/AutoAlign #25, rusty1s/pytorch_sparse #189, pytorch/pytorch #73047)


@pytest.mark.parametrize(
    "toolkit, torch, cuda, status, needles",
    [
        (
            "11.5.119",
            "2.1.2+cu121",
            "12.1",
            Status.WARN,
            [
                "The detected CUDA version (11.5) mismatches the version that was used to compile\nPyTorch (12.1)",
                "sudo apt-get install cuda-toolkit-12-1",
                "export CUDA_HOME=/usr/local/cuda-12.1",
                f"{PY} -m pip install --force-reinstall torch==2.1.2 --index-url https://download.pytorch.org/whl/cu118",
            ],
        ),
        (
            "13.0.48",
            "2.9.0+cu128",
            "12.8",
            Status.WARN,
            [f"{PY} -m pip install --force-reinstall torch==2.9.0 --index-url https://download.pytorch.org/whl/cu130"],
        ),
        ("12.4.131", "2.1.2+cu121", "12.1", Status.OK, []),  # only the major has to match
        ("12.4.131", "2.13.0+cpu", None, Status.OK, []),
    ],
)
def test_toolkit_of_another_cuda_major_than_torch_breaks_extension_builds(
    toolkit, torch, cuda, status, needles, registry
):
    from gpudoctor.facts.cuda import CudaToolkitFacts

    mm = ".".join(toolkit.split(".")[:2])
    tk = CudaToolkitFacts(None, f"/usr/local/cuda-{mm}", toolkit, f"/usr/local/cuda-{mm}/bin/nvcc", mm)
    facts = machine("580.95.05", "13.0", [("NVIDIA GeForce RTX 4090", "8.9")], torch, cuda, arch="8.6")
    facts = make_facts(**dict(facts.domains), cuda_toolkit=tk)
    f = run(facts, registry, "cuda.toolkit")["cuda.toolkit"]
    assert f.status is status
    if status is Status.WARN:
        assert f.summary == (
            f"the CUDA toolkit at /usr/local/cuda-{mm} is {toolkit}, but torch {torch} in {PY} was built with "
            f"CUDA {cuda}: building CUDA extensions fails"
        )
    for needle in needles:
        assert needle in f.explanation


# --------------------------------------------------------------------------- CUDA_VISIBLE_DEVICES indices, fastest first
# the neighbour of case 09 (pytorch/pytorch #86539): with CUDA_DEVICE_ORDER unset an index taken from
# nvidia-smi selects another card


def _two_cards(cvd: str, order: str | None, cuda_bus: str, cuda_name: str) -> Facts:
    g745 = nvml_device(0, "NVIDIA GeForce GTX 745", "5.0", uuid="GPU-745", bus="00000000:01:00.0")
    g1080 = nvml_device(1, "NVIDIA GeForce GTX 1080 Ti", "6.1", uuid="GPU-1080", bus="00000000:02:00.0")
    env = {"CUDA_VISIBLE_DEVICES": cvd} | ({"CUDA_DEVICE_ORDER": order} if order else {})
    cc = "5.0" if "745" in cuda_name else "6.1"
    tf = torch_facts(
        "2.6.0+cu126",
        "12.6",
        device_count=1,
        arch_list=("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        devices=(CudaDevice(0, cuda_name, cc, cuda_bus),),
    )
    return make_facts(
        nvidia=nvidia_facts("550.54.15", "12.4", [g745, g1080]),
        gpu=pci_gpus(2),
        os=os_facts(),
        targets=targets(target(probe_facts(PY, tf, env=env))),
    )


def test_index_from_nvidia_smi_selects_another_card_without_pci_bus_order(registry):
    facts = _two_cards("1", None, "0000:01:00.0", "NVIDIA GeForce GTX 745")
    f = run(facts, registry, "cuda.devices")["cuda.devices"]
    assert f.status is Status.WARN
    assert "1 selects nvidia-smi GPU 0 (NVIDIA GeForce GTX 745), not GPU 1" in f.summary
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in f.explanation


def test_index_with_pci_bus_order_selects_the_card_nvidia_smi_names(registry):
    facts = _two_cards("1", "PCI_BUS_ID", "0000:02:00.0", "NVIDIA GeForce GTX 1080 Ti")
    assert run(facts, registry, "cuda.devices")["cuda.devices"].status is Status.OK


def test_index_that_happens_to_agree_is_fine(registry):
    facts = _two_cards("1", None, "0000:02:00.0", "NVIDIA GeForce GTX 1080 Ti")
    assert run(facts, registry, "cuda.devices")["cuda.devices"].status is Status.OK


# --------------------------------------------------------------------------- the stub, end to end


def test_light_probe_of_a_stub_libcuda_is_judged_a_stub(tmp_path, registry):
    """A real probe run: the gcc-built fake libcuda sits in a toolkit-like ``stubs`` directory on
    LD_LIBRARY_PATH and answers cuInit with CUDA_ERROR_STUB_LIBRARY, as the toolkit's stub does."""
    try:
        site, libdir = build_fake_cuda(tmp_path / "fake")
    except GccMissing:
        pytest.skip("gcc is not installed: cannot build the fake libcuda.so.1")
    stubs = tmp_path / "cuda-12.4" / "targets" / "x86_64-linux" / "lib" / "stubs"
    stubs.mkdir(parents=True)
    shutil.copy(libdir / "libcuda.so.1", stubs / "libcuda.so")
    os.symlink("libcuda.so", stubs / "libcuda.so.1")  # what build images do to link against it
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUDA")}
    env.update(PYTHONPATH=str(site), LD_LIBRARY_PATH=f"{stubs}:/usr/local/cuda/lib64", FAKE_CUDA_INIT_RC="34")
    proc = subprocess.run(probe_argv(sys.executable, "light"), capture_output=True, text=True, env=env, timeout=120)
    probe = parse_probe_output(proc.stdout)
    assert "/stubs/" in (probe.libcuda.path or "")
    assert probe.cuda_driver.init_error.startswith("CUDA_ERROR_STUB_LIBRARY (34)")
    # judged on a host whose driver is there
    probe = dataclasses.replace(probe, executable=PY)
    facts = make_facts(
        nvidia=nvidia_facts("550.54.15", "12.4", [nvml_device()]),
        gpu=pci_gpus(1),
        os=os_facts(),
        targets=targets(target(probe)),
    )
    found = run(facts, registry, "cuda.libcuda", "cuda.context", "cuda.available")
    assert found["cuda.libcuda"].status is Status.FAIL
    assert "export LD_LIBRARY_PATH=/usr/local/cuda/lib64\n" in found["cuda.libcuda"].explanation
    assert found["cuda.context"].caused_by == ("cuda.libcuda",)
    assert found["cuda.available"].evidence["root_cause_check"] == "cuda.libcuda"


# --------------------------------------------------------------------------- import torch: an older libnvJitLink first
# pytorch/pytorch #111469 and #134929, infiniflow/ragflow #4466 (LD_LIBRARY_PATH=/usr/local/cuda-12.1/lib64)

NVJITLINK = (
    "/usr/local/lib/python3.10/dist-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: "
    "undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12"
)


@pytest.mark.parametrize(
    "ld_library_path, remedy",
    [
        ("/usr/local/cuda-12.0/lib64:/usr/local/nvidia/lib64", "export LD_LIBRARY_PATH=/usr/local/nvidia/lib64\n"),
        ("/usr/local/cuda-12.1/lib64:", "unset LD_LIBRARY_PATH\n"),
        ("/opt/conda/lib:/usr/lib/x86_64-linux-gnu", "export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu\n"),
        (None, "An older `libnvJitLink` is found first"),
    ],
)
def test_older_nvjitlink_names_the_directory_that_shadows_the_wheel(ld_library_path, remedy, registry):
    env = {"PATH": "/usr/bin"} | ({"LD_LIBRARY_PATH": ld_library_path} if ld_library_path is not None else {})
    probe = probe_facts(PY, torch_facts("2.1.2+cu121", "12.1", import_error=NVJITLINK), env=env)
    facts = make_facts(
        nvidia=nvidia_facts("550.54.15", "12.4", [nvml_device()]),
        gpu=pci_gpus(1),
        os=os_facts(),
        targets=targets(target(probe)),
    )
    f = run(facts, registry, "torch.install")["torch.install"]
    assert f.status is Status.FAIL
    assert "need nvJitLink ≥ 12.1, but an older `libnvJitLink` was loaded" in f.explanation
    assert remedy in f.explanation
    assert f"{PY} -m pip install -U 'nvidia-nvjitlink-cu12>=12.1'" in f.explanation


def test_other_undefined_symbols_with_a_toolkit_dir_on_the_path_name_it(registry):
    error = "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: cudaGetDriverEntryPointByVersion, version libcudart.so.12"
    env = {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}
    probe = probe_facts(PY, torch_facts("2.6.0+cu124", "12.4", import_error=error), env=env)
    facts = make_facts(nvidia=nvidia_facts(), gpu=pci_gpus(1), os=os_facts(), targets=targets(target(probe)))
    f = run(facts, registry, "torch.install")["torch.install"]
    assert "`/usr/local/cuda/lib64` (a CUDA toolkit's or conda's library directory)" in f.explanation
    assert "unset LD_LIBRARY_PATH" in f.explanation


def test_new_gpu_on_an_old_build_offers_the_newest_and_the_smallest_upgrade(registry):
    # an H100 (sm_90) under torch 1.13 cu117, whose kernels stop at sm_86 (pytorch/pytorch #90761 kind)
    facts = machine(
        "535.104.05",
        "12.2",
        [("NVIDIA H100 80GB HBM3", "9.0")],
        "1.13.1+cu117",
        "11.7",
        arch="3.7;5.0;6.0;7.0;7.5;8.0;8.6",
    )
    f = run(facts, registry, "cuda.arch")["cuda.arch"]
    assert f.status is Status.FAIL
    assert "first official build that covers it is **torch 2.0 with cu118**" in f.explanation
    assert (
        f"{PY} -m pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu126"
        in f.explanation
    )
    assert "or the smallest upgrade that covers it (torch 2.0, cu118)" in f.explanation
    assert (
        f"{PY} -m pip install --force-reinstall 'torch==2.0.*' --index-url https://download.pytorch.org/whl/cu118"
        in f.explanation
    )


# --------------------------------------------------------------------------- arch list of builds the table does not describe


@pytest.mark.parametrize(
    "version, cuda",
    [
        ("2.6.0a0+df5bbc09d1.nv24.12", "12.6"),  # NVIDIA NGC PyTorch container (its own arch list)
        ("2.6.0.dev20241112+cu126", "12.6"),  # a nightly
        ("2.6.0+git1234abc", "12.6"),  # a source build
    ],
)
def test_without_an_arch_list_only_official_builds_are_judged_from_the_table(version, cuda, registry):
    # light probe or CUDA unavailable: torch reports no arch list; the PyPI table must not stand in
    facts = machine("570.133.20", "12.8", [("NVIDIA B200", "10.0")], version, cuda, available=False)
    f = run(facts, registry, "cuda.arch")["cuda.arch"]
    assert f.status is Status.SKIP
    assert "is not an official build gpudoctor knows" in f.summary


def test_without_an_arch_list_an_official_build_is_judged_from_the_table(registry):
    facts = machine("570.133.20", "12.8", [("NVIDIA B200", "10.0")], "2.6.0+cu126", "12.6", available=False)
    f = run(facts, registry, "cuda.arch")["cuda.arch"]
    assert f.status is Status.FAIL
    assert f.evidence["arch_list_source"].startswith("the official wheel's arch list")
