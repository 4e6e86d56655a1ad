"""Check ``platform.container``: where gpudoctor runs, and — in a container —
whether the NVIDIA container runtime injected the GPU.

Sources: NVIDIA Container Toolkit docs (the runtime hook mounts
``/dev/nvidia*``, ``libcuda.so.1``, ``libnvidia-ml.so.1`` and ``nvidia-smi``
into the container; ``NVIDIA_VISIBLE_DEVICES`` names the assigned GPUs,
``void``/``none`` none; ``NVIDIA_DRIVER_CAPABILITIES`` must include
``compute`` for CUDA and ``utility`` for NVML); NVIDIA/nvidia-container-toolkit
issue #48 and the toolkit's troubleshooting page ("Failed to initialize NVML:
Unknown Error" after ``systemctl daemon-reload``: systemd rewrites the
container's device cgroup and the GPU device rules are lost).

- not in a container -> ``ok`` naming bare metal / VM / WSL and any scheduler;
- a container that got nothing although a GPU is assigned or the host has one
  (``/proc/driver/nvidia/version`` is the host's) -> ``fail`` with the remedy of
  the platform in use (Kubernetes: ``runtimeClassName: nvidia``);
- device nodes without driver libraries -> ``fail`` (capabilities);
- a driver library without device nodes -> ``fail``: the library was installed
  in the image and the container was started without the GPU (under WSL 2,
  ``/dev/dxg`` with ``/usr/lib/wsl/lib`` is the injected GPU -> ``ok``);
- device nodes and libraries but NVML "Unknown Error" -> ``fail`` (device cgroup lost);
- everything injected -> ``ok``; a container with no GPU anywhere -> ``info``.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._platform import injection_commands, injection_remedy
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts
from gpudoctor.facts.platform import PlatformFacts
from gpudoctor.model import Check, Finding, Status

_NO_GPU_VALUES = ("void", "none", "")


def where(p: PlatformFacts) -> str:
    """``a Kubernetes pod (containerd)``, ``a Docker container``, ``bare metal``, ``a VM (QEMU)``..."""
    if p.kubernetes:
        base = "a Kubernetes pod" + (
            f" ({p.container_runtime})" if p.container_runtime not in ("", "container") else ""
        )
    elif p.in_container:
        base = {
            "docker": "a Docker container",
            "podman": "a Podman container",
            "containerd": "a containerd container",
            "cri-o": "a CRI-O container",
            "lxc": "an LXC container",
            "apptainer": "an Apptainer/Singularity container",
        }.get(p.container_runtime, "a container")
    elif p.kind == "wsl":
        base = "WSL"
    elif p.kind == "vm":
        base = f"a VM ({p.hypervisor})" if p.hypervisor else "a VM"
    else:
        base = "bare metal"
    if p.scheduler == "slurm":
        base += f", Slurm job {p.env.get('SLURM_JOB_ID', '')}".rstrip()
    elif p.scheduler == "ray":
        base += ", a Ray worker"
    return base


def nvml_unknown_error(facts: Facts) -> bool:
    """NVML failed with "Unknown Error" (the lost-device-cgroup signature)."""
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable):
        return False
    texts = [nv.nvml.reason if isinstance(nv.nvml, Unavailable) else ""] + [a.detail for a in nv.attempts if not a.ok]
    return any("unknown error" in t.lower() for t in texts)


def evaluate(facts: Facts) -> list[Finding]:
    p = require(facts, PlatformFacts)
    place = where(p)
    evidence: dict[str, object] = {
        "where": place,
        "markers": list(p.markers),
        "device_nodes": list(p.device_nodes),
        "driver_libraries": list(p.driver_libraries),
    }
    evidence.update({k: p.env[k] for k in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES") if k in p.env})
    if not p.in_container:
        return [CHECK.finding(Status.OK, f"running on {place}", evidence=evidence)]
    nvd = p.env.get("NVIDIA_VISIBLE_DEVICES")
    assigned = nvd is not None and nvd.strip().lower() not in _NO_GPU_VALUES
    pci = facts.of(PciGpuFacts)
    host_gpu = bool(p.proc_driver_version) or (not isinstance(pci, Unavailable) and bool(pci.devices))
    nodes = [n for n in p.device_nodes if n[len("nvidia") :].isdigit()]
    libs = [lib for lib in p.driver_libraries if lib.endswith("libcuda.so.1")]
    if not nodes and not libs:
        if not assigned and not host_gpu:
            return [
                CHECK.finding(
                    Status.INFO,
                    f"running in {place} with no GPU assigned and none visible",
                    "No `/dev/nvidia*`, no driver libraries, no `NVIDIA_VISIBLE_DEVICES` and no "
                    "NVIDIA kernel module visible: a CPU-only container. If this job needs a GPU:\n\n"
                    + injection_remedy(facts, gpu_requested=False),
                    evidence=evidence,
                    commands=injection_commands(facts),
                )
            ]
        image_default = assigned and (nvd or "").strip().lower() == "all"
        if image_default:
            # the CUDA base images set NVIDIA_VISIBLE_DEVICES=all themselves: it proves no allocation
            what = (
                "the image asks for every GPU (`NVIDIA_VISIBLE_DEVICES=all`, the CUDA images' default) and the "
                "host has one"
                if host_gpu
                else "the image asks for every GPU (`NVIDIA_VISIBLE_DEVICES=all`)"
            )
            assigned = False
        elif assigned:
            what = f"a GPU is assigned (`NVIDIA_VISIBLE_DEVICES={nvd}`)"
        else:
            what = "the host has an NVIDIA GPU (its kernel module shows in `/proc/driver/nvidia/version`)"
        host = f"\n\nThe host kernel module: `{p.proc_driver_version}`." if p.proc_driver_version else ""
        return [
            CHECK.finding(
                Status.FAIL,
                f"in {place}: {what} but the NVIDIA container runtime injected no device nodes or driver libraries",
                f"Inside this container there is no `/dev/nvidia*`, no `libcuda.so.1` and no `nvidia-smi`: the NVIDIA "
                f"runtime hook never ran, so CUDA cannot see a GPU (`torch.cuda.is_available()` is False).{host}\n\n"
                + injection_remedy(facts, gpu_requested=assigned),
                evidence=evidence,
                commands=injection_commands(facts),
            )
        ]
    if not nodes and libs:
        if "dxg" in p.device_nodes:
            return [
                CHECK.finding(
                    Status.OK,
                    f"running in {place}; the GPU was injected through WSL 2 (/dev/dxg, {libs[0]})",
                    evidence=evidence,
                )
            ]
        if not assigned and not host_gpu:
            return [
                CHECK.finding(
                    Status.INFO,
                    f"running in {place} with no GPU assigned and none visible (the image carries {libs[0]})",
                    "No `/dev/nvidia*`, no `NVIDIA_VISIBLE_DEVICES` and no NVIDIA kernel module visible: a CPU-only "
                    "container. If this job needs a GPU:\n\n" + injection_remedy(facts, gpu_requested=False),
                    evidence=evidence,
                    commands=injection_commands(facts),
                )
            ]
        host = f" (the host's module: `{p.proc_driver_version}`)" if p.proc_driver_version else ""
        return [
            CHECK.finding(
                Status.FAIL,
                f"in {place}: no /dev/nvidia* device nodes, only a driver library ({libs[0]}) baked into the image",
                f"The NVIDIA runtime did not inject the GPU: there are no `/dev/nvidia0`/`/dev/nvidiactl` nodes, so "
                f"CUDA sees no device. The `{libs[0]}` here came with the image (a driver package such as "
                f"`libnvidia-compute-*`/`nvidia-utils-*` installed in the Dockerfile), not from the host{host}. "
                f"Remove the driver packages from the image (a copy that differs from the host's kernel module "
                f'gives "Driver/library version mismatch" even once the GPU is passed), and start the container '
                f"with the GPU:\n\n"
                + injection_remedy(facts, gpu_requested=assigned and (nvd or "").strip().lower() != "all"),
                evidence=evidence,
                commands=injection_commands(facts),
            )
        ]
    if nodes and not libs:
        caps = p.env.get("NVIDIA_DRIVER_CAPABILITIES", "")
        hint = (
            f"`NVIDIA_DRIVER_CAPABILITIES={caps}` does not include `compute`, so the runtime mounted no CUDA "
            f"driver library: set `NVIDIA_DRIVER_CAPABILITIES=compute,utility` (or `all`)."
            if caps and not {"compute", "all"} & {c.strip() for c in caps.split(",")}
            else "Apptainer/Singularity binds the host's `/dev` (so the device nodes are here) but the driver "
            "libraries only with `--nv`.\n\n" + injection_remedy(facts)
            if p.container_runtime == "apptainer"
            else "The device nodes are there but the driver libraries were not mounted: the devices were passed "
            "by hand (`--device /dev/nvidia0`) instead of through the NVIDIA runtime.\n\n" + injection_remedy(facts)
        )
        return [
            CHECK.finding(
                Status.FAIL,
                f"in {place}: GPU device nodes are present but no libcuda.so.1",
                hint,
                evidence=evidence,
                commands=injection_commands(facts),
            )
        ]
    if nodes and nvml_unknown_error(facts):
        return [
            CHECK.finding(
                Status.FAIL,
                f'in {place}: "Failed to initialize NVML: Unknown Error" with the GPU device nodes present: the '
                f"container lost its device cgroup access",
                "The GPU was injected (device nodes and libraries are here), but the container may no longer open "
                "them: a `systemctl daemon-reload` (or a package upgrade that triggers one) on the host rewrote the "
                "container's device cgroup, and the NVIDIA device rules were dropped (NVIDIA/nvidia-container-toolkit "
                "issue #48).\n\nNow: restart the container (`docker restart <name>` / delete the pod).\n\nFor good, "
                "on the host: create the `/dev/char` symlinks the rules need, "
                "`sudo nvidia-ctk system create-dev-char-symlinks --create-all` (and the udev rule from the toolkit "
                "docs), or inject GPUs through CDI (`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, "
                '`--device nvidia.com/gpu=all`), or run Docker with `"exec-opts": ["native.cgroupdriver=cgroupfs"]` '
                "in `/etc/docker/daemon.json`.",
                evidence=evidence,
            )
        ]
    return [
        CHECK.finding(
            Status.OK,
            f"running in {place}; the GPU was injected ({', '.join(nodes)}, {libs[0].rsplit('/', 1)[-1]})",
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="platform.container",
    title="where gpudoctor runs, and whether the container runtime injected the GPU",
    needs=("platform", "nvidia", "gpu"),
    evaluate=evaluate,
)
