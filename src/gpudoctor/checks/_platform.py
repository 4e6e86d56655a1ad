"""Pure helpers shared by the ``platform.*`` checks and by the GPU checks that
must name the right remedy for the platform in use.

Remedies and their sources:

- Docker: ``docker run --gpus all`` and Compose
  ``deploy.resources.reservations.devices`` (Docker docs, "GPU support" and
  "Enable GPU access with Docker Compose");
- Apptainer/Singularity: ``--nv`` binds the host's driver libraries
  (Apptainer user guide, "GPU Support");
- LXC: LXD/Incus ``gpu`` devices with ``nvidia.runtime=true`` (LXD docs,
  "Type: gpu"); raw LXC/Proxmox ``lxc.cgroup2.devices.allow`` and
  ``lxc.mount.entry`` lines (LXC ``lxc.container.conf(5)``) with the host
  driver's user-space installed ``--no-kernel-module``;
- Podman: CDI, ``podman run --device nvidia.com/gpu=all`` after
  ``nvidia-ctk cdi generate`` (NVIDIA Container Toolkit docs, "Support for
  Container Device Interface");
- Kubernetes: ``runtimeClassName: nvidia`` or the nvidia runtime as
  containerd's default, and the ``nvidia.com/gpu`` resource of the NVIDIA
  device plugin (NVIDIA k8s-device-plugin README; GPU Operator docs); GKE
  instead mounts the node's driver at ``/usr/local/nvidia`` through its own
  device plugin once the driver is installed (GKE docs "Run GPUs in Standard
  node pools": ``gpu-driver-version``, the driver-installer DaemonSet).
"""

from __future__ import annotations

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.platform import PlatformFacts
from gpudoctor.launchers import COMPOSE, K8S_RUNTIME_CLASS, SLURM_REQUEST, no_gpu_remedy
from gpudoctor.model import Command

__all__ = [
    "K8S_RUNTIME_CLASS",
    "REQUEST",
    "compose_snippet",
    "injection_commands",
    "injection_remedy",
    "platform_of",
    "scheduler_of",
]


def platform_of(facts: Facts) -> PlatformFacts | None:
    """The platform facts, or None when they were not collected."""
    p = facts.of(PlatformFacts)
    return None if isinstance(p, Unavailable) else p


def compose_snippet() -> str:
    """The Compose GPU reservation block (Docker docs)."""
    return COMPOSE


def injection_remedy(facts: Facts, gpu_requested: bool = True) -> str:
    """Markdown: how to give THIS process its GPU (devices and driver libraries), in the words of the
    launcher that decides (:func:`gpudoctor.launchers.no_gpu_remedy`): a JupyterHub spawner's setting,
    Kubernetes' runtime class, Podman's CDI device, LXD/Incus devices, Apptainer's ``--nv``, Docker's
    ``--gpus``; an unknown container gets each of them. ``gpu_requested`` says whether the job already
    asked for a GPU (then only the runtime side is named)."""
    return no_gpu_remedy(facts, gpu_requested)


def injection_commands(facts: Facts) -> tuple[Command, ...]:
    """The commands of :func:`injection_remedy` as data, preferred first, for this kind of container."""
    p = platform_of(facts)
    if p is not None and p.kubernetes:
        return (
            Command("kubectl get runtimeclass", "list the runtime classes (the pod needs `nvidia`)"),
            Command(
                "sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default",
                "on each GPU node: make the NVIDIA runtime containerd's default (then restart containerd)",
                "root",
            ),
        )
    runtime = p.container_runtime if p is not None else ""
    if runtime == "apptainer":
        return (Command("apptainer exec --nv image.sif nvidia-smi", "run the image with the host's driver libraries"),)
    if runtime == "lxc":
        return (
            Command("lxc config device add <name> gpu gpu", "LXD/Incus: give the container the GPU", "changes"),
            Command("lxc config set <name> nvidia.runtime=true", "LXD/Incus: mount the driver libraries", "changes"),
        )
    if runtime == "podman":
        return (
            Command(
                "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml", "on the host, once: CDI specs", "root"
            ),
            Command("podman run --device nvidia.com/gpu=all <image>", "start the container with every GPU"),
        )
    if runtime in ("containerd", "cri-o"):
        return (
            Command(
                f"sudo nvidia-ctk runtime configure --runtime={runtime.replace('-', '')}",
                f"on the host: register the NVIDIA runtime with {runtime} (then restart it)",
                "root",
            ),
        )
    return (
        Command("docker run --gpus all <image>", "start the container with every GPU (NVIDIA Container Toolkit)"),
        Command(
            "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
            "on the host, once: register the NVIDIA runtime with Docker",
            "root",
        ),
    )


def scheduler_of(p: PlatformFacts | None) -> str:
    """``slurm``, ``ray``, ``kubernetes`` or "" — who places this job (and sets its GPUs)."""
    if p is None:
        return ""
    if p.scheduler:
        return p.scheduler
    return "kubernetes" if p.kubernetes else ""


REQUEST = {
    "ray": (
        "Ray",
        "Ray sets `CUDA_VISIBLE_DEVICES` for each task and actor to the GPUs it reserved, and to an empty "
        "value when it reserved none. Reserve GPUs where the work is declared: "
        "`@ray.remote(num_gpus=1)` (tasks/actors), `ScalingConfig(num_workers=N, use_gpu=True)` "
        '(Ray Train), `ray_actor_options={"num_gpus": 1}` (Ray Serve).',
    ),
    "slurm": (
        "Slurm",
        SLURM_REQUEST,
    ),
    "kubernetes": (
        "Kubernetes",
        "In a pod the GPUs come from the NVIDIA device plugin: request them in the "
        "container's `resources.limits: nvidia.com/gpu: 1` (and run it with "
        "`runtimeClassName: nvidia`); setting the variable in the image or the pod spec "
        "does not allocate a GPU.",
    ),
}

#: scheduler -> how to see what the job was given (the allocation :data:`REQUEST` tells how to ask for)
REQUEST_COMMANDS = {
    "ray": (Command("ray status", "the GPUs the cluster has and what is reserved"),),
    "slurm": (
        Command("srun --gres=gpu:1 --pty bash", "an interactive shell with one GPU allocated"),
        Command("scontrol show job $SLURM_JOB_ID | grep -i tres", "what this job was allocated"),
    ),
    "kubernetes": (Command("kubectl describe pod <pod> | grep nvidia.com/gpu", "the GPUs the pod requested"),),
}
