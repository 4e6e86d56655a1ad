"""``nvidia.driver``: every status path, from JSON snapshots and from builders."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from gpudoctor.checks.nvidia_driver import CHECK
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import PciGpuFacts
from gpudoctor.model import Status
from gpudoctor.testing import (
    make_facts,
    no_nvidia,
    nvidia_facts,
    nvml_device,
    os_facts,
    pci_gpus,
)


def run_check(facts: Facts):
    findings = evaluate([CHECK], facts)
    assert len(findings) == 1
    assert findings[0].check == "nvidia.driver"
    return findings[0]


def from_fixture(name: str) -> Facts:
    return Facts.from_json(json.loads((FIXTURES / "facts" / name).read_text()))


# ----------------------------------------------------------------- snapshots


@pytest.mark.parametrize(
    "fixture, status, in_summary, in_explanation",
    [
        (
            "no-gpu-cpu-torch.json",
            Status.SKIP,
            "no NVIDIA GPU on this machine",
            "/proc/driver/nvidia/version does not exist",
        ),
        ("sysfs-unreadable.json", Status.SKIP, "PCI bus could not be listed", "--gpus all"),
        ("gpu-driver-550-cpu-torch.json", Status.OK, "NVIDIA driver 550.54.15 (supports CUDA up to 12.4), 1 GPU", ""),
        ("case01-driver-470-torch-cu121.json", Status.OK, "NVIDIA driver 470.86 (supports CUDA up to 11.4)", ""),
        ("image-root-proc-470.json", Status.OK, "NVIDIA driver 470.86", ""),
        (
            "proc-driver-nvml-broken.json",
            Status.FAIL,
            "kernel module 535.104.05 is loaded",
            "libnvidia-ml.so.1 could not be loaded",
        ),
        (
            "gpu-nouveau-no-torch.json",
            Status.FAIL,
            "1 NVIDIA GPU on the PCI bus, but no usable NVIDIA driver",
            "nouveau",
        ),
        ("gpu-vfio.json", Status.FAIL, "2 NVIDIA GPUs on the PCI bus", "vfio-pci"),
        ("container-no-runtime-cudnn-missing.json", Status.FAIL, "no usable NVIDIA driver", "docker run --gpus all"),
        ("gpu-no-module.json", Status.FAIL, "no usable NVIDIA driver", "sudo modprobe nvidia"),
        ("empty.json", Status.SKIP, "the nvidia facts were not collected", ""),
    ],
)
def test_snapshot_status_paths(fixture, status, in_summary, in_explanation):
    f = run_check(from_fixture(fixture))
    assert f.status is status, f.summary
    assert in_summary in f.summary
    assert in_explanation in f.explanation


def test_image_root_snapshot_keeps_its_root():
    # a snapshot taken with --root must not be judged as if NVML had failed on a live system
    facts = from_fixture("image-root-proc-470.json")
    assert facts.root == "/mnt/image"
    f = run_check(facts)
    assert f.status is Status.OK
    assert f.evidence["source"] == "proc"


# ----------------------------------------------------------------- builders


def test_no_gpu_no_driver_skips_naming_every_place_looked_at():
    f = run_check(make_facts(gpu=pci_gpus(0), nvidia=no_nvidia(), os=os_facts()))
    assert f.status is Status.SKIP
    assert "no NVIDIA GPU" in f.summary
    for place in ("0x10de", "NVML", "/proc/driver/nvidia/version", "/sys/module/nvidia/version"):
        assert place in f.explanation
    assert f.evidence["pci_gpus"] == []
    assert len(f.evidence["attempts"]) == 3
    assert all(": failed: " in a for a in f.evidence["attempts"])


def test_no_driver_and_gpu_domain_unavailable_skips():
    f = run_check(make_facts(gpu=Unavailable("sysfs not mounted"), nvidia=no_nvidia()))
    assert f.status is Status.SKIP
    assert "could not be listed" in f.summary


def test_nvidia_domain_unavailable_skips_with_reason():
    f = run_check(make_facts(nvidia=Unavailable("the nvidia collector crashed: boom")))
    assert f.status is Status.SKIP
    assert f.summary == "the nvidia collector crashed: boom"


def test_nvml_driver_ok_with_version_cuda_and_count():
    devs = [
        nvml_device(0, "NVIDIA H100 80GB HBM3", "9.0", 81559),
        nvml_device(1, "NVIDIA H100 80GB HBM3", "9.0", 81559),
    ]
    f = run_check(make_facts(gpu=pci_gpus(2), nvidia=nvidia_facts("550.54.15", "12.4", devs), os=os_facts()))
    assert f.status is Status.OK
    assert f.summary == "NVIDIA driver 550.54.15 (supports CUDA up to 12.4), 2 GPUs"
    assert f.evidence["driver_version"] == "550.54.15"
    assert f.evidence["source"] == "nvml"
    assert f.evidence["max_cuda"] == "12.4"


def test_nvml_driver_without_cuda_version_is_still_ok():
    f = run_check(make_facts(gpu=pci_gpus(1), nvidia=nvidia_facts("535.104.05", None, [nvml_device()])))
    assert f.status is Status.OK
    assert f.summary == "NVIDIA driver 535.104.05, 1 GPU"
    assert "max_cuda" not in f.evidence


@pytest.mark.parametrize("source", ["proc", "sysmodule"])
def test_kernel_module_without_nvml_on_live_system_fails(source):
    f = run_check(make_facts(gpu=pci_gpus(1), nvidia=nvidia_facts("470.86", source=source)))
    assert f.status is Status.FAIL
    assert "kernel module 470.86 is loaded" in f.summary
    assert "--gpus all" in f.explanation and "reboot" in f.explanation
    assert f.evidence["source"] == source


def test_kernel_module_from_image_root_is_ok():
    facts = Facts(make_facts(gpu=pci_gpus(1), nvidia=nvidia_facts("470.86", source="proc")).domains, root="/srv/img")
    f = run_check(facts)
    assert f.status is Status.OK
    assert f.summary == "NVIDIA driver 470.86"


@pytest.mark.parametrize(
    "driver, container, expected",
    [
        ("nouveau", False, "nouveau"),
        ("vfio-pci", False, "vfio-pci"),
        ("nvidia", True, "docker run --gpus all"),
        (None, True, "nvidia.com/gpu"),
        (None, False, "sudo modprobe nvidia"),
    ],
)
def test_gpu_without_usable_driver_fails_with_the_cause(driver, container, expected):
    f = run_check(
        make_facts(
            gpu=pci_gpus(1, driver=driver),
            nvidia=no_nvidia(),
            os=os_facts(in_container=container, kind="docker" if container else None),
        )
    )
    assert f.status is Status.FAIL
    assert f.summary == "1 NVIDIA GPU on the PCI bus, but no usable NVIDIA driver"
    assert expected in f.explanation
    assert f.evidence["pci_gpus"] == [f"0000:01:00.0 0x2684 driver={driver or 'none'}"]


def test_unreadable_sysfs_with_no_devices_is_not_a_fail():
    f = run_check(make_facts(gpu=PciGpuFacts(devices=(), sysfs_readable=False), nvidia=no_nvidia()))
    assert f.status is Status.SKIP


def test_check_metadata():
    assert CHECK.id == "nvidia.driver"
    assert set(CHECK.needs) >= {"gpu", "nvidia"}
    from gpudoctor.registry import catalogued

    assert "gate" in catalogued(CHECK).tags  # the gate tag comes from data/checks.toml
