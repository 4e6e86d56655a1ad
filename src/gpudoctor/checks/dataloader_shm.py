"""Check ``dataloader.shm``: is /dev/shm large enough for DataLoader workers?

DataLoader workers hand every batch to the main process through shared
memory (``torch.multiprocessing`` "file_descriptor" strategy, backed by
/dev/shm). Docker's default ``--shm-size`` is 64 MiB (Docker run reference),
too small for image batches: workers die with "Bus error" (SIGBUS).
Threshold: 1 GiB (below it -> ``warn``).
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._common import GIB, fmt_bytes, in_container
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import ShmFacts
from gpudoctor.model import Check, Finding, Status

#: Below this /dev/shm size we warn (bytes).
SHM_MIN_BYTES = 1 * GIB

REMEDY = ("Give the container more shared memory: `docker run --shm-size=16g ...` or `--ipc=host` "
          "(or `-v /dev/shm:/dev/shm`); in Kubernetes mount an `emptyDir` with `medium: Memory` at `/dev/shm`; "
          "in docker compose set `shm_size: 16gb`. `num_workers=0` only hides the problem at a large speed cost.")


def evaluate(facts: Facts) -> list[Finding]:
    shm = require(facts, ShmFacts)
    evidence = {"path": shm.path, "mounted": shm.mounted, "fstype": shm.fstype, "options": shm.mount_options}
    if isinstance(shm.total_bytes, Unavailable):
        return [CHECK.finding(Status.WARN, f"{shm.path} is not usable: {shm.total_bytes.reason}",
                              "DataLoader workers and NCCL need a shared-memory filesystem at /dev/shm.\n\n" + REMEDY,
                              evidence=evidence)]
    evidence["size_bytes"] = shm.total_bytes
    if not isinstance(shm.free_bytes, Unavailable):
        evidence["free_bytes"] = shm.free_bytes
    size = fmt_bytes(shm.total_bytes)
    if shm.total_bytes < SHM_MIN_BYTES:
        where = "this container's" if in_container(facts) else "the"
        return [CHECK.finding(
            Status.WARN, f"{shm.path} is only {size}: DataLoader workers may die with 'Bus error'",
            f"{where.capitalize()} shared-memory filesystem {shm.path} is {size} (below {fmt_bytes(SHM_MIN_BYTES)}). "
            f"Each batch a worker produces travels through it; image batches exceed it quickly and the worker "
            f"is killed by SIGBUS.\n\n{REMEDY}",
            evidence=evidence)]
    return [CHECK.finding(Status.OK, f"{shm.path} has {size}", evidence=evidence)]


CHECK = Check(
    id="dataloader.shm",
    title="/dev/shm large enough for DataLoader workers and NCCL",
    needs=("shm", "os"),
    evaluate=evaluate,
    tags=("gate",),
)
