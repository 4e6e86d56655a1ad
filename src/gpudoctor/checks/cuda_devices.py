"""Check ``cuda.devices``: which GPUs does each target see, in which order?

Sources: CUDA Programming Guide, "CUDA Environment Variables":
``CUDA_DEVICE_ORDER`` is ``FASTEST_FIRST`` by default (CUDA ordinals sorted
by estimated speed) or ``PCI_BUS_ID`` (the order nvidia-smi/NVML use);
``CUDA_VISIBLE_DEVICES`` takes indices (in CUDA_DEVICE_ORDER order), ``GPU-``
UUID prefixes or ``MIG-`` UUIDs; an invalid entry hides itself and every entry
after it; an empty value hides every GPU. NVIDIA MIG User Guide: a GPU in MIG
mode is used through its MIG devices (``MIG-<uuid>``, see ``nvidia-smi -L``).
NVIDIA Container Toolkit: ``NVIDIA_VISIBLE_DEVICES=void|none`` injects no GPU.

- every GPU hidden (empty ``CUDA_VISIBLE_DEVICES``, ``NVIDIA_VISIBLE_DEVICES=none``,
  an invalid first entry) -> ``fail``;
- an invalid later entry, a MIG-mode GPU named by GPU index/UUID -> ``warn``;
- CUDA order differs from nvidia-smi order (heterogeneous GPUs, CUDA_DEVICE_ORDER
  unset) -> ``warn`` with the mapping table and ``export CUDA_DEVICE_ORDER=PCI_BUS_ID``;
- a misspelled selection variable (``CUDA_VISABLE_DEVICES``, ``CUDA_VISIBLE``,
  ``CUDA_VISIBLE_DEVICE``) while the real one is unset -> ``warn``: CUDA reads only the exact name, so
  every GPU stays visible (cBio/cbio-cluster #1, open-mmlab/mmagic #1580);
- otherwise ``ok``; no GPU -> ``skip``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from gpudoctor.checks._common import in_container
from gpudoctor.checks._gpu import GpuDevice, gpu_devices, has_nvidia_gpu, per_target
from gpudoctor.checks._platform import (
    REQUEST,
    REQUEST_COMMANDS,
    injection_commands,
    injection_remedy,
    platform_of,
    scheduler_of,
)
from gpudoctor.checks._visibility import assess as visibility_finding
from gpudoctor.checks._visibility import gpus_seen_by, machine_gpus
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.facts.targets import CudaDevice, ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.visibility import parse_visible
from gpudoctor.words import models, plural

_BUS_RE = re.compile(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)$")
FIX_ORDER = "export CUDA_DEVICE_ORDER=PCI_BUS_ID"


def bus_key(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """``00000000:01:00.0`` and ``0000:01:00.0`` -> (0, 1, 0, 0); None if unparsable."""
    m = _BUS_RE.search(bus_id or "")
    return tuple(int(g, 16) for g in m.groups()) if m else None  # type: ignore[return-value]


def match_nvml(dev: CudaDevice, nvml: list[GpuDevice]) -> GpuDevice | None:
    """The NVML device that is CUDA device ``dev`` (by UUID, else PCI bus id)."""
    return nvml_matcher(nvml)(dev)


def nvml_matcher(nvml: list[GpuDevice]) -> Callable[[CudaDevice], GpuDevice | None]:
    """:func:`match_nvml` for many devices: the NVML list is indexed once (by UUID and by bus id),
    so matching 10,000 CUDA devices is linear, not 10,000 x 10,000 comparisons."""
    by_uuid: dict[str, GpuDevice] = {}
    by_bus: dict[tuple[int, int, int, int], GpuDevice] = {}
    for g in nvml:
        if g.uuid:
            by_uuid.setdefault(g.uuid.lower(), g)
        key = bus_key(g.pci_bus_id)
        if key is not None:
            by_bus.setdefault(key, g)

    def match(dev: CudaDevice) -> GpuDevice | None:
        if dev.uuid and dev.uuid.lower() in by_uuid:
            return by_uuid[dev.uuid.lower()]
        key = bus_key(dev.pci_bus_id)
        return by_bus.get(key) if key is not None else None

    return match


def _nvml(facts: Facts) -> list[GpuDevice]:
    nv = facts.of(NvidiaDriverFacts)
    return gpu_devices(facts) if not isinstance(nv, Unavailable) and nv.devices else []


def visibility(facts: Facts, probe: ProbeFacts) -> tuple[Status, str, str, tuple[Command, ...]] | None:
    """A visibility fault of this target's environment: (status, summary, explanation, commands), or None."""
    env = probe.env
    nvml = _nvml(facts)
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    # only the NVIDIA container runtime reads it; on a host it changes nothing
    if in_container(facts) and nvd is not None and nvd.strip().lower() in ("void", "none", ""):
        return (
            Status.FAIL,
            f"NVIDIA_VISIBLE_DEVICES={nvd!r} tells the NVIDIA container runtime to inject no GPU",
            "The container was started with no GPU. " + injection_remedy(facts, gpu_requested=False),
            injection_commands(facts),
        )
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        seen = gpus_seen_by(facts, probe.torch.device_count if probe.torch.import_ok else None)
        slurm = visibility_finding(facts, dict(env), probe.torch.version, None, seen)
        return (slurm.status, slurm.summary, slurm.explanation, slurm.commands) if slurm.status is Status.FAIL else None
    parsed = parse_visible(cvd)
    entries = [e.text for e in parsed.entries]
    if not parsed.entries or parsed.entries[0].form == "hide":
        sched = scheduler_of(platform_of(facts))
        if sched in REQUEST:  # set for the job: unsetting it would take GPUs the job was not given
            who, how = REQUEST[sched]
            return (
                Status.FAIL,
                f"{who} set CUDA_VISIBLE_DEVICES={cvd!r}: this job was given no GPU",
                f"With `CUDA_VISIBLE_DEVICES={cvd}` CUDA enumerates no device. {how}",
                REQUEST_COMMANDS[sched],
            )
        return (
            Status.FAIL,
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA",
            f"With `CUDA_VISIBLE_DEVICES={cvd}` CUDA enumerates no device, so `torch.cuda.is_available()` is "
            f"False although the GPU and driver are fine. Unset it (`unset CUDA_VISIBLE_DEVICES`) or list the "
            f"GPUs to use, e.g. `export CUDA_VISIBLE_DEVICES=0`.",
            (Command("unset CUDA_VISIBLE_DEVICES", "make every GPU visible again"),),
        )
    gpus = machine_gpus(facts)
    if nvml:
        first_bad = parsed.first_invalid(gpus)
        if first_bad is not None:
            first = first_bad
            hidden = entries[first:]
            status = Status.FAIL if first == 0 else Status.WARN
            ids = ", ".join(f"{g.index} ({g.uuid})" for g in nvml)
            mig_note = (
                " No GPU here is in MIG mode, so a `MIG-` device does not exist: use the GPU's index or `GPU-` "
                "UUID, or enable MIG and create the instance first (`sudo nvidia-smi -i N -mig 1`, then "
                "`nvidia-smi mig -cgi ... -C`)."
                if entries[first].startswith("MIG-")
                else ""
            )
            what = (
                f"entry {entries[first]!r} names a MIG device, but no GPU here is in MIG mode"
                if mig_note
                else f"entry {entries[first]!r} matches no GPU"
            )
            return (
                status,
                f"CUDA_VISIBLE_DEVICES={cvd!r}: {what}, so "
                f"{'CUDA sees no GPU' if first == 0 else ', '.join(hidden) + (' are' if len(hidden) > 1 else ' is') + ' hidden'}",
                f"CUDA stops at the first invalid entry of `CUDA_VISIBLE_DEVICES`: it and everything after it "
                f"are ignored. This machine's GPUs are {ids}. Use valid indices or `GPU-` UUIDs "
                f"(`nvidia-smi -L`).{mig_note}",
                (Command("nvidia-smi -L", "the GPUs (and MIG devices) with their indices and UUIDs"),),
            )
        mig = [g for g in nvml if g.mig]
        named = [e for e in entries if not e.startswith("MIG-")]
        migs = [e for e in entries if e.startswith("MIG-")]
        if len(migs) > 1:
            return (
                Status.WARN,
                f"CUDA_VISIBLE_DEVICES lists {len(migs)} MIG devices, but a CUDA process uses only one of them",
                f"CUDA enumerates a single MIG device per process (NVIDIA MIG User Guide, CUDA_VISIBLE_DEVICES), so "
                f"`torch.cuda.device_count()` is 1: only one of the listed devices is used; multi-GPU training across MIG "
                f"devices is not possible. Start one process per MIG device, each with its own "
                f"`CUDA_VISIBLE_DEVICES=MIG-<uuid>` (e.g. `CUDA_VISIBLE_DEVICES={migs[0]} python train.py`).",
                (Command(f"CUDA_VISIBLE_DEVICES={migs[0]} python train.py", "one process on one MIG device"),),
            )
        if mig and named:
            return (
                Status.WARN,
                f"CUDA_VISIBLE_DEVICES={cvd!r} names a GPU in MIG mode by GPU index/UUID",
                f"{', '.join(f'GPU {g.index} ({g.name})' for g in mig)} {'is' if len(mig) == 1 else 'are'} in MIG "
                f"mode: CUDA uses its MIG devices, which must be selected by `MIG-<uuid>` from `nvidia-smi -L`, "
                f"e.g. `export CUDA_VISIBLE_DEVICES=MIG-...`.",
                (Command("nvidia-smi -L", "the GPUs (and MIG devices) with their indices and UUIDs"),),
            )
    return None


#: the variables that select or order GPUs for CUDA and the NVIDIA container runtime
GPU_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")


def misspelled_vars(env: dict[str, str]) -> list[tuple[str, str]]:
    """(variable set, the name it was meant to be) for near-misses of :data:`GPU_VARS` whose real name is
    unset. Only ``CUDA_``/``NVIDIA_`` names are compared, so other vendors' ``HIP_VISIBLE_DEVICES`` and
    the like never match."""
    out = []
    for key in sorted(env):
        if key in GPU_VARS or not key.startswith(("CUDA_", "NVIDIA_")):
            continue
        if any(key.startswith(v + "_") for v in GPU_VARS):  # a saved copy (CUDA_VISIBLE_DEVICES_ORIG), not a typo
            continue
        close = difflib.get_close_matches(key, GPU_VARS, n=1, cutoff=0.85)
        meant = close[0] if close else ("CUDA_VISIBLE_DEVICES" if key.startswith("CUDA_VISIBLE") else None)
        if meant is not None and meant not in env:
            out.append((key, meant))
    return out


def _table(rows: list[tuple[int, GpuDevice | None, CudaDevice]]) -> str:
    lines = ["| torch `cuda:N` | nvidia-smi index | GPU | PCI bus |", "|---|---|---|---|"]
    for i, g, d in rows:
        lines.append(f"| {i} | {g.index if g else '?'} | {d.name} | {g.pci_bus_id if g else d.pci_bus_id or '?'} |")
    return "\n".join(lines)


def _scheduler_view_fails(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> bool:
    """Whether ``platform.visibility`` fails for this target too (the same hidden GPUs, judged with
    the scheduler that set the variable)."""
    seen = gpus_seen_by(facts, probe.torch.device_count if probe.torch.import_ok else None)
    return visibility_finding(facts, dict(probe.env), probe.torch.version, t.label, seen).status is Status.FAIL


def _picked_other_gpus(
    env: dict[str, str], rows: list[tuple[int, GpuDevice | None, CudaDevice]], order: str
) -> tuple[str, str] | None:
    """(summary, explanation) when ``CUDA_VISIBLE_DEVICES`` lists indices and CUDA, numbering GPUs
    fastest first (``CUDA_DEVICE_ORDER`` unset), selected other GPUs than nvidia-smi's indices name;
    None otherwise (CUDA Programming Guide, "CUDA Environment Variables")."""
    cvd = env.get("CUDA_VISIBLE_DEVICES", "")
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    if not entries or not all(e.isdigit() for e in entries) or order == "PCI_BUS_ID":
        return None
    got = [(int(e), g) for e, (_i, g, _d) in zip(entries, rows, strict=False) if g is not None]
    wrong = [(want, g) for want, g in got if g.index != want]
    if not wrong:
        return None
    pairs = "; ".join(f"{want} selects nvidia-smi GPU {g.index} ({g.name}), not GPU {want}" for want, g in wrong)
    return (
        f"CUDA_VISIBLE_DEVICES={cvd!r} selects other GPUs than nvidia-smi's indices: {pairs}",
        f"`CUDA_DEVICE_ORDER` is {('`' + order + '`') if order else 'unset'}, so the indices in "
        f"`CUDA_VISIBLE_DEVICES` count GPUs fastest first, while nvidia-smi and NVML count them by PCI bus. "
        f"The job runs on other cards than the ones picked from `nvidia-smi` (and may collide with another "
        f"job):\n\n{_table(rows)}\n\nSet the order before the process starts, in the shell profile or job "
        f"environment:\n\n```\n{FIX_ORDER}\n```\n\nor select GPUs by UUID (`nvidia-smi -L`).",
    )


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.devices`` finding for one target (pure)."""
    if not has_nvidia_gpu(facts):
        return CHECK.finding(Status.SKIP, "no NVIDIA GPU or driver here", target=t.label)
    env = probe.env
    evidence: dict[str, Any] = {
        k: env[k] for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES") if k in env
    }
    nvml = _nvml(facts)
    evidence["nvml"] = [f"{g.index}: {g.name} {g.pci_bus_id} {g.uuid}" + (" MIG" if g.mig else "") for g in nvml]
    fault = visibility(facts, probe)
    if fault:
        status, summary, explanation, commands = fault
        # the same cause, told with the scheduler's request
        caused = ("platform.visibility",) if status is Status.FAIL and _scheduler_view_fails(facts, t, probe) else ()
        return CHECK.finding(
            status, summary, explanation, evidence=evidence, target=t.label, caused_by=caused, commands=commands
        )
    typos = misspelled_vars(dict(env))
    if typos:
        key, meant = typos[0]
        evidence["misspelled"] = [f"{k}={env[k]} (meant {m})" for k, m in typos]
        return CHECK.finding(
            Status.WARN,
            f"{key}={env[key]} is set, but CUDA reads {meant}, which is unset: the selection has no effect",
            f"`{key}` is not a variable CUDA or the NVIDIA container runtime knows; only the exact name `{meant}` "
            f"is read. With it unset "
            + (
                f"every GPU ({plural(len(nvml), 'GPU')}) stays visible and the job may land on, or spread over, GPUs "
                f"other people use."
                if meant != "CUDA_DEVICE_ORDER"
                else "CUDA keeps numbering GPUs fastest first."
            )
            + f"\n\nRename it where it is set (job script, shell profile, scheduler prolog, documentation):\n\n"
            f"```\nexport {meant}={env[key]}\nunset {key}\n```",
            evidence=evidence,
            target=t.label,
            commands=(
                Command(f"export {meant}={env[key]}; unset {key}", f"set the variable CUDA reads instead of {key}"),
            ),
        )
    devices = probe.torch.devices
    evidence["cuda"] = [f"cuda:{d.index}: {d.name} {d.pci_bus_id or ''} {d.uuid or ''}".strip() for d in devices]
    order = env.get("CUDA_DEVICE_ORDER", "")
    if devices and nvml:
        match = nvml_matcher(nvml)
        rows = [(d.index, match(d), d) for d in devices]
        swapped = [(i, g) for i, g, _d in rows if g is not None and g.index != i]
        if "CUDA_VISIBLE_DEVICES" not in env and swapped:
            return CHECK.finding(
                Status.WARN,
                f"torch's cuda:N indices differ from nvidia-smi's ({', '.join(f'cuda:{i} = nvidia-smi {g.index}' for i, g in swapped)})",
                f"`CUDA_DEVICE_ORDER` is {('`' + order + '`') if order else 'unset'}, so CUDA numbers GPUs fastest "
                f"first while nvidia-smi and NVML number them by PCI bus. Scripts that take an index from nvidia-smi "
                f"and use it as `cuda:<index>` or in `CUDA_VISIBLE_DEVICES` land on another GPU:\n\n{_table(rows)}\n\n"
                f"Make CUDA use the PCI bus order (before the process initialises CUDA), in the shell profile or "
                f"job environment:\n\n```\n{FIX_ORDER}\n```\n\nor select GPUs by UUID in `CUDA_VISIBLE_DEVICES`.",
                evidence=evidence,
                target=t.label,
            )
        picked = _picked_other_gpus(env, rows, order)
        if picked is not None:
            summary, explanation = picked
            return CHECK.finding(Status.WARN, summary, explanation, evidence=evidence, target=t.label)
        return CHECK.finding(
            Status.OK,
            f"{len(devices)} CUDA device{'s' if len(devices) != 1 else ''} "
            f"({models(d.name for d in devices)}); indices match nvidia-smi"
            + (" within CUDA_VISIBLE_DEVICES" if "CUDA_VISIBLE_DEVICES" in env else ""),
            evidence=evidence,
            target=t.label,
        )
    distinct = {(g.name, g.cc) for g in nvml}
    if len(nvml) > 1 and len(distinct) > 1 and order != "PCI_BUS_ID":
        return CHECK.finding(
            Status.INFO,
            f"{len(nvml)} different GPU models and CUDA_DEVICE_ORDER unset: CUDA indices may not match nvidia-smi's",
            f"CUDA orders GPUs fastest first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`; with mixed models `cuda:0` may be "
            f"a different card than nvidia-smi's GPU 0.\n\n```\n{FIX_ORDER}\n```",
            evidence=evidence,
            target=t.label,
        )
    return CHECK.finding(
        Status.OK,
        f"{plural(len(nvml) or len(devices), 'GPU')} visible; no index or visibility problem found",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="cuda.devices",
    title="GPU visibility and order: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES, MIG",
    needs=("targets", "nvidia", "gpu", "os", "platform"),
    evaluate=per_target("cuda.devices", assess),
)
