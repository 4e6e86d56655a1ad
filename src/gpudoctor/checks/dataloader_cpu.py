"""Check ``dataloader.cpu``: does ``os.cpu_count()`` overstate the usable CPUs?

Usable CPUs = min(CPU affinity, cgroup CPU quota), the quota from cgroup v2
``cpu.max`` or v1 ``cpu.cfs_quota_us / cpu.cfs_period_us`` (Linux kernel docs:
admin-guide/cgroup-v2.rst, scheduler/sched-bwc.rst). ``os.cpu_count()``
ignores both, and PyTorch's "suggested max number of worker" warning ignores
the quota (``docker run --cpus``, Kubernetes ``resources.limits.cpu``), so
scripts that size ``num_workers`` or thread pools from it oversubscribe the
container: the CFS throttles them and throughput drops.

Status: ``warn`` when the usable count is below ``os.cpu_count()`` (with the
numbers to use instead); ``ok`` otherwise; ``skip`` when the cpu facts are
unavailable.
"""

from __future__ import annotations

import math

from gpudoctor.checks import require
from gpudoctor.facts import Facts
from gpudoctor.facts.host import CpuFacts, CpuQuota
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.words import plural, verb


def usable_count(cpu: CpuFacts) -> int:
    """Whole CPUs a process can keep busy: min(logical, affinity, ceil(quota)), at least 1.

    A fractional quota rounds up (1.5 CPUs can keep two threads partly busy), as
    in shared/reference/dataloader.md §3."""
    n = cpu.logical_cpus
    if isinstance(cpu.affinity_cpus, int):
        n = min(n, cpu.affinity_cpus)
    if isinstance(cpu.quota, CpuQuota):
        n = min(n, math.ceil(cpu.quota.cpus - 1e-9))
    return max(1, n)


def suggested_workers(usable: int) -> int:
    """num_workers for one training process: the usable CPUs minus one for the main loop (0 with one CPU)."""
    return max(0, usable - 1)


def evaluate(facts: Facts) -> list[Finding]:
    cpu = require(facts, CpuFacts)
    usable = usable_count(cpu)
    evidence: dict[str, object] = {"os.cpu_count()": cpu.logical_cpus, "usable_cpus": usable}
    if isinstance(cpu.affinity_cpus, int):
        evidence["affinity"] = cpu.affinity_cpus
    else:
        evidence["affinity"] = f"unknown ({cpu.affinity_cpus.reason})"
    if isinstance(cpu.quota, CpuQuota):
        evidence["cgroup_quota"] = (
            f"{cpu.quota.quota_us} / {cpu.quota.period_us} us ({plural(cpu.quota.cpus, 'CPU')}) from {cpu.quota.source}"
        )
    if usable < cpu.logical_cpus:
        limits = []
        if isinstance(cpu.quota, CpuQuota) and cpu.quota.cpus < cpu.logical_cpus:
            limits.append(
                f"a cgroup v{cpu.quota.cgroup_version} CPU quota of {plural(cpu.quota.cpus, 'CPU')} "
                f"({cpu.quota.source}: {cpu.quota.quota_us} us per {cpu.quota.period_us} us)"
            )
        if isinstance(cpu.affinity_cpus, int) and cpu.affinity_cpus < cpu.logical_cpus:
            limits.append(f"a CPU affinity of {plural(cpu.affinity_cpus, 'CPU')}")
        workers = suggested_workers(usable)
        evidence["suggested_num_workers"] = workers
        return [
            CHECK.finding(
                Status.WARN,
                f"only {usable} of the {cpu.logical_cpus} CPUs that os.cpu_count() reports {verb(usable, 'is', 'are')} usable",
                f"This process is limited by {' and '.join(limits)}. Code that sizes `num_workers`, "
                f"`torch.set_num_threads` or thread pools from `os.cpu_count()` starts {cpu.logical_cpus} busy "
                f"workers on {plural(usable, 'CPU')}' worth of time, and the kernel throttles them (PyTorch's own "
                f'"suggested max number of worker" warning does not look at the cgroup quota either).\n\n'
                f"Size from the usable count instead: `DataLoader(..., num_workers={workers})` (one CPU left for "
                f"the training loop; divide by the number of training processes on this node), and "
                f"`export OMP_NUM_THREADS={usable}`. Measure the best setting with "
                f"`gpudoctor probe dataloader --dataset MODULE:CALLABLE`. To give the job more CPUs, raise the limit: "
                f"`docker run --cpus=N`, Kubernetes `resources.limits.cpu`, or the Slurm `--cpus-per-task`.",
                evidence=evidence,
                commands=(
                    Command(
                        f"export OMP_NUM_THREADS={usable}",
                        f"size thread pools from the {plural(usable, 'usable CPU')}; DataLoader num_workers={workers}",
                    ),
                    Command(
                        "gpudoctor probe dataloader --dataset MODULE:CALLABLE",
                        "measure the best num_workers for your dataset",
                    ),
                ),
            )
        ]
    return [
        CHECK.finding(
            Status.OK,
            f"{usable} CPU{'' if usable == 1 else 's'} usable (no quota or affinity limit below os.cpu_count())",
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="dataloader.cpu",
    title="usable CPUs (affinity and cgroup quota) versus os.cpu_count()",
    needs=("cpu",),
    evaluate=evaluate,
)
