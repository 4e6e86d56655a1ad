"""Check ``dataloader.cpu``: does ``os.cpu_count()`` overstate the usable CPUs?

Usable CPUs = min(``os.cpu_count()``, CPU affinity, cgroup CPU quota) —
quota from cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us/cfs_period_us``
(Linux kernel docs). Scripts that size ``num_workers`` or thread pools from
``os.cpu_count()`` oversubscribe a container limited to fewer CPUs: the
CFS throttles them and throughput drops.
"""

from __future__ import annotations

import math

from gpudoctor.checks import require
from gpudoctor.facts import Facts
from gpudoctor.facts.host import CpuFacts, CpuQuota
from gpudoctor.model import Check, Finding, Status


def evaluate(facts: Facts) -> list[Finding]:
    cpu = require(facts, CpuFacts)
    usable = cpu.usable_cpus
    usable_int = max(1, math.floor(usable))
    evidence = {"os.cpu_count()": cpu.logical_cpus, "usable_cpus": round(usable, 2)}
    if isinstance(cpu.affinity_cpus, int):
        evidence["affinity"] = cpu.affinity_cpus
    if isinstance(cpu.quota, CpuQuota):
        evidence["cgroup_quota"] = f"{cpu.quota.quota_us} / {cpu.quota.period_us} us ({cpu.quota.cpus:g} CPUs) " \
                                   f"from {cpu.quota.source}"
    if usable < cpu.logical_cpus:
        limits = []
        if isinstance(cpu.quota, CpuQuota) and cpu.quota.cpus < cpu.logical_cpus:
            limits.append(f"a cgroup v{cpu.quota.cgroup_version} CPU quota of {cpu.quota.cpus:g} CPUs")
        if isinstance(cpu.affinity_cpus, int) and cpu.affinity_cpus < cpu.logical_cpus:
            limits.append(f"a CPU affinity of {cpu.affinity_cpus} CPUs")
        return [CHECK.finding(
            Status.WARN,
            f"only {usable:g} of the {cpu.logical_cpus} CPUs that os.cpu_count() reports are usable",
            f"This process is limited by {' and '.join(limits)}. Code that sizes `num_workers`, "
            f"`torch.set_num_threads` or thread pools from `os.cpu_count()` starts {cpu.logical_cpus} busy "
            f"workers on {usable:g} CPUs' worth of time, and the kernel throttles them.\n\n"
            f"Size from the usable count instead: `DataLoader(..., num_workers={max(1, usable_int - 1)})` (one CPU "
            f"left for the training loop), and `OMP_NUM_THREADS={usable_int}`. In Python, "
            f"`len(os.sched_getaffinity(0))` respects affinity; the quota is in `/sys/fs/cgroup/cpu.max`.",
            evidence=evidence)]
    return [CHECK.finding(Status.OK, f"{cpu.logical_cpus} CPUs usable (no quota or affinity limit below that)",
                          evidence=evidence)]


CHECK = Check(
    id="dataloader.cpu",
    title="usable CPUs (affinity and cgroup quota) versus os.cpu_count()",
    needs=("cpu",),
    evaluate=evaluate,
)
