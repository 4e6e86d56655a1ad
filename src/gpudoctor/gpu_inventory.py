"""Every NVIDIA GPU on the PCI bus, accounted for: bound driver, NVML, CUDA.

A GPU can vanish at three layers and each one hides it from the next: no
driver bound (nouveau, vfio-pci, none), bound but NVML cannot open it
(``nvmlDeviceGetHandleByIndex`` fails with "GPU is lost" / "Unknown Error":
``nvidia-smi`` prints "Unable to determine the device handle for GPU ..."),
opened by NVML but not enumerated by CUDA in a target. :func:`account` joins the
three views by PCI address so none is dropped silently. NVML's index order is
the PCI bus order of the GPUs bound to ``nvidia`` (NVML API reference,
``nvmlDeviceGetHandleByIndex``), which places an unopened NVML index on the bus
when the counts agree. Pure functions of the facts.
"""

from __future__ import annotations

import re

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.nvidia import NvidiaDriverFacts, NvmlDevice, PciDevice, PciGpuFacts, UnopenedGpu
from gpudoctor.facts.targets import TargetsFacts
from gpudoctor.records import frozen_dataclass

_BUS = re.compile(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def bus_key(bus_id: str) -> str:
    """``0000:3b:00.0`` for sysfs ``0000:3b:00.0``, NVML ``00000000:3B:00.0`` and CUDA ``0000:3b:00.0``."""
    m = _BUS.search(bus_id.strip())
    if not m:
        return bus_id.strip().lower()
    dom = int(m.group(1) or "0", 16)
    return f"{dom:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


@frozen_dataclass
class GpuAccount:
    """One GPU and what each layer made of it.

    Attributes:
        bus_id: PCI address (``0000:3b:00.0``), or "" for an NVML GPU not seen on the bus.
        device_id: PCI device id (``0x2330``), or "".
        driver: the kernel driver bound to it (``nvidia``, ``nouveau``, ``vfio-pci``), "none", or
            "unknown" (sysfs not readable).
        nvml: ``opened`` / ``unopened`` / ``absent`` (on the host, NVML did not list it) /
            ``not in this container`` (a container sees the host's whole PCI bus but NVML only the
            GPUs given to it) / ``unlisted`` (not listed, NVML's count unknown: an older snapshot) /
            ``not asked`` (NVML not run).
        nvml_index: its NVML index, or None.
        nvml_error: NVML's error for an unopened GPU (or the reason NVML was not asked).
        name: NVML's name, or "".
        cuda: per target: "yes", "no" (enumerated nothing matching), or left out when unknown.
    """

    bus_id: str
    device_id: str
    driver: str
    nvml: str
    nvml_index: int | None = None
    nvml_error: str = ""
    name: str = ""
    cuda: tuple[tuple[str, str], ...] = ()


def _cuda_views(facts: Facts) -> list[tuple[str, set[str] | None]]:
    """(target label, PCI keys CUDA enumerated there or None when unknown) for each probed target."""
    ts = facts.of(TargetsFacts)
    out: list[tuple[str, set[str] | None]] = []
    if isinstance(ts, Unavailable):
        return out
    for t in ts.targets:
        probe = t.probe
        if isinstance(probe, Unavailable):
            continue
        torch = probe.torch
        devs = getattr(torch, "devices", ()) or ()
        if not getattr(torch, "import_ok", False):
            continue
        keys = {bus_key(d.pci_bus_id) for d in devs if d.pci_bus_id}
        out.append((t.label, keys if keys or getattr(torch, "device_count", None) == 0 else None))
    return out


def account(facts: Facts) -> list[GpuAccount]:
    """Every NVIDIA GPU on the bus and every GPU NVML counts, each once, in bus order."""
    pci = facts.of(PciGpuFacts)
    nv = facts.of(NvidiaDriverFacts)
    pci_devs: tuple[PciDevice, ...] = () if isinstance(pci, Unavailable) else pci.devices
    nvml_ran = not isinstance(nv, Unavailable) and nv.nvml == "ok"
    opened: dict[str, NvmlDevice] = {}
    unopened: tuple[UnopenedGpu, ...] = ()
    if not isinstance(nv, Unavailable):
        opened = {bus_key(d.pci_bus_id): d for d in nv.devices if d.pci_bus_id}
        unopened = nv.unopened
    # NVML index order is the bus order of the GPUs bound to nvidia: place unopened indices there
    bound = sorted((d for d in pci_devs if d.driver == "nvidia"), key=lambda d: bus_key(d.bus_id))
    placed: dict[str, UnopenedGpu] = {}
    nv_count = None if isinstance(nv, Unavailable) or isinstance(nv.device_count, Unavailable) else nv.device_count
    if unopened and nv_count == len(bound):
        for u in unopened:
            if u.index < len(bound):
                placed[bus_key(bound[u.index].bus_id)] = u
    views = _cuda_views(facts)
    os_facts = facts.of(OsFacts)
    container = not isinstance(os_facts, Unavailable) and os_facts.container.in_container
    out: list[GpuAccount] = []
    seen: set[str] = set()
    for d in sorted(pci_devs, key=lambda d: bus_key(d.bus_id)):
        key = bus_key(d.bus_id)
        seen.add(key)
        cuda = tuple((label, "yes" if key in keys else "no") for label, keys in views if keys is not None)
        if key in opened:
            dev = opened[key]
            out.append(GpuAccount(d.bus_id, d.device_id, d.driver or "none", "opened", dev.index, "", dev.name, cuda))
        elif key in placed:
            u = placed[key]
            out.append(GpuAccount(d.bus_id, d.device_id, d.driver or "none", "unopened", u.index, u.error, "", cuda))
        elif not nvml_ran:
            why = nv.nvml.reason if not isinstance(nv, Unavailable) and isinstance(nv.nvml, Unavailable) else ""
            out.append(GpuAccount(d.bus_id, d.device_id, d.driver or "none", "not asked", None, why, "", cuda))
        else:
            state = "not in this container" if container else "absent" if nv_count is not None else "unlisted"
            out.append(GpuAccount(d.bus_id, d.device_id, d.driver or "none", state, None, "", "", cuda))
    for key, dev in sorted(opened.items()):
        if key not in seen:  # NVML drives a GPU this PCI view does not show (WSL2, some VMs, a masked sysfs)
            cuda = tuple((label, "yes" if key in keys else "no") for label, keys in views if keys is not None)
            out.append(GpuAccount(dev.pci_bus_id, "", "unknown", "opened", dev.index, "", dev.name, cuda))
    placed_idx = {u.index for u in placed.values()}
    for u in unopened:
        if u.index not in placed_idx:
            out.append(GpuAccount("", "", "nvidia" if bound else "unknown", "unopened", u.index, u.error))
    return out


def describe(a: GpuAccount) -> str:
    """One line: ``0000:3b:00.0 (0x2330): driver nvidia, NVML GPU 1 unopened (GPU is lost), CUDA: python3 no``."""
    where = a.bus_id or f"NVML GPU {a.nvml_index}"
    dev = f" ({a.device_id})" if a.device_id else ""
    if a.nvml == "opened":
        nvml = f"NVML GPU {a.nvml_index} {a.name}".rstrip()
    elif a.nvml == "unopened":
        nvml = f"NVML GPU {a.nvml_index} **cannot be opened** ({a.nvml_error})"
    elif a.nvml == "absent":
        nvml = "**not listed by NVML**"
    elif a.nvml in ("not in this container", "unlisted"):
        nvml = f"NVML: {a.nvml}"
    else:
        nvml = "NVML not asked" + (f" ({a.nvml_error})" if a.nvml_error else "")
    cuda = ", ".join(f"{label}: {seen}" for label, seen in a.cuda)
    return f"`{where}`{dev}: driver {a.driver}, {nvml}" + (f", CUDA {cuda}" if cuda else "")
