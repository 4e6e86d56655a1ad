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

from dataclasses import dataclass
from typing import Optional, Tuple, Union

from gpudoctor.facts.base import Unavailable, domain


@dataclass(frozen=True)
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
    driver: Optional[str] = None


@domain("gpu")
@dataclass(frozen=True)
class PciGpuFacts:
    """NVIDIA GPUs found on the PCI bus, independent of any driver.

    Attributes:
        devices: each NVIDIA display/3D controller in sysfs.
        sysfs_readable: False when /sys/bus/pci could not be listed (some
            containers); then ``devices`` is empty and proves nothing.
    """

    devices: Tuple[PciDevice, ...]
    sysfs_readable: bool = True


@dataclass(frozen=True)
class SourceAttempt:
    """One way we tried to learn the driver version, and how it went."""

    source: str
    ok: bool
    detail: str


#: Clock event (throttle) reason bits, ``nvmlClocksEventReason*`` in nvml.h
#: (NVML API reference, "Clocks Event Reasons"): bit -> (name, operator meaning).
CLOCK_EVENT_REASONS = {
    0x1: ("gpu_idle", "the GPU is idle (normal)"),
    0x2: ("applications_clocks_setting", "application clocks were set (nvidia-smi -ac)"),
    0x4: ("sw_power_cap", "software power cap: the board draws at its power limit"),
    0x8: ("hw_slowdown", "hardware slowdown: clocks halved or lower (overheating, power brake or a failing "
                         "power supply)"),
    0x10: ("sync_boost", "sync boost: held to the clocks of the slowest GPU in its sync-boost group"),
    0x20: ("sw_thermal_slowdown", "software thermal slowdown: temperature above the software target"),
    0x40: ("hw_thermal_slowdown", "hardware thermal slowdown: the GPU or memory is too hot"),
    0x80: ("hw_power_brake_slowdown", "hardware power brake: the external power-brake signal is asserted "
                                      "(power supply or chassis limit)"),
    0x100: ("display_clock_setting", "display clock setting"),
}

#: NVML compute modes (``nvmlComputeMode_t``) by value.
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on a GPU (``nvmlDeviceGetComputeRunningProcesses``
    / ``nvmlDeviceGetGraphicsRunningProcesses``).

    Attributes:
        pid: process id as NVML reports it (the host PID namespace's view).
        used_memory_mib: GPU memory it holds, MiB, or Unavailable (not reported, e.g. WDDM).
        kind: ``compute`` or ``graphics``.
        visible: True when ``/proc/<pid>`` exists in this PID namespace (the
            process is ours: this container or host), False when not (another
            container, or a dead process whose memory is still held), or
            Unavailable when not looked up.
        command: its ``/proc/<pid>/comm`` when visible, else "".
    """

    pid: int
    used_memory_mib: Union[int, Unavailable]
    kind: str = "compute"
    visible: Union[bool, Unavailable] = Unavailable("not looked up")
    command: str = ""


_NQ = Unavailable("not queried")


@dataclass(frozen=True)
class GpuHealth:
    """Health counters of one GPU read through NVML. Each field is Unavailable
    when the query is not supported on this GPU/driver (``NVML_ERROR_NOT_SUPPORTED``)
    or failed, with NVML's reason.

    Attributes:
        ecc_enabled: current ECC mode (``nvmlDeviceGetEccMode``, first value).
        ecc_pending: ECC mode after the next reboot (second value).
        ecc_volatile_corrected, ecc_volatile_uncorrected: single/double-bit
            (corrected/uncorrected) ECC error counts since the last driver load
            (``nvmlDeviceGetTotalEccErrors(.., NVML_MEMORY_ERROR_TYPE_*, NVML_VOLATILE_ECC)``).
        ecc_aggregate_corrected, ecc_aggregate_uncorrected: the same over the
            GPU's lifetime (``NVML_AGGREGATE_ECC``, stored in the InfoROM).
        retired_pages_sbe: pages retired for multiple single-bit errors
            (``nvmlDeviceGetRetiredPages(.., NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)``).
        retired_pages_dbe: pages retired for a double-bit error (``.._DOUBLE_BIT_ECC_ERROR``).
        retired_pages_pending: pages marked for retirement that take effect at
            the next GPU reset or reboot (``nvmlDeviceGetRetiredPagesPendingStatus``).
        remapped_rows_correctable, remapped_rows_uncorrectable: rows remapped
            (A100 and later; ``nvmlDeviceGetRemappedRows``).
        remap_pending: a remapping waits for a GPU reset.
        remap_failure: a row could not be remapped (the GPU needs service).
        clock_event_reasons: bitmask of ``nvmlDeviceGetCurrentClocksEventReasons``
            (older drivers: ``..ClocksThrottleReasons``); bits in :data:`CLOCK_EVENT_REASONS`.
        pcie_gen_current, pcie_gen_max: PCIe link generation now and the most the
            device and system support (``nvmlDeviceGetCurrPcieLinkGeneration`` /
            ``nvmlDeviceGetMaxPcieLinkGeneration``). An idle GPU drops its link
            generation to save power, so compare under load.
        pcie_width_current, pcie_width_max: link width (lanes) now and at most.
        temperature_c: GPU core temperature, °C (``nvmlDeviceGetTemperature``, NVML_TEMPERATURE_GPU).
        temperature_slowdown_c, temperature_shutdown_c: thresholds where the GPU
            slows down / shuts down, °C (``nvmlDeviceGetTemperatureThreshold``).
        power_draw_w: board power draw, W (``nvmlDeviceGetPowerUsage``, mW / 1000).
        power_limit_w: enforced power limit, W (``nvmlDeviceGetEnforcedPowerLimit``).
        persistence_mode: driver persistence mode (``nvmlDeviceGetPersistenceMode``; Linux only).
        compute_mode: ``default``, ``exclusive_process``, ``prohibited`` (``nvmlDeviceGetComputeMode``).
        processes: compute and graphics processes and the memory they hold.
        utilization_gpu_pct, utilization_memory_pct: percent of the last sample
            period a kernel ran / memory was read or written (``nvmlDeviceGetUtilizationRates``).
    """

    ecc_enabled: Union[bool, Unavailable] = _NQ
    ecc_pending: Union[bool, Unavailable] = _NQ
    ecc_volatile_corrected: Union[int, Unavailable] = _NQ
    ecc_volatile_uncorrected: Union[int, Unavailable] = _NQ
    ecc_aggregate_corrected: Union[int, Unavailable] = _NQ
    ecc_aggregate_uncorrected: Union[int, Unavailable] = _NQ
    retired_pages_sbe: Union[int, Unavailable] = _NQ
    retired_pages_dbe: Union[int, Unavailable] = _NQ
    retired_pages_pending: Union[bool, Unavailable] = _NQ
    remapped_rows_correctable: Union[int, Unavailable] = _NQ
    remapped_rows_uncorrectable: Union[int, Unavailable] = _NQ
    remap_pending: Union[bool, Unavailable] = _NQ
    remap_failure: Union[bool, Unavailable] = _NQ
    clock_event_reasons: Union[int, Unavailable] = _NQ
    pcie_gen_current: Union[int, Unavailable] = _NQ
    pcie_gen_max: Union[int, Unavailable] = _NQ
    pcie_width_current: Union[int, Unavailable] = _NQ
    pcie_width_max: Union[int, Unavailable] = _NQ
    temperature_c: Union[int, Unavailable] = _NQ
    temperature_slowdown_c: Union[int, Unavailable] = _NQ
    temperature_shutdown_c: Union[int, Unavailable] = _NQ
    power_draw_w: Union[float, Unavailable] = _NQ
    power_limit_w: Union[float, Unavailable] = _NQ
    persistence_mode: Union[bool, Unavailable] = _NQ
    compute_mode: Union[str, Unavailable] = _NQ
    processes: Union[Tuple[GpuProcess, ...], Unavailable] = _NQ
    utilization_gpu_pct: Union[int, Unavailable] = _NQ
    utilization_memory_pct: Union[int, Unavailable] = _NQ


@dataclass(frozen=True)
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
        health: ECC, retired pages, remapped rows, throttling, PCIe link,
            temperature, power, modes, processes (see :class:`GpuHealth`).
    """

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    compute_capability: Union[str, Unavailable]
    memory_total_mib: Union[int, Unavailable]
    mig_mode: Union[bool, Unavailable] = Unavailable("not queried")
    health: Union[GpuHealth, Unavailable] = Unavailable("not queried")


@domain("nvidia")
@dataclass(frozen=True)
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
    """

    driver_version: Union[str, Unavailable]
    source: str
    cuda_driver_version: Union[str, Unavailable]
    nvml: Union[str, Unavailable]
    devices: Tuple[NvmlDevice, ...] = ()
    attempts: Tuple[SourceAttempt, ...] = ()
    nvml_outcome: str = ""
