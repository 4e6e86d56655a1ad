"""Collectors ``os``, ``cpu`` and ``shm`` from fake roots (``--root``)."""

from __future__ import annotations

import os

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.host import (
    collect_cpu,
    collect_os,
    collect_shm,
    detect_container,
)
from gpudoctor.facts import Unavailable
from gpudoctor.facts.host import CpuQuota
from gpudoctor.testing import fake_system, write_tree

UBUNTU = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=jammy
"""

DEBIAN = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
"""

CPUINFO = "".join(
    f"processor\t: {i}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n\n" for i in range(16)
)


def ctx(root, env=None):
    return CollectContext(fake_system(root, env=env), CollectOptions())


# ----------------------------------------------------------------- os


def test_os_from_os_release_in_root(tmp_path):
    write_tree(tmp_path, {"/etc/os-release": UBUNTU})
    facts = collect_os(ctx(tmp_path))
    assert (facts.id, facts.version, facts.codename) == ("ubuntu", "22.04", "jammy")
    assert facts.pretty_name == "Ubuntu 22.04.4 LTS"
    assert facts.container.in_container is False
    assert facts.container.markers == ()
    # the running kernel is not a property of an image root
    assert facts.kernel == ""


def test_os_release_only_under_usr_lib(tmp_path):
    # os-release(5): /etc/os-release first, /usr/lib/os-release as the fallback
    write_tree(tmp_path, {"/usr/lib/os-release": DEBIAN})
    facts = collect_os(ctx(tmp_path))
    assert (facts.id, facts.version, facts.codename) == ("debian", "12", "bookworm")


def test_os_release_relative_symlink(tmp_path):
    write_tree(tmp_path, {"/usr/lib/os-release": DEBIAN})
    (tmp_path / "etc").mkdir()
    os.symlink("../usr/lib/os-release", tmp_path / "etc" / "os-release")
    assert collect_os(ctx(tmp_path)).codename == "bookworm"


def test_os_in_empty_root_is_unknown(tmp_path):
    facts = collect_os(ctx(tmp_path))
    assert facts.id == "unknown"
    assert facts.version == ""


@pytest.mark.parametrize(
    "files, env, kind, marker",
    [
        ({"/.dockerenv": ""}, {}, "docker", "/.dockerenv exists"),
        ({"/run/.containerenv": ""}, {}, "podman", "/run/.containerenv exists"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "kubernetes", "KUBERNETES_SERVICE_HOST is set"),
        ({}, {"container": "systemd-nspawn"}, "systemd-nspawn", "container=systemd-nspawn in the environment"),
        (
            {"/proc/1/cgroup": "0::/kubepods/besteffort/pod1234/abc\n"},
            {},
            "kubernetes",
            "/proc/1/cgroup mentions kubepods",
        ),
        ({"/proc/1/cgroup": "12:cpu,cpuacct:/lxc/ct101\n"}, {}, "lxc", "/proc/1/cgroup mentions lxc"),
    ],
)
def test_container_markers(tmp_path, files, env, kind, marker):
    write_tree(tmp_path, {"/etc/os-release": DEBIAN, **files})
    facts = collect_os(ctx(tmp_path, env))
    assert facts.container.in_container is True
    assert facts.container.kind == kind
    assert marker in facts.container.markers


def test_no_container_markers_on_plain_host(tmp_path):
    write_tree(tmp_path, {"/proc/1/cgroup": "0::/init.scope\n"})
    c = detect_container(fake_system(tmp_path).files, {})
    assert (c.in_container, c.kind, c.markers) == (False, None, ())


# ----------------------------------------------------------------- cpu


def test_cpu_cgroup_v2_quota_from_own_cgroup(tmp_path):
    write_tree(
        tmp_path,
        {
            "/proc/cpuinfo": CPUINFO,
            "/proc/self/cgroup": "0::/system.slice/docker-abc.scope\n",
            "/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
            "/sys/fs/cgroup/cpu.max": "max 100000\n",
            "/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.max": "400000 100000\n",
        },
    )
    facts = collect_cpu(ctx(tmp_path))
    assert facts.logical_cpus == 16
    assert isinstance(facts.affinity_cpus, Unavailable)
    assert facts.cgroup_version == 2
    assert facts.quota == CpuQuota(2, 400000, 100000, "/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.max")
    assert facts.quota.cpus == 4.0
    assert facts.usable_cpus == 4.0
    assert facts.model == "AMD EPYC 7763 64-Core Processor"


def test_cpu_cgroup_v2_fractional_quota_at_root(tmp_path):
    write_tree(
        tmp_path,
        {
            "/proc/cpuinfo": CPUINFO,
            "/sys/fs/cgroup/cgroup.controllers": "cpu\n",
            "/sys/fs/cgroup/cpu.max": "150000 100000\n",
        },
    )
    facts = collect_cpu(ctx(tmp_path))
    assert facts.quota.cpus == 1.5
    assert facts.quota.source == "/sys/fs/cgroup/cpu.max"


def test_cpu_cgroup_v2_unlimited(tmp_path):
    write_tree(
        tmp_path,
        {
            "/proc/cpuinfo": CPUINFO,
            "/sys/fs/cgroup/cgroup.controllers": "cpu\n",
            "/sys/fs/cgroup/cpu.max": "max 100000\n",
        },
    )
    facts = collect_cpu(ctx(tmp_path))
    assert (facts.cgroup_version, facts.quota) == (2, None)
    assert facts.usable_cpus == 16


def test_cpu_cgroup_v2_garbage_is_unavailable(tmp_path):
    write_tree(
        tmp_path,
        {
            "/proc/cpuinfo": CPUINFO,
            "/sys/fs/cgroup/cgroup.controllers": "cpu\n",
            "/sys/fs/cgroup/cpu.max": "lots 100000\n",
        },
    )
    facts = collect_cpu(ctx(tmp_path))
    assert isinstance(facts.quota, Unavailable)
    assert "not understood" in facts.quota.reason


@pytest.mark.parametrize("base", ["/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"])
def test_cpu_cgroup_v1_quota(tmp_path, base):
    write_tree(
        tmp_path,
        {"/proc/cpuinfo": CPUINFO, f"{base}/cpu.cfs_quota_us": "200000\n", f"{base}/cpu.cfs_period_us": "100000\n"},
    )
    facts = collect_cpu(ctx(tmp_path))
    assert facts.cgroup_version == 1
    assert facts.quota == CpuQuota(1, 200000, 100000, f"{base}/cpu.cfs_quota_us")
    assert facts.usable_cpus == 2.0


def test_cpu_cgroup_v1_unlimited(tmp_path):
    write_tree(
        tmp_path,
        {
            "/proc/cpuinfo": CPUINFO,
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    facts = collect_cpu(ctx(tmp_path))
    assert (facts.cgroup_version, facts.quota) == (1, None)


def test_cpu_no_cgroup_fs(tmp_path):
    write_tree(tmp_path, {"/proc/cpuinfo": CPUINFO})
    facts = collect_cpu(ctx(tmp_path))
    assert isinstance(facts.cgroup_version, Unavailable)
    assert isinstance(facts.quota, Unavailable)
    assert facts.usable_cpus == 16


def test_cpu_live_counts_match_os():
    from gpudoctor.system import System

    facts = collect_cpu(CollectContext(System.live("/"), CollectOptions()))
    assert facts.logical_cpus == os.cpu_count()
    assert facts.affinity_cpus == len(os.sched_getaffinity(0))


# ----------------------------------------------------------------- shm


def test_shm_docker_default_64m(tmp_path):
    (tmp_path / "dev" / "shm").mkdir(parents=True)
    write_tree(
        tmp_path,
        {
            "/proc/mounts": "overlay / overlay rw,relatime 0 0\n"
            "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
        },
    )
    facts = collect_shm(ctx(tmp_path))
    assert facts.mounted is True
    assert facts.fstype == "tmpfs"
    assert facts.mount_options == "rw,nosuid,nodev,noexec,relatime,size=65536k"
    # on an image root statvfs would measure the disk holding the root: the tmpfs size= option is the size
    assert facts.total_bytes == 64 * 1024**2


def test_shm_of_an_image_root_is_unavailable_not_missing(tmp_path):
    # an image root has no mounts of its own: the runtime creates /dev/shm when the image runs,
    # so neither a plain directory nor its absence says anything about the container's shm
    (tmp_path / "dev" / "shm").mkdir(parents=True)
    write_tree(tmp_path, {"/proc/mounts": "overlay / overlay rw 0 0\n"})
    facts = collect_shm(ctx(tmp_path))
    assert isinstance(facts, Unavailable) and "container runtime" in facts.reason
    empty = tmp_path / "empty"
    empty.mkdir()
    assert isinstance(collect_shm(ctx(empty)), Unavailable)


def test_cpu_of_an_image_root_without_cpuinfo_is_unavailable(tmp_path):
    facts = collect_cpu(ctx(tmp_path))
    assert isinstance(facts, Unavailable) and "/proc/cpuinfo" in facts.reason
