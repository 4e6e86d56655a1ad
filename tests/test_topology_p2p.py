"""Topology and peer-to-peer: the real ``topology`` collector on fake sysfs trees (bridge chains,
binary PCI configuration space with an ACS capability, IOMMU groups) and scripted
``nvidia-smi topo -m`` / ``lspci -vvv``; ``devices.p2p`` with the P2P table and NCCL settings.

ACS values and topologies from public reports: NVIDIA/nccl#2079 (2x RTX 5880 Ada behind AMD
root ports with ACSCtl 0x001d), NVIDIA/nccl#667 (topo -m PXB/PIX), NVIDIA/nccl#629 (ACSCtl lines),
NVIDIA/nccl-tests#117 (RTX 4090 all-reduce hang).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.topology import acs_from_config, collect_topology, parse_acsctl, parse_topo_matrix
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.nvidia import GpuPair
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import ScriptedRunner, fake_system, make_facts, nvidia_facts, nvml_device, ok, os_facts

TOPO_667 = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPXB\tSYS\tSYS\t0-27,56-83\t0
GPU1\tPXB\t X \tSYS\tSYS\t0-27,56-83\t0
GPU2\tSYS\tSYS\t X \tPIX\t28-55,84-111\t1
GPU3\tSYS\tSYS\tPIX\t X \t28-55,84-111\t1

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
"""
LSPCI_2079 = """\
00:03.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
20:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
41:00.0 VGA compatible controller: NVIDIA Corporation AD102GL [RTX 5880 Ada Generation]
"""


def config(acs_ctl: int | None, size: int = 4096) -> bytes:
    """PCI configuration space with an ACS extended capability at 0x100 (control at +6)."""
    data = bytearray(size)
    if acs_ctl is not None and size > 0x100:
        data[0x100:0x104] = (0x000D | (1 << 16)).to_bytes(4, "little")
        data[0x104:0x106] = (0x5F).to_bytes(2, "little")
        data[0x106:0x108] = acs_ctl.to_bytes(2, "little")
    return bytes(data[:size])


def sysfs(root: Path, gpus: dict[str, list[str]], acs: dict[str, bytes], iommu: str = "", cmdline: str = "") -> Path:
    """GPUs (bdf -> bridges above it, top first) as /sys/devices paths with /sys/bus/pci/devices links."""
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True, exist_ok=True)
    for i, (gpu, bridges) in enumerate(gpus.items()):
        path = root / "sys/devices" / f"pci0000:{bridges[0][5:7]}"
        for b in bridges:
            path = path / b
            path.mkdir(parents=True, exist_ok=True)
            (path / "config").write_bytes(acs.get(b, config(None)))
            if not (bus / b).exists():
                os.symlink(os.path.relpath(path, bus), bus / b)
        dev = path / gpu
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x10de\n")
        (dev / "class").write_text("0x030000\n")
        (dev / "numa_node").write_text("0\n")
        os.symlink(os.path.relpath(dev, bus), bus / gpu)
        if iommu:
            group = root / "sys/kernel/iommu_groups" / str(30 + i)
            group.mkdir(parents=True)
            (group / "type").write_text(iommu + "\n")
            os.symlink(f"../../../kernel/iommu_groups/{30 + i}", dev / "iommu_group")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/cmdline").write_text(cmdline or "BOOT_IMAGE=/vmlinuz root=UUID=0 ro quiet\n")
    return root


NCCL_2079 = {"0000:41:00.0": ["0000:00:03.1"], "0000:61:00.0": ["0000:20:01.1", "0000:22:01.0"]}


def topo(root: Path, runner: ScriptedRunner | None = None):
    live = runner is not None
    system = fake_system(root, runner=runner, host_commands=live)
    return collect_topology(CollectContext(system, CollectOptions()))


def p2p(facts):
    return evaluate([load_registry().checks["devices.p2p"]], facts)[0]


def two(name="NVIDIA RTX 5880 Ada Generation", p2p_read="ok", link="PHB", driver="550.54.15", **kw):
    devs = [
        nvml_device(0, name=name, bus="00000000:41:00.0", **kw),
        nvml_device(1, name=name, bus="00000000:61:00.0", **kw),
    ]
    nv = nvidia_facts(driver=driver, devices=devs)
    return nv.__class__(**{**nv.__dict__, "pairs": (GpuPair(0, 1, link, p2p_read),)})


def test_acs_control_read_from_binary_config_space():
    assert acs_from_config(config(0x001D)) == 0x001D
    assert acs_from_config(config(None)) is None
    short = acs_from_config(config(0x001D, size=64))  # not root: only the standard header
    assert isinstance(short, Unavailable) and "needs root" in short.reason


def test_parse_acsctl_and_topo_matrix_from_public_reports():
    assert parse_acsctl(LSPCI_2079) == {"00:03.1": 0x1D, "20:01.1": 0x1D}
    matrix = parse_topo_matrix(TOPO_667)
    assert ("GPU0", "GPU1", "PXB") in matrix and ("GPU2", "GPU3", "PIX") in matrix and ("GPU0", "GPU2", "SYS") in matrix
    assert len(matrix) == 12


def test_acs_redirect_above_the_gpus_warns_with_setpci_for_each_bridge(tmp_path):
    acs = {"0000:00:03.1": config(0x001D), "0000:20:01.1": config(0x001D), "0000:22:01.0": config(0)}
    facts_topo = topo(sysfs(tmp_path, NCCL_2079, acs))
    assert [(p.bus_id, [(b.bus_id, b.acs_ctl) for b in p.bridges]) for p in facts_topo.paths] == [
        ("0000:41:00.0", [("0000:00:03.1", 0x1D)]),
        ("0000:61:00.0", [("0000:20:01.1", 0x1D), ("0000:22:01.0", 0)]),
    ]
    finding = p2p(make_facts(nvidia=two(), topology=facts_topo, os=os_facts()))
    assert finding.status is Status.WARN and "ACS redirects" in finding.summary
    assert "sudo setpci -s 0000:00:03.1 ECAP_ACS+6.w=0000" in finding.explanation
    assert "sudo setpci -s 0000:20:01.1 ECAP_ACS+6.w=0000" in finding.explanation
    assert "0000:22:01.0 ECAP" not in finding.explanation  # its ACS is off
    assert "NCCL_P2P_DISABLE=1" in finding.explanation and "halves" in finding.explanation
    inside = p2p(make_facts(nvidia=two(), topology=facts_topo, os=os_facts(in_container=True, kind="docker")))
    assert "Ask the host operator" in inside.explanation


def test_without_root_the_acs_bits_come_from_lspci(tmp_path):
    acs = {b: config(0x001D, size=64) for bridges in NCCL_2079.values() for b in bridges}
    runner = ScriptedRunner({("nvidia-smi", "topo", "-m"): ok(TOPO_667), ("lspci", "-vvv"): ok(LSPCI_2079)})
    facts_topo = topo(sysfs(tmp_path, NCCL_2079, acs), runner)
    bridges = {b.bus_id: (b.acs_ctl, b.source) for p in facts_topo.paths for b in p.bridges}
    assert bridges["0000:00:03.1"] == (0x1D, "lspci")
    assert isinstance(bridges["0000:22:01.0"][0], Unavailable)
    assert ("GPU0", "GPU1", "PXB") in facts_topo.matrix
    assert p2p(make_facts(nvidia=two(), topology=facts_topo, os=os_facts())).status is Status.WARN


def test_healthy_twin_acs_off_p2p_supported(tmp_path):
    acs = {b: config(0) for bridges in NCCL_2079.values() for b in bridges}
    finding = p2p(make_facts(nvidia=two(), topology=topo(sysfs(tmp_path, NCCL_2079, acs)), os=os_facts()))
    assert finding.status is Status.OK


@pytest.mark.parametrize(
    "p2p_read, status, words",
    [
        ("ok", Status.WARN, ["unsupported", "nccl-tests/issues/117", "NCCL_P2P_DISABLE=1"]),
        ("chipset not supported", Status.INFO, ["host memory", "NCCL_P2P_LEVEL"]),
    ],
)
def test_geforce_4090_pair_claimed_vs_reported_unsupported(tmp_path, p2p_read, status, words):
    facts_topo = topo(sysfs(tmp_path, NCCL_2079, {}))
    nv = two("NVIDIA GeForce RTX 4090", p2p_read=p2p_read, driver="525.78.01")
    finding = p2p(make_facts(nvidia=nv, topology=facts_topo, os=os_facts()))
    assert finding.status is status
    for w in words:
        assert w in finding.summary + finding.explanation


def test_driver_560_p2p_hang_says_upgrade_and_570_is_fine(tmp_path):
    facts_topo = topo(sysfs(tmp_path, NCCL_2079, {}))
    bad = p2p(make_facts(nvidia=two("NVIDIA A100-PCIE-40GB", driver="560.35.03"), topology=facts_topo, os=os_facts()))
    assert bad.status is Status.WARN and "570" in bad.explanation
    good = p2p(make_facts(nvidia=two("NVIDIA A100-PCIE-40GB", driver="570.86.15"), topology=facts_topo, os=os_facts()))
    assert good.status is Status.OK


def test_translated_iommu_remedy_debian_vs_fedora(tmp_path):
    facts_topo = topo(sysfs(tmp_path, NCCL_2079, {}, iommu="DMA-FQ"))
    assert {p.iommu_group_type for p in facts_topo.paths} == {"DMA-FQ"} and facts_topo.iommu_groups == 2
    debian = p2p(make_facts(nvidia=two(), topology=facts_topo, os=os_facts()))
    fedora = p2p(make_facts(nvidia=two(), topology=facts_topo, os=os_facts(id="fedora", version="40", codename="")))
    assert debian.status is fedora.status is Status.WARN
    assert "update-grub" in debian.explanation and "grubby" not in debian.explanation
    assert (
        'grubby --update-kernel=ALL --args="iommu=pt"' in fedora.explanation and "update-grub" not in fedora.explanation
    )
    passthrough = topo(sysfs(tmp_path / "pt", NCCL_2079, {}, iommu="identity", cmdline="ro iommu=pt"))
    assert p2p(make_facts(nvidia=two(), topology=passthrough, os=os_facts())).status is Status.OK


def test_nvlink_link_down_on_one_gpu(tmp_path):
    nv = two("NVIDIA H100 80GB HBM3")
    devs = (
        nv.devices[0].__class__(**{**nv.devices[0].__dict__, "nvlink_active": 18}),
        nv.devices[1].__class__(**{**nv.devices[1].__dict__, "nvlink_active": 12}),
    )
    nv = nv.__class__(**{**nv.__dict__, "devices": devs})
    finding = p2p(make_facts(nvidia=nv, topology=topo(sysfs(tmp_path, NCCL_2079, {})), os=os_facts()))
    assert finding.status is Status.WARN and "GPU 1: 12 of 18 NVLink links active" in finding.summary


def test_a_single_gpu_skips(tmp_path):
    one = {"0000:41:00.0": ["0000:00:03.1"]}
    facts = make_facts(
        nvidia=nvidia_facts(devices=[nvml_device(0)]), topology=topo(sysfs(tmp_path, one, {})), os=os_facts()
    )
    assert p2p(facts).status is Status.SKIP


def test_nics_far_from_every_gpu_say_gpudirect_rdma_stays_off(tmp_path):
    from gpudoctor.facts.topology import TopologyFacts

    far = TopologyFacts(matrix=(("GPU0", "GPU1", "PIX"), ("GPU0", "NIC0", "SYS"), ("GPU1", "NIC0", "SYS")))
    finding = p2p(make_facts(nvidia=two(), topology=far, os=os_facts()))
    assert finding.status is Status.INFO and "GPUDirect RDMA stays off" in finding.summary
    assert "NCCL_NET_GDR_LEVEL" in finding.explanation
    near = TopologyFacts(matrix=(("GPU0", "GPU1", "PIX"), ("GPU0", "NIC0", "PIX"), ("GPU1", "NIC0", "PIX")))
    assert p2p(make_facts(nvidia=two(), topology=near, os=os_facts())).status is Status.OK
