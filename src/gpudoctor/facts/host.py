"""Facts about the host or container: OS, CPUs and cgroup quota, /dev/shm."""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class ContainerFacts:
    """Whether we run in a container, and what gave it away.

    Attributes:
        in_container: True when any marker was found.
        kind: ``docker``, ``podman``, ``kubernetes``, ``lxc``, ``wsl`` ... or None.
        markers: the evidence, e.g. ``/.dockerenv exists``.
    """

    in_container: bool
    kind: str | None = None
    markers: tuple[str, ...] = ()


@domain("os")
@frozen_dataclass
class OsFacts:
    """Operating system from os-release (via ``distro``) and the kernel.

    Attributes:
        id: distro id, e.g. ``debian``, ``ubuntu``.
        version: e.g. ``12``, ``24.04``.
        codename: e.g. ``bookworm``, ``noble`` ("" when unknown).
        pretty_name: os-release PRETTY_NAME.
        kernel: ``uname -r`` of the running kernel (the host's in a container).
        machine: ``uname -m``, e.g. ``x86_64``.
        container: container detection.
        wsl: True under Windows Subsystem for Linux (kernel release or ``/proc/version``
            naming ``microsoft``, or ``/dev/dxg`` present: the WSL 2 GPU paravirtualisation device).
        wsl_version: 1 or 2 under WSL, None when not WSL or not known. WSL 1 translates Linux
            system calls in the Windows kernel: its release ends in ``-Microsoft`` (``4.4.0-19041-
            Microsoft``); WSL 2 runs a real Linux kernel (``5.15.90.1-microsoft-standard-WSL2``,
            earlier ``4.19.104-microsoft-standard``) and has ``/dev/dxg``. Only WSL 2 reaches the
            GPU (Microsoft, "GPU accelerated ML training in WSL"; NVIDIA CUDA on WSL User Guide).
    """

    id: str
    version: str
    codename: str
    pretty_name: str
    kernel: str
    machine: str
    container: ContainerFacts
    wsl: bool = False
    wsl_version: int | None = None


@frozen_dataclass
class CpuQuota:
    """A cgroup CPU bandwidth limit.

    Attributes:
        cgroup_version: 1 or 2.
        quota_us: microseconds of CPU time allowed per period (``cpu.max`` first
            field, or ``cpu.cfs_quota_us``).
        period_us: the period in microseconds.
        source: the file the numbers came from.
    """

    cgroup_version: int
    quota_us: int
    period_us: int
    source: str

    @property
    def cpus(self) -> float:
        """Quota as a number of CPUs (quota / period), e.g. 4.0."""
        return self.quota_us / self.period_us


@domain("cpu")
@frozen_dataclass
class CpuFacts:
    """CPU counts as a process sees them.

    Attributes:
        logical_cpus: ``os.cpu_count()``: what most scripts use to size
            ``num_workers`` and thread pools. It ignores affinity and quota.
        affinity_cpus: ``len(os.sched_getaffinity(0))``, or Unavailable.
        cgroup_version: 1, 2, or Unavailable when no cgroup fs is mounted.
        quota: the CPU bandwidth limit, None when unlimited (``max`` / -1),
            Unavailable when it could not be read.
        model: CPU model name from /proc/cpuinfo ("" if unknown).
    """

    logical_cpus: int
    affinity_cpus: int | Unavailable
    cgroup_version: int | Unavailable
    quota: CpuQuota | None | Unavailable
    model: str = ""

    @property
    def usable_cpus(self) -> float:
        """CPUs a process can really use: min(logical, affinity, quota), in CPUs."""
        n = float(self.logical_cpus)
        if isinstance(self.affinity_cpus, int):
            n = min(n, float(self.affinity_cpus))
        if isinstance(self.quota, CpuQuota):
            n = min(n, self.quota.cpus)
        return n


@domain("shm")
@frozen_dataclass
class ShmFacts:
    """The shared-memory filesystem that DataLoader workers and NCCL use.

    Attributes:
        path: normally ``/dev/shm``.
        mounted: whether it is a mount point (tmpfs) at all.
        total_bytes: size (``statvfs``: f_blocks * f_frsize), or Unavailable.
        free_bytes: available bytes, or Unavailable.
        fstype: filesystem type from /proc/mounts (``tmpfs``), "" if unknown.
        mount_options: options from /proc/mounts, e.g. ``size=65536k``.
    """

    path: str
    mounted: bool
    total_bytes: int | Unavailable
    free_bytes: int | Unavailable
    fstype: str = ""
    mount_options: str = ""
