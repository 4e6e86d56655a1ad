"""Collectors for the ``os``, ``cpu`` and ``shm`` domains (and container detection).

Sources: os-release through ``distro`` (read inside ``--root``), cgroup v2
``cpu.max`` / v1 ``cpu.cfs_quota_us`` + ``cpu.cfs_period_us`` (Linux kernel
docs, Documentation/admin-guide/cgroup-v2.rst and scheduler/sched-bwc.rst),
``/proc/mounts`` and ``statvfs`` for /dev/shm.
"""

from __future__ import annotations

import os
import platform

import distro

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.host import ContainerFacts, CpuFacts, CpuQuota, OsFacts, ShmFacts
from gpudoctor.system import Files

# --------------------------------------------------------------------------- os


def detect_container(files: Files, env) -> ContainerFacts:
    """Container markers: /.dockerenv, /run/.containerenv, KUBERNETES_SERVICE_HOST,
    ``container=`` in the environment, cgroup paths naming docker/kubepods/lxc."""
    markers: list[str] = []
    kind: str | None = None
    if files.exists("/.dockerenv"):
        markers.append("/.dockerenv exists")
        kind = "docker"
    if files.exists("/run/.containerenv"):
        markers.append("/run/.containerenv exists")
        kind = kind or "podman"
    if env.get("KUBERNETES_SERVICE_HOST"):
        markers.append("KUBERNETES_SERVICE_HOST is set")
        kind = "kubernetes"
    if env.get("container"):
        markers.append(f"container={env['container']} in the environment")
        kind = kind or env["container"]
    cgroup = files.read_text_or_none("/proc/1/cgroup") or ""
    for word, name in (("kubepods", "kubernetes"), ("docker", "docker"), ("lxc", "lxc"), ("containerd", "containerd")):
        if word in cgroup:
            markers.append(f"/proc/1/cgroup mentions {word}")
            kind = kind or name
            break
    return ContainerFacts(in_container=bool(markers), kind=kind, markers=tuple(markers))


def collect_os(ctx: CollectContext) -> OsFacts:
    files = ctx.system.files
    root = str(files.root)
    if files.is_live:
        info = distro.LinuxDistribution(include_lsb=False, include_uname=False)
    else:
        # os-release(5): /etc/os-release, falling back to /usr/lib/os-release
        os_release = "/etc/os-release" if files.exists("/etc/os-release") else "/usr/lib/os-release"
        info = distro.LinuxDistribution(
            include_lsb=False,
            include_uname=False,
            os_release_file=str(files.host_path(os_release)),
            distro_release_file=os.devnull,
            root_dir=root,
        )
    kernel = platform.release() if files.is_live else ""
    # issue 11: WSL 2 from the kernel release, /proc/version (also in an image root) or /dev/dxg
    osrel = files.read_text_or_none("/proc/version") or ""
    wsl = "microsoft" in kernel.lower() or "microsoft" in osrel.lower() or files.exists("/dev/dxg")
    wsl_version = _wsl_version(kernel, osrel, files.exists("/dev/dxg")) if wsl else None
    container = detect_container(files, ctx.system.env)
    return OsFacts(
        id=info.id() or "unknown",
        version=info.version(best=False) or "",
        codename=info.codename() or info.os_release_attr("version_codename") or "",
        pretty_name=info.os_release_attr("pretty_name") or info.name(pretty=True) or "",
        kernel=kernel,
        machine=platform.machine() if files.is_live else "",
        container=container,
        wsl=wsl,
        wsl_version=wsl_version,
    )


# --------------------------------------------------------------------------- cpu


def _cgroup2_path(files: Files) -> str:
    """The cgroup v2 directory of this process (from /proc/self/cgroup ``0::/path``)."""
    text = files.read_text_or_none("/proc/self/cgroup") or ""
    for line in text.splitlines():
        if line.startswith("0::"):
            rel = line[3:].strip() or "/"
            return "/sys/fs/cgroup" + ("" if rel == "/" else rel)
    return "/sys/fs/cgroup"


def read_cpu_quota(files: Files) -> tuple[int | Unavailable, CpuQuota | None | Unavailable]:
    """(cgroup version, quota) from cgroup v2 ``cpu.max`` or v1 CFS files.

    The quota is None when unlimited (``max`` in v2, ``-1`` in v1). The
    process's own cgroup is read first, then the root of the hierarchy
    (inside a container both are the container's).
    """
    if files.exists("/sys/fs/cgroup/cgroup.controllers"):
        for base in dict.fromkeys([_cgroup2_path(files), "/sys/fs/cgroup"]):
            text = files.read_text_or_none(f"{base}/cpu.max")
            if text is None:
                continue
            parts = text.split()
            if not parts:
                continue
            if parts[0] == "max":
                return 2, None
            try:
                quota, period = int(parts[0]), int(parts[1]) if len(parts) > 1 else 100000
            except ValueError:
                return 2, Unavailable(f"{base}/cpu.max is not understood: {text.strip()!r}")
            return 2, CpuQuota(2, quota, period, f"{base}/cpu.max")
        return 2, None  # cpu controller not enabled for us: no limit we can see
    for base in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"):
        q = files.read_text_or_none(f"{base}/cpu.cfs_quota_us")
        p = files.read_text_or_none(f"{base}/cpu.cfs_period_us")
        if q is None or p is None:
            continue
        try:
            quota, period = int(q.strip()), int(p.strip())
        except ValueError:
            return 1, Unavailable(f"{base}/cpu.cfs_quota_us is not understood: {q.strip()!r}")
        if quota < 0:
            return 1, None
        return 1, CpuQuota(1, quota, period, f"{base}/cpu.cfs_quota_us")
    return Unavailable("no cgroup filesystem is mounted at /sys/fs/cgroup"), Unavailable(
        "no cgroup CPU controller found"
    )


def collect_cpu(ctx: CollectContext) -> CpuFacts | Unavailable:
    files = ctx.system.files
    if files.is_live:
        logical = os.cpu_count() or 1
        try:
            affinity: int | Unavailable = len(os.sched_getaffinity(0))
        except (AttributeError, OSError) as exc:
            affinity = Unavailable(f"sched_getaffinity is not available: {exc}")
    else:
        text = files.read_text_or_none("/proc/cpuinfo")
        logical = sum(1 for line in (text or "").splitlines() if line.startswith("processor"))
        if not logical:
            # an image root: CPUs belong to the machine that will run it, not to the files
            return Unavailable(f"CPU counts belong to a running machine; --root {files.root} has no /proc/cpuinfo")
        affinity = Unavailable("CPU affinity belongs to a running process, not to an image root")
    version, quota = read_cpu_quota(files)
    model = ""
    for line in (files.read_text_or_none("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return CpuFacts(logical_cpus=logical, affinity_cpus=affinity, cgroup_version=version, quota=quota, model=model)


# --------------------------------------------------------------------------- shm

SHM_PATH = "/dev/shm"


def _tmpfs_size(options: str) -> int | None:
    """Bytes from a tmpfs ``size=`` mount option (``65536k``, ``64m``, ``8g``, plain bytes), or None."""
    for opt in options.split(","):
        if opt.startswith("size="):
            value = opt[5:].strip().lower()
            mult = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}.get(value[-1:], 1)
            digits = value[:-1] if value[-1:] in "kmgt" else value
            try:
                return int(digits) * mult
            except ValueError:
                return None
    return None


def collect_shm(ctx: CollectContext) -> ShmFacts | Unavailable:
    files = ctx.system.files
    fstype, options, mounted = "", "", False
    for line in (files.read_text_or_none("/proc/mounts") or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == SHM_PATH:
            mounted, fstype, options = True, fields[2], fields[3]
    if not files.is_live and mounted:
        # an image root or fake root: statvfs would measure the disk holding it, so use the tmpfs size= option
        size = _tmpfs_size(options)
        if size is not None:
            return ShmFacts(
                SHM_PATH, mounted, size, Unavailable("free space is only known on a live system"), fstype, options
            )
    if not files.is_live and not mounted:
        # an image root has no mounts of its own: /dev/shm is set up by the container runtime at start
        reason = (
            f"{SHM_PATH} is created by the container runtime when the image runs; --root "
            f"{files.root} has no /proc/mounts entry for it"
        )
        return Unavailable(reason)
    if not files.is_dir(SHM_PATH):
        return ShmFacts(
            SHM_PATH,
            False,
            Unavailable(f"{SHM_PATH} does not exist"),
            Unavailable(f"{SHM_PATH} does not exist"),
            fstype,
            options,
        )
    try:
        st = os.statvfs(files.host_path(SHM_PATH))
    except OSError as exc:
        reason = f"statvfs({SHM_PATH}) failed: {exc.strerror}"
        return ShmFacts(SHM_PATH, mounted, Unavailable(reason), Unavailable(reason), fstype, options)
    return ShmFacts(SHM_PATH, mounted, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, fstype, options)


def _wsl_version(kernel: str, proc_version: str, dxg: bool) -> int | None:
    """1 or 2 (see :attr:`~gpudoctor.facts.host.OsFacts.wsl_version`) from the kernel release (or,
    in an image root, ``/proc/version``) and ``/dev/dxg``; None when neither tells."""
    words = proc_version.split()
    release = kernel or (words[2] if len(words) > 2 and words[:2] == ["Linux", "version"] else "")
    if dxg or "microsoft-standard" in release.lower() or release.upper().endswith("-WSL2"):
        return 2
    if release.endswith("-Microsoft"):
        return 1
    return None


COLLECTORS = (
    Collector(domain="os", collect=collect_os, timeout_s=10.0),
    Collector(domain="cpu", collect=collect_cpu, timeout_s=10.0),
    Collector(domain="shm", collect=collect_shm, timeout_s=10.0),
)
