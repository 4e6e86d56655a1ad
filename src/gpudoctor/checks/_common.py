"""Shared helpers for the built-in checks (not a public API)."""

from __future__ import annotations

import dataclasses
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts, TargetsFacts

GIB = 1024 ** 3
MIB = 1024 ** 2


def fmt_bytes(n: int) -> str:
    """Human size in binary units: ``64 MiB``, ``23.5 GiB``."""
    if n >= GIB:
        return f"{n / GIB:.1f} GiB".replace(".0 GiB", " GiB")
    return f"{n / MIB:.0f} MiB"


def driver_version(facts: Facts) -> str | None:
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable) or isinstance(nv.driver_version, Unavailable):
        return None
    return nv.driver_version


def nvidia_gpu_count(facts: Facts) -> int:
    """GPUs seen by NVML, else NVIDIA controllers on the PCI bus (0 when unknown)."""
    nv = facts.of(NvidiaDriverFacts)
    if not isinstance(nv, Unavailable) and nv.devices:
        return len(nv.devices)
    pci = facts.of(PciGpuFacts)
    if not isinstance(pci, Unavailable):
        return len(pci.devices)
    return 0


def _v(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def wheel_variants() -> list[dict[str, Any]]:
    """Rows of ``data/torch_wheels.toml`` (CUDA variants first, by CUDA version)."""
    rows = [r for r in load_table("torch_wheels")["variant"] if r["cuda"]]
    return sorted(rows, key=lambda r: _v(r["cuda"]))


def best_variant_for_driver(driver: str | None) -> dict[str, Any] | None:
    """The wheel variant to recommend for ``driver``, or None when it runs none.

    Among variants the driver can run (``min_driver``, the minor-version
    compatibility floor) and that carry the newest torch, prefer the newest
    CUDA the driver supports natively (``toolkit_driver`` <= driver: no
    minor-version-compatibility limits such as PTX JIT, NVIDIA CUDA
    Compatibility guide); otherwise the newest CUDA it runs at all. With no
    known driver, the newest variant.
    """
    rows = wheel_variants()
    if driver is None:
        return rows[-1] if rows else None
    fitting = [r for r in rows if _v(driver) >= _v(r["min_driver"])]
    if not fitting:
        return None
    newest_torch = max(_v(r["newest_torch"]) for r in fitting)
    current = [r for r in fitting if _v(r["newest_torch"]) == newest_torch]
    native = [r for r in current if _v(driver) >= _v(r.get("toolkit_driver") or r["min_driver"])]
    return (native or current)[-1]


def pip_install_command(python: str, variant: dict[str, Any], torch_version: str | None = None) -> str:
    """``<python> -m pip install --force-reinstall torch[==X] --index-url URL``."""
    spec = f"torch=={torch_version}" if torch_version else "torch"
    return f"{python} -m pip install --force-reinstall {spec} --index-url {variant['index_url']}"


def split_local(version: str) -> tuple[str, str]:
    """``2.1.0+cu121`` -> (``2.1.0``, ``cu121``)."""
    public, _, local = version.partition("+")
    return public, local


def in_container(facts: Facts) -> bool:
    """True when the os facts say we run in a container (False when unknown)."""
    os_facts = facts.of(OsFacts)
    return not isinstance(os_facts, Unavailable) and os_facts.container.in_container


def distinct_targets(targets: TargetsFacts) -> list[TargetFacts]:
    """Targets in order, minus any whose probe saw exactly what an earlier one saw.

    A Jupyter kernel that runs the terminal's interpreter with the terminal's
    environment is the same target twice; per-target checks report it once
    (``jupyter.kernels`` still reports every kernel).
    """
    seen = set()
    out: list[TargetFacts] = []
    for t in targets.targets:
        probe = t.probe
        if isinstance(probe, ProbeFacts):
            key = repr(dataclasses.replace(probe, duration_ms=0.0))
        else:
            key = repr((t.python, probe))
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
    return out
