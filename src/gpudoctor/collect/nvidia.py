"""Collectors for the ``gpu`` (PCI bus) and ``nvidia`` (driver, NVML) domains.

Order of driver sources, each outcome kept in ``attempts``:

1. NVML through nvidia-ml-py (``pynvml``), in-process: driver version,
   ``nvmlSystemGetCudaDriverVersion`` (the newest CUDA the driver supports),
   and each device. NVML never initialises CUDA. Only on the live system.
2. ``/proc/driver/nvidia/version`` (``NVRM version: ... Kernel Module  470.86 ...``).
3. ``/sys/module/nvidia/version``.

Every NVML call goes through :func:`_nvml_query`, so a missing symbol or an
unsupported query degrades to Unavailable instead of an exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, NvmlDevice, PciDevice, PciGpuFacts, SourceAttempt
from gpudoctor.system import Files

NVIDIA_VENDOR = "0x10de"
_NVRM_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")


# --------------------------------------------------------------------------- PCI


def collect_gpu(ctx: CollectContext) -> PciGpuFacts:
    """NVIDIA display/3D controllers (class 0x03xxxx) in /sys/bus/pci/devices."""
    files = ctx.system.files
    base = "/sys/bus/pci/devices"
    try:
        entries = files.listdir(base)
    except OSError:
        return PciGpuFacts(devices=(), sysfs_readable=False)
    devices: list[PciDevice] = []
    for name in entries:
        vendor = (files.read_text_or_none(f"{base}/{name}/vendor") or "").strip().lower()
        cls = (files.read_text_or_none(f"{base}/{name}/class") or "").strip().lower()
        if vendor != NVIDIA_VENDOR or not cls.startswith("0x03"):
            continue
        device = (files.read_text_or_none(f"{base}/{name}/device") or "").strip().lower()
        link = files.readlink(f"{base}/{name}/driver")
        driver = link.rstrip("/").rsplit("/", 1)[-1] if link else None
        devices.append(PciDevice(bus_id=name, vendor_id=vendor, device_id=device, class_code=cls, driver=driver))
    return PciGpuFacts(devices=tuple(devices), sysfs_readable=True)


# --------------------------------------------------------------------------- driver


def parse_nvrm_version(text: str) -> str | None:
    """Driver version from /proc/driver/nvidia/version text, e.g. ``470.86``."""
    m = _NVRM_RE.search(text)
    return m.group(1) if m else None


def _nvml_query(fn: Callable[..., Any], *args: Any) -> Any:
    """Call one NVML function; any NVML error or missing symbol -> Unavailable."""
    try:
        value = fn(*args)
    except Exception as exc:  # pynvml.NVMLError and friends, AttributeError for old bindings
        return Unavailable(f"{getattr(fn, '__name__', 'NVML call')} failed: {exc}")
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value


def _nvml(ctx: CollectContext) -> tuple[SourceAttempt, Any]:
    """(attempt, (driver, cuda_driver, devices)) from NVML, or (attempt, None)."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:
        return SourceAttempt("nvml", False, f"nvidia-ml-py is not importable: {exc}"), None
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        detail = str(exc) or type(exc).__name__
        if "LibraryNotFound" in type(exc).__name__ or "not found" in detail.lower():
            detail = "libnvidia-ml.so.1 could not be loaded (no NVIDIA driver installed, or a container " \
                     "started without the NVIDIA runtime)"
        return SourceAttempt("nvml", False, detail), None
    try:
        driver = _nvml_query(pynvml.nvmlSystemGetDriverVersion)
        cuda_raw = _nvml_query(pynvml.nvmlSystemGetCudaDriverVersion)
        cuda = f"{cuda_raw // 1000}.{(cuda_raw % 1000) // 10}" if isinstance(cuda_raw, int) else cuda_raw
        count = _nvml_query(pynvml.nvmlDeviceGetCount)
        devices: list[NvmlDevice] = []
        for i in range(count if isinstance(count, int) else 0):
            h = _nvml_query(pynvml.nvmlDeviceGetHandleByIndex, i)
            if isinstance(h, Unavailable):
                continue
            cc = _nvml_query(pynvml.nvmlDeviceGetCudaComputeCapability, h)
            mem = _nvml_query(pynvml.nvmlDeviceGetMemoryInfo, h)
            pci = _nvml_query(pynvml.nvmlDeviceGetPciInfo, h)
            mig = _nvml_query(pynvml.nvmlDeviceGetMigMode, h)
            bus = getattr(pci, "busId", "") if not isinstance(pci, Unavailable) else ""
            if isinstance(bus, bytes):
                bus = bus.decode()
            devices.append(NvmlDevice(
                index=i,
                name=str(_nvml_query(pynvml.nvmlDeviceGetName, h)),
                uuid=str(_nvml_query(pynvml.nvmlDeviceGetUUID, h)),
                pci_bus_id=bus,
                compute_capability=f"{cc[0]}.{cc[1]}" if isinstance(cc, tuple) else cc,
                memory_total_mib=int(mem.total // (1024 * 1024)) if not isinstance(mem, Unavailable) else mem,
                mig_mode=bool(mig[0]) if isinstance(mig, (list, tuple)) else mig,
            ))
        return SourceAttempt("nvml", True, f"NVML reports driver {driver}"), (driver, cuda, tuple(devices))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def collect_nvidia(ctx: CollectContext) -> NvidiaDriverFacts:
    files: Files = ctx.system.files
    attempts: list[SourceAttempt] = []
    if files.is_live:
        attempt, result = _nvml(ctx)
        attempts.append(attempt)
        if result is not None:
            driver, cuda, devices = result
            return NvidiaDriverFacts(driver, "nvml", cuda, "ok", devices, tuple(attempts))
        nvml_reason = attempt.detail
    else:
        nvml_reason = "NVML is not used on an image root (--root)"
        attempts.append(SourceAttempt("nvml", False, nvml_reason))
    text = files.read_text_or_none("/proc/driver/nvidia/version")
    if text is None:
        attempts.append(SourceAttempt("proc", False, "/proc/driver/nvidia/version does not exist "
                                                      "(the nvidia kernel module is not loaded)"))
    else:
        version = parse_nvrm_version(text)
        attempts.append(SourceAttempt("proc", bool(version),
                                      f"read {version}" if version else "no version found in /proc/driver/nvidia/version"))
        if version:
            return NvidiaDriverFacts(version, "proc", Unavailable("NVML is needed for the driver's CUDA version: "
                                                                  + nvml_reason),
                                     Unavailable(nvml_reason), (), tuple(attempts))
    text = files.read_text_or_none("/sys/module/nvidia/version")
    if text is None:
        attempts.append(SourceAttempt("sysmodule", False, "/sys/module/nvidia/version does not exist"))
    elif text.strip():
        attempts.append(SourceAttempt("sysmodule", True, f"read {text.strip()}"))
        return NvidiaDriverFacts(text.strip(), "sysmodule", Unavailable("NVML is needed for the driver's CUDA "
                                                                        "version: " + nvml_reason),
                                 Unavailable(nvml_reason), (), tuple(attempts))
    reason = "no NVIDIA driver found: " + "; ".join(a.detail for a in attempts)
    return NvidiaDriverFacts(Unavailable(reason), "", Unavailable(reason), Unavailable(nvml_reason), (), tuple(attempts))


COLLECTORS = (
    Collector(domain="gpu", collect=collect_gpu, timeout_s=10.0),
    Collector(domain="nvidia", collect=collect_nvidia, timeout_s=15.0),
)
