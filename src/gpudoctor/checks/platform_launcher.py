"""Checks ``platform.launcher`` and ``platform.rank-binding``: who started the process, whether that
launcher's settings give it GPUs, and whether a scheduler's GPU binding fits the rank a distributed
launcher gives it. The reasoning lives in :mod:`gpudoctor.launchers`; the sources are named there
and in :mod:`gpudoctor.facts.launch`.

``platform.launcher``:

- an LXD/Incus/LXC container whose own ``libcuda.so.<version>`` differs from the host's kernel module
  -> ``fail`` ("Driver/library version mismatch"; remedy: ``nvidia.runtime=true`` instead of a driver
  in the container);
- a JupyterHub configuration (under ``--root``) whose spawner gives the single-user servers no GPU on
  a GPU machine: DockerSpawner without ``device_requests``, KubeSpawner without ``nvidia.com/gpu``
  (traitlets or Helm values) -> ``warn``; SystemdSpawner with ``isolate_devices = True`` -> ``fail``;
- a running single-user server whose environment hides every GPU -> ``fail`` naming the spawner setting;
- an LXD/Incus instance with a ``gpu`` device but no ``nvidia.runtime`` (or the reverse) -> ``warn``;
- otherwise ``ok``, naming the launchers (``JupyterHub (KubeSpawner) > Kubernetes > torchrun``).

``platform.rank-binding``: a process whose local rank (``LOCAL_RANK``; ``SLURM_LOCALID`` of a
multi-task step) is at or beyond the GPUs it sees, or whose node runs more local ranks than it sees
GPUs -> ``fail`` (``warn`` when only ``SLURM_LOCALID`` is known: the code may not select by it);
``ok`` when the rank fits; ``skip`` outside a distributed launch.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks import SkipCheck, require
from gpudoctor.checks._gpu import target_probes
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.launch import HubConfig, LaunchFacts, SingleUserServer
from gpudoctor.facts.platform import PlatformFacts
from gpudoctor.launchers import (
    SPAWNER_NAMES,
    chain,
    host_driver_version,
    hub_gpu_remedy,
    rank_binding,
    spawner_word,
    to_int,
)
from gpudoctor.model import Check, Command, Finding, Status

HIDING = ("", "-1", "none", "void", "nodevfiles")


def _gpu_here(p: PlatformFacts) -> bool:
    return bool(p.proc_driver_version) or any(n[len("nvidia") :].isdigit() for n in p.device_nodes)


def _lxd_mismatch(p: PlatformFacts, launch: LaunchFacts) -> Finding | None:
    host = host_driver_version(p)
    mine = launch.container_driver_version
    if not (p.in_container and p.container_runtime == "lxc" and host and mine) or host == mine:
        return None
    tool, product = (
        ("incus", "Incus") if launch.lxd_api == "incus" else ("lxc", "LXD") if launch.lxd_api else ("lxc", "LXC")
    )
    return CHECK.finding(
        Status.FAIL,
        f"this {product} container has the user-space driver {mine}, the host's kernel module is {host}: "
        f'"Driver/library version mismatch"',
        f"A container shares the host's kernel, so its NVIDIA kernel module is the host's ({host}), but "
        f"`{launch.container_driver_file}` in the container is driver {mine}. NVML and CUDA refuse to work "
        f'across versions (`nvidia-smi`: "Failed to initialize NVML: Driver/library version mismatch"; '
        f"torch: no GPU).\n\nLet the host pass its own user-space in instead of installing a driver in the "
        f"container. On the host:\n\n```\n{tool} config set <container> nvidia.runtime=true\n"
        f"{tool} config device add <container> gpu0 gpu   # if it has no gpu device yet\n"
        f"{tool} restart <container>\n```\n\nand remove the driver installed inside the container (the package "
        f"or `.run` installer that put `{launch.container_driver_file}` there). Without `nvidia.runtime`, install "
        f"inside exactly {host}, without its kernel module (`./NVIDIA-Linux-x86_64-{host}.run --no-kernel-module`), "
        f"and do it again after every host driver upgrade.",
        evidence={"container_driver": launch.container_driver_file, "host_kernel_module": p.proc_driver_version},
        commands=(
            Command(
                f"{tool} config set <container> nvidia.runtime=true",
                "on the host: pass the host's driver user-space in",
                "changes",
            ),
            Command(f"{tool} restart <container>", "on the host: restart the container with it", "changes"),
        ),
    )


def _hub_findings(p: PlatformFacts | None, hub: HubConfig) -> list[Finding]:
    spawner = spawner_word(hub.spawner) if hub.spawner else "local"
    name = SPAWNER_NAMES.get(spawner, hub.spawner or "LocalProcessSpawner")
    evidence: dict[str, Any] = {
        "files": list(hub.files),
        "spawner": hub.spawner or "(default) LocalProcessSpawner",
        "settings": [f"{s.name} = {s.value} ({s.file})" for s in hub.settings],
    }
    gpu = p is not None and _gpu_here(p)
    where = f"the JupyterHub configuration ({', '.join(hub.files[:2])}{'...' if len(hub.files) > 2 else ''})"
    if spawner == "systemd":
        iso = hub.get("isolate_devices")
        if iso and iso[-1].value.strip() == "True":
            return [
                CHECK.finding(
                    Status.FAIL if gpu else Status.WARN,
                    f"{where}: SystemdSpawner runs every single-user server with isolate_devices=True, which hides "
                    f"/dev/nvidia*",
                    f"`{iso[-1].name} = True` ({iso[-1].file}) starts each server's unit with `PrivateDevices=yes`: "
                    f"only pseudo-devices exist in it, so CUDA finds no GPU even though `nvidia-smi` works in an "
                    f"admin's shell.\n\n" + hub_gpu_remedy("systemd", here=False),
                    evidence=evidence,
                )
            ]
    if spawner == "docker":
        host_config = " ".join(s.value for s in hub.get("extra_host_config", "extra_create_kwargs"))
        if "device_requests" not in host_config and "DeviceRequest" not in host_config:
            return [
                CHECK.finding(
                    Status.WARN if gpu else Status.INFO,
                    f"{where}: DockerSpawner requests no GPU, so the single-user containers get none",
                    "No `device_requests` in `c.DockerSpawner.extra_host_config`: DockerSpawner creates each "
                    "server's container through the Docker API without a GPU request (the API equivalent of "
                    "`--gpus`).\n\n" + hub_gpu_remedy("docker", here=False),
                    evidence=evidence,
                )
            ]
    if spawner == "kube":
        gpu_settings = [
            s
            for s in hub.settings
            if "nvidia.com/gpu" in s.value
            and (
                s.name.endswith(("extra_resource_limits", "profile_list", "profileList"))
                or s.name.startswith("singleuser.extraResource")
            )
        ]
        if not gpu_settings:
            return [
                CHECK.finding(
                    Status.WARN if gpu else Status.INFO,
                    f"{where}: KubeSpawner requests no nvidia.com/gpu, so the single-user pods get no GPU",
                    "Neither `c.KubeSpawner.extra_resource_limits`, `singleuser.extraResource.limits` nor a "
                    "`profileList` entry's `kubespawner_override` requests `nvidia.com/gpu`: the device plugin "
                    "allocates GPUs only to pods that request them.\n\n" + hub_gpu_remedy("kube", here=False),
                    evidence=evidence,
                )
            ]
    return [
        CHECK.finding(
            Status.OK,
            f"{where}: {name}"
            + (" requests GPUs for the single-user servers" if spawner in ("docker", "kube") else ""),
            evidence=evidence,
        )
    ]


def _server_findings(servers: tuple[SingleUserServer, ...], spawner: str) -> list[Finding]:
    out = []
    for s in servers:
        cvd = s.env.get("CUDA_VISIBLE_DEVICES")
        nvd = s.env.get("NVIDIA_VISIBLE_DEVICES")
        bad = (
            f"CUDA_VISIBLE_DEVICES={cvd!r}"
            if cvd is not None and cvd.strip().lower() in HIDING
            else f"NVIDIA_VISIBLE_DEVICES={nvd!r}"
            if nvd is not None and nvd.strip().lower() in HIDING
            else ""
        )
        if not bad:
            continue
        user = s.env.get("JUPYTERHUB_USER", "")
        which = "systemd" if s.unit.startswith("jupyter-") else spawner
        out.append(
            CHECK.finding(
                Status.FAIL,
                f"the single-user server of {user or 'a user'} (pid {s.pid}) was started with {bad}: its kernels "
                f"see no GPU",
                f"The running server's environment (`/proc/{s.pid}/environ`) has `{bad}`, which hides every GPU; "
                f"each kernel inherits it from the server, so no cell can undo it before CUDA starts. It was set "
                f"by the spawner (`c.Spawner.environment`) or inherited from the hub (`c.Spawner.env_keep`).\n\n"
                + hub_gpu_remedy(which, here=False),
                evidence={"pid": s.pid, "command": s.command, "unit": s.unit, bad.split("=")[0]: bad.split("=", 1)[1]},
            )
        )
    return out


#: variables a CUDA job needs from the environment that started it (besides LD_LIBRARY_PATH entries)
_CARRIED = ("CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_PRELOAD", "XLA_FLAGS")


def _dropped_env(launch: LaunchFacts, spawner: str) -> list[Finding]:
    """Single-user servers started on this machine (LocalProcessSpawner, SystemdSpawner) that lack the
    hub's ``LD_LIBRARY_PATH`` entries or CUDA variables: JupyterHub passes only ``c.Spawner.env_keep``
    (by default PATH, PYTHONPATH, CONDA_ROOT, CONDA_DEFAULT_ENV, VIRTUAL_ENV, LANG, LC_ALL, ...) and
    ``c.Spawner.environment`` to them."""
    hub = launch.hub_process
    if hub is None or not hub.env:
        return []
    out = []
    for s in launch.singleuser:
        local = not s.in_container and spawner not in ("docker", "kube")
        if not local or not s.env:
            continue
        lost: dict[str, str] = {}
        have = set((s.env.get("LD_LIBRARY_PATH") or "").split(":"))
        missing = [e for e in (hub.env.get("LD_LIBRARY_PATH") or "").split(":") if e and e not in have]
        if missing:
            lost["LD_LIBRARY_PATH"] = ":".join(missing)
        lost.update({k: hub.env[k] for k in _CARRIED if k in hub.env and k not in s.env})
        if not lost:
            continue
        user = s.env.get("JUPYTERHUB_USER", "")
        names = ", ".join(f"`{k}`" for k in lost)
        keep = ", ".join(f'"{k}"' for k in lost)
        values = ", ".join(f'"{k}": "{v}"' for k, v in lost.items())
        out.append(
            CHECK.finding(
                Status.WARN,
                f"JupyterHub (pid {hub.pid}) has {', '.join(lost)} in its environment, but the single-user server of "
                f"{user or 'a user'} (pid {s.pid}) did not get {'it' if len(lost) == 1 else 'them'}",
                f"The hub passes its own environment to the servers it starts only through `c.Spawner.env_keep` "
                f"(by default `PATH`, `PYTHONPATH`, `CONDA_ROOT`, `CONDA_DEFAULT_ENV`, `VIRTUAL_ENV`, `LANG`, "
                f"`LC_ALL`) and `c.Spawner.environment`, so {names} set for the hub (its systemd unit, its shell) "
                f"never reach the notebooks' kernels: libraries on those paths are not found there although they "
                f"load in an admin's shell. In `jupyterhub_config.py`:\n\n```python\n"
                f"c.Spawner.env_keep.extend([{keep}])\n# or set them explicitly:\n"
                f"c.Spawner.environment.update({{{values}}})\n```\n\nthen restart the hub and the user's server.",
                evidence={"hub_pid": hub.pid, "server_pid": s.pid, "lost": lost, "unit": s.unit},
            )
        )
    return out


def _lxd_host_findings(launch: LaunchFacts) -> list[Finding]:
    if isinstance(launch.lxd_instances, Unavailable):
        return []
    tool = launch.lxd_tool or "incus"
    out = []
    for inst in launch.lxd_instances:
        if inst.gpu_devices and not inst.nvidia_runtime:
            out.append(
                CHECK.finding(
                    Status.WARN,
                    f"{tool} instance {inst.name} has a GPU device ({', '.join(inst.gpu_devices)}) but not "
                    f"nvidia.runtime: no driver libraries inside unless a driver of the host's exact version is "
                    f"installed in it",
                    f"A `gpu` device passes the device nodes only. `nvidia.runtime=true` also passes the host "
                    f"driver's user-space (libcuda, nvidia-smi) in, always the host's version:\n\n```\n"
                    f"{tool} config set {inst.name} nvidia.runtime=true\n{tool} restart {inst.name}\n```",
                    evidence={"instance": inst.name, "status": inst.status, "gpu_devices": list(inst.gpu_devices)},
                    commands=(
                        Command(
                            f"{tool} config set {inst.name} nvidia.runtime=true",
                            "pass the host driver's libraries in",
                            "changes",
                        ),
                        Command(f"{tool} restart {inst.name}", "restart the instance with them", "changes"),
                    ),
                )
            )
        elif inst.nvidia_runtime and not inst.gpu_devices:
            out.append(
                CHECK.finding(
                    Status.WARN,
                    f"{tool} instance {inst.name} has nvidia.runtime=true but no GPU device: libraries without "
                    f"device nodes",
                    f"`nvidia.runtime` passes the driver's libraries; the GPU itself is a device:\n\n```\n"
                    f"{tool} config device add {inst.name} gpu0 gpu\n```",
                    evidence={"instance": inst.name, "status": inst.status},
                    commands=(Command(f"{tool} config device add {inst.name} gpu0 gpu", "give it the GPU", "changes"),),
                )
            )
    return out


def _hidden_nodes(p: PlatformFacts, launch: LaunchFacts | Unavailable, spawner: str) -> Finding | None:
    """A host process (no container) under a systemd unit or a hub spawner that sees the host's NVIDIA
    kernel module but no ``/dev/nvidia*``: the unit's ``PrivateDevices=yes`` (SystemdSpawner's
    ``isolate_devices``) or a ``DevicePolicy`` hides them."""
    if p.in_container or p.kind == "wsl" or not p.proc_driver_version:
        return None
    if any(n.startswith("nvidia") for n in p.device_nodes):
        return None
    unit = "" if isinstance(launch, Unavailable) else launch.unit
    if not (unit or spawner):
        return None
    if spawner:
        remedy = hub_gpu_remedy("systemd" if spawner == "systemd" else spawner)
    else:
        remedy = (
            f"Let the unit see the GPU: `systemctl edit {unit}` and set\n\n```\n[Service]\nPrivateDevices=no\n"
            f"DeviceAllow=/dev/nvidiactl rw\nDeviceAllow=/dev/nvidia-uvm rw\nDeviceAllow=/dev/nvidia0 rw\n```\n\n"
            f"then `systemctl restart {unit}`."
        )
    where = f"the systemd unit `{unit}`" if unit else "this JupyterHub server"
    commands = (
        ()
        if spawner
        else (
            Command(f"systemctl edit {unit}", "set PrivateDevices=no and DeviceAllow= the NVIDIA nodes", "root"),
            Command(f"systemctl restart {unit}", "restart the service with its GPU", "root"),
        )
    )
    return CHECK.finding(
        Status.FAIL,
        f"the NVIDIA kernel module is loaded, but {where} sees no /dev/nvidia* device nodes",
        f"The host's module is loaded (`{p.proc_driver_version}`), yet this process has no `/dev/nvidiactl` or "
        f"`/dev/nvidia0`: the service manager gave it a private `/dev` (`PrivateDevices=yes`), so CUDA finds no "
        f"GPU although `nvidia-smi` works in an admin's shell.\n\n" + remedy,
        evidence={"unit": unit, "kernel_module": p.proc_driver_version, "device_nodes": list(p.device_nodes)},
        commands=commands,
    )


def _k8s_mounted(p: PlatformFacts) -> Finding | None:
    """A pod whose ``NVIDIA_VISIBLE_DEVICES`` (set by the device plugin) names more GPUs than the runtime
    mounted as ``/dev/nvidiaN``."""
    nvd = p.env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if not p.kubernetes or not nvd or nvd.lower() in (*HIDING, "all"):
        return None
    assigned = [e.strip() for e in nvd.split(",") if e.strip()]
    mounted = [n for n in p.device_nodes if n[len("nvidia") :].isdigit()]
    if not mounted or len(mounted) >= len(assigned):
        return None
    return CHECK.finding(
        Status.WARN,
        f"the device plugin assigned {len(assigned)} GPUs to this pod (NVIDIA_VISIBLE_DEVICES), but only "
        f"{len(mounted)} device node(s) are mounted ({', '.join(sorted(mounted))})",
        f"`NVIDIA_VISIBLE_DEVICES={nvd}` is the device plugin's allocation; the NVIDIA runtime mounts one "
        f"`/dev/nvidiaN` per GPU. Fewer nodes mean the container was not created from that allocation: an image or "
        f"pod spec that sets `NVIDIA_VISIBLE_DEVICES` itself (which allocates nothing), or a container that "
        f"mounts `/dev/nvidia*` by hand. Request the GPUs as `resources.limits: nvidia.com/gpu: {len(assigned)}` and "
        f"remove `NVIDIA_VISIBLE_DEVICES` from the pod spec and image; check the allocation with "
        f"`kubectl describe pod <pod> | grep nvidia.com/gpu`.",
        evidence={"NVIDIA_VISIBLE_DEVICES": nvd, "device_nodes": list(p.device_nodes)},
        commands=(Command("kubectl describe pod <pod> | grep nvidia.com/gpu", "the GPUs the pod was allocated"),),
    )


def evaluate(facts: Facts) -> list[Finding]:
    p = require(facts, PlatformFacts)
    launch = facts.of(LaunchFacts)
    out: list[Finding] = []
    notes: list[str] = []
    launchers = chain(facts)
    own_spawner = next((launcher.detail for launcher in launchers if launcher.kind == "jupyterhub"), "")
    spawner = own_spawner  # who started this process, else the hub configured here
    if not isinstance(launch, Unavailable):
        mismatch = _lxd_mismatch(p, launch)
        if mismatch is not None:
            out.append(mismatch)
        if not isinstance(launch.hub, Unavailable):
            hub_findings = _hub_findings(p, launch.hub)
            out += [f for f in hub_findings if f.status is not Status.OK]
            notes += [f.summary for f in hub_findings if f.status is Status.OK]
            spawner = spawner or (spawner_word(launch.hub.spawner) if launch.hub.spawner else "local")
        out += _server_findings(launch.singleuser, spawner or "local")
        configured = "" if isinstance(launch.hub, Unavailable) else spawner_word(launch.hub.spawner)
        out += _dropped_env(launch, configured)
        out += _lxd_host_findings(launch)
    hidden = _hidden_nodes(p, launch, own_spawner)
    if hidden is not None:
        out.append(hidden)
    short = _k8s_mounted(p)
    if short is not None:
        out.append(short)
    if not any(f.status.severity > Status.OK.severity for f in out):
        names = " > ".join(launcher.name for launcher in launchers) or "unknown"
        out.insert(
            0,
            CHECK.finding(
                Status.OK,
                f"started by {names}" + "".join(f"; {n}" for n in notes),
                evidence={"launchers": [f"{launcher.name}: {launcher.evidence}" for launcher in launchers]},
            ),
        )
    return sorted(out, key=lambda f: -f.status.severity)


CHECK = Check(
    id="platform.launcher",
    title="who starts the process (scheduler, spawner, container engine, launcher) and whether it gives GPUs",
    needs=("platform", "launch"),
    evaluate=evaluate,
)


# --------------------------------------------------------------------------- rank binding


def _visible(env: dict[str, str], torch_count: int | None) -> tuple[int | None, str]:
    if torch_count:
        return torch_count, "torch.cuda.device_count()"
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() and cvd.strip().lower() not in HIDING:
        return len([e for e in cvd.split(",") if e.strip()]), f"CUDA_VISIBLE_DEVICES={cvd}"
    return None, ""


def _assess_binding(facts: Facts, env: dict[str, str], torch_count: int | None, label: str | None) -> Finding:
    p = facts.of(PlatformFacts)
    penv = {**(p.env if not isinstance(p, Unavailable) else {}), **env}
    visible, source = _visible(penv, torch_count)
    b = rank_binding(facts, env, visible, source)
    if b is None:
        rank = penv.get("LOCAL_RANK", penv.get("SLURM_LOCALID"))
        return BINDING.finding(
            Status.OK,
            f"local rank {rank} fits the {visible} GPU(s) this process sees"
            if visible is not None
            else f"local rank {rank}; the GPUs this process sees are not known",
            evidence={
                "visible": source,
                "LOCAL_RANK": penv.get("LOCAL_RANK"),
                "SLURM_LOCALID": penv.get("SLURM_LOCALID"),
            },
            target=label,
        )
    who = {"slurm": "Slurm", "ray": "Ray", "kubernetes": "Kubernetes"}.get(b.scheduler, "")
    launch = facts.of(LaunchFacts)
    slurm = None if isinstance(launch, Unavailable) or isinstance(launch.slurm, Unavailable) else launch.slurm
    node = (
        f"\n\nThis node constrains devices (`ConstrainDevices=yes` in `{slurm.cgroup_conf}`): each task's device "
        f"cgroup holds only its own GPUs, renumbered from 0 inside the task."
        if slurm is not None and slurm.constrain_devices and b.scheduler == "slurm"
        else ""
    )
    too_many = b.local_ranks > b.visible
    what = (
        f"{b.rank_var}={b.local_rank} but this process sees {b.visible} GPU(s) ({b.visible_from})"
        if b.local_rank >= b.visible
        else f"{b.local_ranks} ranks run on this node but each sees {b.visible} GPU(s) ({b.visible_from})"
    )
    return BINDING.finding(
        Status.FAIL if b.certain else Status.WARN,
        f"{what}: cuda:{b.rank_var} fails for every rank but 0" + (f" ({who} binds the GPUs)" if who else ""),
        f"Each {'task' if b.scheduler == 'slurm' else 'process'} sees {b.visible} GPU(s), numbered from 0, so "
        f"`torch.device('cuda', {b.rank_var.lower() if b.rank_var == 'LOCAL_RANK' else 'local_rank'})` / "
        f"`torch.cuda.set_device(local_rank)` asks for `cuda:{b.local_rank}`, which does not exist here "
        f'("CUDA error: invalid device ordinal")'
        + (f"; {b.local_ranks} local ranks share {b.visible} visible GPU(s)" if too_many else "")
        + (
            ". Only `SLURM_LOCALID` is known here: this holds if the code selects its GPU by it (Lightning and "
            "hand-written `cuda:SLURM_LOCALID` do)."
            if not b.certain
            else "."
        )
        + node
        + "\n\n"
        + b.remedy,
        evidence={
            "gres.conf": list(slurm.gres_gpu_lines) if slurm is not None else [],
            b.rank_var: b.local_rank,
            "local_ranks": b.local_ranks,
            "visible": b.visible,
            "visible_from": b.visible_from,
            "launcher": b.launcher,
            "scheduler": b.scheduler,
        },
        target=label,
        commands=b.commands,
    )


def evaluate_binding(facts: Facts) -> list[Finding]:
    p = require(facts, PlatformFacts)
    env = p.env
    distributed = "LOCAL_RANK" in env or (
        p.scheduler == "slurm" and "SLURM_LOCALID" in env and (to_int(env.get("SLURM_NTASKS")) or 1) > 1
    )
    probes = [
        (t.label, dict(pr.env), pr.torch.device_count if pr.torch.import_ok and pr.torch.cuda else None)
        for t, pr in target_probes(facts)
        if pr is not None
    ]
    if not distributed and not any("LOCAL_RANK" in e for _l, e, _c in probes):
        raise SkipCheck("not a distributed launch (no LOCAL_RANK, no multi-task Slurm step)")
    if probes:
        return [_assess_binding(facts, env_, count, label) for label, env_, count in probes]
    return [_assess_binding(facts, {}, None, None)]


BINDING = Check(
    id="platform.rank-binding",
    title="the local rank a launcher gives each process against the GPUs its scheduler binds to it",
    needs=("platform", "targets", "launch"),
    evaluate=evaluate_binding,
)
