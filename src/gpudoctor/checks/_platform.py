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

K8S_RUNTIME_CLASS = """```yaml
spec:
  runtimeClassName: nvidia      # pod level, next to `containers:`
  containers:
    - name: main
      resources:
        limits:
          nvidia.com/gpu: 1
```"""

COMPOSE = """```yaml
services:
  train:
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
```"""


def platform_of(facts: Facts) -> PlatformFacts | None:
    """The platform facts, or None when they were not collected."""
    p = facts.of(PlatformFacts)
    return None if isinstance(p, Unavailable) else p


def compose_snippet() -> str:
    """The Compose GPU reservation block (Docker docs)."""
    return COMPOSE


def injection_remedy(facts: Facts, gpu_requested: bool = True) -> str:
    """Markdown: how to give THIS kind of container its GPU (devices and driver libraries).

    Kubernetes gets the runtime-class / device-plugin remedy, never Docker's
    run flag; Podman gets CDI; Docker gets ``--gpus all`` and Compose; an
    unknown container gets each of them. ``gpu_requested`` says whether the
    job already asked for a GPU (then only the runtime side is named).
    """
    p = platform_of(facts)
    if p is not None and p.kubernetes:
        request = (
            "The pod already requests a GPU (the device plugin assigned one), so the request is not the "
            "problem: the container was created by the plain runtime (runc), which ignores it. Run the pod "
            "with the NVIDIA runtime class:"
            if gpu_requested
            else "Request a GPU from the NVIDIA device plugin (`resources.limits: nvidia.com/gpu: 1`; an image's "
            "own `NVIDIA_VISIBLE_DEVICES` allocates nothing) and run the pod with the NVIDIA runtime class:"
        )
        return (
            f"{request}\n\n{K8S_RUNTIME_CLASS}\n\n"
            "(`kubectl get runtimeclass` lists it; the GPU Operator creates `nvidia`), or make `nvidia` "
            "containerd's default runtime on the GPU nodes: "
            "`sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default` then "
            "`sudo systemctl restart containerd` (microk8s/k3s keep containerd's config in their own "
            "template). Do not install a driver inside the image. Docker's run flags do not apply inside a "
            "pod: the kubelet creates the container.\n\nGKE is the exception: it uses no NVIDIA runtime; its "
            "device plugin mounts the driver (installed on the node under `/home/kubernetes/bin/nvidia`) at "
            "`/usr/local/nvidia` in containers that request `nvidia.com/gpu`, once the driver is installed: create "
            "the GPU node pool with `--accelerator type=<gpu>,count=1,gpu-driver-version=default`, or apply "
            "Google's driver-installer DaemonSet (`kubectl get pods -n kube-system | grep nvidia-driver-installer`)."
        )
    runtime = p.container_runtime if p is not None else ""
    if runtime == "apptainer":
        return (
            "Run the container with the host's NVIDIA driver libraries: `apptainer exec --nv image.sif ...` "
            "(`singularity exec --nv ...`; with the NVIDIA Container Toolkit's CLI on the host: `--nvccli`). "
            "In a Slurm job also request the GPU (`--gres=gpu:1`)."
        )
    if runtime == "lxc":
        version = ""
        if p is not None and p.proc_driver_version:
            parts = [w for w in p.proc_driver_version.split() if w[:1].isdigit() and "." in w]
            version = parts[0] if parts else ""
        same = f" {version}" if version else ""
        return (
            "An LXC container gets the GPU from its configuration, not from an NVIDIA runtime hook. LXD/Incus: "
            "`lxc config device add <name> gpu gpu` and `lxc config set <name> nvidia.runtime=true`, then restart "
            "it. Proxmox/raw LXC: allow and bind the device nodes in the container's config:\n\n```\n"
            "lxc.cgroup2.devices.allow: c 195:* rwm\nlxc.cgroup2.devices.allow: c 509:* rwm   # nvidia-uvm: "
            "its major from `ls -l /dev/nvidia-uvm` on the host\n"
            "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n```\n\n"
            f"and install inside the container the user-space of the host's driver, the same version{same}, "
            "without its kernel module (`./NVIDIA-Linux-x86_64-<version>.run --no-kernel-module`): any other "
            'version gives "Driver/library version mismatch".'
        )
    if runtime == "podman":
        return (
            "Start the container with the GPU through CDI: `podman run --device nvidia.com/gpu=all ...` "
            "(on the host, once: `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`; "
            "`nvidia-ctk cdi list` shows the device names)."
        )
    if runtime in ("containerd", "cri-o"):
        return (
            f"Start the container through the NVIDIA runtime: with nerdctl `nerdctl run --gpus all ...`; "
            f"for {runtime} generally, register it on the host with "
            f"`sudo nvidia-ctk runtime configure --runtime={runtime.replace('-', '')}` and restart {runtime}, "
            f"or use CDI (`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)."
        )
    if runtime == "docker":
        return (
            "Start the container with the GPU: `docker run --gpus all ...` (NVIDIA Container Toolkit on the "
            "host; `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` once), "
            f"or in Docker Compose reserve it:\n\n{COMPOSE}"
        )
    return (
        "Start the container through the NVIDIA Container Toolkit: Docker `docker run --gpus all ...` (Compose: "
        "`deploy.resources.reservations.devices` with `driver: nvidia`), Podman "
        "`podman run --device nvidia.com/gpu=all ...` (CDI), Kubernetes `runtimeClassName: nvidia` with "
        "`nvidia.com/gpu: 1`."
    )


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
        "Slurm exports the GPUs of the job's allocation; a job that asked for none gets no GPU "
        "(older releases export `NoDevFiles`). Request them: `#SBATCH --gres=gpu:1` (or "
        "`--gpus=1`), or `srun --gres=gpu:1 ...`.",
    ),
    "kubernetes": (
        "Kubernetes",
        "In a pod the GPUs come from the NVIDIA device plugin: request them in the "
        "container's `resources.limits: nvidia.com/gpu: 1` (and run it with "
        "`runtimeClassName: nvidia`); setting the variable in the image or the pod spec "
        "does not allocate a GPU.",
    ),
}
