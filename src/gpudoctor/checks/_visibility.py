"""GPU visibility (``CUDA_VISIBLE_DEVICES``/``NVIDIA_VISIBLE_DEVICES`` against the GPUs, the
scheduler and the torch release), judged in one place: the ``platform.visibility`` finding of a
target's environment, which ``cuda.devices`` reuses for a job the scheduler gave no GPU. A private
domain helper, not a check (sources: see :mod:`gpudoctor.checks.platform_visibility`).
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks._common import split_local
from gpudoctor.checks._gpu import gpu_devices, has_nvidia_gpu, v
from gpudoctor.checks._platform import REQUEST, REQUEST_COMMANDS, platform_of, scheduler_of
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.launchers import hub_gpu_remedy, spawner_of
from gpudoctor.model import Command, Finding, Status
from gpudoctor.visibility import HIDING, Gpu, parse_visible
from gpudoctor.words import plural

__all__ = ["CHECK_ID", "machine_gpus", "assess", "gpus_seen_by", "mig_instances", "parse_limit", "slurm_gpu_request"]

#: the check whose findings :func:`assess` makes
CHECK_ID = "platform.visibility"


def _finding(status: Status, summary: str, explanation: str = "", **kwargs: Any) -> Finding:
    return Finding(check=CHECK_ID, status=status, summary=summary, explanation=explanation, **kwargs)


def mig_instances(facts: Facts) -> dict[str, str]:
    """MIG UUID -> ``<profile> on GPU <index>`` from NVML (empty when NVML listed none)."""
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable):
        return {}
    return {m.uuid: f"{m.profile or 'MIG instance'} on GPU {d.index}" for d in nv.devices for m in d.mig_instances}


def machine_gpus(facts: Facts) -> list[Gpu]:
    """The GPUs of this machine for the visibility model (NVML order, UUIDs, MIG mode and devices)."""
    migs: dict[int, list[str]] = {}
    nv = facts.of(NvidiaDriverFacts)
    if not isinstance(nv, Unavailable):
        for d in nv.devices:
            migs[d.index] = [m.uuid for m in d.mig_instances]
    return [Gpu(d.index, d.uuid, d.mig, tuple(migs.get(d.index, ()))) for d in gpu_devices(facts)]


def parse_limit(torch_version: str | None, entries: list[str]) -> dict[str, Any] | None:
    """The [[visible_devices]] row this torch release trips on, given the entries' forms, or None."""
    if not torch_version:
        return None
    public = v(split_local(torch_version)[0])
    forms = {f"{e[:3]}-uuid" for e in entries if e.startswith(("GPU-", "MIG-"))}
    row: dict[str, Any]
    for row in load_table("platform")["visible_devices"]:
        if row["form"] in forms and v(row["first"]) <= public < v(row["fixed"]):
            return row
    return None


def slurm_gpu_request(env: dict[str, str]) -> bool:
    """Whether the Slurm job's environment shows a GPU allocation (sbatch(1) OUTPUT ENVIRONMENT VARIABLES:
    ``SLURM_JOB_GPUS``/``SLURM_STEP_GPUS``/``SLURM_GPUS*`` set, or ``gpu`` in ``SLURM_JOB_GRES``/
    ``SLURM_STEP_GRES``/``SLURM_TRES_PER_TASK``)."""
    for key, value in env.items():
        if key.startswith(("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS")) and value.strip():
            return True
        if key in ("SLURM_JOB_GRES", "SLURM_STEP_GRES", "SLURM_TRES_PER_TASK") and "gpu" in value.lower():
            return True
    return False


def gpus_seen_by(facts: Facts, torch_count: int | None) -> int | None:
    """GPUs this job can see: the target's ``torch.cuda.device_count()``, else NVML's device count when
    NVML answered; None when neither says."""
    if torch_count is not None:
        return torch_count
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable) or isinstance(nv.nvml, Unavailable):
        return None
    return len(nv.devices)


def assess(
    facts: Facts,
    env: dict[str, Any],
    torch_version: str | None,
    label: str | None,
    gpus_seen: int | None = None,
) -> Finding:
    """The finding for one environment (a target's, or the platform's).

    ``gpus_seen``: GPUs the target could use (``torch.cuda.device_count()`` or NVML's count), None when
    unknown; 0 in a Slurm job without a GPU allocation is the "forgot ``--gres``" signature."""
    p = platform_of(facts)
    sched = scheduler_of(p)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    evidence = {
        k: val
        for k, val in (
            ("CUDA_VISIBLE_DEVICES", cvd),
            ("NVIDIA_VISIBLE_DEVICES", nvd),
            ("scheduler", sched),
            ("torch", torch_version),
        )
        if val is not None
    }
    devices = gpu_devices(facts)
    hides = (
        cvd is not None
        and parse_visible(cvd).names_gpus(machine_gpus(facts)) is not True
        and (cvd.strip() == "" or cvd.strip().lower() in HIDING)
    ) or (nvd is not None and nvd.strip().lower() in HIDING)
    if hides and has_nvidia_gpu(facts) is False:
        # the PCI bus was read and shows no NVIDIA GPU, and there is no driver: nothing is hidden (issue 32)
        shown = " and ".join(
            f"{k}={val!r}"
            for k, val in (("CUDA_VISIBLE_DEVICES", cvd), ("NVIDIA_VISIBLE_DEVICES", nvd))
            if val is not None
        )
        return _finding(
            Status.OK,
            f"{shown} would hide GPUs, but this machine has none to hide (no NVIDIA GPU on the PCI bus)",
            evidence=evidence,
            target=label,
        )
    if cvd is None and sched == "slurm" and gpus_seen == 0 and has_nvidia_gpu(facts) is False:
        return _finding(
            Status.OK,
            "Slurm job without a GPU request on a node without NVIDIA GPUs (no NVIDIA GPU on the PCI bus)",
            evidence=evidence,
            target=label,
        )
    if sched == "kubernetes" and nvd is not None and nvd.strip().lower() in HIDING and cvd is None:
        who, how = REQUEST["kubernetes"]
        return _finding(
            Status.FAIL,
            f"NVIDIA_VISIBLE_DEVICES={nvd!r} in this pod: no GPU was allocated to it",
            f"The NVIDIA runtime injects no GPU for this value. {how}",
            evidence=evidence,
            target=label,
            commands=REQUEST_COMMANDS["kubernetes"],
        )
    if cvd is None and sched == "slurm" and not slurm_gpu_request(p.env if p else {}) and gpus_seen == 0:
        who, how = REQUEST["slurm"]
        job = (p.env.get("SLURM_JOB_ID", "") if p else "").strip()
        return _finding(
            Status.FAIL,
            f"Slurm job{' ' + job if job else ''} requested no GPU: CUDA sees none (no --gres=gpu / --gpus in the job)",
            f"This job carries no GPU allocation (no `SLURM_JOB_GPUS`, `SLURM_GPUS*` or `gpu` in "
            f"`SLURM_JOB_GRES`), and the node's device cgroup (`ConstrainDevices=yes` in `cgroup.conf`) hides the "
            f'GPUs from it: `nvidia-smi` prints "No devices were found" and `torch.cuda.is_available()` is False, '
            f"although the node has GPUs. {how} Interactive: `srun --gres=gpu:1 --pty bash` or "
            f"`salloc --gpus=1`. Check the job with `scontrol show job $SLURM_JOB_ID | grep -i tres`."
            + (f"\n\n{hub_gpu_remedy('batch')}" if spawner_of(facts) == "batch" else ""),
            evidence=evidence,
            target=label,
            commands=REQUEST_COMMANDS["slurm"],
        )
    if cvd is None:
        return _finding(
            Status.OK, "CUDA_VISIBLE_DEVICES is not set: every GPU is visible", evidence=evidence, target=label
        )
    parsed = parse_visible(cvd)
    entries = [e.text for e in parsed.entries] or [""]
    # a value naming no GPU this machine has hides them all (never "ok"); None: no GPUs known to judge by
    hidden_all = parsed.names_gpus(machine_gpus(facts)) is False
    if hidden_all and sched in REQUEST:
        who, how = REQUEST[sched]
        return _finding(
            Status.FAIL,
            f"{who} set CUDA_VISIBLE_DEVICES={cvd!r}: this job was given no GPU",
            f"`CUDA_VISIBLE_DEVICES={cvd}` hides every GPU, and it was set by {who} for this job, so unsetting it "
            f"in the script only hides the real problem (and may take GPUs another job owns). {how}",
            evidence=evidence,
            target=label,
            commands=REQUEST_COMMANDS[sched],
        )
    renumbered = (
        p is not None
        and p.in_container
        and bool(devices)
        and entries[0].isdigit()
        and int(entries[0]) >= len(devices)
        and cvd.strip() != ""
    )
    if hidden_all and renumbered:
        host_ids = p.env.get("NVIDIA_VISIBLE_DEVICES", "") if p is not None else ""
        n = len(devices)
        return _finding(
            Status.FAIL,
            f"CUDA_VISIBLE_DEVICES={cvd!r} names a host GPU index; inside this container the {plural(n, 'GPU')} "
            f"{'is' if n == 1 else 'are'} numbered from 0",
            "The container runtime passes only the assigned GPUs"
            + (f" (`NVIDIA_VISIBLE_DEVICES={host_ids}`)" if host_ids else "")
            + f" and CUDA numbers them from 0 inside the container, so index {entries[0]} does not exist here "
            f'(`invalid device ordinal`, or "no CUDA GPUs are available"). '
            + (
                "In a pod the device plugin picks the GPU (`nvidia.com/gpu: N` in the limits): remove "
                "`CUDA_VISIBLE_DEVICES` from the pod spec or the image, or use indices from 0."
                if p is not None and p.kubernetes
                else f"Select the GPU on the host side (`docker run --gpus '\"device={entries[0]}\"'`, Compose "
                f"`device_ids: ['{entries[0]}']`) and use `CUDA_VISIBLE_DEVICES=0` (or leave it unset) inside."
            ),
            evidence=evidence,
            target=label,
            commands=(Command("unset CUDA_VISIBLE_DEVICES", "inside: every GPU the container was given"),)
            if p is not None and p.kubernetes
            else (
                Command(
                    f"docker run --gpus '\"device={entries[0]}\"' ...",
                    "select the host GPU when the container starts",
                    "changes",
                ),
                Command("export CUDA_VISIBLE_DEVICES=0", "inside: the first GPU the container was given"),
            ),
        )
    if hidden_all:
        return _finding(
            Status.FAIL,
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU; no scheduler set it",
            "No Slurm, Ray or Kubernetes placement here, so it comes from the environment or the "
            "script: `unset CUDA_VISIBLE_DEVICES` or list the GPUs to use (`nvidia-smi -L`).",
            evidence=evidence,
            target=label,
            commands=(
                Command("unset CUDA_VISIBLE_DEVICES", "make every GPU visible again"),
                Command("nvidia-smi -L", "the GPUs to list instead"),
            ),
        )
    row = parse_limit(torch_version, entries)
    if row is not None:
        return _finding(
            Status.FAIL,
            f"torch {torch_version} cannot parse the {row['form'].split('-')[0]}- UUIDs in "
            f"CUDA_VISIBLE_DEVICES; fixed in torch {row['fixed']}",
            f"The value is valid for CUDA, but in torch {torch_version}: {row['effect']} ({row['source']}). "
            f"Upgrade torch to {row['fixed']} or newer (with matching torchvision/torchaudio), or — when the "
            f"scheduler allows — pass indices instead of UUIDs.",
            evidence=evidence,
            target=label,
            commands=(
                Command(f'python -m pip install "torch>={row["fixed"]}"', "a torch that parses these UUIDs", "changes"),
            ),
        )
    migs = [e for e in entries if e.startswith("MIG-")]
    if len(migs) > 1:
        known = mig_instances(facts)
        listed = ", ".join(f"`{m}`" + (f" ({known[m]})" if m in known else "") for m in migs)
        evidence["mig_instances"] = listed
        return _finding(
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES lists {len(migs)} MIG instances; a CUDA process uses only the first",
            f'CUDA enumerates a single MIG instance per process (NVIDIA MIG User Guide, "CUDA Device '
            f'Enumeration"): of {listed}, `{migs[0]}` is `cuda:0` and the other {len(migs) - 1} are unused; '
            f"`cuda:1` fails with "
            f'"invalid device ordinal". Run one process per MIG instance, each with its own '
            f"`CUDA_VISIBLE_DEVICES=MIG-...` (torchrun/DDP: one rank per instance).",
            evidence=evidence,
            target=label,
            commands=(Command(f"export CUDA_VISIBLE_DEVICES={migs[0]}", "one MIG instance per process"),),
        )
    return _finding(
        Status.OK,
        f"CUDA_VISIBLE_DEVICES={cvd!r} names GPUs this machine has"
        + (f" (set by {REQUEST[sched][0]})" if sched in REQUEST else ""),
        evidence=evidence,
        target=label,
    )
