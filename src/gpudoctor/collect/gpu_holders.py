"""Collector for the ``gpu_holders`` domain: processes holding ``/dev/nvidia*`` open.

Reads ``/proc/<pid>/fd`` links (never opens the devices), ``cmdline``, ``comm``, ``stat``,
``cgroup`` and ``/proc/uptime`` through the System's files, so a fake root's ``/proc`` tree
replays a machine. Bounded to :data:`~gpudoctor.facts.gpu_holders.MAX_PROCESSES` processes.
"""

from __future__ import annotations

import os
import re

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.gpu_holders import MAX_HOLDERS, MAX_PROCESSES, GpuHolder, GpuHoldersFacts
from gpudoctor.system import Files

_DEV = re.compile(r"^/dev/nvidia(?:\d+|ctl|-uvm(?:-tools)?|-modeset|-caps/.*)$")
_CONTAINER = (
    (re.compile(r"kubepods.*?pod([0-9a-f_-]{36})"), "k8s"),
    (re.compile(r"libpod-(?:conmon-)?([0-9a-f]{12})[0-9a-f]*"), "podman"),
    (re.compile(r"docker[-/]([0-9a-f]{12})[0-9a-f]*"), "docker"),
    (re.compile(r"cri-containerd-([0-9a-f]{12})[0-9a-f]*"), "containerd"),
    (re.compile(r"lxc\.payload\.([^/]+)"), "lxc"),
    (re.compile(r"/lxc/([^/]+)"), "lxc"),
)


def _clk_tck() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100


def container_of(cgroup: str) -> str:
    """``engine:id`` of the container a cgroup path belongs to, or ""."""
    for pattern, engine in _CONTAINER:
        m = pattern.search(cgroup)
        if m:
            return f"{engine}:{m.group(1).replace('_', '-')}"
    return ""


def _stat(files: Files, pid: str) -> tuple[int, str, float | None]:
    """(ppid, comm, start time in clock ticks) from /proc/<pid>/stat."""
    text = files.read_text_or_none(f"/proc/{pid}/stat") or ""
    if ")" not in text:
        return 0, "", None
    comm = text[text.find("(") + 1 : text.rfind(")")]
    fields = text.rsplit(")", 1)[1].split()
    try:
        return int(fields[1]), comm, float(fields[19])
    except (IndexError, ValueError):
        return 0, comm, None


def collect_gpu_holders(ctx: CollectContext) -> GpuHoldersFacts:
    files = ctx.system.files
    try:
        pids = sorted((p for p in files.listdir("/proc") if p.isdigit()), key=int)
    except OSError as exc:
        return GpuHoldersFacts(Unavailable(f"/proc could not be listed: {exc.strerror or exc}"))
    if not pids:
        return GpuHoldersFacts(Unavailable("/proc lists no process (no /proc mounted under this root)"))
    uptime_text = (files.read_text_or_none("/proc/uptime") or "").split()
    uptime = float(uptime_text[0]) if uptime_text else None
    tck = _clk_tck()
    holders: list[GpuHolder] = []
    unreadable = 0
    scanned = 0
    own = str(os.getpid()) if files.is_live else ""
    for pid in pids[:MAX_PROCESSES]:
        scanned += 1
        if pid == own:
            continue
        try:
            fds = files.listdir(f"/proc/{pid}/fd")
        except OSError:
            unreadable += 1
            continue
        devices = set()
        for fd in fds:
            target = files.readlink(f"/proc/{pid}/fd/{fd}")
            if target and _DEV.match(target):
                devices.add(target)
        if not devices:
            continue
        ppid, comm, start = _stat(files, pid)
        comm = (files.read_text_or_none(f"/proc/{pid}/comm") or comm).strip()
        raw = files.read_text_or_none(f"/proc/{pid}/cmdline") or ""
        cmdline = " ".join(a for a in raw.split("\0") if a)[:300]
        cgroups = (files.read_text_or_none(f"/proc/{pid}/cgroup") or "").splitlines()
        v2 = next((ln.split(":", 2)[2] for ln in cgroups if ln.startswith("0::")), "")
        cgroup = v2 or next((ln.split(":", 2)[2] for ln in cgroups if ln.count(":") >= 2), "")
        parent = (files.read_text_or_none(f"/proc/{ppid}/comm") or "").strip() if ppid else ""
        age = round(uptime - start / tck, 1) if uptime is not None and start is not None else None
        holders.append(
            GpuHolder(
                pid=int(pid),
                ppid=ppid,
                comm=comm,
                cmdline=cmdline,
                devices=tuple(sorted(devices)),
                parent_comm=parent,
                age_s=age,
                container=container_of(cgroup),
                cgroup=cgroup[:200],
            )
        )
        if len(holders) >= MAX_HOLDERS:
            break
    return GpuHoldersFacts(True, tuple(holders), scanned, unreadable)


COLLECTOR = Collector(domain="gpu_holders", collect=collect_gpu_holders, timeout_s=15.0)
