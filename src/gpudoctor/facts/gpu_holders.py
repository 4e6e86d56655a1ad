"""Facts about the processes that hold NVIDIA device nodes open (``/proc/*/fd``).

Source: ``/proc/<pid>/fd/*`` symlinks to ``/dev/nvidia<N>``, ``/dev/nvidiactl``,
``/dev/nvidia-uvm`` (proc(5)); the command line (``/proc/<pid>/cmdline``), parent and start
time (``/proc/<pid>/stat`` fields 4 and 22, clock ticks since boot), control group
(``/proc/<pid>/cgroup``: the container it runs in). A process that opened a GPU holds its
memory until every descriptor is closed, including copies inherited by forked children
(PyTorch DataLoader workers), which NVML may not list.
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class GpuHolder:
    """One process holding NVIDIA device nodes open.

    Attributes:
        pid: its PID in this PID namespace.
        ppid: its parent's PID (1 or a subreaper once the parent died).
        comm: ``/proc/<pid>/comm``.
        cmdline: the command line, arguments joined by spaces (at most 300 characters).
        devices: the device nodes it holds (``/dev/nvidia0``, ``/dev/nvidiactl``, ...).
        parent_comm: the parent's ``comm``, or "" when unreadable.
        age_s: seconds since it started (``/proc/uptime`` minus its start time), or None.
        container: ``docker:<12 hex>``, ``podman:<12 hex>``, ``k8s:<pod uid>``, ``lxc:<name>``,
            or "" (none recognised in its cgroup).
        cgroup: its cgroup path (the v2 line, or the first v1 line), at most 200 characters.
    """

    pid: int
    ppid: int
    comm: str
    cmdline: str
    devices: tuple[str, ...]
    parent_comm: str = ""
    age_s: float | None = None
    container: str = ""
    cgroup: str = ""


@domain("gpu_holders")
@frozen_dataclass
class GpuHoldersFacts:
    """Processes holding ``/dev/nvidia*`` open.

    Attributes:
        readable: True, or Unavailable with why ``/proc`` could not be scanned.
        holders: each holding process, by PID (at most :data:`MAX_HOLDERS`).
        scanned: processes looked at.
        unreadable: processes whose descriptors could not be read (another user's, without root):
            a holder among them is not listed.
    """

    readable: bool | Unavailable
    holders: tuple[GpuHolder, ...] = ()
    scanned: int = 0
    unreadable: int = 0


#: Most holders kept; most processes scanned.
MAX_HOLDERS = 200
MAX_PROCESSES = 20000
