"""Shared helpers for the ``devices.*`` health checks (not a public API)."""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.checks import SkipCheck, require
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import GpuHealth, NvidiaDriverFacts, NvmlDevice

NVML_DOC = "https://docs.nvidia.com/deploy/nvml-api/index.html"


def gpus_with_health(facts: Facts) -> list[tuple[NvmlDevice, GpuHealth]]:
    """(device, health) for every GPU NVML reported health for.

    Raises :class:`SkipCheck` when NVML gave nothing (no driver, image root,
    NVML broken: ``nvidia.driver`` reports that) or no GPU has health data.
    """
    nv = require(facts, NvidiaDriverFacts)
    if isinstance(nv.nvml, Unavailable):
        raise SkipCheck(f"NVML gave no device data: {nv.nvml.reason}")
    if not nv.devices:
        raise SkipCheck("NVML reports no GPU")
    out = [(d, d.health) for d in nv.devices if isinstance(d.health, GpuHealth)]
    if not out:
        reasons = {d.health.reason for d in nv.devices if isinstance(d.health, Unavailable)}
        raise SkipCheck("NVML reported no health data for any GPU: " + "; ".join(sorted(reasons)))
    return out


def label(dev: NvmlDevice) -> str:
    """``GPU 0 (NVIDIA H100 80GB HBM3, 00000000:18:00.0)``."""
    return f"GPU {dev.index} ({dev.name}, {dev.pci_bus_id})" if dev.pci_bus_id else f"GPU {dev.index} ({dev.name})"


def num(value: Any) -> Any:
    """The value when known, else None (for comparisons)."""
    return None if isinstance(value, Unavailable) else value


def shown(value: Any, unit: str = "") -> str:
    """Text: ``3``, ``41 °C`` or ``unavailable: <reason>``."""
    if isinstance(value, Unavailable):
        return f"unavailable: {value.reason}"
    return f"{value}{unit}"


def ev(value: Any) -> Any:
    """Evidence value: the value itself (int, bool, float, str), or ``unavailable: <reason>``."""
    return f"unavailable: {value.reason}" if isinstance(value, Unavailable) else value


def bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


def head(line: str) -> str:
    """The GPU named at the start of a finding line: ``GPU 1 (NVIDIA H100 80GB HBM3)``."""
    m = re.match(r"GPU \d+(?: \(([^,)]*))?", line)
    if not m:
        return line.split(":")[0]
    return f"{m.group(0)})" if m.group(1) else m.group(0)
