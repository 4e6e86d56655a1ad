"""Check ``devices.holders``: who holds the GPU (``/proc/*/fd`` -> ``/dev/nvidia*``) compared with NVML.

A process keeps a GPU's memory until every descriptor on ``/dev/nvidia*`` is closed, also the
copies forked children inherited: when a training job is killed, its PyTorch DataLoader workers
(forked, same command line) are re-parented to init and keep the memory, often without NVML
naming them. This check:

- ``warn``: orphaned workers (two or more with the main process's command line, re-parented to an
  init, none with a CUDA context NVML lists) hold the GPU -> named with their command line, age and
  ``kill`` command; a lone process under init (``nohup``, a service) is a running job;
- ``warn``: a GPU has memory in use (``nvmlDeviceGetMemoryInfo``) that no process NVML lists
  accounts for -> the holders seen here are named, else it is said that they live in another
  container or PID namespace, with the commands to find them on the host;
- ``info``: processes hold the GPU, all accounted for (other containers' named);
- ``ok``: nothing holds it; ``skip``: ``/proc`` not readable.
"""

from __future__ import annotations

from typing import Any

from gpudoctor import hostpkg
from gpudoctor.checks import SkipCheck
from gpudoctor.checks._devices import bullets
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.gpu_holders import GpuHolder, GpuHoldersFacts
from gpudoctor.facts.nvidia import GpuHealth, NvidiaDriverFacts
from gpudoctor.model import Check, Command, Finding, Status

#: PID 1 programs that adopt orphans (init systems and container inits)
INITS = frozenset(
    {
        "systemd",
        "init",
        "tini",
        "dumb-init",
        "docker-init",
        "catatonit",
        "s6-svscan",
        "runit",
        "containerd-shim",
        "conmon",
    }
)
#: programs that hold the GPU by design
DAEMONS = frozenset(
    {
        "nvidia-persistenced",
        "nv-hostengine",
        "nvidia-fabricmanager",
        "nvidia-fabricmanag",
        "dcgm-exporter",
        "Xorg",
        "Xwayland",
        "gnome-shell",
        "kwin_wayland",
        "nvidia-smi",
    }
)
#: memory in use with no process that is still normal: the driver's own reservation, MiB
BASELINE_MIB = 1024


def _age(s: float | None) -> str:
    if s is None:
        return "age unknown"
    if s < 3600:
        return f"{int(s // 60)} min"
    if s < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def _line(h: GpuHolder) -> str:
    where = f", container {h.container}" if h.container else ""
    gpus = ", ".join(d.replace("/dev/", "") for d in h.devices)
    return (
        f"PID {h.pid} `{h.cmdline or h.comm}` (parent {h.ppid} {h.parent_comm or '?'}, running {_age(h.age_s)}"
        f"{where}) holds {gpus}"
    )


def orphans(holders: list[GpuHolder], nvml_pids: set[int]) -> list[GpuHolder]:
    """Forked children of a job whose main process is gone: two or more holders with the same command
    line, all re-parented to an init, none the parent of another holder and none with a CUDA context
    NVML lists. A lone process under init (a ``nohup`` job, a service) is a running job, not an orphan."""
    users = [h for h in holders if h.comm not in DAEMONS]
    pids = {h.pid for h in users}
    groups: dict[str, list[GpuHolder]] = {}
    for h in users:
        if h.ppid == 1 and h.parent_comm in INITS:
            groups.setdefault(h.cmdline or h.comm, []).append(h)
    out: list[GpuHolder] = []
    for cmd, group in groups.items():
        if len(group) < 2:
            continue
        if any((u.cmdline or u.comm) == cmd and u.ppid in pids for u in users):
            continue  # the main process is alive: its workers are its children
        if any(h.pid in nvml_pids for h in group):
            continue
        out.extend(group)
    return out


def evaluate(facts: Facts) -> list[Finding]:
    hf = facts.of(GpuHoldersFacts)
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(hf, Unavailable) or isinstance(hf.readable, Unavailable):
        why = hf.reason if isinstance(hf, Unavailable) else str(getattr(hf.readable, "reason", ""))
        raise SkipCheck(f"the processes could not be scanned: {why}")
    holders = list(hf.holders)
    users = [h for h in holders if h.comm not in DAEMONS]
    evidence: dict[str, Any] = {
        "holders": [_line(h).replace("`", "") for h in holders],
        "scanned": hf.scanned,
        "unreadable": hf.unreadable,
    }
    nvml_pids: set[int] = set()
    unaccounted: list[str] = []
    if not isinstance(nv, Unavailable):
        for dev in nv.devices:
            h = dev.health
            procs = h.processes if isinstance(h, GpuHealth) and not isinstance(h.processes, Unavailable) else None
            if procs is not None:
                nvml_pids |= {p.pid for p in procs}
            used = dev.memory_used_mib
            total = dev.memory_total_mib
            if procs is None or isinstance(used, Unavailable):
                continue
            listed = sum(p.used_memory_mib for p in procs if isinstance(p.used_memory_mib, int))
            floor = max(BASELINE_MIB, int(total * 0.02) if isinstance(total, int) else 0)
            if not procs and used > floor:
                unaccounted.append(f"GPU {dev.index} ({dev.name}): {used} MiB in use, NVML lists no process")
            elif procs and used - listed > max(floor, used // 2):
                unaccounted.append(
                    f"GPU {dev.index} ({dev.name}): {used} MiB in use, the {len(procs)} process(es) NVML lists "
                    f"account for {listed} MiB"
                )
    evidence["unaccounted"] = unaccounted
    lost = orphans(users, nvml_pids)
    place = hostpkg.place(facts)
    if lost:
        pids = " ".join(str(h.pid) for h in lost)
        what = (
            f"{len(lost)} processes with the same command line, re-parented to {lost[0].parent_comm}: the "
            "DataLoader workers (or other forked children) of a job whose main process is gone. They inherited "
            "its descriptors on the GPU and keep its memory."
        )
        extra = ("\n\nMemory NVML cannot attribute:\n\n" + bullets(unaccounted)) if unaccounted else ""
        return [
            CHECK.finding(
                Status.WARN,
                f"orphaned process(es) hold the GPU: PID {pids} (leftover DataLoader workers)",
                f"{what}\n\n{bullets([_line(h) for h in lost])}{extra}\n\nEnd them (they are this "
                f"{'container' if place.container else 'machine'}'s, so you can):\n\n```\nkill {pids}\n"
                f"sleep 5; kill -9 {pids} 2>/dev/null\nnvidia-smi --query-gpu=index,memory.used --format=csv\n```\n\n"
                "To stop it recurring, let the job's launcher kill its process group (`torchrun`, or "
                "`kill -- -<pgid>`), and set `persistent_workers=False` where workers outlive a crash.",
                evidence=evidence,
                commands=(
                    Command(f"kill {pids}", "end the orphaned workers", "changes"),
                    Command("nvidia-smi --query-gpu=index,memory.used --format=csv", "the memory they freed"),
                ),
            )
        ]
    if unaccounted:
        if users:
            body = (
                "Processes here hold the GPU, but NVML does not list them against the memory (a process in "
                "another PID namespace is listed under its host PID, or not at all):\n\n"
                + bullets([_line(h) for h in users])
                + f"\n\nIf they are not yours to keep, end them: `kill {' '.join(str(h.pid) for h in users)}`."
            )
        else:
            find = (
                "```\nsudo fuser -v /dev/nvidia*        # or: sudo lsof /dev/nvidia*\n"
                "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n"
                "ps -o pid,ppid,etime,cmd -p $(sudo fuser /dev/nvidia* 2>/dev/null)\n```"
            )
            body = (
                "No process here holds the GPU, so the memory belongs to a process in another container or PID "
                "namespace (NVML names only processes of its own namespace on some drivers), or to one that "
                "exited while the driver still holds its memory. "
                + hostpkg.on_host(place, find, "find the processes that hold it")
                + "\n\nThen end them (`kill <pid>`); if none is left and the memory stays, reset the GPU when idle "
                "(`sudo nvidia-smi -r -i <index>`)."
            )
        find_cmd = (
            (
                Command(
                    f"kill {' '.join(str(h.pid) for h in users)}", "end them, if they are not yours to keep", "changes"
                ),
            )
            if users
            else (Command("sudo fuser -v /dev/nvidia*", "the processes that hold the GPU device nodes", "root"),)
        )
        return [
            CHECK.finding(
                Status.WARN,
                "GPU memory in use with no process NVML names: " + "; ".join(u.split(":")[0] for u in unaccounted),
                bullets(unaccounted) + "\n\n" + body,
                evidence=evidence,
                commands=find_cmd,
            )
        ]
    if holders:
        others = [h for h in users if h.container and not place.container]
        lines = [_line(h) for h in holders]
        note = (
            f"\n\n{len(others)} of them run in containers (`docker ps --filter id=<id>`, `crictl ps`, `podman ps`)."
            if others
            else ""
        )
        return [
            CHECK.finding(
                Status.INFO,
                f"{len(holders)} process(es) hold the GPU device nodes",
                bullets(lines) + note,
                evidence=evidence,
            )
        ]
    if isinstance(nv, Unavailable) or nv.nvml != "ok":
        raise SkipCheck("no process holds /dev/nvidia* and no NVIDIA driver answers here (see nvidia.driver)")
    unread = f" ({hf.unreadable} processes could not be read: run as root to see all)" if hf.unreadable else ""
    return [CHECK.finding(Status.OK, f"no process holds /dev/nvidia*{unread}", evidence=evidence)]


CHECK = Check(
    id="devices.holders",
    title="processes holding the GPU (/proc/*/fd) compared with NVML: orphans, memory no process accounts for",
    needs=("gpu_holders", "nvidia", "os"),
    evaluate=evaluate,
)
