"""Collectors for the ``gpu`` (PCI bus) and ``nvidia`` (driver, NVML) domains.

Order of driver sources, each outcome kept in ``attempts``:

1. NVML through nvidia-ml-py (``pynvml``) in a child process
   (:mod:`gpudoctor.nvml_worker`, the doctor's own interpreter, its own process
   group, killed at :data:`NVML_WORKER_TIMEOUT_S`): driver version,
   ``nvmlSystemGetCudaDriverVersion`` (the newest CUDA the driver supports),
   each device and its health counters. NVML never initialises CUDA. Only on
   the live system. A crash (signal), hang, garbage or nonzero exit becomes
   ``nvml = Unavailable(reason)`` and ``nvml_outcome``; the doctor lives on.
2. ``/proc/driver/nvidia/version`` (``NVRM version: ... Kernel Module  470.86 ...``).
3. ``/sys/module/nvidia/version``.

The doctor process never loads libnvidia-ml.so.1 itself. The collector
runs alongside the target probes (collectors of a wave start together).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import FactsDecodeError, Unavailable
from gpudoctor.facts.base import from_jsonable
from gpudoctor.facts.nvidia import (
    GpuHealth,
    GpuPair,
    GpuProcess,
    NvidiaDriverFacts,
    NvmlDevice,
    PciDevice,
    PciGpuFacts,
    SourceAttempt,
    UnopenedGpu,
)
from gpudoctor.nvml_worker import MARKER
from gpudoctor.system import Files, signal_name

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


#: Seconds the NVML worker may take (NVML init on a healthy 8-GPU node takes ~1-2 s;
#: a driver that waits on a GPU fallen off the bus can block for tens of seconds).
NVML_WORKER_TIMEOUT_S = 20.0

_CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT", "SIGFPE")


def nvml_worker_argv() -> list[str]:
    """The doctor's own interpreter running :mod:`gpudoctor.nvml_worker`."""
    return [sys.executable, "-m", "gpudoctor.nvml_worker"]


def _worker_env(ctx: CollectContext) -> dict:
    env = dict(ctx.system.env)
    # the child must import gpudoctor from where this process did (a source checkout included)
    pkg_parent = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_parent not in paths:
        env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + paths)
    return env


def parse_worker_output(stdout: str) -> dict:
    """The marker-framed JSON document of the worker. Raises ``ValueError`` saying why."""
    end = stdout.rfind(MARKER)
    start = stdout.rfind(MARKER, 0, end) if end > 0 else -1
    if start < 0:
        raise ValueError("the NVML worker printed no result document")
    try:
        doc = json.loads(stdout[start + len(MARKER) : end])
    except ValueError as exc:
        raise ValueError(f"the NVML worker's result is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("worker") != 1 or not isinstance(doc.get("ok"), bool):
        raise ValueError("the NVML worker's result is not a version-1 document")
    return doc


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[:500]


def nvml_timeout_s(ctx: CollectContext) -> float:
    """The worker's timeout, s: :data:`NVML_WORKER_TIMEOUT_S`, or ``--probe-timeout`` when that is shorter."""
    return max(0.5, min(NVML_WORKER_TIMEOUT_S, float(ctx.options.probe_timeout_s)))


#: Where a driver's libnvidia-ml.so.1 is installed (Debian/Ubuntu multiarch, RHEL, the
#: NVIDIA container runtime's mount point in Kubernetes images, WSL2); LD_LIBRARY_PATH
#: entries are looked at too.
NVML_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/wsl/lib",
)
#: Signs of an NVIDIA kernel driver (or WSL2's GPU paravirtualisation device).
DRIVER_SIGNS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")


def kernel_driver_absent(files: Files) -> bool:
    """True when no NVIDIA kernel driver is loaded here: none of :data:`DRIVER_SIGNS` and no
    ``/sys/module/nvidia``. The light (entrypoint gate) collectors then skip the commands that only
    an NVIDIA driver gives something to read (``modinfo nvidia``, the kernel log's XIDs)."""
    return not any(files.exists(p) for p in (*DRIVER_SIGNS, "/sys/module/nvidia"))


def nvml_worth_trying(ctx: CollectContext) -> str | None:
    """``None`` when NVML may answer here; else why starting the worker is pointless.

    The worker is a second Python interpreter (~25 MiB, ~0.2 s); on a machine
    with no NVIDIA kernel driver (:data:`DRIVER_SIGNS`) and no
    ``libnvidia-ml.so*`` in :data:`NVML_LIBRARY_DIRS` or ``LD_LIBRARY_PATH``
    it could only report "not loaded", so it is not started (the gate runs on
    every container start).
    """
    files: Files = ctx.system.files
    if any(files.exists(p) for p in DRIVER_SIGNS):
        return None
    dirs = [d for d in ctx.system.env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(NVML_LIBRARY_DIRS)
    for d in dirs:
        try:
            names = files.listdir(d)
        except OSError:
            continue
        if any(n.startswith("libnvidia-ml.so") for n in names):
            return None
    return (
        "libnvidia-ml.so.1 could not be loaded (no NVIDIA driver installed: no /proc/driver/nvidia, "
        "/dev/nvidiactl or /dev/dxg and no libnvidia-ml.so in the library directories or LD_LIBRARY_PATH; "
        "the NVML worker was not started)"
    )


def run_nvml_worker(ctx: CollectContext, timeout_s: float | None = None) -> tuple[str, str, Any]:
    """Run the NVML worker once (timeout: :func:`nvml_timeout_s`). Returns ``(outcome, detail, doc)``.

    ``outcome`` is one of ``ok``, ``not-loaded``, ``init-failed``, ``crashed``,
    ``timeout``, ``garbage``, ``failed`` (see ``NvidiaDriverFacts.nvml_outcome``);
    ``doc`` is the worker's document when ``ok``. Never raises for a broken library.
    """
    pointless = nvml_worth_trying(ctx)
    if pointless is not None:
        return "not-loaded", pointless, None
    timeout_s = nvml_timeout_s(ctx) if timeout_s is None else timeout_s
    result = ctx.system.runner.run(nvml_worker_argv(), timeout_s=timeout_s, env=_worker_env(ctx))
    stderr = _tail(result.stderr)
    if result.error == "timeout":
        return (
            "timeout",
            f"the NVML worker (libnvidia-ml.so.1) did not answer within {timeout_s:g} s and was "
            f"killed with its process group: the driver library hangs (a GPU that fell off the bus, "
            f"a stuck kernel module, or a broken libnvidia-ml.so.1)",
            None,
        )
    if result.error:
        return "failed", f"the NVML worker could not be started: {result.error}", None
    if result.returncode is not None and result.returncode < 0:
        sig = signal_name(-result.returncode)
        kind = " (a crash inside the native driver library)" if sig in _CRASH_SIGNALS else ""
        return (
            "crashed",
            f"the NVML worker was killed by {sig} while loading or querying libnvidia-ml.so.1"
            f"{kind}" + (f"; stderr: {stderr}" if stderr else ""),
            None,
        )
    try:
        doc = parse_worker_output(result.stdout)
    except ValueError as exc:
        status = f"exit status {result.returncode}"
        outcome = "garbage" if result.returncode == 0 else "failed"
        return outcome, f"{exc} ({status})" + (f"; stderr: {stderr}" if stderr else ""), None
    if result.returncode != 0:
        return (
            "failed",
            f"the NVML worker exited with status {result.returncode}" + (f"; stderr: {stderr}" if stderr else ""),
            None,
        )
    if not doc["ok"]:
        detail = str(doc.get("error") or "NVML failed")
        if doc.get("stage") in ("import", "load"):
            if doc.get("stage") == "load":
                detail = (
                    "libnvidia-ml.so.1 could not be loaded (no NVIDIA driver installed, or a container "
                    "started without the NVIDIA runtime)"
                )
            return "not-loaded", detail, None
        return "init-failed", f"nvmlInit failed: {detail}", None
    return "ok", f"NVML reports driver {doc.get('driver_version')}", doc


def _visible(files: Files, proc: GpuProcess) -> GpuProcess:
    """Mark whether the PID exists in this PID namespace, with its command name."""
    comm = files.read_text_or_none(f"/proc/{proc.pid}/comm")
    return replace(proc, visible=comm is not None, command=(comm or "").strip())


def _decode_devices(doc: dict, files: Files) -> tuple[NvmlDevice, ...]:
    devices = []
    for raw in doc.get("devices") or ():
        try:
            dev = from_jsonable(NvmlDevice, raw)
        except FactsDecodeError as exc:
            raise ValueError(f"the NVML worker's device entry does not decode: {exc}") from None
        health = dev.health
        if isinstance(health, GpuHealth) and isinstance(health.processes, tuple):
            health = replace(health, processes=tuple(_visible(files, p) for p in health.processes))
            dev = replace(dev, health=health)
        devices.append(dev)
    return tuple(devices)


def _accounting(doc: dict) -> dict[str, Any]:
    """device_count, unopened and pairs of the worker's document (NvidiaDriverFacts fields)."""
    try:
        count = doc.get("device_count")
        return {
            "device_count": count
            if isinstance(count, int) and not isinstance(count, bool)
            else Unavailable(str(count.get("unavailable")) if isinstance(count, dict) else "not reported"),
            "unopened": tuple(from_jsonable(UnopenedGpu, u) for u in doc.get("unopened") or ()),
            "pairs": tuple(from_jsonable(GpuPair, p) for p in doc.get("pairs") or ()),
        }
    except FactsDecodeError as exc:
        raise ValueError(f"the NVML worker's accounting does not decode: {exc}") from None


def _nvml(ctx: CollectContext) -> tuple[SourceAttempt, str, Any]:
    """(attempt, outcome, (driver, cuda_driver, devices, accounting) or None)."""
    outcome, detail, doc = run_nvml_worker(ctx)
    if doc is None:
        return SourceAttempt("nvml", False, detail), outcome, None
    try:
        devices = _decode_devices(doc, ctx.system.files)
        accounting = _accounting(doc)
    except ValueError as exc:
        return SourceAttempt("nvml", False, str(exc)), "garbage", None
    driver = doc.get("driver_version")
    driver = Unavailable(str(driver["unavailable"])) if isinstance(driver, dict) else str(driver)
    raw = doc.get("cuda_driver_version")
    cuda: Any = (
        f"{raw // 1000}.{(raw % 1000) // 10}"
        if isinstance(raw, int)
        else Unavailable(str(raw.get("unavailable") if isinstance(raw, dict) else "not reported"))
    )
    if isinstance(driver, Unavailable):
        return SourceAttempt("nvml", False, f"NVML gave no driver version: {driver.reason}"), "init-failed", None
    return SourceAttempt("nvml", True, detail), "ok", (driver, cuda, devices, accounting)


def collect_nvidia(ctx: CollectContext) -> NvidiaDriverFacts:
    files: Files = ctx.system.files
    attempts: list[SourceAttempt] = []
    if files.is_live:
        attempt, outcome, result = _nvml(ctx)
        attempts.append(attempt)
        if result is not None:
            driver, cuda, devices, accounting = result
            return NvidiaDriverFacts(driver, "nvml", cuda, "ok", devices, tuple(attempts), "ok", **accounting)
        nvml_reason = attempt.detail
    else:
        outcome = "not-run"
        nvml_reason = "NVML is not used on an image root (--root)"
        attempts.append(SourceAttempt("nvml", False, nvml_reason))
    text = files.read_text_or_none("/proc/driver/nvidia/version")
    if text is None:
        attempts.append(
            SourceAttempt(
                "proc", False, "/proc/driver/nvidia/version does not exist (the nvidia kernel module is not loaded)"
            )
        )
    else:
        version = parse_nvrm_version(text)
        attempts.append(
            SourceAttempt(
                "proc",
                bool(version),
                f"read {version}" if version else "no version found in /proc/driver/nvidia/version",
            )
        )
        if version:
            return NvidiaDriverFacts(
                version,
                "proc",
                Unavailable("NVML is needed for the driver's CUDA version: " + nvml_reason),
                Unavailable(nvml_reason),
                (),
                tuple(attempts),
                outcome,
            )
    text = files.read_text_or_none("/sys/module/nvidia/version")
    if text is None:
        attempts.append(SourceAttempt("sysmodule", False, "/sys/module/nvidia/version does not exist"))
    elif text.strip():
        attempts.append(SourceAttempt("sysmodule", True, f"read {text.strip()}"))
        return NvidiaDriverFacts(
            text.strip(),
            "sysmodule",
            Unavailable("NVML is needed for the driver's CUDA version: " + nvml_reason),
            Unavailable(nvml_reason),
            (),
            tuple(attempts),
            outcome,
        )
    reason = "no NVIDIA driver found: " + "; ".join(a.detail for a in attempts)
    return NvidiaDriverFacts(
        Unavailable(reason), "", Unavailable(reason), Unavailable(nvml_reason), (), tuple(attempts), outcome
    )


COLLECTORS = (
    Collector(domain="gpu", collect=collect_gpu, timeout_s=10.0),
    Collector(domain="nvidia", collect=collect_nvidia, timeout_s=NVML_WORKER_TIMEOUT_S + 10.0),
)
