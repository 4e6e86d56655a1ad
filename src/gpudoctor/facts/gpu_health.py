"""Health counters of one GPU as the NVML worker reads them (:mod:`gpudoctor.nvml_worker`).

Values and their meaning follow the NVML API reference (docs.nvidia.com/deploy/nvml-api);
the function that fills each field is named in its docstring. Part of the ``nvidia``
domain (``NvmlDevice.health``).
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable
from gpudoctor.records import frozen_dataclass

#: Clock event (throttle) reason bits, ``nvmlClocksEventReason*`` in nvml.h
#: (NVML API reference, "Clocks Event Reasons"): bit -> (name, operator meaning).
CLOCK_EVENT_REASONS = {
    0x1: ("gpu_idle", "the GPU is idle (normal)"),
    0x2: ("applications_clocks_setting", "application clocks were set (nvidia-smi -ac)"),
    0x4: ("sw_power_cap", "software power cap: the board draws at its power limit"),
    0x8: (
        "hw_slowdown",
        "hardware slowdown: clocks halved or lower (overheating, power brake or a failing power supply)",
    ),
    0x10: ("sync_boost", "sync boost: held to the clocks of the slowest GPU in its sync-boost group"),
    0x20: ("sw_thermal_slowdown", "software thermal slowdown: temperature above the software target"),
    0x40: ("hw_thermal_slowdown", "hardware thermal slowdown: the GPU or memory is too hot"),
    0x80: (
        "hw_power_brake_slowdown",
        "hardware power brake: the external power-brake signal is asserted (power supply or chassis limit)",
    ),
    0x100: ("display_clock_setting", "display clock setting"),
}

#: NVML compute modes (``nvmlComputeMode_t``) by value.
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


@frozen_dataclass
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
    used_memory_mib: int | Unavailable
    kind: str = "compute"
    visible: bool | Unavailable = Unavailable("not looked up")
    command: str = ""


_NQ = Unavailable("not queried")


@frozen_dataclass
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

    ecc_enabled: bool | Unavailable = _NQ
    ecc_pending: bool | Unavailable = _NQ
    ecc_volatile_corrected: int | Unavailable = _NQ
    ecc_volatile_uncorrected: int | Unavailable = _NQ
    ecc_aggregate_corrected: int | Unavailable = _NQ
    ecc_aggregate_uncorrected: int | Unavailable = _NQ
    retired_pages_sbe: int | Unavailable = _NQ
    retired_pages_dbe: int | Unavailable = _NQ
    retired_pages_pending: bool | Unavailable = _NQ
    remapped_rows_correctable: int | Unavailable = _NQ
    remapped_rows_uncorrectable: int | Unavailable = _NQ
    remap_pending: bool | Unavailable = _NQ
    remap_failure: bool | Unavailable = _NQ
    clock_event_reasons: int | Unavailable = _NQ
    pcie_gen_current: int | Unavailable = _NQ
    pcie_gen_max: int | Unavailable = _NQ
    pcie_width_current: int | Unavailable = _NQ
    pcie_width_max: int | Unavailable = _NQ
    temperature_c: int | Unavailable = _NQ
    temperature_slowdown_c: int | Unavailable = _NQ
    temperature_shutdown_c: int | Unavailable = _NQ
    power_draw_w: float | Unavailable = _NQ
    power_limit_w: float | Unavailable = _NQ
    persistence_mode: bool | Unavailable = _NQ
    compute_mode: str | Unavailable = _NQ
    processes: tuple[GpuProcess, ...] | Unavailable = _NQ
    utilization_gpu_pct: int | Unavailable = _NQ
    utilization_memory_pct: int | Unavailable = _NQ
