"""Check ``platform.limits``: RLIMIT_NOFILE of each target process against what
DataLoader workers need with torch's default sharing strategy.

Sources: PyTorch docs, ``torch.multiprocessing`` "Sharing strategies": on
Linux the default ``file_descriptor`` strategy keeps one open descriptor per
shared-memory segment in flight (every tensor of every batch a worker sends),
"if your system has low limits for the number of open file descriptors, and
you can't raise them, you should use the file_system strategy"; the failure
reads "Too many open files" or "received 0 items of ancdata" (pytorch/pytorch
issues #973, #11201). The common soft limit of 1024 (systemd's default,
``ulimit -n``) is what those reports ran under. getrlimit(2): an unprivileged
process may raise its soft limit up to the hard limit.

RLIMIT_MEMLOCK is reported as evidence: it bounds RDMA memory registration
(judged by ``platform.rdma``); CUDA's pinned host memory (``pin_memory``) is
page-locked by the NVIDIA driver (``cudaHostAlloc``) and is not counted
against it.

- soft limit below 4096 -> ``warn`` with
  ``ulimit -n``, ``docker run --ulimit nofile=``, and
  ``torch.multiprocessing.set_sharing_strategy('file_system')``;
- otherwise ``ok``; limits not readable -> ``skip``.
"""

from __future__ import annotations

from gpudoctor.checks import SkipCheck
from gpudoctor.checks._gpu import target_probes
from gpudoctor.checks._platform import platform_of
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.dataloader import DataLoaderProbeFacts
from gpudoctor.facts.platform import LimitsFacts, ProcessLimits, RLimit
from gpudoctor.model import Check, Command, Finding, Status

#: below this soft RLIMIT_NOFILE, DataLoader workers with the file_descriptor strategy run out
#: (1024 is the usual default that the reports above ran under; 4096 leaves room for a few workers
#: with prefetch_factor 2 and many-tensor batches)
NOFILE_MIN = 4096
NOFILE_SUGGESTED = 65536


def fmt_limit(value: int | None) -> str:
    """``None`` -> ``unlimited``."""
    return "unlimited" if value is None else str(value)


def _workers(facts: Facts) -> int | None:
    probe = facts.of(DataLoaderProbeFacts)
    return None if isinstance(probe, Unavailable) else getattr(probe, "num_workers", None)


def assess(facts: Facts, limits: ProcessLimits, label: str | None) -> Finding:
    nofile = limits.nofile
    evidence = {"source": limits.source}
    if isinstance(limits.memlock, RLimit):
        evidence["memlock"] = f"{fmt_limit(limits.memlock.soft)}/{fmt_limit(limits.memlock.hard)}"
    if not isinstance(nofile, RLimit):
        return CHECK.finding(Status.SKIP, f"RLIMIT_NOFILE unknown: {nofile.reason}", evidence=evidence, target=label)
    evidence["nofile"] = f"{fmt_limit(nofile.soft)}/{fmt_limit(nofile.hard)}"
    if nofile.soft is None or nofile.soft >= NOFILE_MIN:
        return CHECK.finding(
            Status.OK,
            f"open-file limit {fmt_limit(nofile.soft)} is enough for DataLoader workers",
            evidence=evidence,
            target=label,
        )
    workers = _workers(facts)
    raise_to = NOFILE_SUGGESTED if nofile.hard is None else min(NOFILE_SUGGESTED, nofile.hard)
    can_raise = raise_to > nofile.soft
    p = platform_of(facts)
    container = ""
    if p is not None and p.in_container:
        container = (
            f"\n- the container's limit comes from its runtime: `docker run --ulimit "
            f"nofile={NOFILE_SUGGESTED}:{NOFILE_SUGGESTED} ...` (Compose: `ulimits: nofile: "
            f"{{soft: {NOFILE_SUGGESTED}, hard: {NOFILE_SUGGESTED}}}`)"
        )
    else:
        container = f"\n- in Docker: `docker run --ulimit nofile={NOFILE_SUGGESTED}:{NOFILE_SUGGESTED} ...`"
    raise_line = (
        f"- raise it in the shell that starts the job: `ulimit -n {raise_to}` (the hard limit is "
        f"{fmt_limit(nofile.hard)})"
        if can_raise
        else f"- the hard limit is also {fmt_limit(nofile.hard)}: raise it as root in "
        f"`/etc/security/limits.conf` (`* - nofile {NOFILE_SUGGESTED}`) or the service's `LimitNOFILE=`"
    )
    docker = Command(
        f"docker run --ulimit nofile={NOFILE_SUGGESTED}:{NOFILE_SUGGESTED} ...",
        "start the container with a higher open-file limit",
        "changes",
    )
    if can_raise:
        commands: tuple[Command, ...] = (
            Command(f"ulimit -n {raise_to}", "in the shell that starts the job: raise the soft limit"),
        )
    else:
        commands = (
            Command(
                f"echo '* - nofile {NOFILE_SUGGESTED}' >> /etc/security/limits.conf",
                "raise the hard limit for new logins",
                "root",
            ),
        )
    commands = (docker, *commands) if p is not None and p.in_container else (*commands, docker)
    return CHECK.finding(
        Status.WARN,
        f'open-file limit is {nofile.soft}: DataLoader workers can fail with "Too many open files"',
        f"With torch's default `file_descriptor` sharing strategy every tensor a worker sends holds an open "
        f"descriptor until it is consumed; {('num_workers=' + str(workers)) if workers else 'several workers'} "
        f'with prefetching run past a soft limit of {nofile.soft} ("received 0 items of ancdata" / "Too many '
        f'open files"). Either:\n\n{raise_line}{container}\n- or switch the strategy in the training script, '
        f"before creating the DataLoader: `torch.multiprocessing.set_sharing_strategy('file_system')` (segments "
        f"in /dev/shm instead of descriptors).",
        evidence=evidence,
        target=label,
        commands=commands,
    )


def evaluate(facts: Facts) -> list[Finding]:
    found: list[tuple[str | None, ProcessLimits]] = []
    for t, pr in target_probes(facts):
        if pr is not None and isinstance(pr.limits, ProcessLimits):
            found.append((t.label, pr.limits))
    if not found:
        own = facts.of(LimitsFacts)
        if isinstance(own, Unavailable) or isinstance(own.process, Unavailable):
            raise SkipCheck("no process limits were read (no target probe, and /proc/self/limits unavailable)")
        found.append((None, own.process))
    return [assess(facts, lim, label) for label, lim in found]


CHECK = Check(
    id="platform.limits",
    title="process limits of each target: open files for DataLoader workers",
    needs=("targets", "limits", "platform"),
    evaluate=evaluate,
)
