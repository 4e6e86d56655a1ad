"""Shared helpers for the built-in checks (not a public API)."""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts, TargetsFacts
from gpudoctor.model import Command
from gpudoctor.versions import Version
from gpudoctor.versions import split_local as split_local  # re-exported: the checks import it from here
from gpudoctor.versions import v as _v

GIB = 1024**3
MIB = 1024**2


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


def wheel_variants() -> list[dict[str, Any]]:
    """Rows of ``data/torch_wheels.toml`` (CUDA variants first, by CUDA version)."""
    rows = [r for r in load_table("torch_wheels")["variant"] if r["cuda"]]
    return sorted(rows, key=lambda r: _v(r["cuda"]))


def python_minor(python_version: str | None) -> tuple[int, int] | None:
    """``"3.8.18"`` -> ``(3, 8)``; None when absent or unreadable."""
    parts = (python_version or "").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def torch_limit(python_version: str | None) -> dict[str, Any] | None:
    """The ``data/python_torch.toml`` row for the target's Python: ``last_torch`` is the newest
    torch it can install. None when current torch releases support it (3.10+) or the version is
    unknown. A Python between rows (3.0-3.5) gets the limit of the row below it: a release it can
    install (torch 1.4.0 shipped wheels for 2.7 and 3.5-3.8), perhaps not its newest."""
    minor = python_minor(python_version)
    if minor is None:
        return None
    rows: list[dict[str, Any]] = load_table("python_torch")["python"]
    for row in rows:
        if python_minor(row["python"]) == minor:
            return row
    newest_limited = max(python_minor(r["python"]) or (0, 0) for r in rows)
    if minor > newest_limited:
        return None
    older = [r for r in rows if (python_minor(r["python"]) or (0, 0)) < minor]
    return older[-1] if older else rows[0]


def newest_torch_for_python(python_version: str | None) -> str | None:
    """The newest torch release ``python_version`` can install, or None when that is the current one."""
    row = torch_limit(python_version)
    return row["last_torch"] if row else None


def variant_fits_python(variant: dict[str, Any], python_version: str | None) -> bool:
    """Whether the wheel variant has a torch that ``python_version`` can install (its
    ``first_torch`` is not newer than the Python's last torch)."""
    last = newest_torch_for_python(python_version)
    return last is None or not variant.get("first_torch") or _v(variant["first_torch"]) <= _v(last)


def best_variant_for_driver(driver: str | None, python_version: str | None = None) -> dict[str, Any] | None:
    """The wheel variant to recommend for ``driver``, or None when it runs none.

    Among variants the driver can run (``min_driver``, the minor-version
    compatibility floor) and that carry the newest torch, prefer the newest
    CUDA the driver supports natively (``toolkit_driver`` <= driver: no
    minor-version-compatibility limits such as PTX JIT, NVIDIA CUDA
    Compatibility guide); otherwise the newest CUDA it runs at all. With no
    known driver, the newest variant. With ``python_version``, only variants
    that carry a torch that Python can install (:func:`variant_fits_python`),
    their newest torch capped at that Python's last one.
    """
    last = newest_torch_for_python(python_version)
    rows = [r for r in wheel_variants() if variant_fits_python(r, python_version)]
    if driver is None:
        return rows[-1] if rows else None
    fitting = [r for r in rows if _v(driver) >= _v(r["min_driver"])]
    if not fitting:
        return None

    def newest(r: dict[str, Any]) -> Version:
        return min(_v(r["newest_torch"]), _v(last)) if last else _v(r["newest_torch"])

    newest_torch = max(newest(r) for r in fitting)
    current = [r for r in fitting if newest(r) == newest_torch]
    native = [r for r in current if _v(driver) >= _v(r.get("toolkit_driver") or r["min_driver"])]
    return (native or current)[-1]


def pip_command(python: str, verb: str, args: str = "", venv_creator: str | None = None) -> str:
    """``<python> -m pip VERB ARGS`` for the interpreter at path ``python`` (quoted here for a POSIX
    shell: a path with spaces; ``args`` are shell words, quoted by the caller where they need it),
    or, in a venv made by ``uv venv`` (which has no pip; the probe's ``venv_creator``), uv's
    ``uv pip VERB --python <python> ARGS`` (``install``, ``check`` and ``show`` take the same words)."""
    tail = f" {args}" if args else ""
    if venv_creator == "uv":
        return f"uv pip {verb} --python {shlex.quote(python)}{tail}"
    return f"{shlex.quote(python)} -m pip {verb}{tail}"


def install_command(python: str, args: str, venv_creator: str | None = None) -> str:
    """:func:`pip_command` ``install ARGS``, pip's ``--force-reinstall`` spelt as uv's ``--reinstall``
    in a venv made by ``uv venv``."""
    if venv_creator == "uv":
        args = " ".join("--reinstall" if a == "--force-reinstall" else a for a in args.split(" "))
    return pip_command(python, "install", args, venv_creator)


def pip_install_command(
    python: str,
    variant: dict[str, Any],
    torch_version: str | None = None,
    python_version: str | None = None,
    venv_creator: str | None = None,
) -> str:
    """``<python> -m pip install --force-reinstall torch[==X] --index-url URL`` (uv's form in a venv
    made by ``uv venv``: :func:`install_command`).

    With ``python_version`` (the target's, e.g. ``3.8.18``) the command never
    names a torch that Python cannot install (``data/python_torch.toml``): a
    ``torch_version`` newer than its last torch, or an unpinned install from
    a variant that carries newer releases, becomes ``torch==<last torch>``.
    """
    last = newest_torch_for_python(python_version)
    if last is not None:
        named = (torch_version or "").rstrip("*").rstrip(".")
        newest = named or variant.get("newest_torch") or "9999"
        if _v(newest) > _v(last):
            torch_version = last
    spec = shlex.quote(f"torch=={torch_version}") if torch_version else "torch"  # torch==2.6.*: zsh globs
    return install_command(python, f"--force-reinstall {spec} --index-url {variant['index_url']}", venv_creator)


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


def distro_family(facts: Facts) -> str:
    """``debian`` (Debian, Ubuntu...), ``rhel`` (RHEL, Rocky, Fedora, Amazon), ``suse``, or "" when unknown."""
    os_facts = facts.of(OsFacts)
    if isinstance(os_facts, Unavailable):
        return ""
    ident = os_facts.id.lower()
    if ident in ("debian", "ubuntu", "linuxmint", "pop", "raspbian"):
        return "debian"
    if ident in ("rhel", "centos", "rocky", "almalinux", "fedora", "amzn", "ol"):
        return "rhel"
    if "suse" in ident or ident == "sles":
        return "suse"
    return ""


def driver_install_commands(facts: Facts, branch: str = "") -> tuple[Command, ...]:
    """How to install or upgrade the NVIDIA driver on this distribution (every family when unknown),
    then reboot; ``branch`` e.g. ``"550"`` pins the branch where the package manager can."""
    family = distro_family(facts)
    rows: list[Command] = []
    if family in ("debian", ""):
        text = f"sudo apt-get install nvidia-driver-{branch}" if branch else "sudo ubuntu-drivers install"
        rows.append(Command(text, "Debian/Ubuntu: install the NVIDIA driver, then reboot", "root"))
    if family in ("rhel", ""):
        text = f"sudo dnf module install nvidia-driver:{branch}-dkms" if branch else "sudo dnf install nvidia-driver"
        rows.append(Command(text, "RHEL/Fedora: install the NVIDIA driver, then reboot", "root"))
    if family == "suse":
        rows.append(
            Command("sudo zypper install nvidia-compute-G06", "SUSE: install the NVIDIA driver, then reboot", "root")
        )
    return tuple(rows)


#: how to upgrade the driver, by distribution family ({branch}: the driver branch to install)
UPGRADE_HOWTO = (
    "Debian/Ubuntu: `sudo ubuntu-drivers install` or `sudo apt-get install nvidia-driver-{branch}`; "
    "RHEL/Fedora: `sudo dnf module install nvidia-driver:{branch}-dkms` (or the distro's akmod); "
    "then reboot and run `gpudoctor check cuda` again. A new CUDA *toolkit* alone does not "
    "replace the driver."
)
