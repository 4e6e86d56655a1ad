"""Collectors ``gpu`` (PCI bus in sysfs) and ``nvidia`` (driver sources) from fake roots."""

from __future__ import annotations

import os

import pytest

from conftest import CASES
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.nvidia import collect_gpu, collect_nvidia, parse_nvrm_version
from gpudoctor.facts import Unavailable
from gpudoctor.facts.nvidia import PciDevice
from gpudoctor.testing import fake_system, write_tree

CASE01_PROC = (CASES / "01-driver-470-vs-torch-cu121" / "proc-driver-nvidia-version.txt").read_text()


def ctx(root):
    return CollectContext(fake_system(root), CollectOptions())


def pci_device(root, bus, vendor, device, cls, driver=None):
    base = f"/sys/bus/pci/devices/{bus}"
    write_tree(root, {f"{base}/vendor": f"{vendor}\n", f"{base}/device": f"{device}\n", f"{base}/class": f"{cls}\n"})
    if driver:
        drivers = root / "sys" / "bus" / "pci" / "drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../bus/pci/drivers/{driver}", root / base.lstrip("/") / "driver")


# ----------------------------------------------------------------- gpu (PCI)


def test_gpu_finds_nvidia_display_controllers_only(tmp_path):
    pci_device(tmp_path, "0000:00:02.0", "0x8086", "0x3e92", "0x030000", "i915")  # Intel iGPU
    pci_device(tmp_path, "0000:01:00.0", "0x10de", "0x2684", "0x030000", "nvidia")  # RTX 4090, VGA
    pci_device(tmp_path, "0000:01:00.1", "0x10de", "0x22ba", "0x040300", "snd_hda_intel")  # its HDMI audio
    pci_device(tmp_path, "0000:41:00.0", "0x10DE", "0x2330", "0x030200")  # H100, 3D, no driver
    facts = collect_gpu(ctx(tmp_path))
    assert facts.sysfs_readable is True
    assert facts.devices == (
        PciDevice("0000:01:00.0", "0x10de", "0x2684", "0x030000", "nvidia"),
        PciDevice("0000:41:00.0", "0x10de", "0x2330", "0x030200", None),
    )


@pytest.mark.parametrize("driver", ["nouveau", "vfio-pci"])
def test_gpu_reports_the_bound_driver(tmp_path, driver):
    pci_device(tmp_path, "0000:65:00.0", "0x10de", "0x1eb8", "0x030200", driver)
    (dev,) = collect_gpu(ctx(tmp_path)).devices
    assert dev.driver == driver


def test_gpu_no_nvidia_devices(tmp_path):
    pci_device(tmp_path, "0000:00:02.0", "0x8086", "0x3e92", "0x030000", "i915")
    facts = collect_gpu(ctx(tmp_path))
    assert (facts.devices, facts.sysfs_readable) == ((), True)


def test_gpu_sysfs_not_listable(tmp_path):
    facts = collect_gpu(ctx(tmp_path))
    assert (facts.devices, facts.sysfs_readable) == ((), False)


# ----------------------------------------------------------------- nvidia (driver)


def test_parse_nvrm_version_of_case01():
    assert parse_nvrm_version(CASE01_PROC) == "470.86"


@pytest.mark.parametrize(
    "text, version",
    [
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n", "550.54.15"),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  (dvs-builder@U16-T02)\n",
            "535.104.05",
        ),
        ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  540.3.0  Thu Oct 10 2024\n", "540.3.0"),
        ("garbage\n", None),
    ],
)
def test_parse_nvrm_version_variants(text, version):
    assert parse_nvrm_version(text) == version


def test_nvidia_from_proc_in_root_keeps_every_attempt(tmp_path):
    write_tree(tmp_path, {"/proc/driver/nvidia/version": CASE01_PROC})
    facts = collect_nvidia(ctx(tmp_path))
    assert facts.driver_version == "470.86"
    assert facts.source == "proc"
    assert isinstance(facts.nvml, Unavailable) and "--root" in facts.nvml.reason
    assert isinstance(facts.cuda_driver_version, Unavailable)
    assert [(a.source, a.ok) for a in facts.attempts] == [("nvml", False), ("proc", True)]
    assert facts.devices == ()


def test_nvidia_from_sys_module_when_proc_is_missing(tmp_path):
    write_tree(tmp_path, {"/sys/module/nvidia/version": "535.104.05\n"})
    facts = collect_nvidia(ctx(tmp_path))
    assert (facts.driver_version, facts.source) == ("535.104.05", "sysmodule")
    assert [(a.source, a.ok) for a in facts.attempts] == [("nvml", False), ("proc", False), ("sysmodule", True)]
    assert "does not exist" in facts.attempts[1].detail


def test_nvidia_unparsable_proc_falls_through_to_sys_module(tmp_path):
    write_tree(
        tmp_path, {"/proc/driver/nvidia/version": "something else\n", "/sys/module/nvidia/version": "550.54.15\n"}
    )
    facts = collect_nvidia(ctx(tmp_path))
    assert (facts.driver_version, facts.source) == ("550.54.15", "sysmodule")
    assert facts.attempts[1].ok is False
    assert "no version found" in facts.attempts[1].detail


def test_nvidia_no_driver_says_why_for_each_source(tmp_path):
    facts = collect_nvidia(ctx(tmp_path))
    assert isinstance(facts.driver_version, Unavailable)
    assert facts.source == ""
    assert [(a.source, a.ok) for a in facts.attempts] == [("nvml", False), ("proc", False), ("sysmodule", False)]
    reason = facts.driver_version.reason
    assert "/proc/driver/nvidia/version does not exist" in reason
    assert "/sys/module/nvidia/version does not exist" in reason


def test_nvidia_empty_sys_module_version_is_no_driver(tmp_path):
    write_tree(tmp_path, {"/sys/module/nvidia/version": "\n"})
    facts = collect_nvidia(ctx(tmp_path))
    assert isinstance(facts.driver_version, Unavailable)
