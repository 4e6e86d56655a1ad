"""Shared helpers for the built-in checks (not a public API)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts

GIB = 1024 ** 3
MIB = 1024 ** 2


def fmt_bytes(n: int) -> str:
    """Human size in binary units: ``64 MiB``, ``23.5 GiB``."""
    if n >= GIB:
        return f"{n / GIB:.1f} GiB".replace(".0 GiB", " GiB")
    return f"{n / MIB:.0f} MiB"


def driver_version(facts: Facts) -> Optional[str]:
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


def wheel_variants() -> List[dict]:
    """Rows of ``data/torch_wheels.toml`` (CUDA variants first, by CUDA version)."""
    rows = [r for r in load_table("torch_wheels")["variant"] if r["cuda"]]
    return sorted(rows, key=lambda r: _v(r["cuda"]))


def best_variant_for_driver(driver: Optional[str]) -> Optional[dict]:
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


def pip_install_command(python: str, variant: dict, torch_version: Optional[str] = None) -> str:
    """``<python> -m pip install --force-reinstall torch[==X] --index-url URL``."""
    spec = f"torch=={torch_version}" if torch_version else "torch"
    return f"{python} -m pip install --force-reinstall {spec} --index-url {variant['index_url']}"


def split_local(version: str) -> Tuple[str, str]:
    """``2.1.0+cu121`` -> (``2.1.0``, ``cu121``)."""
    public, _, local = version.partition("+")
    return public, local


def in_container(facts: Facts) -> bool:
    """True when the os facts say we run in a container (False when unknown)."""
    os_facts = facts.of(OsFacts)
    return not isinstance(os_facts, Unavailable) and os_facts.container.in_container
