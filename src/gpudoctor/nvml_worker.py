"""The NVML worker: run as ``python -m gpudoctor.nvml_worker`` by the doctor, never imported by it.

It loads ``libnvidia-ml.so.1`` through nvidia-ml-py (``pynvml``), reads the
driver, every device and its health counters, and prints one JSON document
framed by :data:`MARKER` lines on stdout. Stdlib and pynvml only: this module
must stay importable without the rest of gpudoctor's dependencies.

A native crash or hang here kills only this child; the doctor
(:mod:`gpudoctor.collect.nvidia`) runs it with a timeout in its own process
group and turns whatever happened into an Unavailable reason.

Document (version 1)::

    {"worker": 1, "ok": true, "driver_version": "550.54.15" | {"unavailable": "..."},
     "cuda_driver_version": 12040 | {"unavailable": ...}, "device_count": 2 | {"unavailable": ...},
     "devices": [ {NvmlDevice as JSON} ],
     "unopened": [ {"index": 1, "error": "nvmlDeviceGetHandleByIndex failed: GPU is lost"} ],
     "pairs": [ {GpuPair as JSON} ]}
    {"worker": 1, "ok": false, "stage": "import" | "load" | "init", "error": "..."}

Values that NVML could not give are ``{"unavailable": "<function> failed: <NVML error>"}``,
the facts JSON encoding of :class:`gpudoctor.facts.Unavailable`.
"""

from __future__ import annotations

import json
import sys

MARKER = "@@gpudoctor-nvml@@"
VERSION = 1
MIB = 1024 * 1024


def _na(reason):
    return {"unavailable": reason}


def _is_na(value):
    return isinstance(value, dict) and set(value) == {"unavailable"}


def _query(fn, *args):
    """Call one pynvml function; an NVML error or a missing symbol becomes an unavailable value."""
    name = getattr(fn, "__name__", "NVML call")
    try:
        value = fn(*args)
    except Exception as exc:  # pynvml.NVMLError_NotSupported, _FunctionNotFound, ...
        text = str(exc) or type(exc).__name__
        return _na(f"{name} failed: {text}")
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value


def _map(value, fn):
    return value if _is_na(value) else fn(value)


def _first_supported(*calls):
    """The first call that answers, else the last call's unavailable value."""
    value = _na("no query")
    for fn, args in calls:
        value = _query(fn, *args)
        if not _is_na(value):
            return value
    return value


def _processes(nv, handle):
    out = []
    reasons = []
    for kind, fn in (
        ("compute", getattr(nv, "nvmlDeviceGetComputeRunningProcesses", None)),
        ("graphics", getattr(nv, "nvmlDeviceGetGraphicsRunningProcesses", None)),
    ):
        if fn is None:
            reasons.append(f"{kind}: not in this nvidia-ml-py")
            continue
        procs = _query(fn, handle)
        if _is_na(procs):
            reasons.append(procs["unavailable"])
            continue
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            out.append(
                {
                    "pid": int(p.pid),
                    "kind": kind,
                    "used_memory_mib": int(used) // MIB if isinstance(used, int) else _na("not reported by NVML"),
                }
            )
    if not out and len(reasons) == 2:
        return _na("; ".join(reasons))
    return out


def _health(nv, h):
    """GpuHealth as JSON; every query guarded."""
    ecc = _query(nv.nvmlDeviceGetEccMode, h)
    health = {
        "ecc_enabled": _map(ecc, lambda v: bool(v[0])),
        "ecc_pending": _map(ecc, lambda v: bool(v[1])),
    }
    for counter, ctype in (("volatile", nv.NVML_VOLATILE_ECC), ("aggregate", nv.NVML_AGGREGATE_ECC)):
        for kind, etype in (
            ("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
        ):
            health[f"ecc_{counter}_{kind}"] = _map(_query(nv.nvmlDeviceGetTotalEccErrors, h, etype, ctype), int)
    for key, cause in (
        ("sbe", nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        ("dbe", nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
    ):
        health[f"retired_pages_{key}"] = _map(_query(nv.nvmlDeviceGetRetiredPages, h, cause), len)
    health["retired_pages_pending"] = _map(_query(nv.nvmlDeviceGetRetiredPagesPendingStatus, h), bool)
    rows = _query(nv.nvmlDeviceGetRemappedRows, h)
    for i, key in enumerate(("remapped_rows_correctable", "remapped_rows_uncorrectable")):
        health[key] = _map(rows, lambda v, i=i: int(v[i]))
    health["remap_pending"] = _map(rows, lambda v: bool(v[2]))
    health["remap_failure"] = _map(rows, lambda v: bool(v[3]))
    health["clock_event_reasons"] = _map(
        _first_supported(
            (
                getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nv.nvmlDeviceGetCurrentClocksThrottleReasons,
                (h,),
            ),
            (nv.nvmlDeviceGetCurrentClocksThrottleReasons, (h,)),
        ),
        int,
    )
    for key, fn in (
        ("pcie_gen_current", nv.nvmlDeviceGetCurrPcieLinkGeneration),
        ("pcie_gen_max", nv.nvmlDeviceGetMaxPcieLinkGeneration),
        ("pcie_width_current", nv.nvmlDeviceGetCurrPcieLinkWidth),
        ("pcie_width_max", nv.nvmlDeviceGetMaxPcieLinkWidth),
    ):
        health[key] = _map(_query(fn, h), int)
    health["temperature_c"] = _map(_query(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU), int)
    health["temperature_slowdown_c"] = _map(
        _query(nv.nvmlDeviceGetTemperatureThreshold, h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN), int
    )
    health["temperature_shutdown_c"] = _map(
        _query(nv.nvmlDeviceGetTemperatureThreshold, h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN), int
    )
    health["power_draw_w"] = _map(_query(nv.nvmlDeviceGetPowerUsage, h), lambda mw: round(mw / 1000.0, 3))
    health["power_limit_w"] = _map(
        _first_supported((nv.nvmlDeviceGetEnforcedPowerLimit, (h,)), (nv.nvmlDeviceGetPowerManagementLimit, (h,))),
        lambda mw: round(mw / 1000.0, 3),
    )
    health["persistence_mode"] = _map(_query(nv.nvmlDeviceGetPersistenceMode, h), bool)
    modes = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
    health["compute_mode"] = _map(_query(nv.nvmlDeviceGetComputeMode, h), lambda m: modes.get(int(m), f"mode {m}"))
    health["processes"] = _processes(nv, h)
    util = _query(nv.nvmlDeviceGetUtilizationRates, h)
    health["utilization_gpu_pct"] = _map(util, lambda u: int(u.gpu))
    health["utilization_memory_pct"] = _map(util, lambda u: int(u.memory))
    return health


def _mig_instances(nv, h, mig):
    """MigInstance JSON for each MIG device of a GPU in MIG mode (empty otherwise)."""
    if _is_na(mig) or not mig[0]:
        return []
    count = _query(nv.nvmlDeviceGetMaxMigDeviceCount, h)
    out = []
    for j in range(count if isinstance(count, int) else 0):
        m = _query(nv.nvmlDeviceGetMigDeviceHandleByIndex, h, j)
        if _is_na(m):
            continue  # a slot without a MIG device
        uuid = _query(nv.nvmlDeviceGetUUID, m)
        if _is_na(uuid):
            continue
        name = _query(nv.nvmlDeviceGetName, m)
        profile = name.rsplit(" MIG ", 1)[1] if isinstance(name, str) and " MIG " in name else ""
        gi = _query(nv.nvmlDeviceGetGpuInstanceId, m)
        ci = _query(nv.nvmlDeviceGetComputeInstanceId, m)
        out.append(
            {
                "uuid": str(uuid),
                "profile": profile,
                "gpu_instance": None if _is_na(gi) else int(gi),
                "compute_instance": None if _is_na(ci) else int(ci),
            }
        )
    return out


#: ``nvmlGpuRecoveryAction_t`` (nvml.h; field ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`` = 230, R550+).
RECOVERY_ACTIONS = {
    0: "none",
    1: "gpu_reset",
    2: "node_reboot",
    3: "drain_p2p",
    4: "drain_and_reset",
    5: "recover_imex_domain",
    6: "bus_reset",
    7: "system_reboot",
}
FI_RECOVERY_ACTION = 230


def _recovery_action(nv, h):
    """What the driver says the GPU needs (``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``), or unavailable."""
    values = _query(nv.nvmlDeviceGetFieldValues, h, [FI_RECOVERY_ACTION])
    if _is_na(values):
        return values
    v = values[0]
    if int(v.nvmlReturn) != 0:
        return _na(f"NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: NVML error {int(v.nvmlReturn)}")
    code = int(v.value.uiVal)
    return RECOVERY_ACTIONS.get(code, f"action {code}")


def _nvlink_active(nv, h):
    """Active NVLink links (``nvmlDeviceGetNvLinkState`` per link), or unavailable when the GPU has none."""
    up = 0
    answered = False
    first = None
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _query(nv.nvmlDeviceGetNvLinkState, h, link)
        if _is_na(state):
            first = first or state
            continue
        answered = True
        up += 1 if int(state) else 0
    return up if answered else (first or _na("no NVLink"))


#: ``nvmlGpuTopologyLevel_t`` -> the ``nvidia-smi topo -m`` legend word.
TOPOLOGY_LEVELS = {0: "internal", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: ``nvmlGpuP2PStatus_t``.
P2P_STATUS = {
    0: "ok",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}


def _pairs(nv, opened):
    """Topology level and P2P read status for each pair of opened GPUs (index, handle)."""
    out = []
    read = getattr(nv, "NVML_P2P_CAPS_INDEX_READ", 0)
    read = read[0] if isinstance(read, tuple) else read  # nvidia-ml-py defines it as a 1-tuple
    for a in range(len(opened)):
        for b in range(a + 1, len(opened)):
            (ia, ha), (ib, hb) = opened[a], opened[b]
            level = _query(nv.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
            p2p = _query(nv.nvmlDeviceGetP2PStatus, ha, hb, read)
            out.append(
                {
                    "a": ia,
                    "b": ib,
                    "link": _map(level, lambda v: TOPOLOGY_LEVELS.get(int(v), f"level {v}")),
                    "p2p_read": _map(p2p, lambda v: P2P_STATUS.get(int(v), f"status {v}")),
                }
            )
    return out


def _device(nv, i, h):
    cc = _query(nv.nvmlDeviceGetCudaComputeCapability, h)
    mem = _query(nv.nvmlDeviceGetMemoryInfo, h)
    pci = _query(nv.nvmlDeviceGetPciInfo, h)
    mig = _query(nv.nvmlDeviceGetMigMode, h)
    bus = "" if _is_na(pci) else getattr(pci, "busId", "")
    if isinstance(bus, bytes):
        bus = bus.decode("utf-8", errors="replace")
    return {
        "index": i,
        "name": str(_query(nv.nvmlDeviceGetName, h)),
        "uuid": str(_query(nv.nvmlDeviceGetUUID, h)),
        "pci_bus_id": bus,
        "compute_capability": _map(cc, lambda v: f"{v[0]}.{v[1]}"),
        "memory_total_mib": _map(mem, lambda m: int(m.total) // MIB),
        "memory_used_mib": _map(mem, lambda m: int(m.used) // MIB),
        "mig_mode": _map(mig, lambda v: bool(v[0])),
        "mig_instances": _mig_instances(nv, h, mig),
        "health": _health(nv, h),
        "recovery_action": _recovery_action(nv, h),
        "nvlink_active": _nvlink_active(nv, h),
    }


def collect():
    """The result document (a dict); never raises for NVML errors."""
    try:
        import pynvml as nv  # nvidia-ml-py
    except ImportError as exc:
        return {"worker": VERSION, "ok": False, "stage": "import", "error": f"nvidia-ml-py is not importable: {exc}"}
    try:
        nv.nvmlInit()
    except Exception as exc:
        name = type(exc).__name__
        stage = "load" if "LibraryNotFound" in name or "not found" in str(exc).lower() else "init"
        return {"worker": VERSION, "ok": False, "stage": stage, "error": str(exc) or name}
    try:
        cuda = _query(nv.nvmlSystemGetCudaDriverVersion)
        count = _query(nv.nvmlDeviceGetCount)
        devices = []
        unopened = []
        opened = []
        for i in range(count if isinstance(count, int) else 0):
            h = _query(nv.nvmlDeviceGetHandleByIndex, i)
            if _is_na(h):  # a GPU NVML counts but cannot open: never dropped silently
                unopened.append({"index": i, "error": h["unavailable"]})
                continue
            opened.append((i, h))
            devices.append(_device(nv, i, h))
        return {
            "worker": VERSION,
            "ok": True,
            "driver_version": _query(nv.nvmlSystemGetDriverVersion),
            "cuda_driver_version": cuda,
            "device_count": count,
            "devices": devices,
            "unopened": unopened,
            "pairs": _pairs(nv, opened),
        }
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def sample(interval_s: float, out=None) -> int:
    """``--sample SECONDS``: one JSON line per interval on stdout, until the reader goes away
    or the parent dies: ``{"t": unix time, "devices": [{"index", "util_gpu", "util_mem",
    "mem_used_mib", "mem_total_mib"}]}`` (a value NVML cannot give is null); the first line
    is ``{"ok": false, "error": "..."}`` when NVML cannot start (and the worker exits)."""
    import os
    import time

    out = out or sys.stdout
    try:
        import pynvml as nv  # nvidia-ml-py

        nv.nvmlInit()
        count = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except Exception as exc:
        out.write(json.dumps({"ok": False, "error": str(exc) or type(exc).__name__}) + "\n")
        out.flush()
        return 0
    parent = os.getppid()
    try:
        while os.getppid() == parent:
            devices = []
            for i, h in enumerate(handles):
                util = _query(nv.nvmlDeviceGetUtilizationRates, h)
                mem = _query(nv.nvmlDeviceGetMemoryInfo, h)
                devices.append(
                    {
                        "index": i,
                        "util_gpu": None if _is_na(util) else int(util.gpu),
                        "util_mem": None if _is_na(util) else int(util.memory),
                        "mem_used_mib": None if _is_na(mem) else int(mem.used) // MIB,
                        "mem_total_mib": None if _is_na(mem) else int(mem.total) // MIB,
                    }
                )
            try:
                out.write(json.dumps({"ok": True, "t": round(time.time(), 3), "devices": devices}) + "\n")
                out.flush()
            except (BrokenPipeError, OSError):
                return 0
            time.sleep(interval_s)
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--sample":
        return sample(max(0.05, float(sys.argv[2])))
    doc = collect()
    sys.stdout.write(f"\n{MARKER}\n{json.dumps(doc)}\n{MARKER}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
