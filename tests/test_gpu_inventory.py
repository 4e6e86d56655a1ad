"""No GPU lost silently: the PCI bus, NVML (through the real worker and a gcc-built fake
libnvidia-ml.so.1) and CUDA joined by PCI address; ``nvidia.driver`` never says "ok" for a
GPU NVML cannot open; recovery actions and P2P/topology read through the real ctypes path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.nvidia import collect_nvidia
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.nvidia import PciDevice, PciGpuFacts
from gpudoctor.facts.targets import CudaDevice
from gpudoctor.gpu_inventory import account, bus_key
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.system import System
from gpudoctor.testing import make_facts, nvidia_facts, nvml_device, os_facts, probe_facts, target, targets, torch_facts
from nvml_lib import build_fake_nvml


def live_ctx(libdir: Path) -> CollectContext:
    environ = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    return CollectContext(System(env=environ), CollectOptions(probe_timeout_s=20.0))


def bus(n: int, driver: str | None = "nvidia", first: int = 0x18) -> PciGpuFacts:
    """The PCI functions the fake NVML reports (bus 0x18 + index)."""
    return PciGpuFacts(
        tuple(PciDevice(f"0000:{first + i:02x}:00.0", "0x10de", "0x2330", "0x030200", driver) for i in range(n))
    )


def run(facts, *ids):
    registry = load_registry()
    return {f.check: f for f in evaluate([registry.checks[c] for c in ids], facts)}


def test_bus_key_normalises_sysfs_nvml_and_cuda_spellings():
    assert bus_key("00000000:3B:00.0") == bus_key("0000:3b:00.0") == bus_key("3b:00.0") == "0000:3b:00.0"


@pytest.mark.parametrize(
    "rc, error, words",
    [
        (15, "GPU is lost", ["reboot", "fell off the PCIe bus"]),  # NVML_ERROR_GPU_IS_LOST
        (999, "Unknown Error", ["reboot", "Unable to determine the device handle"]),  # what nvidia-smi prints
        (4, "Insufficient Permissions", ["nvidia-smi -r -i 1", "/dev/nvidia"]),
        (16, "GPU requires restart", ["nvidia-smi -r -i 1", "NVML_ERROR_RESET_REQUIRED"]),  # needs a reset
    ],
)
def test_a_gpu_nvml_cannot_open_is_a_failure_never_driver_ok(tmp_path, rc, error, words):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=2, LOST_INDEX=1, LOST_RC=rc)
    nv = collect_nvidia(live_ctx(lib))
    assert nv.nvml == "ok" and nv.device_count == 2
    assert [d.index for d in nv.devices] == [0]
    assert [(u.index, error in u.error) for u in nv.unopened] == [(1, True)]
    facts = make_facts(nvidia=nv, gpu=bus(2), os=os_facts())
    found = run(facts, "nvidia.driver", "devices.inventory")
    assert found["nvidia.driver"].status is Status.FAIL
    assert "cannot open 1 of its GPUs" in found["nvidia.driver"].summary
    inv = found["devices.inventory"]
    assert inv.status is Status.FAIL
    assert "0000:19:00.0" in inv.summary and "only 1 usable" in inv.summary
    text = inv.summary + inv.explanation
    for word in words:
        assert word in text, text
    # the GPU that works is listed too, with its NVML index
    assert "`0000:18:00.0` (0x2330): driver nvidia, NVML GPU 0 NVIDIA H100 80GB HBM3" in inv.explanation


def test_healthy_twin_every_gpu_opened(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=2)
    nv = collect_nvidia(live_ctx(lib))
    assert nv.unopened == () and nv.device_count == 2
    found = run(make_facts(nvidia=nv, gpu=bus(2), os=os_facts()), "nvidia.driver", "devices.inventory")
    assert found["nvidia.driver"].status is Status.OK
    assert found["devices.inventory"].status is Status.OK
    assert "all 2 NVIDIA GPUs" in found["devices.inventory"].summary


def test_lost_gpu_in_a_container_is_for_the_host_operator(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=2, LOST_INDEX=0)
    nv = collect_nvidia(live_ctx(lib))
    facts = make_facts(nvidia=nv, gpu=bus(2), os=os_facts(in_container=True, kind="docker"))
    inv = run(facts, "devices.inventory")["devices.inventory"]
    assert inv.status is Status.FAIL
    assert "host operator" in inv.explanation and "This is a container" in inv.explanation
    assert "sudo reboot" in inv.explanation  # on the host, said to the operator
    host = run(make_facts(nvidia=nv, gpu=bus(2), os=os_facts()), "devices.inventory")["devices.inventory"]
    assert "host operator" not in host.explanation and "sudo reboot" in host.explanation


def test_gpus_of_the_host_not_given_to_a_container_are_not_lost():
    # a container sees the host's whole PCI bus in sysfs, but NVML only the GPU it was given
    nv = nvidia_facts(devices=[nvml_device(0, bus="00000000:18:00.0")])
    nv = nv.__class__(**{**nv.__dict__, "device_count": 1})
    facts = make_facts(nvidia=nv, gpu=bus(4), os=os_facts(in_container=True, kind="docker"))
    found = run(facts, "nvidia.driver", "devices.inventory")
    assert found["nvidia.driver"].status is Status.OK
    assert found["devices.inventory"].status is Status.OK
    assert "NVML: not in this container" in found["devices.inventory"].explanation
    # the same bus on the host: three GPUs bound to nvidia that NVML does not list
    host = run(make_facts(nvidia=nv, gpu=bus(4), os=os_facts()), "nvidia.driver", "devices.inventory")
    assert host["nvidia.driver"].status is Status.FAIL
    assert host["devices.inventory"].status is Status.FAIL
    assert "not listed by NVML" in host["devices.inventory"].explanation


@pytest.mark.parametrize(
    "action, words",
    [(1, ["gpu_reset", "nvidia-smi -r -i 0"]), (2, ["node_reboot", "sudo reboot"]), (3, ["drain_p2p", "P2P"])],
)
def test_recovery_action_asked_by_the_driver_fails(tmp_path, action, words):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=1, RECOVERY_ACTION=action)
    nv = collect_nvidia(live_ctx(lib))
    inv = run(make_facts(nvidia=nv, gpu=bus(1), os=os_facts()), "devices.inventory")["devices.inventory"]
    assert inv.status is Status.FAIL
    for word in words:
        assert word in inv.summary + inv.explanation


def test_recovery_action_none_and_an_older_driver_are_healthy(tmp_path):
    lib = build_fake_nvml(tmp_path / "none", DEVICE_COUNT=1, RECOVERY_ACTION=0)
    nv = collect_nvidia(live_ctx(lib))
    assert nv.devices[0].recovery_action == "none"
    assert run(make_facts(nvidia=nv, gpu=bus(1), os=os_facts()), "devices.inventory")["devices.inventory"].status is (
        Status.OK
    )
    old = collect_nvidia(live_ctx(build_fake_nvml(tmp_path / "old", DEVICE_COUNT=1)))
    assert isinstance(old.devices[0].recovery_action, Unavailable)  # nvmlDeviceGetFieldValues absent


def test_topology_and_p2p_status_come_through_the_real_ctypes_path(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=3, TOPO_LEVEL=50, P2P_READ_STATUS=1, NVLINK_UP=0)
    nv = collect_nvidia(live_ctx(lib))
    assert [(p.a, p.b, p.link, p.p2p_read) for p in nv.pairs] == [
        (0, 1, "SYS", "chipset not supported"),
        (0, 2, "SYS", "chipset not supported"),
        (1, 2, "SYS", "chipset not supported"),
    ]
    assert isinstance(nv.devices[0].nvlink_active, Unavailable)
    linked = collect_nvidia(live_ctx(build_fake_nvml(tmp_path / "nvl", DEVICE_COUNT=2, NVLINK_UP=18)))
    assert linked.devices[0].nvlink_active == 18 and linked.pairs[0].p2p_read == "ok"


def test_cuda_view_per_target_is_joined_by_pci_address():
    nv = nvidia_facts(devices=[nvml_device(0, bus="00000000:18:00.0"), nvml_device(1, bus="00000000:19:00.0")])
    torch = torch_facts(
        "2.4.0+cu121",
        cuda="12.1",
        cuda_available=True,
        device_count=1,
        devices=(CudaDevice(0, "NVIDIA H100", "9.0", pci_bus_id="0000:18:00.0"),),
    )
    ts = targets(target(probe=probe_facts(torch=torch)))
    accounts = account(make_facts(nvidia=nv, gpu=bus(2), os=os_facts(), targets=ts))
    assert [(a.bus_id, a.nvml_index, a.cuda) for a in accounts] == [
        ("0000:18:00.0", 0, (("current", "yes"),)),
        ("0000:19:00.0", 1, (("current", "no"),)),
    ]


def test_wsl_gpu_not_on_the_pci_view_is_fine():
    # WSL2: /sys/bus/pci/devices is readable but holds no NVIDIA function; NVML drives the GPU through /dev/dxg
    nv = nvidia_facts(devices=[nvml_device(0, bus="00000000:01:00.0")])
    nv = nv.__class__(**{**nv.__dict__, "device_count": 1})
    facts = make_facts(nvidia=nv, gpu=PciGpuFacts(()), os=os_facts(id="ubuntu", version="22.04"))
    found = run(facts, "nvidia.driver", "devices.inventory")
    assert found["nvidia.driver"].status is Status.OK
    assert found["devices.inventory"].status is Status.OK
