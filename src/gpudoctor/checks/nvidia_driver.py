"""Check ``nvidia.driver``: is there an NVIDIA GPU, and is its driver usable?

- no NVIDIA GPU on the PCI bus and no driver -> ``skip`` (nothing to check),
  naming every place that was looked at;
- a GPU on the PCI bus but no usable driver -> ``fail`` (nouveau bound,
  vfio-pci passthrough, module not loaded, container without the NVIDIA runtime);
- the kernel module answers but NVML cannot be loaded on the live system
  -> ``fail`` (user-space driver libraries missing or mismatched);
- NVML's worker crashed, hung, printed garbage or failed, and no other source
  found a driver -> ``fail`` naming the signal/timeout (a broken libnvidia-ml.so.1);
- otherwise ``ok`` with the version and the newest CUDA it supports.
"""

from __future__ import annotations

from typing import Any

from gpudoctor import hostpkg
from gpudoctor.checks import require
from gpudoctor.checks._common import driver_install_commands, in_container
from gpudoctor.checks._platform import injection_commands, injection_remedy
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts
from gpudoctor.gpu_inventory import account, describe
from gpudoctor.model import Check, Command, Finding, Status

#: NVML worker outcomes that mean the library itself is broken -> what to say. (``init-failed``,
#: an NVML error such as "Driver Not Loaded", keeps the usual driver diagnosis below.)
BROKEN_NVML = {
    "crashed": "it crashes when loaded",
    "timeout": "it hangs when loaded",
    "garbage": "it gives no valid answer",
    "failed": "its worker exited abnormally",
}


def _known_host(facts: Facts) -> bool:
    """Whether the os facts were collected and say this is not a container."""
    from gpudoctor.facts.host import OsFacts

    return not isinstance(facts.of(OsFacts), Unavailable) and not in_container(facts)


def evaluate(facts: Facts) -> list[Finding]:
    nv = require(facts, NvidiaDriverFacts)
    pci = facts.of(PciGpuFacts)
    looked = "; ".join(f"{a.source}: {a.detail}" for a in nv.attempts)
    pci_devices = () if isinstance(pci, Unavailable) else pci.devices
    evidence: dict[str, Any] = {
        "attempts": [f"{a.source}: {'ok' if a.ok else 'failed'}: {a.detail}" for a in nv.attempts],
        "pci_gpus": [f"{d.bus_id} {d.device_id} driver={d.driver or 'none'}" for d in pci_devices],
    }

    if isinstance(nv.driver_version, str):
        evidence["driver_version"] = nv.driver_version
        evidence["source"] = nv.source
        cuda = nv.cuda_driver_version
        if isinstance(cuda, str):
            evidence["max_cuda"] = cuda
        if (
            nv.source != "nvml"
            and facts.root == "/"
            and isinstance(nv.nvml, Unavailable)
            and "--root" not in nv.nvml.reason
        ):
            if "version mismatch" in nv.nvml.reason.lower():
                return [_version_mismatch(nv.driver_version, nv.source, nv.nvml.reason, evidence)]
            return [
                CHECK.finding(
                    Status.FAIL,
                    f"the NVIDIA kernel module {nv.driver_version} is loaded, but the user-space driver "
                    f"(libnvidia-ml / libcuda) cannot be used",
                    f"The kernel reports driver **{nv.driver_version}** ({nv.source}), but NVML failed: "
                    f"{nv.nvml.reason}.\n\nCUDA programs need the user-space libraries of the *same* driver "
                    f"version. "
                    + (
                        # in a container the runtime mounts the host's libraries: installing a driver package
                        # in the image is the remedy other findings of this run rule out
                        f"This is a container: it was started without the NVIDIA runtime, so the host's driver "
                        f"libraries were not mounted in. {injection_remedy(facts)} Do not install a driver "
                        f"inside the image. If the runtime is in use, the host's driver was upgraded without a "
                        f"reboot (kernel module and libraries differ): reboot the host."
                        if in_container(facts)
                        else "Typical causes:\n\n"
                        + (
                            ""
                            if _known_host(facts)
                            else f"- in a container: it was started without the NVIDIA runtime. "
                            f"{injection_remedy(facts)}\n"
                        )
                        + "- on the host: the driver was upgraded without a reboot (kernel module and libraries "
                        "differ) — reboot, or reload the module;\n"
                        "- the `libnvidia-compute`/`nvidia-utils` package of that version is not installed."
                    ),
                    evidence=evidence,
                    commands=injection_commands(facts) if in_container(facts) else (REBOOT,),
                )
            ]
        lost = [a for a in account(facts) if a.nvml in ("unopened", "absent") and a.driver in ("nvidia", "unknown")]
        if nv.source == "nvml" and lost:
            evidence["unusable"] = [describe(a).replace("**", "").replace("`", "") for a in lost]
            return [
                CHECK.finding(
                    Status.FAIL,
                    f"NVIDIA driver {nv.driver_version} is loaded, but NVML cannot open {len(lost)} of its GPUs",
                    "The driver answers, but not for every GPU bound to it:\n\n"
                    + "\n".join(f"- {describe(a)}" for a in lost)
                    + "\n\nSee `devices.inventory` for every GPU and what to do.",
                    evidence=evidence,
                    commands=hostpkg.reset_gpu_commands(
                        facts,
                        [str(x.nvml_index) if x.nvml_index is not None else x.bus_id for x in lost],
                        reboot=any("lost" in x.nvml_error.lower() or "unknown" in x.nvml_error.lower() for x in lost),
                    ),
                )
            ]
        count = len(nv.devices)
        where = f", {count} GPU{'s' if count != 1 else ''}" if nv.devices else ""
        max_cuda = f" (supports CUDA up to {cuda})" if isinstance(cuda, str) else ""
        return [CHECK.finding(Status.OK, f"NVIDIA driver {nv.driver_version}{max_cuda}{where}", evidence=evidence)]

    if nv.nvml_outcome in BROKEN_NVML and isinstance(nv.nvml, Unavailable):
        return [
            CHECK.finding(
                Status.FAIL,
                f"the NVIDIA driver library libnvidia-ml.so.1 is broken: {BROKEN_NVML[nv.nvml_outcome]}",
                f"gpudoctor loads NVML only in a separate worker process, and that worker did not come back: "
                f"{nv.nvml.reason}.\n\nEvery NVIDIA tool (`nvidia-smi`, the CUDA runtime, PyTorch's device queries) "
                f"loads this library, so they will crash or hang the same way. Find which copy is loaded: "
                f"`ldconfig -p | grep libnvidia-ml` and `echo $LD_LIBRARY_PATH` (a stray copy on LD_LIBRARY_PATH "
                f"shadows the driver's); reinstall the driver's user-space package of the same version as the "
                f"kernel module (`cat /proc/driver/nvidia/version`); if a GPU fell off the bus (`sudo dmesg | grep -i "
                f"xid`), reboot.\n\n{looked}.",
                evidence=evidence,
                commands=(
                    Command("ldconfig -p | grep libnvidia-ml", "which libnvidia-ml copies the loader knows"),
                    Command("cat /proc/driver/nvidia/version", "the kernel module's version (reinstall that one)"),
                ),
            )
        ]

    if not pci_devices:
        if isinstance(pci, Unavailable) or not pci.sysfs_readable:
            summary = "no NVIDIA driver found, and the PCI bus could not be listed to look for a GPU"
        else:
            summary = "no NVIDIA GPU on this machine (none on the PCI bus, no NVIDIA driver)"
        return [
            CHECK.finding(
                Status.SKIP,
                summary,
                "Looked at: the PCI bus in sysfs (vendor 0x10de, display/3D class), NVML "
                f"(nvidia-ml-py), /proc/driver/nvidia/version and /sys/module/nvidia/version.\n\n{looked}.\n\n"
                "GPU checks do not apply here. If this should be a GPU machine, in a VM check that the GPU is passed "
                "through; in a container: " + injection_remedy(facts, gpu_requested=False),
                evidence=evidence,
            )
        ]

    drivers = {d.driver for d in pci_devices}
    n = len(pci_devices)
    commands = driver_install_commands(facts)
    if "nouveau" in drivers:
        cause = (
            "the open-source **nouveau** driver is bound to the GPU; CUDA needs NVIDIA's driver. "
            "Install it (Debian/Ubuntu: `sudo apt install nvidia-driver` / `sudo ubuntu-drivers install`), "
            "which blacklists nouveau, then reboot."
        )
    elif "vfio-pci" in drivers:
        cause = (
            "the GPU is bound to **vfio-pci** (reserved for passthrough to a VM); unbind it or run "
            "the workload in the VM it is passed to."
        )
        commands = (Command("lspci -nnk -d 10de:", "which kernel driver each NVIDIA device is bound to"),)
    elif in_container(facts):
        cause = (
            "this is a container and the host's GPU is visible on the PCI bus, but no driver is exposed "
            "inside. " + injection_remedy(facts)
        )
        commands = injection_commands(facts)
    else:
        cause = (
            "no NVIDIA kernel module is loaded. Install the NVIDIA driver (Debian/Ubuntu: "
            "`sudo apt install nvidia-driver` or `sudo ubuntu-drivers install`), then reboot; if it is "
            "installed, `sudo modprobe nvidia` and check `dmesg` (Secure Boot may block unsigned modules)."
        )
    return [
        CHECK.finding(
            Status.FAIL,
            f"{n} NVIDIA GPU{'s' if n != 1 else ''} on the PCI bus, but no usable NVIDIA driver",
            f"The GPU is there, but {cause}\n\n{looked}.",
            evidence=evidence,
            commands=commands,
        )
    ]


def _version_mismatch(kernel: str, source: str, reason: str, evidence: dict[str, Any]) -> Finding:
    """NVML's "Driver/library version mismatch": the loaded kernel module and the user-space driver
    libraries are different releases, almost always a driver upgrade (often an unattended
    upgrade) without a reboot (NVML reference: ``NVML_ERROR_LIB_RM_VERSION_MISMATCH``, "RM detects a
    driver/library version mismatch")."""
    return CHECK.finding(
        Status.FAIL,
        f"driver/library version mismatch: the loaded kernel module is {kernel}, the user-space driver "
        f"libraries are another version (the driver was upgraded without a reboot)",
        f"The running kernel module is **{kernel}** ({source}), but `libnvidia-ml` / `libcuda` on disk belong to "
        f"another driver release, so NVML fails (`{reason}`), `nvidia-smi` prints `Failed to initialize NVML: "
        f"Driver/library version mismatch` and CUDA cannot initialise. This happens when the driver packages are "
        f"upgraded (by hand or by unattended-upgrades) while the old module stays loaded.\n\n"
        f"Reboot:\n\n```\nsudo reboot\n```\n\nor, when nothing uses the GPU (no display server on it), reload "
        f"the modules without a reboot:\n\n```\nsudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia\n"
        f"sudo modprobe nvidia && nvidia-smi\n```\n\nTo stop it recurring, hold the driver packages "
        f"(`sudo apt-mark hold 'nvidia-*' 'libnvidia-*'`) or reboot after every driver update.\n\n"
        f"If the mismatch survives a reboot, the kernel module and the user-space libraries come from two "
        f"different installs (a module built from source, e.g. open-gpu-kernel-modules or a patched fork, or a "
        f"DKMS package, next to a `.run` or distribution user space of another release): install the user-space "
        f"driver of exactly the module's version {kernel} (`sudo sh NVIDIA-Linux-x86_64-{kernel}.run "
        f"--no-kernel-modules`, or the distribution's packages of {kernel}), or rebuild the module from the "
        f"sources of the user-space version (`nvidia-smi` prints it as `NVML library version`).",
        evidence=evidence,
        commands=(
            REBOOT,
            Command(
                "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
                "or reload the modules when nothing uses the GPU",
                "root",
            ),
        ),
    )


#: load the kernel module and libraries of the same driver release
REBOOT = Command("sudo reboot", "load the installed driver's kernel module", "root")

CHECK = Check(
    id="nvidia.driver",
    title="NVIDIA GPU present and its driver usable",
    needs=("gpu", "nvidia", "os", "platform"),
    evaluate=evaluate,
)
