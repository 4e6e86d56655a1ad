"""Neighbours of the platform cases: the same kinds of fault on other GPUs, distros and schedulers,
each with its healthy twin.

- open kernel module on a GPU older than Turing (negativo17/nvidia-driver #158: GT 1030 0x1d01 on
  560; NVIDIA/open-gpu-kernel-modules #322: V100 0x1db5, #696: GTX 1080 0x1b82);
- a driver after R580 on a Pascal GPU (R580 is the last branch for Maxwell/Pascal/Volta);
- DKMS module built for another kernel on RHEL (the dnf headers package);
- Triton's ``-lcuda`` on RHEL, where the 32-bit driver copy lives in ``/usr/lib`` (pytorch/pytorch #123159
  is the Debian twin);
- ``Python.h`` of a non-default Python on RHEL/Rocky 8/9 and Ubuntu (pytorch/pytorch #129351);
- a Slurm job without ``--gres=gpu`` on a node whose device cgroup hides the GPUs;
- a GKE pod (no NVIDIA runtime there): the remedy names the GKE driver installation.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.libraries import collect_cuda_libraries
from gpudoctor.collect.loader import collect_loader
from gpudoctor.collect.nvidia import collect_gpu, collect_nvidia
from gpudoctor.collect.platform import kernel_module_facts
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.platform import KernelModuleFacts, Modinfo, PlatformFacts
from gpudoctor.facts.targets import ToolchainFacts, TritonFacts
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import (
    ScriptedRunner,
    fake_system,
    make_facts,
    nvidia_facts,
    nvml_device,
    ok,
    os_facts,
    probe_facts,
    target,
    targets,
    torch_facts,
    write_tree,
)

NVRM_OPEN_550 = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.120  Release Build  (dvs-builder@U16)\n"
NVRM_PROP_590 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.44.01  Tue Nov 18 09:14:40 UTC 2025\n"
NVRM_PROP_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:16 UTC 2024\n"


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def one(registry, facts, cid):
    [finding] = [f for f in evaluate([registry.checks[cid]], facts) if f.check == cid]
    return finding


def text(f):
    return f.summary + "\n" + f.explanation


# --------------------------------------------------------------------------- kernel module flavour / branch


def _pci_root(tmp_path: Path, device: str, bound: bool, extra=None) -> Path:
    files = {
        "/sys/bus/pci/devices/0000:01:00.0/vendor": "0x10de\n",
        "/sys/bus/pci/devices/0000:01:00.0/device": device + "\n",
        "/sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
        "/proc/sys/kernel/osrelease": "6.8.0-51-generic\n",
        **(extra or {}),
    }
    root = write_tree(tmp_path, files)
    if bound:
        drv = root / "sys/bus/pci/drivers/nvidia"
        drv.mkdir(parents=True)
        (root / "sys/bus/pci/devices/0000:01:00.0/driver").symlink_to(drv)
    return root


def _module_facts(root: Path, os_id=("ubuntu", "24.04", "noble"), modinfo=None):
    system = fake_system(root)
    km = kernel_module_facts(system.files, None)
    if modinfo is not None:
        from dataclasses import replace

        from gpudoctor.collect.platform import flavour_of

        km = replace(km, modinfo=modinfo, flavour=flavour_of(km.proc_version, modinfo))
    c = CollectContext(system, CollectOptions())
    return make_facts(
        kmod=km,
        gpu=collect_gpu(c),
        nvidia=collect_nvidia(c),
        platform=PlatformFacts(kind="bare-metal"),
        os=os_facts(*os_id),
    )


def test_open_module_loaded_on_a_pascal_gpu(tmp_path, registry):
    root = _pci_root(tmp_path, "0x1b82", bound=False, extra={"/proc/driver/nvidia/version": NVRM_OPEN_550})
    f = one(registry, _module_facts(root), "platform.kernel-module")
    assert f.status is Status.FAIL
    assert "open NVIDIA kernel module is loaded" in f.summary and "older than Turing" in f.summary
    assert "0x1b82" in f.summary and "0000:01:00.0" in f.summary
    assert "sudo apt install nvidia-driver-550\n" in f.explanation and "-open" not in f.explanation.split("```")[1]


def test_open_module_that_refused_to_load_on_a_gt1030_on_fedora(tmp_path, registry):
    # 560 open module: "None of the NVIDIA devices were initialized", so nothing is loaded; modinfo says open
    root = _pci_root(tmp_path, "0x1d01", bound=False)
    mod = Modinfo("/lib/modules/6.8.0-51-generic/extra/nvidia.ko.xz", "560.31.02", "Dual MIT/GPL")
    f = one(registry, _module_facts(root, ("fedora", "40", ""), mod), "platform.kernel-module")
    assert f.status is Status.FAIL and "is installed, but the GPU 0x1d01" in f.summary
    assert "sudo dnf install akmod-nvidia\n" in f.explanation
    assert "modprobe nvidia" not in f.explanation


def test_driver_after_r580_on_a_pascal_gpu(tmp_path, registry):
    root = _pci_root(tmp_path, "0x1b06", bound=False, extra={"/proc/driver/nvidia/version": NVRM_PROP_590})
    f = one(registry, _module_facts(root, ("rocky", "9.4", "")), "platform.kernel-module")
    assert f.status is Status.FAIL and "driver 590.44.01 does not support" in f.summary and "R580" in f.summary
    assert "sudo dnf module install nvidia-driver:580-dkms" in f.explanation


def test_pascal_on_the_proprietary_module_is_healthy(tmp_path, registry):
    root = _pci_root(tmp_path, "0x1b06", bound=True, extra={"/proc/driver/nvidia/version": NVRM_PROP_550})
    f = one(registry, _module_facts(root), "platform.kernel-module")
    assert f.status is Status.OK and "(proprietary)" in f.summary


def test_turing_unbound_under_the_open_module_is_not_called_pre_turing(tmp_path, registry):
    root = _pci_root(tmp_path, "0x1e04", bound=False, extra={"/proc/driver/nvidia/version": NVRM_OPEN_550})
    f = one(registry, _module_facts(root), "platform.kernel-module")
    assert f.status is Status.FAIL and "no driver is bound" in f.summary and "Turing" not in f.summary


def test_dkms_for_another_kernel_on_rhel_names_kernel_devel(tmp_path, registry):
    root = _pci_root(
        tmp_path,
        "0x2330",
        bound=False,
        extra={
            "/proc/sys/kernel/osrelease": "5.14.0-503.11.1.el9_5.x86_64\n",
            "/lib/modules/5.14.0-427.13.1.el9_4.x86_64/extra/nvidia.ko.xz": "",
        },
    )
    f = one(registry, _module_facts(root, ("rhel", "9.5", "")), "platform.kernel-module")
    assert f.status is Status.FAIL and "5.14.0-427.13.1.el9_4.x86_64" in f.summary
    assert "sudo dnf install kernel-devel-5.14.0-503.11.1.el9_5.x86_64" in f.explanation
    assert "apt" not in f.explanation


def test_kernel_module_facts_are_plain(tmp_path):
    km = kernel_module_facts(fake_system(_pci_root(tmp_path, "0x1b82", bound=False)).files, None)
    assert isinstance(km, KernelModuleFacts) and not km.loaded and isinstance(km.modinfo, Unavailable)


# --------------------------------------------------------------------------- Triton -lcuda on RHEL


def elf_header(bits: int) -> bytes:
    """A minimal ELF shared-object header (x86-64 or i386)."""
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 1, 1, 0]) + bytes(8)
    if bits == 64:
        return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)
    return ident + struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 0, 0, 0, 52, 32, 0, 40, 0, 0)


RHEL_LDCONFIG = (
    "4 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibcuda.so.1 (libc6) => /usr/lib/libcuda.so.1\n"
    "\tlibcuda.so (libc6) => /usr/lib/libcuda.so\n"
    "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib64/libcuda.so.1\n"
)


def _rhel_compile_facts(tmp_path: Path, link64: bool):
    tree = {
        "/etc/ld.so.cache": b"cache",
        "/usr/lib64/libcuda.so.550.127.05": elf_header(64),
        "/usr/lib/libcuda.so.550.127.05": elf_header(32),
    }
    write_tree(tmp_path, tree)
    for d in ("usr/lib64", "usr/lib"):
        (tmp_path / d / "libcuda.so.1").symlink_to("libcuda.so.550.127.05")
    (tmp_path / "usr/lib/libcuda.so").symlink_to("libcuda.so.1")
    ldconfig = RHEL_LDCONFIG
    if link64:
        (tmp_path / "usr/lib64/libcuda.so").symlink_to("libcuda.so.1")
        ldconfig += "\tlibcuda.so (libc6,x86-64) => /usr/lib64/libcuda.so\n"
    runner = ScriptedRunner({("ldconfig", "-p", "-C", str(tmp_path / "etc/ld.so.cache")): ok(ldconfig)})
    env = {"PATH": "/home/user/venv/bin:/usr/bin:/bin"}
    probe = probe_facts(
        "/home/user/venv/bin/python",
        torch_facts("2.5.1+cu124", "12.4", cuda_available=True),
        python_version="3.11.9",
        env=env,
        toolchain=ToolchainFacts(True, "/usr/include/python3.11/Python.h", "/usr/bin/gcc", "/usr/bin/g++"),
        triton=TritonFacts(True, "3.1.0", True),
    )
    tg = targets(target(probe))
    system = fake_system(tmp_path, env=env, runner=runner)
    loader = collect_loader(CollectContext(system, CollectOptions(), {"targets": tg}))
    libs = collect_cuda_libraries(CollectContext(system, CollectOptions(), {"targets": tg, "loader": loader}))
    return make_facts(
        targets=tg,
        loader=loader,
        cuda_libraries=libs,
        os=os_facts("rocky", "9.4", ""),
        nvidia=nvidia_facts("550.127.05", "12.4", [nvml_device(cc="8.0")]),
    )


def test_triton_lcuda_on_rhel_names_lib64_not_the_32bit_usr_lib(tmp_path, registry):
    f = one(registry, _rhel_compile_facts(tmp_path, link64=False), "torch.compile")
    assert f.status is Status.FAIL and "cannot find -lcuda" in f.summary
    assert "32-bit one in `/usr/lib`" in f.explanation
    assert "sudo ln -s libcuda.so.1 /usr/lib64/libcuda.so && sudo ldconfig" in f.explanation
    assert "ln -s /usr/lib64/libcuda.so.1 ~/.local/lib/cuda-link/libcuda.so" in f.explanation


def test_triton_lcuda_on_rhel_with_the_lib64_link_is_healthy(tmp_path, registry):
    f = one(registry, _rhel_compile_facts(tmp_path, link64=True), "torch.compile")
    assert f.status is Status.INFO, f.summary


# --------------------------------------------------------------------------- Python.h per distro


def _headers_facts(os_id, python_version, include=None):
    mm = ".".join(python_version.split(".")[:2])
    path = f"{include or f'/usr/include/python{mm}'}/Python.h"
    probe = probe_facts(
        f"/home/user/venv{mm}/bin/python",
        torch_facts("2.5.1+cu124", "12.4"),
        python_version=python_version,
        toolchain=ToolchainFacts(False, path, "/usr/bin/gcc", "/usr/bin/g++", ("/usr/include/python3.9",)),
    )
    return make_facts(targets=targets(target(probe)), os=os_facts(*os_id))


@pytest.mark.parametrize(
    ("os_id", "python", "command", "absent"),
    [
        (("rhel", "9.4", ""), "3.11.9", "sudo dnf install python3.11-devel\n", "python3-devel\n"),
        (("rocky", "9.4", ""), "3.12.5", "sudo dnf install python3.12-devel\n", "python3-devel\n"),
        (("rocky", "9.4", ""), "3.9.18", "sudo dnf install python3-devel\n", "python3.9-devel"),
        (("almalinux", "8.10", ""), "3.9.20", "sudo dnf install python39-devel\n", "python3-devel\n"),
        (("amzn", "2023", ""), "3.11.6", "sudo dnf install python3.11-devel\n", "python3-devel\n"),
        (("ubuntu", "24.04", "noble"), "3.12.3", "sudo apt-get install python3.12-dev\n", "devel"),
        (("debian", "12", "bookworm"), "3.11.2", "sudo apt-get install python3.11-dev\n", "devel"),
    ],
)
def test_python_h_package_is_the_interpreters_own(registry, os_id, python, command, absent):
    f = one(registry, _headers_facts(os_id, python), "torch.compile")
    assert f.status is Status.FAIL and "Python.h" in f.summary
    assert command in f.explanation
    assert absent not in f.explanation.split("```")[1]


# --------------------------------------------------------------------------- Slurm without --gres


def _slurm_facts(platform_env, torch_count, cvd=None, nvml_devices=()):
    env = {"CUDA_VISIBLE_DEVICES": cvd} if cvd is not None else {}
    probe = probe_facts(
        "/home/user/venv/bin/python",
        torch_facts("2.5.1+cu124", "12.4", cuda_available=bool(torch_count), device_count=torch_count),
        env=env,
    )
    p = PlatformFacts(kind="bare-metal", scheduler="slurm", env=platform_env)
    return make_facts(
        platform=p, targets=targets(target(probe)), nvidia=nvidia_facts("550.127.05", "12.4", list(nvml_devices))
    )


def test_slurm_job_without_gres_sees_no_gpu(registry):
    f = one(registry, _slurm_facts({"SLURM_JOB_ID": "4242", "SLURM_JOB_GRES": "(null)"}, 0), "platform.visibility")
    assert f.status is Status.FAIL and f.summary.startswith("Slurm job 4242 requested no GPU")
    assert "#SBATCH --gres=gpu:1" in f.explanation and "srun --gres=gpu:1 --pty bash" in f.explanation
    assert "No devices were found" in f.explanation


def test_slurm_job_without_gres_from_nvml_alone(registry):
    facts = _slurm_facts({"SLURM_JOB_ID": "4242"}, 0)
    probe = probe_facts("/usr/bin/python3", torch_facts(installed=False))
    facts = make_facts(**{**facts.domains, "targets": targets(target(probe))})
    f = one(registry, facts, "platform.visibility")
    assert f.status is Status.FAIL and "requested no GPU" in f.summary


def test_slurm_job_with_gres_is_healthy(registry):
    facts = _slurm_facts(
        {"SLURM_JOB_ID": "4242", "SLURM_JOB_GPUS": "0", "SLURM_JOB_GRES": "gpu:1"},
        1,
        cvd="0",
        nvml_devices=[nvml_device(0)],
    )
    f = one(registry, facts, "platform.visibility")
    assert f.status is Status.OK and "set by Slurm" in f.summary


def test_slurm_job_without_gres_on_an_unconstrained_node_is_not_failed(registry):
    # no device cgroup: the GPUs stay visible, the job simply did not reserve them
    f = one(registry, _slurm_facts({"SLURM_JOB_ID": "4242"}, 2), "platform.visibility")
    assert f.status is Status.OK


def test_slurm_gres_in_tres_per_task_counts_as_a_request(registry):
    f = one(
        registry, _slurm_facts({"SLURM_JOB_ID": "7", "SLURM_TRES_PER_TASK": "gres/gpu:1"}, 0), "platform.visibility"
    )
    assert "requested no GPU" not in f.summary


# --------------------------------------------------------------------------- Kubernetes: GKE


def test_pod_without_injection_names_the_gke_driver_install(registry):
    p = PlatformFacts(
        kind="container",
        container_runtime="containerd",
        kubernetes=True,
        markers=("KUBERNETES_SERVICE_HOST is set",),
        env={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NVIDIA_VISIBLE_DEVICES": "all"},
        proc_driver_version="NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024",
    )
    f = one(registry, make_facts(platform=p, nvidia=nvidia_facts("550.90.07", source="proc")), "platform.container")
    assert f.status is Status.FAIL
    assert "runtimeClassName: nvidia" in f.explanation and "nvidia.com/gpu: 1" in f.explanation
    assert "gpu-driver-version=default" in f.explanation and "/usr/local/nvidia" in f.explanation


# --------------------------------------------------------------------------- rootless Docker


def _rootless_host(tmp_path: Path, no_cgroups: bool):
    from gpudoctor.collect.platform import container_host_facts, parse_docker_info

    config = "[nvidia-container-cli]\n" + ("no-cgroups = true\n" if no_cgroups else "#no-cgroups = false\n")
    root = write_tree(
        tmp_path,
        {
            "/usr/bin/docker": "",
            "/usr/bin/nvidia-ctk": "",
            "/usr/bin/nvidia-container-runtime-hook": "",
            "/etc/nvidia-container-runtime/config.toml": config,
        },
    )
    host = container_host_facts(fake_system(root).files, None)
    info = parse_docker_info(
        '{"ServerVersion": "27.3.1", "Runtimes": {"runc": {}, "nvidia": {}}, "DefaultRuntime": "runc", '
        '"SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless", "name=cgroupns"]}'
    )
    from dataclasses import replace

    host = replace(host, docker=info, toolkit_version="1.17.8")
    return make_facts(
        container_host=host,
        platform=PlatformFacts(kind="bare-metal"),
        nvidia=nvidia_facts("550.120", "12.4", [nvml_device(0)]),
        os=os_facts("ubuntu", "22.04", "jammy"),
    )


def test_rootless_docker_without_no_cgroups(tmp_path, registry):
    facts = _rootless_host(tmp_path, no_cgroups=False)
    assert facts.domains["container_host"].docker.rootless
    f = one(registry, facts, "platform.toolkit")
    assert f.status is Status.FAIL and "rootless Docker" in f.summary and "no-cgroups" in f.summary
    assert "sudo nvidia-ctk config --set nvidia-container-cli.no-cgroups --in-place" in f.explanation
    assert "systemctl --user restart docker" in f.explanation


def test_rootless_docker_with_no_cgroups_is_healthy(tmp_path, registry):
    facts = _rootless_host(tmp_path, no_cgroups=True)
    assert facts.domains["container_host"].no_cgroups
    f = one(registry, facts, "platform.toolkit")
    assert f.status is Status.OK, f.summary


# --------------------------------------------------------------------------- k3s / MicroK8s containerd


K3S_CONFIG = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
MICROK8S_TEMPLATE = "/var/snap/microk8s/current/args/containerd-template.toml"


def _containerd_host(tmp_path: Path, path: str, with_nvidia: bool):
    from gpudoctor.collect.platform import container_host_facts

    body = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'
    body += '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
    if with_nvidia:
        body += (
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia"]\n'
            '  runtime_type = "io.containerd.runc.v2"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia".options]\n'
            '  BinaryName = "/usr/bin/nvidia-container-runtime"\n'
        )
    root = write_tree(tmp_path, {path: body, "/usr/bin/nvidia-ctk": "", "/usr/bin/nvidia-container-runtime": ""})
    host = container_host_facts(fake_system(root).files, None)
    return make_facts(
        container_host=host,
        platform=PlatformFacts(kind="bare-metal"),
        nvidia=nvidia_facts("550.120", "12.4", [nvml_device(0)]),
        os=os_facts("ubuntu", "22.04", "jammy"),
    )


def test_k3s_without_the_nvidia_runtime_restarts_k3s_instead_of_editing_its_config(tmp_path, registry):
    f = one(registry, _containerd_host(tmp_path, K3S_CONFIG, False), "platform.toolkit")
    assert f.status is Status.FAIL and K3S_CONFIG in f.summary
    assert "sudo systemctl restart k3s" in f.explanation and "kind: RuntimeClass" in f.explanation
    assert "nvidia-ctk runtime configure" not in f.explanation.split("```")[1]


def test_k3s_with_the_nvidia_runtime_but_runc_default(tmp_path, registry):
    f = one(registry, _containerd_host(tmp_path, K3S_CONFIG, True), "platform.toolkit")
    assert f.status is Status.INFO and "runtimeClassName: nvidia" in f.explanation
    assert "--default-runtime=nvidia" in f.explanation and "--set-as-default" not in f.explanation


def test_microk8s_without_the_nvidia_runtime_enables_the_addon(tmp_path, registry):
    f = one(registry, _containerd_host(tmp_path, MICROK8S_TEMPLATE, False), "platform.toolkit")
    assert f.status is Status.FAIL and "sudo microk8s enable nvidia" in f.explanation


def test_plain_containerd_keeps_nvidia_ctk(tmp_path, registry):
    f = one(registry, _containerd_host(tmp_path, "/etc/containerd/config.toml", False), "platform.toolkit")
    assert f.status is Status.FAIL and "sudo nvidia-ctk runtime configure --runtime=containerd" in f.explanation
    f = one(registry, _containerd_host(tmp_path / "b", "/etc/containerd/config.toml", True), "platform.toolkit")
    assert f.status is Status.INFO and "--set-as-default" in f.explanation


# --------------------------------------------------------------------------- container: driver baked into the image


def _container_facts(tmp_path: Path, files: dict, env: dict, docker: bool = True):
    from gpudoctor.collect.platform import collect_platform

    marker = {"/.dockerenv": ""} if docker else {}
    root = write_tree(tmp_path, {**marker, "/proc/self/cgroup": "0::/\n", **files})
    p = collect_platform(CollectContext(fake_system(root, env=env), CollectOptions()))
    if p.proc_driver_version:
        return make_facts(platform=p, nvidia=nvidia_facts("550.120", source="proc"))
    return make_facts(platform=p)


NVRM_HOST = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:16 UTC 2024\n"


def test_driver_library_installed_in_the_image_without_device_nodes(tmp_path, registry):
    facts = _container_facts(
        tmp_path,
        {
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1": "",
            "/proc/driver/nvidia/version": NVRM_HOST,
            "/dev/null": "",
        },
        {"NVIDIA_VISIBLE_DEVICES": "all"},
    )
    f = one(registry, facts, "platform.container")
    assert (
        f.status is Status.FAIL and "no /dev/nvidia* device nodes" in f.summary and "baked into the image" in f.summary
    )
    assert "docker run --gpus all" in f.explanation and "Driver/library version mismatch" in f.explanation


def test_wsl_container_with_dxg_is_injected(tmp_path, registry):
    facts = _container_facts(
        tmp_path, {"/usr/lib/wsl/lib/libcuda.so.1": "", "/dev/dxg": ""}, {"NVIDIA_VISIBLE_DEVICES": "all"}
    )
    f = one(registry, facts, "platform.container")
    assert f.status is Status.OK and "WSL 2 (/dev/dxg" in f.summary


def test_cpu_container_with_a_baked_library_is_info(tmp_path, registry):
    facts = _container_facts(tmp_path, {"/usr/lib/x86_64-linux-gnu/libcuda.so.1": "", "/dev/null": ""}, {})
    f = one(registry, facts, "platform.container")
    assert f.status is Status.INFO and "no GPU assigned" in f.summary


def test_injected_container_is_still_ok(tmp_path, registry):
    facts = _container_facts(
        tmp_path,
        {
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1": "",
            "/proc/driver/nvidia/version": NVRM_HOST,
            "/dev/nvidia0": "",
            "/dev/nvidiactl": "",
        },
        {"NVIDIA_VISIBLE_DEVICES": "GPU-1"},
    )
    f = one(registry, facts, "platform.container")
    assert f.status is Status.OK and "nvidia0" in f.summary


# --------------------------------------------------------------------------- container: host index in CUDA_VISIBLE_DEVICES


def _container_visibility(cvd: str, in_container: bool = True):
    p = (
        PlatformFacts(
            kind="container",
            container_runtime="docker",
            markers=("/.dockerenv exists",),
            env={"NVIDIA_VISIBLE_DEVICES": "1"},
        )
        if in_container
        else PlatformFacts(kind="bare-metal")
    )
    probe = probe_facts(
        "/opt/conda/bin/python", torch_facts("2.5.1+cu124", "12.4", device_count=0), env={"CUDA_VISIBLE_DEVICES": cvd}
    )
    return make_facts(platform=p, targets=targets(target(probe)), nvidia=nvidia_facts(devices=[nvml_device(0)]))


def test_host_gpu_index_inside_a_container(registry):
    f = one(registry, _container_visibility("1"), "platform.visibility")
    assert f.status is Status.FAIL and "host GPU index" in f.summary and "numbered from 0" in f.summary
    assert "docker run --gpus '\"device=1\"'" in f.explanation and "CUDA_VISIBLE_DEVICES=0" in f.explanation


def test_index_zero_inside_a_container_is_healthy(registry):
    f = one(registry, _container_visibility("0"), "platform.visibility")
    assert f.status is Status.OK


def test_out_of_range_index_on_bare_metal_keeps_the_plain_remedy(registry):
    f = one(registry, _container_visibility("1", in_container=False), "platform.visibility")
    assert f.status is Status.FAIL and "no scheduler set it" in f.summary and "numbered from 0" not in f.summary


# --------------------------------------------------------------------------- a CUDA library found nowhere


LIB_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "facts" / "libraries"


def _lost_library_facts(framework):
    import json
    from dataclasses import replace

    from gpudoctor.facts import Facts
    from gpudoctor.facts.libraries import CudaLibrariesFacts

    facts = Facts.from_json(json.loads((LIB_FIXTURES / "libs-cublaslt-not-found.json").read_text()))
    cl = facts.of(CudaLibrariesFacts)
    fw = replace(cl.frameworks[0], **framework)
    model = cl.targets[0]
    root = model.roots[0].partition(":")[2]
    model = replace(model, roots=(f"{fw.name}:{root}",))
    return make_facts(**{**facts.domains, "cuda_libraries": replace(cl, frameworks=(fw,), targets=(model,))})


def test_torch_missing_a_dependency_wheel_reinstalls_its_pins_from_its_index(registry):
    f = one(registry, _lost_library_facts({}), "cuda.libraries")
    assert f.status is Status.FAIL and "libcublasLt.so.12" in f.summary and "found nowhere" in f.summary
    assert "-m pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124\n" in f.explanation
    assert "<framework>" not in f.explanation


def test_pypi_torch_missing_a_dependency_wheel(registry):
    f = one(registry, _lost_library_facts({"version": "2.5.1"}), "cuda.libraries")
    assert "-m pip install torch==2.5.1\n" in f.explanation and "--index-url" not in f.explanation


def test_another_framework_missing_cublaslt_gets_the_nvidia_wheel(registry):
    f = one(
        registry,
        _lost_library_facts({"name": "onnxruntime-gpu", "dist": "onnxruntime-gpu", "version": "1.19.2"}),
        "cuda.libraries",
    )
    assert "-m pip install nvidia-cublas-cu12\n" in f.explanation and "pip show onnxruntime-gpu" in f.explanation


# --------------------------------------------------------------------------- nvidia-* wheel older than the framework's pin


SITE = "/home/user/venv/lib/python3.11/site-packages"
TORCH_METADATA = (
    "Metadata-Version: 2.1\nName: torch\nVersion: 2.2.0\n"
    'Requires-Dist: nvidia-nccl-cu12==2.19.3; platform_system == "Linux" and platform_machine == "x86_64"\n'
    'Requires-Dist: nvidia-cudnn-cu12==8.9.2.26; platform_system == "Linux" and platform_machine == "x86_64"\n'
    'Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"\n'
    'Requires-Dist: nvidia-cufile-cu12==1.0.0; extra == "gds"\n'
    "\nThe description.\nRequires-Dist: nvidia-fake==9.9\n"
)


def _pinned_env_facts(tmp_path: Path, nccl: str):
    tree = {
        "/etc/ld.so.cache": b"cache",
        f"{SITE}/torch/lib/libtorch_cuda.so": elf_header(64),
        f"{SITE}/torch-2.2.0.dist-info/METADATA": TORCH_METADATA,
        f"{SITE}/nvidia_nccl_cu12-{nccl}.dist-info/METADATA": f"Name: nvidia-nccl-cu12\nVersion: {nccl}\n",
        f"{SITE}/nvidia_cudnn_cu12-8.9.2.26.dist-info/METADATA": "Name: nvidia-cudnn-cu12\nVersion: 8.9.2.26\n",
    }
    write_tree(tmp_path, tree)
    runner = ScriptedRunner({("ldconfig", "-p", "-C", str(tmp_path / "etc/ld.so.cache")): ok("0 libs found\n")})
    env = {"PATH": "/home/user/venv/bin:/usr/bin:/bin"}
    probe = probe_facts(
        "/home/user/venv/bin/python",
        torch_facts("2.2.0", "12.1", cuda_available=True),
        env=env,
        site_packages=(SITE,),
    )
    tg = targets(target(probe))
    system = fake_system(tmp_path, env=env, runner=runner)
    loader = collect_loader(CollectContext(system, CollectOptions(), {"targets": tg}))
    libs = collect_cuda_libraries(CollectContext(system, CollectOptions(), {"targets": tg, "loader": loader}))
    return make_facts(targets=tg, loader=loader, cuda_libraries=libs)


def test_exact_pins_reads_headers_only_and_skips_extras():
    from gpudoctor.collect.libraries import exact_pins

    assert exact_pins(TORCH_METADATA) == ("nvidia-nccl-cu12==2.19.3", "nvidia-cudnn-cu12==8.9.2.26")
    assert exact_pins("Requires-Dist: nvidia-nccl-cu12 (==2.18.1) ; platform_system == 'Linux'\n") == (
        "nvidia-nccl-cu12==2.18.1",
    )


def test_nccl_wheel_older_than_torch_pins(tmp_path, registry):
    facts = _pinned_env_facts(tmp_path, "2.18.1")
    [fw] = facts.domains["cuda_libraries"].frameworks
    assert "nvidia-nccl-cu12==2.18.1" in fw.pinned_installed
    f = one(registry, facts, "cuda.libraries")
    assert f.status is Status.FAIL
    assert f.summary == "nvidia-nccl-cu12 2.18.1 is installed, older than the 2.19.3 that torch 2.2.0 pins"
    assert "/home/user/venv/bin/python -m pip install nvidia-nccl-cu12==2.19.3\n" in f.explanation
    assert "pip check" in f.explanation and "ncclCommRegister" in f.explanation


def test_nccl_wheel_at_the_pin_is_healthy(tmp_path, registry):
    f = one(registry, _pinned_env_facts(tmp_path, "2.19.3"), "cuda.libraries")
    assert f.status is not Status.FAIL and "older than" not in f.summary


def test_nccl_wheel_newer_than_the_pin_is_not_flagged(tmp_path, registry):
    f = one(registry, _pinned_env_facts(tmp_path, "2.21.5"), "cuda.libraries")
    assert f.status is not Status.FAIL and "older than" not in f.summary


# --------------------------------------------------------------------------- Secure Boot: the distro's signing key


SECURE_BOOT_ON = {
    "/lib/modules/6.8.0-51-generic/updates/dkms/nvidia.ko.zst": "",
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c": b"\x06\x00\x00\x00\x01",
}


@pytest.mark.parametrize(
    ("os_id", "command"),
    [
        (("ubuntu", "24.04", "noble"), "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der\n"),
        (("fedora", "40", ""), "sudo mokutil --import /etc/pki/akmods/certs/public_key.der\n"),
        (("debian", "12", "bookworm"), "sudo mokutil --import /var/lib/dkms/mok.pub\n"),
    ],
)
def test_secure_boot_enrols_the_distros_signing_key(tmp_path, registry, os_id, command):
    root = _pci_root(tmp_path, "0x2204", bound=False, extra=SECURE_BOOT_ON)
    f = one(registry, _module_facts(root, os_id), "platform.kernel-module")
    assert f.status is Status.FAIL and "Secure Boot" in f.summary and command in f.explanation


# --------------------------------------------------------------------------- DKMS could not build for the running kernel


def test_dkms_driver_without_kernel_headers(tmp_path, registry):
    root = _pci_root(
        tmp_path,
        "0x2204",
        bound=False,
        extra={
            "/var/lib/dkms/nvidia/550.120/source/dkms.conf": "PACKAGE_NAME=nvidia\n",
            "/lib/modules/6.8.0-51-generic/kernel/drivers/net/e1000.ko.zst": "",
        },
    )
    facts = _module_facts(root)
    km = facts.domains["kmod"]
    assert km.dkms_versions == ("550.120",) and not km.kernel_headers
    f = one(registry, facts, "platform.kernel-module")
    assert f.status is Status.FAIL and "no module was built for kernel 6.8.0-51-generic" in f.summary
    assert "no kernel headers" in f.summary
    assert "sudo apt install linux-headers-6.8.0-51-generic\nsudo dkms autoinstall -k 6.8.0-51-generic" in (
        f.explanation
    )


def test_dkms_driver_with_headers_but_a_failed_build(tmp_path, registry):
    root = _pci_root(
        tmp_path,
        "0x2204",
        bound=False,
        extra={
            "/var/lib/dkms/nvidia/550.120/source/dkms.conf": "PACKAGE_NAME=nvidia\n",
            "/lib/modules/6.8.0-51-generic/build/Makefile": "",
        },
    )
    f = one(registry, _module_facts(root, ("rocky", "9.4", "")), "platform.kernel-module")
    assert f.status is Status.FAIL and "the build failed" in f.summary and "make.log" in f.explanation
    assert "sudo dnf install kernel-devel-6.8.0-51-generic" in f.explanation


def test_no_driver_at_all_keeps_the_install_advice(tmp_path, registry):
    root = _pci_root(tmp_path, "0x2204", bound=False)
    f = one(registry, _module_facts(root), "platform.kernel-module")
    assert f.status is Status.FAIL and "install the NVIDIA driver" in f.explanation and "DKMS" not in f.summary


def test_triton_lcuda_in_a_container_puts_the_link_in_the_image(tmp_path, registry):
    facts = _rhel_compile_facts(tmp_path, link64=False)
    container = PlatformFacts(kind="container", container_runtime="docker", markers=("/.dockerenv exists",))
    f = one(registry, make_facts(**{**facts.domains, "platform": container}), "torch.compile")
    assert f.status is Status.FAIL and "RUN ln -s libcuda.so.1 /usr/lib64/libcuda.so" in f.explanation
    bare = one(registry, facts, "torch.compile")
    assert "Dockerfile" not in bare.explanation


def test_slurm_without_gres_is_the_headline_root_cause(registry):
    facts = _slurm_facts({"SLURM_JOB_ID": "4242"}, 0)
    facts = make_facts(**{**facts.domains, "nvidia": nvidia_facts("550.127.05", "12.4", [])})
    head = one(registry, facts, "cuda.available")
    assert head.status is Status.FAIL and "requested no GPU" in head.summary
    dev = one(registry, facts, "cuda.devices")
    assert dev.caused_by == ("platform.visibility",)


# --------------------------------------------------------------------------- WSL: nvidia-utils installed inside


def _wsl_nvml_facts(nvml_dir: str):
    import json
    from dataclasses import replace

    from gpudoctor.facts import Facts
    from gpudoctor.facts.libraries import CudaLibrariesFacts

    facts = Facts.from_json(json.loads((LIB_FIXTURES / "wsl-libcuda-ok.json").read_text()))
    cl = facts.of(CudaLibrariesFacts)
    model = cl.targets[0]
    template = model.lookups[0]
    nvml = replace(
        template,
        needed="libnvidia-ml.so.1",
        family="nvml",
        path=f"{nvml_dir}/libnvidia-ml.so.1",
        directory=nvml_dir,
        via="ld.so cache",
    )
    model = replace(model, lookups=(*model.lookups, nvml))
    return make_facts(**{**facts.domains, "cuda_libraries": replace(cl, targets=(model,))})


def test_wsl_with_nvidia_utils_installed_inside(registry):
    f = one(registry, _wsl_nvml_facts("/usr/lib/x86_64-linux-gnu"), "cuda.wsl")
    assert f.status is Status.FAIL and "libnvidia-ml.so.1 resolves to /usr/lib/x86_64-linux-gnu" in f.summary
    assert "NVIDIA-SMI has failed" in f.explanation and "'nvidia-utils-*'" in f.explanation


def test_wsl_with_its_own_nvml_is_healthy(registry):
    f = one(registry, _wsl_nvml_facts("/usr/lib/wsl/lib"), "cuda.wsl")
    assert f.status is Status.OK


# --------------------------------------------------------------------------- RDMA memlock in a Slurm job


def _rdma_facts(scheduler: str):
    from gpudoctor.facts.platform import LimitsFacts, ProcessLimits, RdmaFacts, RLimit

    p = PlatformFacts(kind="bare-metal", scheduler=scheduler, env={"SLURM_JOB_ID": "99"} if scheduler else {})
    r = RdmaFacts(
        hcas=("mlx5_0",), dev_infiniband=("uverbs0",), cap_ipc_lock=False, net_interfaces=("ib0", "lo"), nccl_env={}
    )
    limits = LimitsFacts(ProcessLimits("/proc/self/limits", RLimit(1024, 4096), RLimit(65536, 65536)))
    return make_facts(platform=p, rdma=r, limits=limits)


def test_slurm_job_memlock_names_slurm_settings(registry):
    f = one(registry, _rdma_facts("slurm"), "platform.rdma")
    assert f.status is Status.WARN and "65536 bytes" in f.summary
    assert "PropagateResourceLimitsExcept=MEMLOCK" in f.explanation and "LimitMEMLOCK=infinity" in f.explanation


def test_bare_metal_memlock_keeps_limits_conf(registry):
    f = one(registry, _rdma_facts(""), "platform.rdma")
    assert f.status is Status.WARN and "/etc/security/limits.conf" in f.explanation
    assert "Slurm" not in f.explanation


def test_host_gpu_index_inside_a_pod_names_the_device_plugin(registry):
    from dataclasses import replace

    facts = _container_visibility("3")
    pod = replace(facts.domains["platform"], kubernetes=True, container_runtime="containerd")
    f = one(registry, make_facts(**{**facts.domains, "platform": pod}), "platform.visibility")
    assert f.status is Status.FAIL and "device plugin" in f.explanation and "docker run" not in f.explanation


# --------------------------------------------------------------------------- Apptainer / Singularity


def test_apptainer_without_nv_has_device_nodes_but_no_driver_libraries(tmp_path, registry):
    facts = _container_facts(
        tmp_path,
        {
            "/.singularity.d/runscript": "",
            "/dev/nvidia0": "",
            "/dev/nvidiactl": "",
            "/proc/driver/nvidia/version": NVRM_HOST,
        },
        {"APPTAINER_CONTAINER": "/scratch/user/pytorch.sif", "SLURM_JOB_ID": "5"},
        docker=False,
    )
    p = facts.domains["platform"]
    assert p.container_runtime == "apptainer" and p.in_container
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL and "Apptainer/Singularity" in f.summary and "no libcuda.so.1" in f.summary
    assert "apptainer exec --nv" in f.explanation and "--device /dev/nvidia0" not in f.explanation


def test_apptainer_with_nv_is_injected(tmp_path, registry):
    facts = _container_facts(
        tmp_path,
        {
            "/.singularity.d/runscript": "",
            "/.singularity.d/libs/libcuda.so.1": "",
            "/dev/nvidia0": "",
            "/dev/nvidiactl": "",
            "/proc/driver/nvidia/version": NVRM_HOST,
        },
        {"APPTAINER_CONTAINER": "/scratch/user/pytorch.sif"},
        docker=False,
    )
    f = one(registry, facts, "platform.container")
    assert f.status is Status.OK and "Apptainer/Singularity" in f.summary


# --------------------------------------------------------------------------- WSL with Docker Desktop


def _wsl_docker_facts(tmp_path: Path, desktop: bool):
    from gpudoctor.collect.platform import container_host_facts

    files = {"/usr/bin/docker": ""}
    if desktop:
        files["/mnt/wsl/docker-desktop/cli-tools/usr/bin/docker"] = ""
    host = container_host_facts(fake_system(write_tree(tmp_path, files)).files, None)
    return make_facts(
        container_host=host,
        platform=PlatformFacts(kind="wsl"),
        nvidia=nvidia_facts("560.94", "12.6", [nvml_device(0)]),
        os=os_facts("ubuntu", "22.04", "jammy"),
    )


def test_wsl_with_docker_desktop_needs_no_toolkit(tmp_path, registry):
    f = one(registry, _wsl_docker_facts(tmp_path, True), "platform.toolkit")
    assert f.status is Status.SKIP and "Docker Desktop" in f.summary


def test_wsl_with_docker_engine_inside_needs_the_toolkit(tmp_path, registry):
    f = one(registry, _wsl_docker_facts(tmp_path, False), "platform.toolkit")
    assert f.status is Status.FAIL and "not installed" in f.summary


def test_docker_info_operating_system_marks_docker_desktop():
    from gpudoctor.collect.platform import parse_docker_info

    info = parse_docker_info('{"ServerVersion": "27.2.0", "OperatingSystem": "Docker Desktop", "Runtimes": {}}')
    assert info.operating_system == "Docker Desktop"


# --------------------------------------------------------------------------- LXC (Proxmox / LXD)


def test_lxc_container_without_the_gpu_gets_the_lxc_config(tmp_path, registry):
    facts = _container_facts(
        tmp_path,
        {
            "/proc/1/cgroup": "0::/lxc.payload.ct101/init.scope\n",
            "/proc/driver/nvidia/version": NVRM_HOST,
            "/dev/null": "",
        },
        {},
        docker=False,
    )
    assert facts.domains["platform"].container_runtime == "lxc"
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL and "an LXC container" in f.summary
    assert "lxc.cgroup2.devices.allow: c 195:* rwm" in f.explanation and "nvidia.runtime=true" in f.explanation
    assert "the same version 550.120" in f.explanation and "docker run" not in f.explanation


# --------------------------------------------------------------------------- GPU Operator / RKE2 nodes


def test_gpu_operator_node_counts_its_toolkit_and_containerd_runtime(tmp_path, registry):
    from gpudoctor.collect.platform import container_host_facts

    config = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n'
    )
    root = write_tree(
        tmp_path,
        {
            "/etc/containerd/config.toml": config,
            "/usr/local/nvidia/toolkit/nvidia-container-runtime": "",
            "/usr/local/nvidia/toolkit/nvidia-ctk": "",
        },
    )
    host = container_host_facts(fake_system(root).files, None)
    assert "/usr/local/nvidia/toolkit/nvidia-container-runtime" in host.toolkit_files
    facts = make_facts(
        container_host=host,
        platform=PlatformFacts(kind="bare-metal"),
        nvidia=nvidia_facts("550.127.05", "12.4", [nvml_device(0)]),
        os=os_facts("ubuntu", "22.04", "jammy"),
    )
    f = one(registry, facts, "platform.toolkit")
    assert f.status is Status.OK, f.summary


def test_rke2_without_the_nvidia_runtime_restarts_rke2(tmp_path, registry):
    path = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
    f = one(registry, _containerd_host(tmp_path, path, False), "platform.toolkit")
    assert f.status is Status.FAIL and "sudo systemctl restart rke2-agent" in f.explanation
