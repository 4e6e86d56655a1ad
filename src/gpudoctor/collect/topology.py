"""Collector for the ``topology`` domain: each NVIDIA GPU's PCIe path with the ACS control of
its bridges, IOMMU mode, and the ``nvidia-smi topo -m`` matrix.

Files through the System (so a fake root's sysfs replays a machine); ``nvidia-smi topo -m`` and
``lspci -vvv`` run only where the System's commands speak for the root, each with a timeout.
"""

from __future__ import annotations

import re

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.collect.nvidia import NVIDIA_VENDOR
from gpudoctor.facts import Unavailable
from gpudoctor.facts.topology import ACS_BITS, Bridge, GpuPath, TopologyFacts
from gpudoctor.system import Files

TIMEOUT_S = 10.0
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_LSPCI_HEAD = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s")
ACS_CAP_ID = 0x000D


def acs_from_config(data: bytes) -> int | None | Unavailable:
    """The ACS control register from PCI configuration space bytes: None when the device has no
    ACS capability, Unavailable when the extended space (beyond 256 bytes) is not readable."""
    if len(data) <= 0x100:
        return Unavailable(f"only {len(data)} bytes of configuration space readable (the extended space needs root)")
    offset = 0x100
    seen = set()
    while offset and offset not in seen and offset + 8 <= len(data):
        seen.add(offset)
        header = int.from_bytes(data[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            return int.from_bytes(data[offset + 6 : offset + 8], "little")
        offset = (header >> 20) & 0xFFC
    return None


def parse_acsctl(text: str) -> dict[str, int]:
    """``lspci -vvv`` text -> {bus id (as printed): ACS control bits} for devices with an ACSCtl line."""
    out: dict[str, int] = {}
    current = ""
    for line in text.splitlines():
        m = _LSPCI_HEAD.match(line)
        if m:
            current = m.group(1).lower()
            continue
        if "ACSCtl:" in line and current:
            flags = line.split("ACSCtl:", 1)[1]
            out[current] = sum(bit for bit, name in ACS_BITS if f"{name}+" in flags)
    return out


def parse_topo_matrix(text: str) -> tuple[tuple[str, str, str], ...]:
    """``nvidia-smi topo -m`` -> (row, column, link) for every GPU/NIC pair (not the diagonal)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header: list[str] = []
    pairs = []
    for ln in lines:
        cells = ln.split()
        if not header:
            if cells and re.fullmatch(r"(GPU|NIC|mlx)\w*", cells[0]):
                header = [c for c in cells if re.fullmatch(r"(GPU|NIC)\d+|mlx\w+", c)]
            continue
        if ln.strip().startswith("Legend"):
            break
        if not cells or not re.fullmatch(r"(GPU|NIC)\d+|mlx\w+", cells[0]):
            continue
        row = cells[0]
        for col, link in zip(header, cells[1 : 1 + len(header)]):
            if col != row and link != "X":
                pairs.append((row, col, link))
    return tuple(pairs)


def _gpus(files: Files) -> list[str]:
    base = "/sys/bus/pci/devices"
    try:
        names = files.listdir(base)
    except OSError:
        return []
    out = []
    for name in sorted(names):
        vendor = (files.read_text_or_none(f"{base}/{name}/vendor") or "").strip().lower()
        cls = (files.read_text_or_none(f"{base}/{name}/class") or "").strip().lower()
        if vendor == NVIDIA_VENDOR and cls.startswith("0x03"):
            out.append(name)
    return out


def _path(files: Files, bdf: str, lspci: dict[str, int]) -> GpuPath:
    base = f"/sys/bus/pci/devices/{bdf}"
    try:
        real = files.realpath(base)
    except OSError:
        real = ""
    parts = [p for p in real.split("/") if _BDF.match(p)]
    bridges = []
    for bridge in parts[:-1] if parts and parts[-1] == bdf else parts:
        try:
            data = files.read_bytes(f"/sys/bus/pci/devices/{bridge}/config")
            ctl: int | None | Unavailable = acs_from_config(data)
            source = "sysfs"
        except OSError as exc:
            ctl, source = Unavailable(f"config not readable: {exc.strerror or exc}"), ""
        if isinstance(ctl, Unavailable):
            short = bridge[5:] if bridge.startswith("0000:") else bridge
            for key in (bridge.lower(), short.lower()):
                if key in lspci:
                    ctl, source = lspci[key], "lspci"
                    break
        bridges.append(Bridge(bridge, ctl, source))
    group = files.readlink(f"{base}/iommu_group") or ""
    gtype = ""
    if group:
        gtype = (files.read_text_or_none(f"/sys/kernel/iommu_groups/{group.rsplit('/', 1)[-1]}/type") or "").strip()
    numa = (files.read_text_or_none(f"{base}/numa_node") or "").strip()
    return GpuPath(bdf, tuple(bridges), gtype, int(numa) if re.fullmatch(r"-?\d+", numa) else None)


def collect_topology(ctx: CollectContext) -> TopologyFacts:
    files = ctx.system.files
    gpus = _gpus(files)
    live = ctx.system.commands_live
    matrix: tuple[tuple[str, str, str], ...] | Unavailable = Unavailable("not run: fewer than two GPUs")
    text = ""
    lspci: dict[str, int] = {}
    if live and len(gpus) >= 2:
        r = ctx.system.runner.run(["nvidia-smi", "topo", "-m"], timeout_s=TIMEOUT_S)
        if r.ok and r.stdout.strip():
            text = r.stdout[:8000]
            matrix = parse_topo_matrix(r.stdout)
        else:
            matrix = Unavailable(r.describe_failure())
        lp = ctx.system.runner.run(["lspci", "-vvv"], timeout_s=TIMEOUT_S)
        if lp.ok:
            lspci = parse_acsctl(lp.stdout)
    elif len(gpus) >= 2:
        matrix = Unavailable("nvidia-smi is not run on an image root (--root)")
    try:
        groups = len(files.listdir("/sys/kernel/iommu_groups"))
    except OSError:
        groups = 0
    return TopologyFacts(
        paths=tuple(_path(files, g, lspci) for g in gpus),
        matrix=matrix,
        matrix_text=text,
        cmdline=(files.read_text_or_none("/proc/cmdline") or "").strip()[:2000],
        iommu_groups=groups,
    )


COLLECTOR = Collector(domain="topology", collect=collect_topology, timeout_s=2 * TIMEOUT_S + 5.0)
