"""Facts about NVIDIA hardware and the kernel driver.

Sources: PCI ids from sysfs (vendor 0x10de, class 0x03xxxx = display
controller: VGA 0x0300, 3D 0x0302), the driver through NVML (nvidia-ml-py),
and ``/proc/driver/nvidia/version`` / ``/sys/module/nvidia/version`` when NVML
cannot be loaded.

NVML runs in a child process (:mod:`gpudoctor.nvml_worker`, the doctor's own
interpreter under a timeout in its own process group), never in the doctor:
a crashing or hanging ``libnvidia-ml.so.1`` becomes an Unavailable reason.
Health values come from the NVML API reference (docs.nvidia.com/deploy/nvml-api):
the function that fills each field is named in its docstring.
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.facts.gpu_health import (
    CLOCK_EVENT_REASONS as CLOCK_EVENT_REASONS,  # re-exported
)
from gpudoctor.facts.gpu_health import COMPUTE_MODES as COMPUTE_MODES
from gpudoctor.facts.gpu_health import GpuHealth as GpuHealth
from gpudoctor.facts.gpu_health import GpuProcess as GpuProcess
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class PciDevice:
    """An NVIDIA display/3D controller on the PCI bus.

    Attributes:
        bus_id: sysfs address, e.g. ``0000:01:00.0``.
        vendor_id: ``0x10de``.
        device_id: e.g. ``0x2684``.
        class_code: e.g. ``0x030000`` (VGA) or ``0x030200`` (3D controller).
        driver: bound kernel driver (``nvidia``, ``nouveau``, ``vfio-pci``) or None.
    """

    bus_id: str
    vendor_id: str
    device_id: str
    class_code: str
    driver: str | None = None


@domain("gpu")
@frozen_dataclass
class PciGpuFacts:
    """NVIDIA GPUs found on the PCI bus, independent of any driver.

    Attributes:
        devices: each NVIDIA display/3D controller in sysfs.
        sysfs_readable: False when /sys/bus/pci could not be listed (some
            containers); then ``devices`` is empty and proves nothing.
    """

    devices: tuple[PciDevice, ...]
    sysfs_readable: bool = True


@frozen_dataclass
class SourceAttempt:
    """One way we tried to learn the driver version, and how it went."""

    source: str
    ok: bool
    detail: str


@frozen_dataclass
class MigInstance:
    """One MIG device (GPU instance + compute instance) of a GPU in MIG mode.

    Attributes:
        uuid: ``MIG-<uuid>`` (R470+ drivers; ``nvidia-smi -L``).
        profile: e.g. ``1g.10gb`` ("" when unknown).
        gpu_instance: GPU instance id, or None.
        compute_instance: compute instance id, or None.
    """

    uuid: str
    profile: str = ""
    gpu_instance: int | None = None
    compute_instance: int | None = None


@frozen_dataclass
class NvmlDevice:
    """One GPU as NVML reports it (NVML index order = PCI bus order).

    Attributes:
        index: NVML index (the one nvidia-smi shows).
        name: marketing name, e.g. ``NVIDIA H200``.
        uuid: ``GPU-...``.
        pci_bus_id: e.g. ``00000000:01:00.0``.
        compute_capability: ``major.minor``, e.g. ``9.0``, or Unavailable.
        memory_total_mib: total memory in MiB, or Unavailable.
        mig_mode: True/False when known, Unavailable where MIG is not supported.
        mig_instances: the MIG devices of this GPU (NVML
            ``nvmlDeviceGetMigDeviceHandleByIndex``), empty when none or not queried.
        health: ECC, retired pages, remapped rows, throttling, PCIe link,
            temperature, power, modes, processes (see :class:`GpuHealth`).
        recovery_action: what the driver says the GPU needs now (field
            ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``, R550+): ``none``, ``gpu_reset``,
            ``node_reboot``, ``drain_p2p``, ``drain_and_reset``, ...; Unavailable on older drivers.
        memory_used_mib: memory in use, MiB (``nvmlDeviceGetMemoryInfo``), or Unavailable.
        nvlink_active: NVLink links in the active state (``nvmlDeviceGetNvLinkState``),
            Unavailable on a GPU without NVLink.
    """

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    compute_capability: str | Unavailable
    memory_total_mib: int | Unavailable
    mig_mode: bool | Unavailable = Unavailable("not queried")
    mig_instances: tuple[MigInstance, ...] = ()
    health: GpuHealth | Unavailable = Unavailable("not queried")
    recovery_action: str | Unavailable = Unavailable("not queried")
    nvlink_active: int | Unavailable = Unavailable("not queried")
    memory_used_mib: int | Unavailable = Unavailable("not queried")


@frozen_dataclass
class UnopenedGpu:
    """A GPU NVML counts (``nvmlDeviceGetCount``) but cannot open (``nvmlDeviceGetHandleByIndex``
    failed): ``nvidia-smi`` prints "Unable to determine the device handle for GPU ...".

    Attributes:
        index: its NVML index.
        error: NVML's error (``GPU is lost``, ``Unknown Error``, ``Insufficient Permissions``, ...).
    """

    index: int
    error: str


@frozen_dataclass
class GpuPair:
    """How two GPUs reach each other (NVML indices ``a`` < ``b``).

    Attributes:
        a, b: NVML indices.
        link: the common ancestor as ``nvidia-smi topo -m`` names it
            (``nvmlDeviceGetTopologyCommonAncestor``): ``PIX`` one PCIe switch, ``PXB``
            several switches, ``PHB`` the CPU's host bridge, ``NODE`` host bridges of one
            NUMA node, ``SYS`` across the CPU interconnect, ``internal`` the same board;
            or Unavailable.
        p2p_read: ``nvmlDeviceGetP2PStatus(.., NVML_P2P_CAPS_INDEX_READ)``: ``ok``,
            ``chipset not supported``, ``GPU not supported``, ``IOH topology not
            supported``, ``disabled by regkey``, ``not supported``, ``unknown``; or Unavailable.
    """

    a: int
    b: int
    link: str | Unavailable
    p2p_read: str | Unavailable


@domain("nvidia")
@frozen_dataclass
class NvidiaDriverFacts:
    """The NVIDIA kernel driver and what NVML sees through it.

    Attributes:
        driver_version: e.g. ``550.54.15``, or Unavailable (no driver).
        source: where ``driver_version`` came from: ``nvml``, ``proc``, ``sysmodule``, or "".
        cuda_driver_version: the newest CUDA the driver supports, ``major.minor``
            (``nvmlSystemGetCudaDriverVersion``, what nvidia-smi shows as
            "CUDA Version"), or Unavailable.
        nvml: "ok", or Unavailable with why NVML could not be used.
        devices: GPUs enumerated by NVML (empty when NVML is unavailable).
        attempts: every source tried, in order, with its outcome.
        nvml_outcome: how the NVML worker ended: ``ok``; ``not-loaded``
            (libnvidia-ml.so.1 or nvidia-ml-py missing: no driver here);
            ``init-failed`` (NVML answered with an error); ``crashed`` (killed
            by a signal inside the library), ``timeout`` (hung, killed with its
            process group), ``garbage`` (no valid result document), ``failed``
            (another nonzero exit); ``not-run`` (image root); "" in old snapshots.
        device_count: GPUs NVML counts (``nvmlDeviceGetCount``), opened or not.
        unopened: GPUs NVML counts but could not open, with NVML's error (never dropped silently).
        pairs: topology and P2P status of every pair of opened GPUs.
    """

    driver_version: str | Unavailable
    source: str
    cuda_driver_version: str | Unavailable
    nvml: str | Unavailable
    devices: tuple[NvmlDevice, ...] = ()
    attempts: tuple[SourceAttempt, ...] = ()
    nvml_outcome: str = ""
    device_count: int | Unavailable = Unavailable("not queried")
    unopened: tuple[UnopenedGpu, ...] = ()
    pairs: tuple[GpuPair, ...] = ()
