"""Check ``torch.extensions``: will CUDA extensions built here run on the GPUs here?

``torch.utils.cpp_extension`` (every ``pip install`` that compiles CUDA code:
flash-attn, apex, xformers, mmcv, custom ops) compiles for the architectures in
``TORCH_CUDA_ARCH_LIST`` when it is set, else for the GPUs it sees
(``_get_cuda_arch_flags``). An entry ``X.Y`` yields ``sm_XY`` SASS, which runs
on GPUs of major X with minor >= Y; ``X.Y+PTX`` also embeds PTX, which the
driver JIT-compiles for any GPU of capability >= X.Y (CUDA C++ Programming
Guide, "Binary Compatibility" and "PTX Compatibility").

- ``TORCH_CUDA_ARCH_LIST`` set in the target and a GPU here that no entry
  covers -> ``fail``: the built extension fails on it with "no kernel image is
  available for execution on the device"; the remedy names the GPU's
  capability and the list that covers every GPU;
- set and covering every GPU -> ``ok``; unset, or a named entry (``Ampere``)
  gpudoctor does not expand -> ``skip``.
"""

from __future__ import annotations

import re

from gpudoctor.checks._gpu import gpu_devices, per_target
from gpudoctor.facts import Facts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced

_ENTRY = re.compile(r"^(\d+)\.(\d+)(\+PTX)?$", re.IGNORECASE)


def parse_arch_list(value: str) -> list[tuple[int, int, bool]] | None:
    """``"7.5;8.0 8.6+PTX"`` -> [(7, 5, False), (8, 0, False), (8, 6, True)]; None when an entry is not numeric."""
    out = []
    for raw in re.split(r"[;\s]+", value.strip()):
        if not raw:
            continue
        m = _ENTRY.match(raw)
        if not m:
            return None
        out.append((int(m.group(1)), int(m.group(2)), bool(m.group(3))))
    return out


def covers(entries: list[tuple[int, int, bool]], cc: tuple[int, int]) -> bool:
    """Does a build for ``entries`` run on a GPU of capability ``cc``?"""
    return any((ma == cc[0] and mi <= cc[1]) or (ptx and (ma, mi) <= cc) for ma, mi, ptx in entries)


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``torch.extensions`` finding for one target (pure)."""
    value = probe.env.get("TORCH_CUDA_ARCH_LIST")
    if value is None:
        return CHECK.finding(
            Status.SKIP, "TORCH_CUDA_ARCH_LIST is not set: extensions build for the GPUs they see", target=t.label
        )
    entries = parse_arch_list(value)
    if entries is None or not entries:
        return CHECK.finding(
            Status.SKIP, f"TORCH_CUDA_ARCH_LIST={value!r} has entries gpudoctor does not expand", target=t.label
        )
    gpus = [g for g in gpu_devices(facts, probe) if g.cc]
    if not gpus:
        return CHECK.finding(Status.SKIP, "no GPU with a known compute capability here", target=t.label)
    evidence = {"TORCH_CUDA_ARCH_LIST": value, "gpus": [f"{g.index}: {g.name} ({g.cc})" for g in gpus]}
    missed = []
    for g in gpus:
        major, _, minor = (g.cc or "0.0").partition(".")
        if not covers(entries, (int(major), int(minor or 0))):
            missed.append(g)
    if missed:
        need = sorted({g.cc or "" for g in missed})
        fixed = ";".join(dict.fromkeys([*(f"{a}.{b}{'+PTX' if p else ''}" for a, b, p in entries), *need]))
        names = ", ".join(f"{g.name} (compute capability {g.cc})" for g in missed)
        commands = (
            Command(f'export TORCH_CUDA_ARCH_LIST="{fixed}"', "build for these GPUs too"),
            Command(
                f"{probe.executable} -m pip install --no-build-isolation --no-cache-dir --force-reinstall "
                "<the extension>",
                "rebuild the extension with it",
                "changes",
            ),
        )
        return CHECK.finding(
            Status.FAIL,
            f"TORCH_CUDA_ARCH_LIST={value} builds CUDA extensions that cannot run on {names}",
            f"`torch.utils.cpp_extension` compiles for exactly the architectures in `TORCH_CUDA_ARCH_LIST` "
            f"(`{value}`, set in `{probe.executable}`'s environment). None of them covers {names}: SASS `sm_XY` "
            f"runs only on GPUs of the same major with a minor >= Y, PTX (`+PTX`) only on newer GPUs. The built "
            f"extension fails there with `no kernel image is available for execution on the device`.\n\n"
            f"Add the capability and rebuild the extension (pip caches built wheels: `--no-cache-dir`):\n\n"
            + fenced(*commands),
            evidence=evidence,
            target=t.label,
            commands=commands,
        )
    return CHECK.finding(
        Status.OK,
        f"TORCH_CUDA_ARCH_LIST={value} covers every GPU here ({', '.join(g.cc or '' for g in gpus)})",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="torch.extensions",
    title="CUDA extensions built with TORCH_CUDA_ARCH_LIST run on the GPUs present",
    needs=("targets", "nvidia"),
    evaluate=per_target("torch.extensions", assess),
)
