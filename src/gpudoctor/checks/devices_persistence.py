"""Check ``devices.persistence``: persistence mode and compute mode (NVML).

- ``info``: persistence mode off on a data-centre GPU (A100, H100, L40S, Tesla
  ...): the driver tears the GPU down whenever no client holds it, so every job
  start pays the initialisation again and ECC/clock settings can reset
  (NVIDIA "Driver Persistence" documentation) — with the command;
- ``warn``: compute mode ``prohibited`` (no CUDA context can be created);
- ``warn``: compute mode ``exclusive_process`` (or ``exclusive_thread``) on a GPU a compute process
  already holds: a second process gets "all CUDA-capable devices are busy or unavailable"
  (``cudaErrorDevicesUnavailable``; NVIDIA nvidia-smi manual, ``--compute-mode``);
- ``ok`` otherwise (GeForce/RTX boards usually run without it: ok).
"""

from __future__ import annotations

import re

from gpudoctor.checks._devices import bullets, ev, gpus_with_health, head, label
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.words import plural

DOC = "https://docs.nvidia.com/deploy/driver-persistence/index.html"
#: Marketing names of data-centre GPUs (NVIDIA product names; GeForce/RTX/Quadro excluded).
_DATACENTRE = re.compile(
    r"\b(Tesla|[ABH]\d{2,3}\b|[ABH]\d{2,3}[A-Z]|GH200|GB200|L4\b|L40S?|T4\b|V100|P100|P40|"
    r"A10G?|A16|A2\b|A30|A40)",
    re.IGNORECASE,
)


def is_datacentre(name: str) -> bool:
    """True for data-centre GPU names (``NVIDIA H100 80GB HBM3``, ``Tesla V100-SXM2-16GB``)."""
    return bool(_DATACENTRE.search(name)) and not re.search(r"GeForce|RTX|Quadro|TITAN", name, re.IGNORECASE)


def evaluate(facts: Facts) -> list[Finding]:
    off: list[str] = []
    prohibited: list[str] = []
    taken: list[tuple[int, str]] = []
    evidence = {}
    for dev, h in gpus_with_health(facts):
        evidence[f"gpu{dev.index}"] = {
            "name": dev.name,
            "persistence_mode": ev(h.persistence_mode),
            "compute_mode": ev(h.compute_mode),
        }
        if h.compute_mode == "prohibited":
            prohibited.append(
                f"{label(dev)}: compute mode **prohibited** — `sudo nvidia-smi -c DEFAULT -i {dev.index}`"
            )
        if h.persistence_mode is False and is_datacentre(dev.name):
            off.append(label(dev))
        holders = [p for p in h.processes if p.kind == "compute"] if not isinstance(h.processes, Unavailable) else []
        if h.compute_mode in ("exclusive_process", "exclusive_thread") and holders:
            pids = ", ".join(f"PID {p.pid}" + (f" ({p.command})" if p.command else "") for p in holders)
            taken.append((dev.index, f"{label(dev)}: compute mode **{h.compute_mode}**, already held by {pids}"))
    if prohibited:
        idx = next((d.index for d, h in gpus_with_health(facts) if h.compute_mode == "prohibited"), 0)
        return [
            CHECK.finding(
                Status.WARN,
                "compute mode prohibited: no CUDA program can use " + head(prohibited[0]),
                "In compute mode *prohibited* the GPU accepts no CUDA context:\n\n" + bullets(prohibited),
                evidence=evidence,
                commands=(Command(f"sudo nvidia-smi -c DEFAULT -i {idx}", "let CUDA programs use the GPU", "root"),),
            )
        ]
    if taken:
        idx = taken[0][0]
        return [
            CHECK.finding(
                Status.WARN,
                "exclusive compute mode: a GPU another process holds refuses every other CUDA process ("
                + head(taken[0][1])
                + ")",
                "In an exclusive compute mode a GPU accepts one CUDA context at a time, so a second process fails "
                "with `all CUDA-capable devices are busy or unavailable` (`CUDA-capable device(s) is/are busy or "
                "unavailable`) although `nvidia-smi` lists the GPU:\n\n"
                + bullets([t for _, t in taken])
                + "\n\nUse another GPU (`CUDA_VISIBLE_DEVICES`, or the one the scheduler allocated), wait for or "
                "stop the process that holds it, or, where the machine is yours (clusters set this mode on purpose), "
                f"allow sharing: `sudo nvidia-smi -c DEFAULT -i {idx}`.",
                evidence=evidence,
                commands=(
                    Command(
                        f"nvidia-smi -i {idx} --query-compute-apps=pid,used_memory --format=csv", "who holds it", "safe"
                    ),
                    Command(f"sudo nvidia-smi -c DEFAULT -i {idx}", "let several processes share the GPU", "root"),
                ),
            )
        ]
    if off:
        return [
            CHECK.finding(
                Status.INFO,
                f"persistence mode is off on {plural(len(off), 'data-centre GPU')}",
                "With persistence off the driver deinitialises the GPU when the last client exits, so each job "
                "start waits for the GPU to be brought up again, and settings (application clocks, ECC "
                "counters' volatile state) reset:\n\n" + bullets(off) + "\n\nEnable it at boot with the "
                "persistence daemon: `sudo systemctl enable --now nvidia-persistenced`, or for now "
                "`sudo nvidia-smi -pm 1`.",
                evidence=evidence,
                doc_url=DOC,
            )
        ]
    return [CHECK.finding(Status.OK, "persistence and compute modes are fine", evidence=evidence)]


CHECK = Check(
    id="devices.persistence",
    title="GPU persistence mode and compute mode",
    needs=("nvidia",),
    evaluate=evaluate,
)
