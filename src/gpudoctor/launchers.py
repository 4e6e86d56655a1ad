"""Who started this process, and how that launcher gives a process its GPUs.

One cause — "no GPU reached the process" — has as many remedies as there are things that start
processes: a Docker flag, a Podman CDI device, a pod's runtime class and device-plugin request, an
LXD/Incus device, an Apptainer option, a Slurm request, a Ray resource, a JupyterHub spawner setting.
This module decides from the facts which launchers stand between the machine and the process
(:func:`chain`) and words the remedy in the setting of the one that decides
(:func:`no_gpu_remedy`); checks call it instead of naming a ``docker run`` flag to someone who
does not run Docker. :func:`rank_binding` judges a scheduler's GPU binding together with the
rank a distributed launcher gives the process.

Sources for the remedies:

- Docker: ``docker run --gpus all``, Compose ``deploy.resources.reservations.devices`` (Docker docs,
  "GPU support");
- Podman: CDI, ``podman run --device nvidia.com/gpu=all`` after ``nvidia-ctk cdi generate``
  (NVIDIA Container Toolkit docs, "Support for Container Device Interface");
- containerd without Kubernetes: ``nerdctl run --gpus all`` (nerdctl docs, "Using GPUs"),
  ``ctr run --gpus 0`` (ctr's NVIDIA hook);
- Kubernetes: ``resources.limits: nvidia.com/gpu`` (NVIDIA k8s-device-plugin README) and
  ``runtimeClassName: nvidia`` (GPU Operator docs);
- LXD/Incus: a ``gpu`` device and ``nvidia.runtime=true`` (LXD and Incus docs, "Type: gpu",
  "nvidia.runtime": the host's NVIDIA user-space is passed in by libnvidia-container);
  raw LXC/Proxmox: ``lxc.cgroup2.devices.allow`` / ``lxc.mount.entry`` (lxc.container.conf(5));
- Apptainer/Singularity: ``--nv`` binds the host's driver libraries, ``--nvccli`` uses
  nvidia-container-cli (Apptainer user guide, "GPU Support");
- Slurm: ``--gres=gpu:N`` / ``--gpus=N`` (sbatch(1)), ``--gpus-per-task`` and ``--gpu-bind``
  (srun(1): each task is bound to its own GPUs), ``SLURM_LOCALID`` (the node-local task id);
- Ray: ``num_gpus`` (Ray docs, "Accelerator support": ``CUDA_VISIBLE_DEVICES`` is set to the GPUs
  a task or actor reserved, empty when it reserved none);
- JupyterHub: DockerSpawner ``extra_host_config`` (docker-py ``device_requests``), KubeSpawner
  ``extra_resource_limits`` / ``extra_pod_config`` and the Zero to JupyterHub chart's
  ``singleuser.extraResource`` / ``singleuser.extraPodConfig`` / ``profileList``
  (``kubespawner_override``), SystemdSpawner ``isolate_devices`` (``PrivateDevices=yes`` hides
  ``/dev/nvidia*``), ``c.Spawner.environment`` / ``c.Spawner.env_keep`` (JupyterHub docs);
- torchrun (``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``TORCHELASTIC_RUN_ID``: torch.distributed.elastic
  docs), accelerate (``ACCELERATE_*``; ``accelerate launch`` places a process on ``cuda:LOCAL_RANK``),
  DeepSpeed's launcher (``LOCAL_RANK``, ``CROSS_RANK``, ``LOCAL_SIZE``; ``--include``/``--num_gpus``).
"""

from __future__ import annotations

import re

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.launch import LaunchFacts
from gpudoctor.facts.platform import PlatformFacts
from gpudoctor.model import Command
from gpudoctor.records import frozen_dataclass

__all__ = [
    "COMPOSE",
    "K8S_RUNTIME_CLASS",
    "SLURM_REQUEST",
    "SPAWNER_NAMES",
    "Binding",
    "Launcher",
    "chain",
    "host_driver_version",
    "hub_gpu_remedy",
    "kinds",
    "lxd_api",
    "no_gpu_remedy",
    "rank_binding",
    "spawner_of",
    "spawner_word",
    "to_int",
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


@frozen_dataclass
class Launcher:
    """One thing that stands between the machine and the process.

    Attributes:
        kind: ``slurm``, ``ray``, ``kubernetes``, ``jupyterhub``, ``docker``, ``podman``, ``containerd``,
            ``cri-o``, ``lxd``, ``incus``, ``lxc``, ``apptainer``, ``container``, ``torchrun``,
            ``accelerate``, ``deepspeed`` or ``host``.
        name: how a person calls it (``Slurm job 4242``, ``JupyterHub (KubeSpawner)``, ``Incus``).
        evidence: why it is believed (a variable, a marker file, a systemd unit).
        detail: a kind-specific detail: the spawner (``docker``, ``kube``, ``systemd``, ``local``).
    """

    kind: str
    name: str
    evidence: str
    detail: str = ""


def _platform(facts: Facts) -> PlatformFacts | None:
    p = facts.of(PlatformFacts)
    return None if isinstance(p, Unavailable) else p


def _launch(facts: Facts) -> LaunchFacts | None:
    launch = facts.of(LaunchFacts)
    return None if isinstance(launch, Unavailable) else launch


def _hub_spawner_class(facts: Facts) -> str:
    launch = _launch(facts)
    if launch is None or isinstance(launch.hub, Unavailable):
        return ""
    return launch.hub.spawner


def spawner_word(spawner_class: str) -> str:
    low = spawner_class.lower()
    for word in ("docker", "kube", "systemd", "sudo", "batch", "local"):
        if word in low:
            return {"sudo": "local", "batch": "batch"}.get(word, word)
    return ""


def spawner_of(facts: Facts) -> str:
    """The JupyterHub spawner that started THIS process (``docker``, ``kube``, ``systemd``, ``local``),
    or "" when no hub started it. A hub-started server has ``JUPYTERHUB_*`` in its environment; the
    spawner follows from where it runs: a pod (KubeSpawner), a Docker container (DockerSpawner), a
    ``jupyter-<user>-singleuser`` systemd unit (SystemdSpawner), else the hub's configured class."""
    p = _platform(facts)
    if p is None or not any(k.startswith("JUPYTERHUB_") for k in p.env):
        return ""
    if p.kubernetes:
        return "kube"
    if p.container_runtime in ("docker", "podman"):
        return "docker"
    if p.scheduler == "slurm":
        return "batch"  # batchspawner's SlurmSpawner runs the server as a Slurm job
    launch = _launch(facts)
    if launch is not None and re.match(r"jupyter-.+-singleuser\.service$", launch.unit):
        return "systemd"
    return spawner_word(_hub_spawner_class(facts)) or "local"


SPAWNER_NAMES = {
    "docker": "DockerSpawner",
    "kube": "KubeSpawner",
    "systemd": "SystemdSpawner",
    "local": "LocalProcessSpawner",
    "batch": "batchspawner (Slurm)",
}


def chain(facts: Facts) -> tuple[Launcher, ...]:
    """The launchers of this process, outermost first: the spawner or scheduler that placed it, the
    orchestrator, the container engine, the distributed launcher; ``host`` alone when none."""
    p = _platform(facts)
    launch = _launch(facts)
    if p is None:
        return ()
    env = p.env
    out: list[Launcher] = []
    spawner = spawner_of(facts)
    if spawner:
        user = env.get("JUPYTERHUB_USER", "")
        out.append(
            Launcher(
                "jupyterhub",
                f"JupyterHub ({SPAWNER_NAMES.get(spawner, spawner)})",
                "JUPYTERHUB_* in the environment" + (f" (user {user})" if user else ""),
                spawner,
            )
        )
    if p.scheduler == "slurm":
        job = env.get("SLURM_JOB_ID", "")
        out.append(Launcher("slurm", f"Slurm job {job}".strip(), "SLURM_JOB_ID is set"))
    elif p.scheduler == "ray":
        out.append(Launcher("ray", "Ray", "RAY_* variables of a Ray worker"))
    if p.kubernetes:
        out.append(Launcher("kubernetes", "Kubernetes", "; ".join(m for m in p.markers if "kube" in m.lower())))
    runtime = p.container_runtime
    if p.in_container and runtime:
        kind, name = (
            runtime,
            {
                "docker": "Docker",
                "podman": "Podman",
                "containerd": "containerd",
                "cri-o": "CRI-O",
                "apptainer": "Apptainer/Singularity",
                "container": "a container engine",
            }.get(runtime, runtime),
        )
        if runtime == "lxc":
            api = lxd_api(p, launch)
            kind, name = (api, {"lxd": "LXD", "incus": "Incus"}[api]) if api else ("lxc", "LXC")
        if not (p.kubernetes and runtime in ("containerd", "cri-o", "container")):
            out.append(Launcher(kind, name, "; ".join(p.markers)))
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true" or ("CROSS_RANK" in env and "LOCAL_SIZE" in env):
        out.append(Launcher("deepspeed", "DeepSpeed launcher", "CROSS_RANK/LOCAL_SIZE or ACCELERATE_USE_DEEPSPEED"))
    elif any(k.startswith("ACCELERATE_") for k in env):
        out.append(Launcher("accelerate", "accelerate launch", "ACCELERATE_* in the environment"))
    elif "TORCHELASTIC_RUN_ID" in env or ("LOCAL_RANK" in env and "LOCAL_WORLD_SIZE" in env):
        out.append(Launcher("torchrun", "torchrun", "TORCHELASTIC_RUN_ID / LOCAL_WORLD_SIZE is set"))
    if not out:
        out.append(Launcher("host", {"wsl": "WSL", "vm": "a VM"}.get(p.kind, "the host"), f"platform: {p.kind}"))
    return tuple(out)


def lxd_api(p: PlatformFacts | None, launch: LaunchFacts | None) -> str:
    """``lxd`` or ``incus`` when the container has that guest API socket (launch facts, else the
    platform's markers), "" for raw LXC/Proxmox."""
    if launch is not None and launch.lxd_api:
        return launch.lxd_api
    markers = " ".join(p.markers) if p is not None else ""
    return "incus" if "/dev/incus/sock" in markers else "lxd" if "/dev/lxd/sock" in markers else ""


def kinds(facts: Facts) -> tuple[str, ...]:
    """The kinds of :func:`chain`, outermost first."""
    return tuple(launcher.kind for launcher in chain(facts))


# --------------------------------------------------------------------------- remedies


def hub_gpu_remedy(spawner: str, here: bool = True) -> str:
    """Markdown: the spawner setting that gives a single-user server its GPU. ``here``: said to the
    process the spawner started ("This notebook server was started by"); else to the hub's admin."""
    who = "This notebook server was started by" if here else "The single-user servers are started by"
    restart = (
        "\n\nThen restart the hub and the user's server (Hub Control Panel > Stop My Server > Start My "
        "Server): the spawner creates the server, so nothing typed in the notebook or its terminal reaches it."
    )
    if spawner == "docker":
        return (
            f"{who} JupyterHub's **DockerSpawner**: the GPU is requested in the "
            "spawner's host config, in `jupyterhub_config.py`:\n\n```python\nimport docker\n"
            "c.DockerSpawner.extra_host_config = {\n"
            '    "device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],\n}\n```\n\n'
            "(the NVIDIA Container Toolkit must be configured for Docker on the host; an image that sets "
            "`NVIDIA_VISIBLE_DEVICES` allocates nothing by itself)." + restart
        )
    if spawner == "kube":
        return (
            f"{who} JupyterHub's **KubeSpawner**: the pod gets a GPU only when the "
            "spawner requests it from the NVIDIA device plugin. In `jupyterhub_config.py`:\n\n```python\n"
            'c.KubeSpawner.extra_resource_limits = {"nvidia.com/gpu": "1"}\n'
            'c.KubeSpawner.extra_pod_config = {"runtimeClassName": "nvidia"}   # where runc is the default\n'
            "```\n\nor in the Zero to JupyterHub Helm values (then `helm upgrade`):\n\n```yaml\nsingleuser:\n"
            '  extraResource:\n    limits:\n      nvidia.com/gpu: "1"\n  extraPodConfig:\n'
            "    runtimeClassName: nvidia\n```\n\n(per profile: `kubespawner_override: {extra_resource_limits: "
            '{"nvidia.com/gpu": "1"}}` in `singleuser.profileList`).' + restart
        )
    if spawner == "systemd":
        return (
            f"{who} JupyterHub's **SystemdSpawner** as a transient systemd unit. "
            "With `c.SystemdSpawner.isolate_devices = True` the unit runs with `PrivateDevices=yes`, which hides "
            "`/dev/nvidia*`: set it to False in `jupyterhub_config.py`:\n\n```python\n"
            "c.SystemdSpawner.isolate_devices = False\n```\n\nThe unit does not read shell profiles either: "
            "pass CUDA variables with `c.Spawner.environment = {...}` or keep the hub's with "
            '`c.Spawner.env_keep.extend(["LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"])`.' + restart
        )
    if spawner == "batch":
        return (
            f"{who} JupyterHub's **batchspawner** (SlurmSpawner) as a Slurm job: the job gets a GPU only when the "
            "spawner's batch script requests one. In `jupyterhub_config.py`:\n\n```python\n"
            'c.SlurmSpawner.req_gres = "gpu:1"   # the default batch_script adds #SBATCH --gres={gres}\n'
            "```\n\n(a custom `c.SlurmSpawner.batch_script` needs its own `#SBATCH --gres=gpu:1` line; with "
            "profiles, `wrapspawner.ProfilesSpawner` passes `req_gres` per profile)." + restart
        )
    return (
        f"{who} JupyterHub as a plain process on this machine (the default "
        "LocalProcessSpawner), so no container stands in the way: its kernels see what the spawner's "
        "environment gives them. A GPU hidden by `CUDA_VISIBLE_DEVICES`, or a lost `LD_LIBRARY_PATH`, comes from "
        "the spawner: set it in `jupyterhub_config.py` with `c.Spawner.environment = {...}` or keep the hub's "
        'value with `c.Spawner.env_keep.extend(["LD_LIBRARY_PATH"])`.' + restart
    )


def _lxd_remedy(tool: str, product: str, version: str) -> str:
    same = f" {version}" if version else ""
    return (
        f"An {product} container gets the GPU from its configuration, not from a runtime flag. On the host:\n\n"
        f"```\n{tool} config device add <container> gpu0 gpu\n"
        f"{tool} config set <container> nvidia.runtime=true\n{tool} restart <container>\n```\n\n"
        f"`nvidia.runtime=true` passes the host driver's user-space{same} into the container (the NVIDIA "
        "Container Toolkit's `nvidia-container-cli` must be installed on the host); do not install a "
        "driver inside the container, whose version would have to match the host's kernel module exactly."
    )


def _raw_lxc_remedy(version: str) -> str:
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


def host_driver_version(p: PlatformFacts | None) -> str:
    """The host kernel module's version from ``/proc/driver/nvidia/version`` ("" when not shown)."""
    if p is None or not p.proc_driver_version:
        return ""
    parts = [w for w in p.proc_driver_version.split() if re.fullmatch(r"\d{3}\.\d+(\.\d+)?", w)]
    return parts[0] if parts else ""


def _kubernetes_remedy(gpu_requested: bool) -> str:
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


SLURM_REQUEST = (
    "Slurm exports the GPUs of the job's allocation; a job that asked for none gets no GPU "
    "(older releases export `NoDevFiles`). Request them: `#SBATCH --gres=gpu:1` (or "
    "`--gpus=1`), or `srun --gres=gpu:1 ...`."
)


def no_gpu_remedy(facts: Facts, gpu_requested: bool = True) -> str:
    """Markdown: how to give THIS process its GPU, in the setting of the launcher that decides.

    A JupyterHub spawner comes first (its setting creates the container or pod), then Kubernetes
    (runtime class / device plugin), then the container engine (Podman CDI, LXD/Incus devices,
    Apptainer ``--nv``, nerdctl, Docker), with the Slurm request added where a Slurm job runs the
    container. ``gpu_requested``: the job already asked for a GPU (only the runtime side is named).
    """
    p = _platform(facts)
    spawner = spawner_of(facts)
    if spawner:
        text = hub_gpu_remedy(spawner)
        if spawner == "kube" and gpu_requested:
            text += "\n\nWhen the limit is already there, the pod ran under runc:\n\n" + _kubernetes_remedy(True)
        return text
    if p is not None and p.kubernetes:
        return _kubernetes_remedy(gpu_requested)
    runtime = p.container_runtime if p is not None else ""
    slurm = p is not None and p.scheduler == "slurm"
    if runtime == "apptainer":
        return (
            "Run the container with the host's NVIDIA driver libraries: `apptainer exec --nv image.sif ...` "
            "(`singularity exec --nv ...`; with the NVIDIA Container Toolkit's CLI on the host: `--nvccli`)."
            + (
                " In this Slurm job the GPU must also be allocated: `#SBATCH --gres=gpu:1` (or `--gpus=1`), then "
                "`srun apptainer exec --nv image.sif ...`."
                if slurm
                else " In a Slurm job also request the GPU (`--gres=gpu:1`)."
            )
        )
    if runtime == "lxc":
        api = lxd_api(p, _launch(facts))
        version = host_driver_version(p)
        if api:
            return _lxd_remedy("incus" if api == "incus" else "lxc", "Incus" if api == "incus" else "LXD", version)
        return _raw_lxc_remedy(version)
    if runtime == "podman":
        return (
            "Start the container with the GPU through CDI: `podman run --device nvidia.com/gpu=all ...` "
            "(on the host, once and after every driver upgrade: "
            "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`; `nvidia-ctk cdi list` shows the device "
            "names)."
        )
    if runtime in ("containerd", "cri-o"):
        return (
            f"Start the container through the NVIDIA runtime: with nerdctl `nerdctl run --gpus all ...`, with ctr "
            f"`ctr run --gpus 0 ...`; for {runtime} generally, register it on the host with "
            f"`sudo nvidia-ctk runtime configure --runtime={runtime.replace('-', '')}` and restart {runtime}, "
            f"or use CDI (`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)."
        )
    if runtime == "docker":
        return (
            "Start the container with the GPU: `docker run --gpus all ...` (NVIDIA Container Toolkit on the "
            "host; `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` once), "
            f"or in Docker Compose reserve it:\n\n{COMPOSE}"
        )
    if p is not None and not p.in_container:
        if slurm:
            return SLURM_REQUEST
        if p.scheduler == "ray":
            return (
                "Ray gives a task or actor the GPUs it reserved: `@ray.remote(num_gpus=1)` "
                '(Ray Train: `ScalingConfig(use_gpu=True)`; Ray Serve: `ray_actor_options={"num_gpus": 1}`).'
            )
        return (
            "No container or scheduler stands between this process and the machine: the GPU must come from the "
            "host's NVIDIA driver (`nvidia-smi` on the host) and the process's `CUDA_VISIBLE_DEVICES`."
        )
    return (
        "Start the container through the NVIDIA Container Toolkit: Docker `docker run --gpus all ...` (Compose: "
        "`deploy.resources.reservations.devices` with `driver: nvidia`), Podman "
        "`podman run --device nvidia.com/gpu=all ...` (CDI), Kubernetes `runtimeClassName: nvidia` with "
        "`nvidia.com/gpu: 1`."
    )


# --------------------------------------------------------------------------- rank binding


@frozen_dataclass
class Binding:
    """A distributed process whose local rank names a GPU it cannot see.

    Attributes:
        local_rank: the process's node-local rank.
        rank_var: the variable it came from (``LOCAL_RANK``, ``SLURM_LOCALID``).
        local_ranks: how many ranks run on this node (``LOCAL_WORLD_SIZE`` / ``SLURM_NTASKS_PER_NODE``),
            0 when unknown.
        visible: the GPUs this process sees.
        visible_from: how that was counted (``torch.cuda.device_count()``, ``CUDA_VISIBLE_DEVICES``).
        launcher: the distributed launcher (``torchrun``, ``accelerate``, ``deepspeed``, ``slurm``).
        scheduler: who bound the GPUs (``slurm``, ``ray``, ``kubernetes`` or "").
        certain: the launcher itself selects ``cuda:LOCAL_RANK`` (accelerate, DeepSpeed, torchrun
            recipes); False when only ``SLURM_LOCALID`` is known (the code may not use it).
        remedy: Markdown, in the words of that scheduler and launcher.
        commands: the launch line the remedy names, as data (none where the remedy is a change of code).
    """

    local_rank: int
    rank_var: str
    local_ranks: int
    visible: int
    visible_from: str
    launcher: str
    scheduler: str
    certain: bool
    remedy: str
    commands: tuple[Command, ...] = ()


def to_int(value: str | None) -> int | None:
    try:
        return int(str(value).split("(")[0]) if value is not None and str(value).strip() else None
    except ValueError:
        return None


def _binding_remedy(launcher: str, scheduler: str, env: dict[str, str], visible: int) -> str:
    per_task = env.get("SLURM_GPUS_PER_TASK") or ""
    bind = env.get("SLURM_GPU_BIND") or ""
    if scheduler == "slurm" and launcher in ("torchrun", "accelerate", "deepspeed"):
        how = {
            "torchrun": "srun torchrun --nproc-per-node=$SLURM_GPUS_ON_NODE train.py",
            "accelerate": "srun accelerate launch --num_processes=$SLURM_GPUS_ON_NODE train.py",
            "deepspeed": "srun deepspeed --num_gpus=$SLURM_GPUS_ON_NODE train.py",
        }[launcher]
        return (
            f"{launcher} starts one process per GPU inside ONE Slurm task, so that task must hold all the node's "
            f"GPUs; here it holds {visible}. Give the launcher one task per node with every GPU:\n\n```\n"
            "#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=4   # all the GPUs\n"
            f"{how}\n```\n\n(no `--gpus-per-task`, no `--gpu-bind`). Or let Slurm start the ranks (one task per GPU, "
            "`srun --ntasks-per-node=4 --gpus-per-task=1 python train.py`) and select `cuda:0`, the task's only GPU."
        )
    if scheduler == "slurm":
        why = (
            f"`--gpus-per-task={per_task}`"
            if per_task
            else f"`--gpu-bind={bind}`"
            if bind
            else "the step's GPU binding"
        )
        return (
            f"Slurm bound each task to its own GPU ({why}), and CUDA numbers a task's GPUs from 0, so in every "
            "task the GPU is `cuda:0`. Either select `cuda:0` (`torch.cuda.set_device(0)`; Lightning and "
            "accelerate do this when each task sees one GPU), or let every task see all the node's GPUs and pick "
            "its own by `SLURM_LOCALID`:\n\n```\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n"
            "srun --gpu-bind=none python train.py\n```"
        )
    if scheduler == "kubernetes":
        return (
            f"The pod was given {visible} GPU(s) (`nvidia.com/gpu` in its limits) but runs more ranks than that. "
            "Make them equal: `resources.limits: nvidia.com/gpu: N` with `torchrun --nproc-per-node=N` "
            "(Kubeflow PyTorchJob: `nprocPerNode: N`)."
        )
    if scheduler == "ray":
        return (
            "Ray sets each worker's `CUDA_VISIBLE_DEVICES` to the GPUs it reserved, so a worker's GPU is not "
            "`cuda:<rank>`: use `ray.train.torch.get_device()` in Ray Train (or `cuda:0` in an actor with "
            "`num_gpus=1`)."
        )
    if launcher == "deepspeed":
        return (
            "Start as many processes as the GPUs this process can see: `deepspeed --num_gpus=N train.py`, or select "
            "GPUs with `--include localhost:0,1` instead of narrowing `CUDA_VISIBLE_DEVICES`."
        )
    if launcher == "accelerate":
        return (
            "Start as many processes as visible GPUs: `accelerate launch --num_processes=N --gpu_ids=0,1 ...` "
            "(or `accelerate config`), and unset a narrower `CUDA_VISIBLE_DEVICES`."
        )
    return (
        "Start as many ranks per node as this process can see GPUs: `torchrun --nproc-per-node=N` with N the "
        "number of GPUs in `CUDA_VISIBLE_DEVICES` (`nvidia-smi -L`), or widen `CUDA_VISIBLE_DEVICES`."
    )


def _binding_commands(launcher: str, scheduler: str, visible: int) -> tuple[Command, ...]:
    """The launch line of :func:`_binding_remedy` (none for Ray: there the code picks the device)."""
    slurm = {
        "torchrun": "srun torchrun --nproc-per-node=$SLURM_GPUS_ON_NODE train.py",
        "accelerate": "srun accelerate launch --num_processes=$SLURM_GPUS_ON_NODE train.py",
        "deepspeed": "srun deepspeed --num_gpus=$SLURM_GPUS_ON_NODE train.py",
    }
    if scheduler == "slurm" and launcher in slurm:
        text, why = slurm[launcher], "one task per node with every GPU; the launcher starts the ranks"
    elif scheduler == "slurm":
        text, why = "srun --gpu-bind=none python train.py", "every task sees the node's GPUs (or select cuda:0)"
    elif scheduler == "ray":
        return ()
    elif launcher == "deepspeed":
        text, why = f"deepspeed --num_gpus={visible} train.py", "as many processes as GPUs this process sees"
    elif launcher == "accelerate":
        text, why = f"accelerate launch --num_processes={visible} train.py", "as many processes as visible GPUs"
    else:
        text, why = f"torchrun --nproc-per-node={visible} train.py", "as many ranks as GPUs this process sees"
    return (Command(text, why, "changes"),)


def rank_binding(facts: Facts, env: dict[str, str], visible: int | None, visible_from: str) -> Binding | None:
    """The binding fault of one process, or None: its local rank (``LOCAL_RANK``, else ``SLURM_LOCALID``
    of a multi-task step) names a GPU beyond the ``visible`` ones, or its node runs more local ranks than
    it sees GPUs, so ``cuda:LOCAL_RANK`` fails on every rank but 0."""
    if visible is None or visible < 1:
        return None
    p = _platform(facts)
    penv = {**(p.env if p is not None else {}), **env}
    launchers = {launcher.kind for launcher in chain(facts)}
    sched = (
        "slurm"
        if "slurm" in launchers
        else "ray"
        if "ray" in launchers
        else "kubernetes"
        if "kubernetes" in launchers
        else ""
    )
    launcher = next((k for k in ("deepspeed", "accelerate", "torchrun") if k in launchers), "")
    local = to_int(penv.get("LOCAL_RANK"))
    var = "LOCAL_RANK"
    ranks = to_int(penv.get("LOCAL_WORLD_SIZE")) or to_int(penv.get("LOCAL_SIZE")) or 0
    if local is None and sched == "slurm" and (to_int(penv.get("SLURM_NTASKS")) or 1) > 1:
        local, var = to_int(penv.get("SLURM_LOCALID")), "SLURM_LOCALID"
        ranks = to_int(penv.get("SLURM_NTASKS_PER_NODE")) or 0
        launcher = "slurm"
    if local is None:
        return None
    if local < visible and (not ranks or ranks <= visible):
        return None
    return Binding(
        local_rank=local,
        rank_var=var,
        local_ranks=ranks,
        visible=visible,
        visible_from=visible_from,
        launcher=launcher or ("slurm" if var == "SLURM_LOCALID" else "torchrun"),
        scheduler=sched,
        certain=var == "LOCAL_RANK",
        remedy=_binding_remedy(launcher or "", sched, penv, visible),
        commands=_binding_commands(launcher or "", sched, visible),
    )
