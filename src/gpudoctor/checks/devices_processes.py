"""Check ``devices.processes``: GPU memory held by processes we cannot see.

NVML lists the processes holding memory on each GPU
(``nvmlDeviceGetComputeRunningProcesses`` / ``..GraphicsRunningProcesses``);
the collector looks each PID up in ``/proc`` of this PID namespace:

- ``warn``: memory held by PIDs not visible here (another container, or a
  process that died while the driver still holds its memory) — names the
  PIDs and the memory;
- ``info``: memory held by processes visible here (listed, with commands);
- ``ok``: no process holds GPU memory.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks._devices import bullets, gpus_with_health, label
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Check, Command, Finding, Status


def _mib(value: int | Unavailable) -> str:
    return "unknown memory" if isinstance(value, Unavailable) else f"{value} MiB"


def evaluate(facts: Facts) -> list[Finding]:
    foreign: list[str] = []
    ours: list[str] = []
    pids: list[int] = []
    evidence: dict[str, Any] = {}
    unknown = []
    for dev, h in gpus_with_health(facts):
        if isinstance(h.processes, Unavailable):
            unknown.append(f"{label(dev)}: {h.processes.reason}")
            evidence[f"gpu{dev.index}"] = f"unavailable: {h.processes.reason}"
            continue
        evidence[f"gpu{dev.index}"] = [
            f"pid {p.pid} {p.kind} {_mib(p.used_memory_mib)}"
            + (f" ({p.command})" if p.command else "")
            + ("" if p.visible is True else " not visible here")
            for p in h.processes
        ]
        for p in h.processes:
            line = f"{label(dev)}: PID {p.pid} holds {_mib(p.used_memory_mib)} ({p.kind})"
            if p.visible is False:
                foreign.append(line)
                pids.append(p.pid)
            else:
                ours.append(line + (f", `{p.command}`" if p.command else ""))
    if foreign:
        plist = " ".join(str(p) for p in sorted(set(pids)))
        return [
            CHECK.finding(
                Status.WARN,
                f"GPU memory held by process(es) not visible here: PID {plist}",
                "These processes hold GPU memory but do not exist in this PID namespace — another container on the "
                "same GPU, or a process that died while the driver still holds its memory:\n\n"
                + bullets(foreign)
                + "\n\nA job started here gets only the memory left over. On the host, `nvidia-smi` shows who they "
                f"are (`ps -o pid,user,etime,cmd -p {plist.replace(' ', ',')}`); stop them, or reset the GPU when "
                "it is idle (`sudo nvidia-smi -r -i <index>`) if they are gone.",
                evidence=evidence,
                commands=(
                    Command(f"ps -o pid,user,etime,cmd -p {plist.replace(' ', ',')}", "on the host: who they are"),
                ),
            )
        ]
    if ours:
        return [
            CHECK.finding(Status.INFO, f"{len(ours)} process(es) hold GPU memory", bullets(ours), evidence=evidence)
        ]
    if unknown and len(unknown) == len(evidence):
        return [
            CHECK.finding(Status.SKIP, "NVML does not list GPU processes here", bullets(unknown), evidence=evidence)
        ]
    return [CHECK.finding(Status.OK, "no process holds GPU memory", evidence=evidence)]


CHECK = Check(
    id="devices.processes",
    title="GPU memory held by processes",
    needs=("nvidia",),
    evaluate=evaluate,
)
