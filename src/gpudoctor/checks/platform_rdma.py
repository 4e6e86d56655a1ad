"""Check ``platform.rdma``: can NCCL use InfiniBand/RoCE here, and do the NCCL
network variables name things that exist?

Sources: NCCL docs, "Environment Variables" (``NCCL_SOCKET_IFNAME`` and
``NCCL_IB_HCA``: comma lists, prefix match, ``=`` for exact names, ``^`` to
exclude, ``:port`` for HCAs) and "Troubleshooting" (containers need the
``/dev/infiniband`` devices, ``--cap-add=IPC_LOCK`` and ``--ulimit
memlock=-1`` so verbs can register memory; otherwise NCCL falls back to TCP
sockets: "NET/Socket" in ``NCCL_DEBUG=INFO``); capabilities(7) (CAP_IPC_LOCK
lifts RLIMIT_MEMLOCK).

- no HCA -> ``skip``;
- HCAs on the host but no ``/dev/infiniband`` in this container -> ``warn``;
- no CAP_IPC_LOCK and a finite memlock limit -> ``warn``;
- ``NCCL_SOCKET_IFNAME``/``NCCL_IB_HCA`` naming nothing that exists -> ``warn``;
- otherwise ``ok``.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._gpu import target_probes
from gpudoctor.checks._platform import platform_of
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.platform import LimitsFacts, ProcessLimits, RdmaFacts, RLimit
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.words import plural

RUN_FLAGS = "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1"
K8S = (
    "in Kubernetes: the RDMA device plugin resource (e.g. `rdma/rdma_shared_device_a: 1`) or `hostNetwork` with "
    'the devices, and `securityContext.capabilities.add: ["IPC_LOCK"]`'
)


#: Slurm FAQ ("locked memory" for InfiniBand/MPI jobs): a job inherits the limit of the shell that
#: submitted it (PropagateResourceLimits) or of slurmd itself; both must allow unlimited locked memory.
SLURM_MEMLOCK = (
    "In a Slurm job the limit comes from the submitting shell (Slurm propagates it) or from `slurmd`: ask the "
    "administrators to set `PropagateResourceLimitsExcept=MEMLOCK` in `slurm.conf` and `LimitMEMLOCK=infinity` "
    "in slurmd's systemd unit (`systemctl edit slurmd`), or submit from a shell where `ulimit -l` is "
    "`unlimited`. Check inside the job: `srun bash -c 'ulimit -l'`."
)


def unmatched(spec: str, names: tuple[str, ...], strip_port: bool = False) -> list[str]:
    """Entries of an NCCL interface/HCA list that match no name (``^`` exclusions are ignored)."""
    spec = spec.strip()
    if not spec or spec.startswith("^"):
        return []
    exact = spec.startswith("=")
    out = []
    for entry in (spec[1:] if exact else spec).split(","):
        entry = entry.strip()
        if strip_port:
            entry = entry.split(":", 1)[0]
        if not entry:
            continue
        if not any(n == entry if exact else n.startswith(entry) for n in names):
            out.append(entry)
    return out


def _memlock(facts: Facts) -> RLimit | None:
    for _t, pr in target_probes(facts):
        if pr is not None and isinstance(pr.limits, ProcessLimits) and isinstance(pr.limits.memlock, RLimit):
            return pr.limits.memlock
    own = facts.of(LimitsFacts)
    if (
        not isinstance(own, Unavailable)
        and isinstance(own.process, ProcessLimits)
        and isinstance(own.process.memlock, RLimit)
    ):
        return own.process.memlock
    return None


def evaluate(facts: Facts) -> list[Finding]:
    r = require(facts, RdmaFacts)
    p = platform_of(facts)
    in_container = p is not None and p.in_container
    memlock = _memlock(facts)
    evidence = {
        "hcas": list(r.hcas),
        "dev_infiniband": list(r.dev_infiniband),
        "cap_ipc_lock": r.cap_ipc_lock if isinstance(r.cap_ipc_lock, bool) else str(r.cap_ipc_lock),
        "memlock": "unknown" if memlock is None else ("unlimited" if memlock.soft is None else str(memlock.soft)),
        **r.nccl_env,
    }
    findings: list[Finding] = []
    ifname = r.nccl_env.get("NCCL_SOCKET_IFNAME", "")
    bad_if = unmatched(ifname, r.net_interfaces) if r.net_interfaces else []
    if bad_if:
        good_if = next((n for n in r.net_interfaces if n != "lo"), "eth0")
        findings.append(
            CHECK.finding(
                Status.WARN,
                f"NCCL_SOCKET_IFNAME={ifname!r} names no interface here ({', '.join(bad_if)})",
                f"NCCL matches `NCCL_SOCKET_IFNAME` entries as prefixes (`=` for exact names, `^` to exclude); none of "
                f"{', '.join(bad_if)} exists (interfaces: {', '.join(r.net_interfaces)}), so NCCL finds no socket "
                f'interface ("Bootstrap : no socket interface found"). Set it to one of them, e.g. '
                f"`export NCCL_SOCKET_IFNAME={good_if}`.",
                evidence=evidence,
                commands=(Command(f"export NCCL_SOCKET_IFNAME={good_if}", "an interface this machine has"),),
            )
        )
    hca = r.nccl_env.get("NCCL_IB_HCA", "")
    bad_hca = unmatched(hca, r.hcas, strip_port=True)
    if hca and bad_hca:
        findings.append(
            CHECK.finding(
                Status.WARN,
                f"NCCL_IB_HCA={hca!r} names no HCA here ({', '.join(bad_hca)})",
                f"HCAs present: {', '.join(r.hcas) or 'none'} (`ls /sys/class/infiniband`, `ibv_devices`). With no "
                f"match NCCL uses no IB device and falls back to sockets. Use existing names, e.g. "
                f"`export NCCL_IB_HCA={r.hcas[0] if r.hcas else 'mlx5_0'}`.",
                evidence=evidence,
                commands=(
                    Command(f"export NCCL_IB_HCA={r.hcas[0]}", "an HCA this machine has")
                    if r.hcas
                    else Command("ls /sys/class/infiniband", "the HCAs this machine has"),
                ),
            )
        )
    if not r.hcas:
        if findings:
            return findings
        return [
            CHECK.finding(
                Status.SKIP,
                "no InfiniBand/RoCE HCA on this machine: NCCL uses sockets between nodes",
                evidence=evidence,
            )
        ]
    if r.nccl_env.get("NCCL_IB_DISABLE", "") == "1":
        return findings + [
            CHECK.finding(Status.INFO, f"{plural(len(r.hcas), 'HCA')} present but NCCL_IB_DISABLE=1", evidence=evidence)
        ]
    how = f"`docker run {RUN_FLAGS} ...` ({K8S})"
    run = Command(
        f"docker run {RUN_FLAGS} ...", "start the container with the RDMA devices and pinned memory", "changes"
    )
    if in_container and not r.dev_infiniband:
        findings.append(
            CHECK.finding(
                Status.WARN,
                f"the host has {plural(len(r.hcas), 'RDMA HCA')} ({', '.join(r.hcas)}) but this container has no "
                f"/dev/infiniband: NCCL will fall back to sockets",
                f"sysfs shows the host's HCAs, but without the uverbs devices NCCL cannot open them and silently uses "
                f'TCP ("NET/Socket" with `NCCL_DEBUG=INFO`), many times slower across nodes. Start the container '
                f"with {how}.",
                evidence=evidence,
                commands=(run,),
            )
        )
    elif r.cap_ipc_lock is False and memlock is not None and memlock.soft is not None:
        findings.append(
            CHECK.finding(
                Status.WARN,
                f"RDMA devices are present but locked memory is limited to {memlock.soft} bytes and "
                f"CAP_IPC_LOCK is missing: NCCL's IB transport can fail to register buffers",
                "Verbs pin NCCL's buffers; without CAP_IPC_LOCK they count against RLIMIT_MEMLOCK, and a finite limit "
                "makes `ibv_reg_mr` fail, so NCCL falls back to sockets or aborts. "
                + (
                    f"Start the container with {how}."
                    if in_container
                    else SLURM_MEMLOCK
                    if p is not None and p.scheduler == "slurm"
                    else "Raise it: `ulimit -l unlimited` (hard limit permitting), `* - memlock unlimited` in "
                    "`/etc/security/limits.conf`, or `LimitMEMLOCK=infinity` for a systemd service."
                ),
                evidence=evidence,
                commands=(run,)
                if in_container
                else (Command("srun bash -c 'ulimit -l'", "the locked-memory limit inside a job"),)
                if p is not None and p.scheduler == "slurm"
                else (Command("ulimit -l unlimited", "raise the locked-memory limit (hard limit permitting)"),),
            )
        )
    if findings:
        return findings
    return [
        CHECK.finding(
            Status.OK, f"{plural(len(r.hcas), 'RDMA HCA')} usable by NCCL ({', '.join(r.hcas)})", evidence=evidence
        )
    ]


CHECK = Check(
    id="platform.rdma",
    title="RDMA for NCCL: HCAs, /dev/infiniband, IPC_LOCK, memlock, NCCL_SOCKET_IFNAME/NCCL_IB_HCA",
    needs=("rdma", "platform", "limits", "targets"),
    evaluate=evaluate,
)
