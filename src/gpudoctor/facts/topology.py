"""Facts about how the GPUs reach each other: PCIe path, ACS on the bridges, IOMMU, the
``nvidia-smi topo -m`` matrix.

Sources: ``nvidia-smi topo -m`` (legend: X self, SYS across the CPU interconnect, NODE host
bridges of one NUMA node, PHB one host bridge, PXB several PCIe switches, PIX one switch,
NV# # NVLinks); sysfs (``/sys/bus/pci/devices/<bdf>`` resolves to the path of bridges above
the device; ``config`` holds its PCI configuration space, the extended capabilities beyond
256 bytes readable by root only); PCI Express Base Specification, Access Control Services
extended capability (ID 0x000D; control register at +6: bit 0 Source Validation, 1 Translation
Blocking, 2 P2P Request Redirect, 3 P2P Completion Redirect, 4 Upstream Forwarding, 5 Egress
Control, 6 Direct Translated P2P); ``lspci -vvv`` (``ACSCtl:`` lines) when sysfs gives no
extended space; the kernel command line and ``/sys/kernel/iommu_groups/<n>/type``
(``identity`` = passthrough, ``DMA`` / ``DMA-FQ`` = translated).
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class Bridge:
    """A PCIe bridge (root port or switch port) above a GPU.

    Attributes:
        bus_id: its PCI address.
        acs_ctl: the ACS control register (bits as in the module docstring), None when the bridge
            has no ACS capability, or Unavailable when it could not be read.
        source: ``sysfs`` or ``lspci`` (where ``acs_ctl`` came from), or "".
    """

    bus_id: str
    acs_ctl: int | None | Unavailable
    source: str = ""


@frozen_dataclass
class GpuPath:
    """The bridges between the root complex and one NVIDIA GPU, top first.

    Attributes:
        bus_id: the GPU's PCI address.
        bridges: the bridges above it, root port first.
        iommu_group_type: ``identity``, ``DMA``, ``DMA-FQ``, or "" when not in an IOMMU group.
        numa_node: its NUMA node (``numa_node`` in sysfs; -1 when none), or None.
    """

    bus_id: str
    bridges: tuple[Bridge, ...] = ()
    iommu_group_type: str = ""
    numa_node: int | None = None


@domain("topology")
@frozen_dataclass
class TopologyFacts:
    """GPU topology from sysfs and ``nvidia-smi topo -m``.

    Attributes:
        paths: each NVIDIA GPU's path of bridges (empty when sysfs lists none).
        matrix: ``nvidia-smi topo -m`` pairs ``(row, column, link)`` between GPUs and NICs
            (``("GPU0", "GPU1", "PIX")``), or Unavailable with why it was not run.
        matrix_text: the matrix as printed (at most 8000 characters), or "".
        cmdline: the kernel command line (``/proc/cmdline``), or "".
        iommu_groups: IOMMU groups in ``/sys/kernel/iommu_groups`` (0: no IOMMU in use).
    """

    paths: tuple[GpuPath, ...] = ()
    matrix: tuple[tuple[str, str, str], ...] | Unavailable = Unavailable("not collected")
    matrix_text: str = ""
    cmdline: str = ""
    iommu_groups: int = 0


#: ACS control bits that send peer-to-peer traffic up to the root complex.
ACS_REDIRECT = 0x4 | 0x8
ACS_BITS = (
    (0x1, "SrcValid"),
    (0x2, "TransBlk"),
    (0x4, "ReqRedir"),
    (0x8, "CmpltRedir"),
    (0x10, "UpstreamFwd"),
    (0x20, "EgressCtrl"),
    (0x40, "DirectTrans"),
)
