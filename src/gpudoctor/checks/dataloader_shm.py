"""Check ``dataloader.shm``: is /dev/shm large enough for DataLoader workers and NCCL?

DataLoader workers hand every batch to the main process through shared
memory (``torch.multiprocessing`` "file_descriptor" strategy, backed by the
/dev/shm tmpfs); NCCL's SHM transport between local ranks uses it too
(NVIDIA/nccl #342). Docker's and Kubernetes' default is 64 MB (Docker run
reference; meta-pytorch/torchx #428): workers die with "Bus error" (SIGBUS),
NCCL fails at communicator init with "unhandled system error".

Estimate of what a loader needs (shared/reference/dataloader.md §1, §4):
``num_workers × prefetch_factor × batch bytes`` (batches in flight). With a
saved ``gpudoctor probe dataloader`` result the measured batch and the
recommended workers are used; otherwise the stated defaults below. With two
or more local GPUs, NCCL adds about :data:`NCCL_SEGMENT_BYTES` per ordered
GPU pair and direction. Status: ``fail`` below a quarter of the estimate (or
below one measured batch, or below NCCL's share); ``warn`` below the
estimate (a size that prints the same as the estimate, 1 GiB for ~1.04 GiB, is not below it), or
when less than the estimate is free; ``ok`` otherwise.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._common import GIB, MIB, fmt_bytes, in_container, nvidia_gpu_count
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.dataloader import DataLoaderProbeFacts
from gpudoctor.facts.host import OsFacts, ShmFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.words import plural

#: Default batch size in bytes when no probe measured one: 64 decoded 3×256×256 float32
#: images are 48 MiB; rounded up to 64 MiB.
DEFAULT_BATCH_BYTES = 64 * MIB
#: Default workers assumed when no probe ran (a common setting on an 8+ CPU GPU node).
DEFAULT_WORKERS = 8
#: PyTorch's default prefetch_factor with workers (torch/utils/data/dataloader.py).
DEFAULT_PREFETCH = 2
#: NCCL SHM transport segment per ordered pair of local ranks and direction: 9 637 888 bytes
#: in NCCL 2.7 logs ("Error while creating shared memory segment ... (size 9637888)"), rounded up.
NCCL_SEGMENT_BYTES = 10 * MIB
#: Fail below this fraction of the estimated need ("far too small").
FAIL_FRACTION = 0.25
#: The smallest --shm-size we suggest (memory is only used when written).
MIN_SUGGESTED = 8 * GIB


def estimate(facts: Facts) -> tuple[int, int, dict[str, object], list[str]]:
    """(loader need, NCCL need, evidence, basis sentences), bytes."""
    probe = facts.of(DataLoaderProbeFacts)
    evidence: dict[str, object] = {}
    if isinstance(probe, DataLoaderProbeFacts) and probe.batch_bytes > 0:
        workers = max(1, probe.num_workers)
        prefetch = max(1, probe.prefetch_factor or DEFAULT_PREFETCH)
        batch = probe.batch_bytes
        basis = [
            f"the batch measured by `gpudoctor probe dataloader` ({fmt_bytes(batch)}, {probe.measured_at}) "
            f"× {plural(workers, 'worker')} × prefetch_factor {prefetch}"
        ]
        evidence["measured_batch_bytes"] = batch
    else:
        workers, prefetch, batch = DEFAULT_WORKERS, DEFAULT_PREFETCH, DEFAULT_BATCH_BYTES
        basis = [
            f"a typical loader: {plural(workers, 'worker')} × prefetch_factor {prefetch} × a {fmt_bytes(batch)} batch "
            f"(no `gpudoctor probe dataloader` result saved, so this is the stated default)"
        ]
    loader = workers * prefetch * batch
    gpus = nvidia_gpu_count(facts)
    nccl = gpus * (gpus - 1) * 2 * NCCL_SEGMENT_BYTES if gpus >= 2 else 0
    if nccl:
        basis.append(
            f"NCCL's shared-memory transport between {gpus} local GPUs "
            f"(~{fmt_bytes(NCCL_SEGMENT_BYTES)} per GPU pair and direction)"
        )
    evidence.update({"estimated_loader_bytes": loader, "estimated_nccl_bytes": nccl, "local_gpus": gpus})
    return loader, nccl, evidence, basis


def suggested_size(need: int) -> str:
    """``--shm-size`` value: twice the need, at least 8 GiB, in whole GiB (``8g``)."""
    return f"{max(MIN_SUGGESTED, 2 * need) // GIB + (1 if max(MIN_SUGGESTED, 2 * need) % GIB else 0)}g"


def remedy(need: int, gpus: int, engine: str | None = None) -> str:
    """What to do, for where the user is (``engine``: the container kind of ``os``; None on a host or
    when unknown): a pod gets the memory-backed emptyDir only (``docker run`` flags cannot apply to
    it), a podman container podman's flags, a Docker container or an unknown one every way."""
    size = suggested_size(need)
    k8s = (
        f"- Kubernetes: mount a memory-backed emptyDir at /dev/shm:\n\n"
        f"  ```yaml\n  volumes:\n    - name: dshm\n      emptyDir: {{medium: Memory, sizeLimit: {size[:-1]}Gi}}\n"
        f"  # container: volumeMounts: [{{name: dshm, mountPath: /dev/shm}}]\n  ```\n"
    )
    if engine == "kubernetes":
        text = (
            "This pod's /dev/shm is the container runtime's default; the pod spec decides it (the job, "
            "notebook spawner or operator template that creates the pod):\n\n" + k8s + "\n"
        )
    elif engine == "podman":
        text = (
            f"Give the container more shared memory (it is only used when written):\n\n"
            f"- Podman: `podman run --shm-size={size} ...`, or `--ipc=host` (shares the host's /dev/shm; podman "
            f"refuses `--shm-size` together with it); Quadlet: `ShmSize={size}` (on the `.pod` unit when the "
            f"container runs in a pod).\n\n"
        )
    else:
        text = (
            f"Give the container more shared memory (it is only used when written):\n\n"
            f"- Docker: `docker run --shm-size={size} ...`, or `--ipc=host` (shares the host's /dev/shm), "
            f"or `-v /dev/shm:/dev/shm`; docker compose: `shm_size: {size}b`.\n"
            + k8s
            + f"- A running machine (needs root): `mount -o remount,size={size[:-1]}G /dev/shm`.\n\n"
        )
    if gpus >= 2:
        text += (
            "NCCL needs it too: with too little, multi-GPU jobs fail at start-up with `NCCL error ... "
            "unhandled system error` (with `NCCL_DEBUG=WARN`: `posix_fallocate failed : No space left on "
            "device`). If the container cannot be changed, `export NCCL_SHM_DISABLE=1` makes NCCL use "
            "P2P/sockets instead (slower).\n\n"
        )
    text += "`num_workers=0` only hides the problem at a large speed cost."
    return text


def remedy_commands(need: int, gpus: int, engine: str | None, host: bool) -> tuple[Command, ...]:
    """:func:`remedy` as data, preferred first: on a host the remount, in a container its engine's flag."""
    size = suggested_size(need)
    remount = Command(
        f"sudo mount -o remount,size={size[:-1]}G /dev/shm", f"grow /dev/shm to {size[:-1]} GiB until reboot", "root"
    )
    run = {
        "podman": Command(
            f"podman run --shm-size={size} ...", "start the container with more shared memory", "changes"
        ),
        "kubernetes": Command("df -h /dev/shm", "this pod's /dev/shm, after the emptyDir is mounted there"),
    }.get(
        engine or "",
        Command(f"docker run --shm-size={size} ...", "start the container with more shared memory", "changes"),
    )
    rows = [remount, run] if host else [run] + ([remount] if engine not in ("kubernetes", "podman") else [])
    if gpus >= 2:
        rows.append(
            Command("export NCCL_SHM_DISABLE=1", "if the container cannot change: NCCL uses P2P/sockets (slower)")
        )
    return tuple(rows)


def evaluate(facts: Facts) -> list[Finding]:
    shm = require(facts, ShmFacts)
    loader, nccl, est_evidence, basis = estimate(facts)
    need = loader + nccl
    os_facts = facts.of(OsFacts)
    engine = (
        os_facts.container.kind if not isinstance(os_facts, Unavailable) and os_facts.container.in_container else None
    )
    gpus = int(est_evidence["local_gpus"])  # type: ignore[call-overload]
    commands = remedy_commands(need, gpus, engine, not in_container(facts))
    evidence: dict[str, object] = {
        "path": shm.path,
        "mounted": shm.mounted,
        "fstype": shm.fstype,
        "options": shm.mount_options,
    }
    if isinstance(shm.total_bytes, Unavailable):
        return [
            CHECK.finding(
                Status.WARN,
                f"{shm.path} is not usable: {shm.total_bytes.reason}",
                "DataLoader workers and NCCL need a shared-memory filesystem at /dev/shm.\n\n"
                + remedy(need, gpus, engine),
                evidence=evidence,
                commands=commands,
            )
        ]
    total = shm.total_bytes
    evidence["size_bytes"] = total
    free = None if isinstance(shm.free_bytes, Unavailable) else shm.free_bytes
    if free is not None:
        evidence["free_bytes"] = free
    evidence.update(est_evidence)
    evidence["estimated_need_bytes"] = need
    size = fmt_bytes(total)
    where = "this container's" if in_container(facts) else "the"
    users = "DataLoader workers" + (f" and NCCL ({gpus} GPUs)" if nccl else "")
    why = (
        f"{where.capitalize()} shared-memory filesystem {shm.path} is {size}"
        + (f" ({fmt_bytes(free)} free)" if free is not None else "")
        + f". Estimated need: {fmt_bytes(need)}, from "
        + " plus ".join(basis)
        + ". "
        "Each batch a worker produces travels through /dev/shm; when it is full the worker is killed by "
        "SIGBUS (`DataLoader worker (pid N) is killed by signal: Bus error`)."
    )
    batch = est_evidence.get("measured_batch_bytes")
    far = total < FAIL_FRACTION * need or (isinstance(batch, int) and total < batch) or (nccl and total < nccl)
    if far:
        return [
            CHECK.finding(
                Status.FAIL,
                f"{shm.path} is only {size}, far below the ~{fmt_bytes(need)} {users} need: "
                f"expect 'Bus error' worker deaths" + (" and NCCL init failures" if nccl else ""),
                f"{why}\n\n{remedy(need, gpus, engine)}",
                evidence=evidence,
                commands=commands,
            )
        ]
    # the need is an estimate ("~"): a size that prints the same as it ("1 GiB" for ~1.04 GiB) is not short
    if total < need and fmt_bytes(total) != fmt_bytes(need):
        return [
            CHECK.finding(
                Status.WARN,
                f"{shm.path} is {size}, below the ~{fmt_bytes(need)} {users} may need",
                f"{why}\n\n{remedy(need, gpus, engine)}",
                evidence=evidence,
                commands=commands,
            )
        ]
    if free is not None and free < need and fmt_bytes(free) != fmt_bytes(need):
        return [
            CHECK.finding(
                Status.WARN,
                f"{shm.path} has only {fmt_bytes(free)} free of {size} (~{fmt_bytes(need)} needed)",
                f"{why}\n\nSomething already holds most of it: list it with `ls -la /dev/shm` (`torch_*` files "
                f"left by killed workers, `nccl-*` segments, other jobs) and remove stale ones, or "
                f"{remedy(need, gpus, engine)[0].lower()}{remedy(need, gpus, engine)[1:]}",
                evidence=evidence,
                commands=(Command("ls -la /dev/shm", "what holds it: stale torch_* and nccl-* files"), *commands),
            )
        ]
    return [
        CHECK.finding(Status.OK, f"{shm.path} has {size} (~{fmt_bytes(need)} needed by {users})", evidence=evidence)
    ]


CHECK = Check(
    id="dataloader.shm",
    title="/dev/shm large enough for DataLoader workers and NCCL",
    needs=("shm", "os", "nvidia", "gpu", "dataloader_probe"),
    evaluate=evaluate,
)
