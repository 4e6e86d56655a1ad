"""The platform layer (issue 12): where gpudoctor runs, container GPU injection,
the NVIDIA Container Toolkit, kernel modules, driver branches, scheduler and
MIG visibility, process limits and RDMA.

Case 39 is replayed from its files as a fake root plus environment. Commands
are real processes: ``docker``, ``nvidia-ctk`` and ``modinfo`` are a scripted
fake binary on PATH replaying recordings under tests/fixtures/platform/recorded
(each starts with the command that produced it); limits are set with
``prlimit`` and ``resource.setrlimit`` on real child processes.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _foundation import env_with, run_gpudoctor
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.nvidia import collect_gpu, collect_nvidia
from gpudoctor.collect.platform import (
    collect_limits,
    collect_platform,
    collect_rdma,
    container_host_facts,
    kernel_module_facts,
    parse_proc_limits,
    query_host_tools,
)
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import MigInstance, NvidiaDriverFacts, SourceAttempt
from gpudoctor.facts.platform import (
    ContainerHostFacts,
    DockerInfo,
    LimitsFacts,
    PlatformFacts,
    ProcessLimits,
    RLimit,
)
from gpudoctor.facts.targets import LibcudaProbe
from gpudoctor.model import Status
from gpudoctor.probe import probe_target
from gpudoctor.registry import load_registry
from gpudoctor.system import SubprocessRunner, System
from gpudoctor.testing import (
    fake_system,
    make_facts,
    nvidia_facts,
    nvml_device,
    os_facts,
    pci_gpus,
    probe_facts,
    target,
    targets,
    torch_facts,
    write_tree,
)

HERE = Path(__file__).resolve().parent
CASE39 = HERE / "fixtures" / "cases" / "39-k8s-pod-no-nvidia-runtimeclass"
RECORDED = HERE / "fixtures" / "platform" / "recorded"
FAKEBIN = HERE / "fixtures" / "platform" / "fakebin.py"
UUID = "GPU-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
NVRM_PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.07  Fri Feb 28 10:10:20 UTC 2025\n"
NVRM_PROPRIETARY_LINE = NVRM_PROPRIETARY.strip()
NVRM_OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.07  Release Build  (dvs-builder@U16)\n"
GPU_CHECKS = ("nvidia.driver", "cuda.available", "cuda.libcuda", "cuda.devices")


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def run(registry, facts, *ids):
    """check id -> list of findings."""
    out = {}
    for f in evaluate([registry.checks[i] for i in ids], facts):
        out.setdefault(f.check, []).append(f)
    return out


def one(registry, facts, cid):
    [finding] = run(registry, facts, cid)[cid]
    return finding


def ctx(root, env=None):
    return CollectContext(fake_system(root, env=env or {}), CollectOptions())


def text(f):
    return f.summary + "\n" + f.explanation


# --------------------------------------------------------------------------- fake binaries


@pytest.fixture
def fakebin(tmp_path, monkeypatch):
    """Install the scripted fake as docker/nvidia-ctk/modinfo on a PATH of its own; returns ``use(name, file)``."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))

    def use(name: str, recording: str | None):
        link = bindir / name
        if recording is None:
            if link.exists():
                link.unlink()
            return
        if not link.exists():
            link.write_text(f"#!{sys.executable}\n" + FAKEBIN.read_text())
            link.chmod(0o755)
        monkeypatch.setenv("GPUDOCTOR_RECORDED_" + name.upper().replace("-", "_"), str(RECORDED / recording))

    return use


def test_every_recording_names_its_command():
    for rec in RECORDED.iterdir():
        first = rec.read_text().splitlines()[0]
        assert first.startswith("$ ") and first.split()[1] in ("docker", "nvidia-ctk", "modinfo"), rec.name
        assert "# exit:" in rec.read_text()


def test_fake_binary_refuses_another_command(fakebin):
    fakebin("docker", "docker-info-nvidia-runtime.txt")
    result = SubprocessRunner().run(["docker", "ps"])
    assert result.returncode == 99 and "unexpected command" in result.stderr


# --------------------------------------------------------------------------- case 39


def _case39_env():
    lines = (CASE39 / "in-pod.txt").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("$ env"))
    env = {}
    for ln in lines[start + 1 :]:
        if ln.startswith("$"):
            break
        key, _, value = ln.partition("=")
        env[key] = value
    # every pod gets these from the kubelet (not shown by the case's grep)
    env["KUBERNETES_SERVICE_HOST"] = "10.152.183.1"
    return env


def _case39_root(tmp_path, runtime_class: bool):
    in_pod = (CASE39 / "in-pod.txt").read_text()
    nvrm = next(ln for ln in in_pod.splitlines() if ln.startswith("NVRM version"))
    task = "/var/snap/microk8s/common/run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a9c"
    files = {
        "/proc/driver/nvidia/version": nvrm + "\n",
        "/proc/self/mountinfo": f"1570 1480 0:312 / / rw,relatime - overlay overlay rw,lowerdir={task}/rootfs\n"
        "1589 1570 0:59 / /var/run/secrets/kubernetes.io/serviceaccount ro - tmpfs tmpfs ro\n",
        "/proc/self/cgroup": "0::/\n",
        "/var/run/secrets/kubernetes.io/serviceaccount/token": "redacted\n",
        "/etc/os-release": 'ID=ubuntu\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\nPRETTY_NAME="Ubuntu 22.04.3 LTS"\n',
        "/dev/null": "",
    }
    if runtime_class:  # what the NVIDIA runtime hook injects with runtimeClassName: nvidia
        files.update(
            {
                "/dev/nvidia0": "",
                "/dev/nvidiactl": "",
                "/dev/nvidia-uvm": "",
                "/usr/bin/nvidia-smi": "",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1": "",
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "",
            }
        )
    return write_tree(tmp_path / ("ok" if runtime_class else "runc"), files)


def _case39_facts(tmp_path, runtime_class: bool) -> Facts:
    env = _case39_env()
    root = _case39_root(tmp_path, runtime_class)
    c = ctx(root, env)
    version, available = re.search(r"^(\S+) (True|False)$", (CASE39 / "in-pod.txt").read_text(), re.MULTILINE).groups()
    libcuda = (
        LibcudaProbe(True, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", None, 12030)
        if runtime_class
        else LibcudaProbe(False, None, "libcuda.so.1: cannot open shared object file: No such file or directory")
    )
    probe = probe_facts(
        "/usr/bin/python3",
        torch_facts(version, "12.1", cuda_available=available == "True"),
        python_version="3.10.12",
        env=env,
        libcuda=libcuda,
    )
    from gpudoctor.collect.host import collect_os

    from_proc = collect_nvidia(c)  # on a fake root NVML is not tried; the kernel module comes from /proc
    assert from_proc.driver_version == "545.23.08" and from_proc.source == "proc"
    # live in the pod, NVML is tried first and fails (no libnvidia-ml.so.1), then /proc answers
    nv = from_proc if runtime_class else nvidia_facts(from_proc.driver_version, source="proc")
    if runtime_class:
        nv = nvidia_facts(from_proc.driver_version, "12.3", [nvml_device(0, "NVIDIA GeForce RTX 4090", uuid=UUID)])
    return make_facts(
        platform=collect_platform(c), nvidia=nv, gpu=collect_gpu(c), os=collect_os(c), targets=targets(target(probe))
    )


def test_case_39_pod_without_runtime_class(tmp_path, registry):
    facts = _case39_facts(tmp_path, runtime_class=False)
    p = facts.get("platform")
    assert p.kubernetes and p.in_container and p.container_runtime == "containerd"
    assert p.device_nodes == () and p.driver_libraries == () and "545.23.08" in p.proc_driver_version
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL
    assert "Kubernetes pod" in f.summary and f"NVIDIA_VISIBLE_DEVICES={UUID}" in f.summary
    assert "injected no device nodes or driver libraries" in f.summary
    assert "runtimeClassName: nvidia" in f.explanation and "--set-as-default" in f.explanation
    assert "already requests a GPU" in f.explanation
    found = run(registry, facts, "platform.container", *GPU_CHECKS)
    for cid, findings in found.items():
        for finding in findings:
            assert "--gpus" not in text(finding), (cid, finding.explanation)
    # the driver check names the pod remedy too, not Docker's flag
    drv = found["nvidia.driver"][0]
    assert drv.status is Status.FAIL and "runtimeClassName: nvidia" in drv.explanation
    assert found["cuda.libcuda"][0].status is Status.FAIL
    assert "runtimeClassName" in found["cuda.libcuda"][0].explanation
    head = found["cuda.available"][0]
    assert head.status is Status.FAIL and head.evidence["root_cause_check"] == "platform.container"
    assert head.summary.startswith("CUDA is unavailable in /usr/bin/python3: in a Kubernetes pod")


def test_case_39_healthy_twin_with_runtime_class(tmp_path, registry):
    facts = _case39_facts(tmp_path, runtime_class=True)
    f = one(registry, facts, "platform.container")
    assert f.status is Status.OK and "Kubernetes pod" in f.summary and "nvidia0" in f.summary


def test_case_39_cluster_side_containerd_defaults_to_runc(tmp_path, registry):
    # the node's containerd template, rebuilt from the lines the case grepped
    lines = (CASE39 / "cluster-facts.txt").read_text().splitlines()
    grep = [ln.split(":", 1)[1] for ln in lines if re.match(r"^\d+:", ln)]
    root = write_tree(
        tmp_path,
        {
            "/var/snap/microk8s/current/args/containerd-template.toml": "\n".join(grep) + "\n",
            "/usr/bin/nvidia-ctk": "",
            "/usr/bin/nvidia-container-runtime": "",
        },
    )
    host = container_host_facts(fake_system(root).files, None)
    assert host.containerd[0].default_runtime == "runc" and "nvidia" in host.containerd[0].runtimes
    facts = make_facts(
        container_host=host,
        platform=PlatformFacts(kind="bare-metal"),
        nvidia=nvidia_facts("545.23.08", "12.3", [nvml_device(0)]),
        gpu=pci_gpus(1),
        os=os_facts("ubuntu", "22.04", "jammy"),
    )
    f = one(registry, facts, "platform.toolkit")
    assert f.status is Status.INFO and "runtimeClassName: nvidia" in f.explanation


# --------------------------------------------------------------------------- where am I


@pytest.mark.parametrize(
    "files,env,kind,runtime,kube,scheduler",
    [
        ({"/.dockerenv": "", "/proc/self/cgroup": "0::/\n"}, {}, "container", "docker", False, ""),
        ({"/run/.containerenv": 'engine="podman-4.9.3"\n'}, {}, "container", "podman", False, ""),
        (
            {"/proc/self/cgroup": "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-7f3e.scope\n"},
            {},
            "container",
            "containerd",
            True,
            "",
        ),
        ({"/proc/self/cgroup": "12:devices:/docker/4b1d9c\n"}, {}, "container", "docker", False, ""),
        (
            {
                "/proc/self/cgroup": "0::/\n",
                "/proc/self/mountinfo": "612 598 259:1 /var/lib/docker/containers/4b1d9c/hostname /etc/hostname rw - ext4 /dev/nvme0n1p1 rw\n",
            },
            {},
            "container",
            "docker",
            False,
            "",
        ),
        (
            {"/proc/self/cgroup": "0::/kubepods.slice/kubepods-pod1a2b.slice/crio-9f8e.scope\n"},
            {},
            "container",
            "cri-o",
            True,
            "",
        ),
        (
            {
                "/proc/cpuinfo": "flags\t\t: fpu vme hypervisor\n",
                "/sys/class/dmi/id/sys_vendor": "QEMU\n",
                "/sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n",
            },
            {},
            "vm",
            "",
            False,
            "",
        ),
        ({"/proc/sys/kernel/osrelease": "5.15.167.4-microsoft-standard-WSL2\n"}, {}, "wsl", "", False, ""),
        (
            {"/proc/cpuinfo": "flags\t\t: fpu vme sse\n"},
            {"SLURM_JOB_ID": "81234", "SLURM_JOB_GPUS": "0"},
            "bare-metal",
            "",
            False,
            "slurm",
        ),
        ({"/.dockerenv": ""}, {"RAY_RAYLET_PID": "4242", "RAY_NODE_ID": "ab12"}, "container", "docker", False, "ray"),
    ],
)
def test_where_am_i(tmp_path, files, env, kind, runtime, kube, scheduler, registry):
    p = collect_platform(ctx(write_tree(tmp_path, files), env))
    assert (p.kind, p.container_runtime, p.kubernetes, p.scheduler) == (kind, runtime, kube, scheduler)
    f = one(registry, make_facts(platform=p), "platform.container")
    assert f.status in (Status.OK, Status.INFO)


def test_a_host_that_runs_containers_is_not_one(tmp_path):
    mounts = (
        "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
        "812 22 0:71 / /var/lib/docker/overlay2/9c1e/merged rw - overlay overlay rw,lowerdir=/var/lib/docker/x\n"
        "930 22 0:80 / /var/lib/kubelet/pods/1a2b/volumes/kubernetes.io~projected/kube-api-access rw - tmpfs "
        "tmpfs rw\n"
        "944 22 0:81 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a/rootfs rw - overlay overlay "
        "rw\n"
    )
    root = write_tree(
        tmp_path,
        {
            "/proc/self/mountinfo": mounts,
            "/proc/1/cgroup": "0::/init.scope\n",
            "/proc/self/cgroup": "0::/user.slice/session-3.scope\n",
            "/proc/cpuinfo": "flags\t\t: fpu sse\n",
        },
    )
    p = collect_platform(ctx(root))
    assert (p.kind, p.container_runtime, p.kubernetes) == ("bare-metal", "", False), p.markers


def test_an_image_root_is_not_a_place(tmp_path):
    p = collect_platform(ctx(write_tree(tmp_path, {"/etc/os-release": "ID=ubuntu\n"})))
    assert isinstance(p, Unavailable) and "running system" in p.reason


def test_service_account_mount_alone_means_kubernetes(tmp_path):
    root = write_tree(tmp_path, {"/var/run/secrets/kubernetes.io/serviceaccount/namespace": "default\n"})
    p = collect_platform(ctx(root))
    assert p.kubernetes and p.in_container


# --------------------------------------------------------------------------- container injection


def _container(runtime: str, env=None, nodes=(), libs=(), proc=NVRM_PROPRIETARY_LINE, kube=False):
    return PlatformFacts(
        kind="container",
        container_runtime=runtime,
        markers=("test",),
        kubernetes=kube,
        env=dict(env or {}),
        device_nodes=tuple(nodes),
        driver_libraries=tuple(libs),
        proc_driver_version=proc,
    )


LIBS = ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
NODES = ("nvidia0", "nvidiactl", "nvidia-uvm")


def test_docker_container_started_without_gpus(registry):
    f = one(registry, make_facts(platform=_container("docker")), "platform.container")
    assert f.status is Status.FAIL and "Docker container" in f.summary and "host has an NVIDIA GPU" in f.summary
    assert "docker run --gpus all" in f.explanation and "reservations:" in f.explanation
    assert "driver: nvidia" in f.explanation


@pytest.mark.parametrize("runtime,kube", [("containerd", True), ("docker", False)])
def test_image_default_all_is_not_an_allocation(runtime, kube, registry):
    f = one(
        registry,
        make_facts(platform=_container(runtime, {"NVIDIA_VISIBLE_DEVICES": "all"}, kube=kube)),
        "platform.container",
    )
    assert f.status is Status.FAIL and "CUDA images' default" in f.summary
    if kube:
        assert "nvidia.com/gpu: 1" in f.explanation and "already requests" not in f.explanation
    else:
        assert "docker run --gpus all" in f.explanation


def test_podman_container_gets_the_cdi_remedy(registry):
    f = one(
        registry, make_facts(platform=_container("podman", {"NVIDIA_VISIBLE_DEVICES": "all"})), "platform.container"
    )
    assert f.status is Status.FAIL and "--device nvidia.com/gpu=all" in f.explanation
    assert "--gpus" not in f.explanation


def test_pod_without_gpu_request_is_told_to_request_one(registry):
    f = one(registry, make_facts(platform=_container("containerd", kube=True)), "platform.container")
    assert f.status is Status.FAIL and "nvidia.com/gpu: 1" in f.explanation and "--gpus" not in f.explanation


def test_cpu_only_container_is_info(registry):
    f = one(registry, make_facts(platform=_container("docker", proc="")), "platform.container")
    assert f.status is Status.INFO


def test_devices_without_compute_capability(registry):
    facts = make_facts(platform=_container("docker", {"NVIDIA_DRIVER_CAPABILITIES": "utility"}, NODES, LIBS[1:]))
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL and "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in f.explanation


def _nvml_unknown_error():
    reason = "Unknown Error"
    return NvidiaDriverFacts(
        "550.120",
        "proc",
        Unavailable("NVML is needed: " + reason),
        Unavailable(reason),
        (),
        (SourceAttempt("nvml", False, reason), SourceAttempt("proc", True, "read 550.120")),
    )


def test_nvml_unknown_error_with_device_nodes_is_the_lost_device_cgroup(registry):
    facts = make_facts(
        platform=_container("docker", {"NVIDIA_VISIBLE_DEVICES": "all"}, NODES, LIBS), nvidia=_nvml_unknown_error()
    )
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL and "device cgroup" in f.summary
    assert "daemon-reload" in f.explanation and "create-dev-char-symlinks" in f.explanation
    # the healthy twin: same container, NVML answers
    ok = one(
        registry,
        make_facts(
            platform=_container("docker", {"NVIDIA_VISIBLE_DEVICES": "all"}, NODES, LIBS),
            nvidia=nvidia_facts("550.120", "12.4", [nvml_device(0)]),
        ),
        "platform.container",
    )
    assert ok.status is Status.OK


# --------------------------------------------------------------------------- toolkit on a host


def _host_facts(host: ContainerHostFacts, driver="550.120", os_id=("ubuntu", "22.04", "jammy")):
    return make_facts(
        container_host=host,
        platform=PlatformFacts(kind="bare-metal"),
        nvidia=nvidia_facts(driver, "12.4", [nvml_device(0)]),
        gpu=pci_gpus(1),
        os=os_facts(*os_id),
    )


def test_docker_host_without_toolkit(tmp_path, fakebin, registry):
    fakebin("docker", "docker-info-runc-only.txt")
    root = write_tree(
        tmp_path,
        {
            "/usr/bin/docker": "",
            "/var/lib/dpkg/status": "Package: docker-ce\nStatus: install ok installed\nVersion: 5:28.2.2-1\n\n",
        },
    )
    host = container_host_facts(fake_system(root).files, SubprocessRunner())
    assert isinstance(host.docker, DockerInfo) and "nvidia" not in host.docker.runtimes
    assert isinstance(host.toolkit_version, Unavailable) and "not found" in host.toolkit_version.reason
    f = one(registry, _host_facts(host), "platform.toolkit")
    assert f.status is Status.FAIL and "NVIDIA Container Toolkit is not installed" in f.summary
    assert "sudo apt-get install -y nvidia-container-toolkit" in f.explanation
    assert "nvidia-ctk runtime configure --runtime=docker" in f.explanation and "dnf" not in f.explanation
    rhel = one(registry, _host_facts(host, os_id=("rocky", "9.4", "")), "platform.toolkit")
    assert "sudo dnf install -y nvidia-container-toolkit" in rhel.explanation and "apt-get" not in rhel.explanation


def test_docker_host_with_toolkit_configured(tmp_path, fakebin, registry):
    fakebin("docker", "docker-info-nvidia-runtime.txt")
    fakebin("nvidia-ctk", "nvidia-ctk-version.txt")
    root = write_tree(
        tmp_path,
        {
            "/usr/bin/docker": "",
            "/usr/bin/nvidia-ctk": "",
            "/usr/bin/nvidia-container-runtime": "",
            "/var/lib/dpkg/status": "Package: nvidia-container-toolkit\nStatus: install ok installed\n"
            "Version: 1.17.3-1\n",
        },
    )
    host = container_host_facts(fake_system(root).files, SubprocessRunner())
    assert host.toolkit_version == "1.17.3" and "nvidia" in host.docker.runtimes
    assert host.toolkit_packages == ("nvidia-container-toolkit 1.17.3-1",)
    f = one(registry, _host_facts(host), "platform.toolkit")
    assert f.status is Status.OK and "1.17.3" in f.summary


def test_toolkit_installed_but_docker_runtime_not_registered(tmp_path, fakebin, registry):
    fakebin("docker", "docker-info-runc-only.txt")
    fakebin("nvidia-ctk", "nvidia-ctk-version.txt")
    root = write_tree(
        tmp_path, {"/usr/bin/docker": "", "/usr/bin/nvidia-ctk": "", "/usr/bin/nvidia-container-runtime-hook": ""}
    )
    f = one(
        registry, _host_facts(container_host_facts(fake_system(root).files, SubprocessRunner())), "platform.toolkit"
    )
    assert f.status is Status.WARN and "sudo nvidia-ctk runtime configure --runtime=docker" in f.explanation
    assert "could not select device driver" in f.explanation
    # only nvidia-container-toolkit-base (nvidia-ctk, no hook): Docker's --gpus has no driver at all
    (root / "usr/bin/nvidia-container-runtime-hook").unlink()
    f = one(
        registry, _host_facts(container_host_facts(fake_system(root).files, SubprocessRunner())), "platform.toolkit"
    )
    assert f.status is Status.FAIL and "nvidia-container-runtime-hook" in f.summary
    assert "sudo apt-get install -y nvidia-container-toolkit" in f.explanation


def test_a_hung_docker_is_killed_at_its_timeout(fakebin, monkeypatch):
    import gpudoctor.collect.platform as plat

    monkeypatch.setattr(plat, "COMMAND_TIMEOUT_S", 0.5)
    fakebin("docker", "docker-info-nvidia-runtime.txt")
    fakebin("nvidia-ctk", "nvidia-ctk-version.txt")
    monkeypatch.setenv("GPUDOCTOR_FAKE_HANG", "1")
    docker, ctk = query_host_tools(SubprocessRunner())
    assert isinstance(docker, Unavailable) and "did not answer within its timeout" in docker.reason
    assert isinstance(ctk, Unavailable) and "timeout" in ctk.reason


def test_docker_daemon_down_is_unavailable_not_a_runtime_list(fakebin):
    fakebin("docker", "docker-info-daemon-down.txt")
    docker, ctk = query_host_tools(SubprocessRunner())
    assert isinstance(docker, Unavailable) and "Cannot connect to the Docker daemon" in docker.reason
    assert isinstance(ctk, Unavailable)


CDI = """cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{v}
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{v}
  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{v}
    containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{v}
"""


@pytest.mark.parametrize("spec_driver,status", [("545.23.08", Status.FAIL), ("550.120", Status.OK)])
def test_podman_cdi_spec_stale_after_driver_upgrade(tmp_path, spec_driver, status, registry):
    root = write_tree(
        tmp_path, {"/usr/bin/podman": "", "/usr/bin/nvidia-ctk": "", "/etc/cdi/nvidia.yaml": CDI.format(v=spec_driver)}
    )
    host = container_host_facts(fake_system(root).files, None)
    assert host.cdi_specs[0].kind == "nvidia.com/gpu" and host.cdi_specs[0].devices == ("0", "all")
    f = one(registry, _host_facts(host, driver="550.120"), "platform.toolkit")
    assert f.status is status
    if status is Status.FAIL:
        assert "545.23.08" in f.summary and "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in f.explanation


def test_podman_without_cdi_spec(tmp_path, registry):
    root = write_tree(tmp_path, {"/usr/bin/podman": "", "/usr/bin/nvidia-ctk": ""})
    f = one(registry, _host_facts(container_host_facts(fake_system(root).files, None)), "platform.toolkit")
    assert f.status is Status.FAIL and "podman run --device nvidia.com/gpu=all" in f.explanation


def test_containerd_without_nvidia_runtime(tmp_path, registry):
    root = write_tree(
        tmp_path,
        {
            "/etc/containerd/config.toml": 'version = 2\n[plugins."io.containerd.grpc.v1.cri"'
            '.containerd]\n  default_runtime_name = "runc"\n[plugins."io.containerd.grpc.v1.cri"'
            '.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n',
            "/usr/bin/nvidia-ctk": "",
        },
    )
    f = one(registry, _host_facts(container_host_facts(fake_system(root).files, None)), "platform.toolkit")
    assert f.status is Status.FAIL and "--runtime=containerd" in f.explanation


def test_toolkit_skips_inside_a_container_and_without_gpu(registry):
    host = ContainerHostFacts(engines=("docker",))
    assert (
        one(registry, make_facts(container_host=host, platform=_container("docker")), "platform.toolkit").status
        is Status.SKIP
    )


# --------------------------------------------------------------------------- kernel module


def _pci_root(tmp_path, device="0x2b85", driver="nvidia", extra=None):
    files = {
        "/sys/bus/pci/devices/0000:01:00.0/vendor": "0x10de\n",
        "/sys/bus/pci/devices/0000:01:00.0/device": device + "\n",
        "/sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
        "/proc/sys/kernel/osrelease": "6.8.0-51-generic\n",
    }
    files.update(extra or {})
    root = write_tree(tmp_path, files)
    if driver:
        drv = root / "sys/bus/pci/drivers" / driver
        drv.mkdir(parents=True)
        (root / "sys/bus/pci/devices/0000:01:00.0/driver").symlink_to(drv)
    return root


def _kmod_facts(root, modinfo_recording=None, fakebin=None):
    system = fake_system(root)
    runner = None
    if modinfo_recording:
        fakebin("modinfo", modinfo_recording)
        runner = SubprocessRunner()
    km = kernel_module_facts(system.files, runner)
    c = ctx(root)
    return km, make_facts(
        kmod=km,
        gpu=collect_gpu(c),
        nvidia=collect_nvidia(c),
        platform=PlatformFacts(kind="bare-metal"),
        os=os_facts("ubuntu", "24.04", "noble"),
    )


def test_blackwell_on_the_proprietary_module(tmp_path, fakebin, registry):
    root = _pci_root(
        tmp_path, extra={"/proc/driver/nvidia/version": NVRM_PROPRIETARY, "/sys/module/nvidia/version": "570.133.07\n"}
    )
    km, facts = _kmod_facts(root, "modinfo-nvidia-proprietary-550.txt", fakebin)
    assert km.flavour == "proprietary" and km.modinfo.license == "NVIDIA"
    f = one(registry, facts, "platform.kernel-module")
    assert f.status is Status.FAIL and "needs the open NVIDIA kernel modules" in f.summary and "0x2b85" in f.summary
    assert "sudo apt install nvidia-driver-570-open" in f.explanation and "No devices were found" in f.explanation
    # the headline names it as the root cause (NVML answers, with no device)
    probe = probe_facts(
        "/v/bin/python",
        torch_facts("2.7.0+cu128", "12.8", cuda_available=False, cuda_error="No CUDA GPUs are available"),
    )
    facts = make_facts(
        **{**facts.domains, "nvidia": nvidia_facts("570.133.07", "12.8", []), "targets": targets(target(probe))}
    )
    head = one(registry, facts, "cuda.available")
    assert head.status is Status.FAIL and head.evidence["root_cause_check"] == "platform.kernel-module"


def test_blackwell_on_the_open_module_is_ok(tmp_path, fakebin, registry):
    root = _pci_root(tmp_path, extra={"/proc/driver/nvidia/version": NVRM_OPEN})
    km, facts = _kmod_facts(root, "modinfo-nvidia-open-570.txt", fakebin)
    assert km.flavour == "open" and km.modinfo.license == "Dual MIT/GPL"
    f = one(registry, facts, "platform.kernel-module")
    assert f.status is Status.OK and "(open)" in f.summary


def test_flavour_from_modinfo_when_not_loaded(tmp_path, fakebin):
    root = _pci_root(tmp_path, driver=None)
    km, _facts = _kmod_facts(root, "modinfo-nvidia-open-570.txt", fakebin)
    assert not km.loaded and km.flavour == "open"
    km, _facts = _kmod_facts(root, "modinfo-nvidia-not-found.txt", fakebin)
    assert isinstance(km.modinfo, Unavailable) and "Module nvidia not found" in km.modinfo.reason


def test_ampere_on_the_proprietary_module_is_fine(tmp_path, fakebin, registry):
    root = _pci_root(tmp_path, device="0x2204", extra={"/proc/driver/nvidia/version": NVRM_PROPRIETARY})
    _km, facts = _kmod_facts(root)
    assert one(registry, facts, "platform.kernel-module").status is Status.OK


def test_nouveau_bound(tmp_path, registry):
    root = _pci_root(tmp_path, device="0x2204", driver="nouveau", extra={"/sys/module/nouveau/refcnt": "1\n"})
    km, facts = _kmod_facts(root)
    assert km.nouveau_loaded
    f = one(registry, facts, "platform.kernel-module")
    assert f.status is Status.FAIL and "nouveau" in f.summary and "blacklist nouveau" in f.explanation


def test_module_loaded_but_gpu_unbound(tmp_path, registry):
    root = _pci_root(tmp_path, device="0x2204", driver=None, extra={"/proc/driver/nvidia/version": NVRM_PROPRIETARY})
    f = one(registry, _kmod_facts(root)[1], "platform.kernel-module")
    assert f.status is Status.FAIL and "no driver is bound" in f.summary and "0000:01:00.0" in f.summary


def test_dkms_built_for_another_kernel(tmp_path, registry):
    root = _pci_root(
        tmp_path,
        device="0x2204",
        driver=None,
        extra={
            "/lib/modules/6.8.0-49-generic/updates/dkms/nvidia.ko.zst": "",
            "/lib/modules/6.8.0-51-generic/kernel/drivers/net/e1000.ko.zst": "",
        },
    )
    km, facts = _kmod_facts(root)
    assert km.installed_for == ("6.8.0-49-generic",)
    f = one(registry, facts, "platform.kernel-module")
    assert f.status is Status.FAIL and "6.8.0-49-generic" in f.summary and "6.8.0-51-generic" in f.summary
    assert "sudo dkms autoinstall -k 6.8.0-51-generic" in f.explanation


def test_secure_boot_refuses_the_module(tmp_path, registry):
    root = _pci_root(
        tmp_path,
        device="0x2204",
        driver=None,
        extra={
            "/lib/modules/6.8.0-51-generic/updates/dkms/nvidia.ko.zst": "",
            "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c": b"\x06\x00\x00\x00\x01",
        },
    )
    km, facts = _kmod_facts(root)
    assert km.secure_boot is True
    f = one(registry, facts, "platform.kernel-module")
    assert f.status is Status.FAIL and "Secure Boot" in f.summary and "mokutil --import" in f.explanation
    (root / "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c").write_bytes(b"\x06\0\0\0\0")
    f = one(registry, _kmod_facts(root)[1], "platform.kernel-module")
    assert f.status is Status.FAIL and "modprobe nvidia" in f.explanation and "Secure Boot" not in f.summary


# --------------------------------------------------------------------------- driver branch


def test_blackwell_needs_r570_even_where_the_cuda_floor_is_met(tmp_path, registry):
    root = _pci_root(tmp_path, extra={"/proc/driver/nvidia/version": NVRM_OPEN.replace("570.133.07", "560.35.03")})
    c = ctx(root)
    probe = probe_facts("/opt/venv/bin/python", torch_facts("2.6.0+cu124", "12.4", cuda_available=False))
    facts = make_facts(
        nvidia=collect_nvidia(c),
        gpu=collect_gpu(c),
        os=os_facts("ubuntu", "24.04", "noble"),
        targets=targets(target(probe)),
    )
    f = one(registry, facts, "platform.driver-branch")
    assert f.status is Status.FAIL and "R570" in f.summary and "560.35.03" in f.summary
    assert (
        "/opt/venv/bin/python -m pip install --force-reinstall torch==2.7.0 torchvision==0.22.0 "
        "torchaudio==2.7.0 --index-url https://download.pytorch.org/whl/cu128"
    ) in f.explanation
    assert "nvidia-driver-570-open" in f.explanation
    head = one(registry, facts, "cuda.available")
    assert head.status is Status.FAIL and head.evidence["root_cause_check"] == "platform.driver-branch"


def test_driver_branch_pins_the_targets_torch_when_cu128_has_it(registry):
    facts = make_facts(
        nvidia=nvidia_facts("565.57.01", "12.7", [nvml_device(0, "NVIDIA B200", "10.0")]),
        targets=targets(target(probe_facts("/v/bin/python", torch_facts("2.8.0+cu126", "12.6")))),
    )
    f = one(registry, facts, "platform.driver-branch")
    assert f.status is Status.FAIL
    assert (
        "torch==2.8.0 torchvision==0.23.0 torchaudio==2.8.0 --index-url https://download.pytorch.org/whl/cu128"
        in f.explanation
    )


@pytest.mark.parametrize(
    "driver,cc,status",
    [
        ("570.133.07", "12.0", Status.OK),
        ("550.120", "8.9", Status.OK),
        ("575.51.03", "10.3", Status.OK),
        ("570.133.07", "10.3", Status.FAIL),
    ],
)
def test_driver_branch_twins(driver, cc, status, registry):
    facts = make_facts(nvidia=nvidia_facts(driver, "12.8", [nvml_device(0, "GPU", cc)]), targets=targets())
    assert one(registry, facts, "platform.driver-branch").status is status


# --------------------------------------------------------------------------- visibility


def _vis(env, torch="2.4.1+cu124", platform_env=None, scheduler="", kube=False, devices=None):
    p = PlatformFacts(
        kind="container" if kube else "bare-metal",
        kubernetes=kube,
        scheduler=scheduler,
        env=dict(platform_env or {}),
        container_runtime="containerd" if kube else "",
    )
    probe = probe_facts("/v/bin/python", torch_facts(torch, "12.4"), env=env)
    return make_facts(
        platform=p,
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=devices if devices is not None else [nvml_device(0), nvml_device(1)]),
    )


def test_ray_worker_with_no_gpu_reserved(registry):
    f = one(registry, _vis({"CUDA_VISIBLE_DEVICES": ""}, scheduler="ray"), "platform.visibility")
    assert f.status is Status.FAIL and f.summary.startswith("Ray set CUDA_VISIBLE_DEVICES=''")
    assert "num_gpus=1" in f.explanation and "unset" in f.explanation


def test_slurm_job_without_gres(registry):
    f = one(
        registry,
        _vis({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, scheduler="slurm", platform_env={"SLURM_JOB_ID": "81234"}),
        "platform.visibility",
    )
    assert f.status is Status.FAIL and "Slurm" in f.summary and "--gres=gpu:1" in f.explanation


def test_pod_with_nvidia_visible_devices_void(registry):
    f = one(registry, _vis({"NVIDIA_VISIBLE_DEVICES": "void"}, kube=True), "platform.visibility")
    assert f.status is Status.FAIL and "nvidia.com/gpu: 1" in f.explanation


@pytest.mark.parametrize(
    "sched,value,ask",
    [("ray", "3", "num_gpus=1"), ("slurm", "-1", "--gres=gpu:1"), ("kubernetes", "", "nvidia.com/gpu: 1")],
)
def test_all_invalid_value_from_a_scheduler_names_the_request(sched, value, ask, registry):
    facts = _vis(
        {"CUDA_VISIBLE_DEVICES": value}, scheduler="" if sched == "kubernetes" else sched, kube=sched == "kubernetes"
    )
    f = one(registry, facts, "platform.visibility")
    assert f.status is Status.FAIL and ask in f.explanation
    # cuda.devices (the headline's visibility cause) no longer says "unset it" for a scheduler's value
    if value in ("", "-1"):
        dev = one(registry, facts, "cuda.devices")
        assert dev.status is Status.FAIL and ask in dev.explanation and "unset" not in dev.explanation


def test_slurm_job_with_its_gpu_is_ok(registry):
    f = one(registry, _vis({"CUDA_VISIBLE_DEVICES": "1"}, scheduler="slurm"), "platform.visibility")
    assert f.status is Status.OK and "Slurm" in f.summary


def test_empty_value_without_scheduler_is_the_users(registry):
    f = one(registry, _vis({"CUDA_VISIBLE_DEVICES": ""}), "platform.visibility")
    assert f.status is Status.FAIL and "unset CUDA_VISIBLE_DEVICES" in f.explanation


def test_gpu_uuid_on_torch_1_13(registry):
    devs = [nvml_device(0, uuid="GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")]
    f = one(
        registry,
        _vis({"CUDA_VISIBLE_DEVICES": "GPU-8932f937"}, torch="1.13.1+cu117", devices=devs),
        "platform.visibility",
    )
    assert f.status is Status.FAIL and "fixed in torch 2.0.0" in f.summary and "#90543" in f.explanation
    ok = one(
        registry,
        _vis({"CUDA_VISIBLE_DEVICES": "GPU-8932f937"}, torch="2.0.0+cu118", devices=devs),
        "platform.visibility",
    )
    assert ok.status is Status.OK


def test_mig_uuid_on_torch_2_0(registry):
    mig = "MIG-feee0c61-26ec-5616-bb59-b6d777cc4f34"
    devs = [nvml_device(0, "NVIDIA A100-SXM4-80GB", "8.0", mig=True)]
    devs = [devs[0].__class__(**{**devs[0].__dict__, "mig_instances": (MigInstance(mig, "1g.10gb", 7, 0),)})]
    f = one(registry, _vis({"CUDA_VISIBLE_DEVICES": mig}, torch="2.0.1+cu118", devices=devs), "platform.visibility")
    assert f.status is Status.FAIL and "fixed in torch 2.1.0" in f.summary
    assert (
        one(
            registry, _vis({"CUDA_VISIBLE_DEVICES": mig}, torch="2.1.0+cu121", devices=devs), "platform.visibility"
        ).status
        is Status.OK
    )


def test_several_mig_instances_in_one_process(registry):
    cvd = "MIG-89c850dc-38e3-57df-85c7-690c186b68e9,MIG-f2b5fbbd-850e-51bb-8ffa-ac9fb48126da"
    mig = [nvml_device(0, mig=True), nvml_device(1, mig=True)]
    f = one(registry, _vis({"CUDA_VISIBLE_DEVICES": cvd}, devices=mig), "platform.visibility")
    assert f.status is Status.WARN and "2 MIG instances" in f.summary
    assert "one process per MIG instance" in f.explanation
    # on GPUs that are not in MIG mode the same value names no device here: never ok (issue 23)
    f = one(registry, _vis({"CUDA_VISIBLE_DEVICES": cvd}), "platform.visibility")
    assert f.status is Status.FAIL and "hides every GPU" in f.summary


def test_nothing_set_is_ok(registry):
    assert one(registry, _vis({}), "platform.visibility").status is Status.OK


# --------------------------------------------------------------------------- limits (real processes)


def _wrapper(tmp_path, nofile: str, memlock: str) -> str:
    if shutil.which("prlimit", path="/usr/bin:/bin") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    script = tmp_path / f"python-{nofile.replace(':', '-')}"
    script.write_text(f'#!/bin/sh\nexec /usr/bin/prlimit --nofile={nofile} --memlock={memlock} /usr/bin/python3 "$@"\n')
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("nofile,status", [("1024:4096", Status.WARN), ("8192:8192", Status.OK)])
def test_probe_reads_the_targets_limits(tmp_path, nofile, status, registry):
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 to probe")
    hard_now = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert hard_now == resource.RLIM_INFINITY or hard_now >= 8192, "the test needs a hard open-file limit >= 8192"
    python = _wrapper(tmp_path, nofile, "65536:65536")
    system = System(env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    probe = probe_target(system, python, timeout_s=60)
    soft, hard = (int(x) for x in nofile.split(":"))
    assert probe.limits.nofile == RLimit(soft, hard) and probe.limits.memlock == RLimit(65536, 65536)
    f = one(
        registry,
        make_facts(targets=targets(target(probe)), platform=PlatformFacts(kind="bare-metal")),
        "platform.limits",
    )
    assert f.status is status
    if status is Status.WARN:
        assert "ulimit -n 4096" in f.explanation and "--ulimit nofile=65536:65536" in f.explanation
        assert "set_sharing_strategy('file_system')" in f.explanation


def test_proc_pid_limits_of_a_real_child():
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, 2048))
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (1 << 20, 1 << 20))

    child = subprocess.Popen(["sleep", "30"], preexec_fn=limit)
    try:
        lim = parse_proc_limits(Path(f"/proc/{child.pid}/limits").read_text(), f"/proc/{child.pid}/limits")
    finally:
        child.kill()
        child.wait()
    assert lim.nofile == RLimit(512, 2048) and lim.memlock == RLimit(1 << 20, 1 << 20)


def test_hard_limit_too_low_needs_root(registry, tmp_path):
    root = write_tree(
        tmp_path,
        {
            "/proc/self/limits": (
                "Limit                     Soft Limit           Hard Limit           Units     \n"
                "Max open files            1024                 1024                 files     \n"
                "Max locked memory         unlimited            unlimited            bytes     \n"
            )
        },
    )
    lim = collect_limits(ctx(root))
    assert lim.process.memlock == RLimit(None, None)
    f = one(registry, make_facts(limits=lim, platform=_container("docker")), "platform.limits")
    assert f.status is Status.WARN and "limits.conf" in f.explanation and "--ulimit nofile=" in f.explanation


# --------------------------------------------------------------------------- RDMA


def _rdma_root(tmp_path, dev=True, capeff="00000000a80425fb", extra=None):
    files = {
        "/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        "/sys/class/net/eth0/mtu": "1500\n",
        "/sys/class/net/ib0/mtu": "2044\n",
        "/sys/class/net/lo/mtu": "65536\n",
        "/.dockerenv": "",
        "/proc/self/status": f"Name:\tpython\nCapEff:\t{capeff}\n",
    }
    if dev:
        files["/dev/infiniband/uverbs0"] = ""
    files.update(extra or {})
    return write_tree(tmp_path, files)


def _rdma_facts(root, env=None, memlock=RLimit(None, None)):
    c = ctx(root, env)
    return make_facts(
        rdma=collect_rdma(c),
        platform=collect_platform(c),
        limits=LimitsFacts(ProcessLimits("/proc/self/limits", RLimit(65536, 65536), memlock)),
    )


def test_container_without_dev_infiniband(tmp_path, registry):
    f = one(registry, _rdma_facts(_rdma_root(tmp_path, dev=False)), "platform.rdma")
    assert f.status is Status.WARN and "fall back to sockets" in f.summary
    assert "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1" in f.explanation


def test_rdma_ready_container_is_ok(tmp_path, registry):
    facts = _rdma_facts(_rdma_root(tmp_path, capeff="00000000a80465fb"))  # bit 14 (IPC_LOCK) set
    assert facts.get("rdma").cap_ipc_lock is True
    assert one(registry, facts, "platform.rdma").status is Status.OK


def test_low_memlock_without_ipc_lock(tmp_path, registry):
    facts = _rdma_facts(_rdma_root(tmp_path), memlock=RLimit(65536, 65536))
    assert facts.get("rdma").cap_ipc_lock is False
    f = one(registry, facts, "platform.rdma")
    assert f.status is Status.WARN and "65536" in f.summary and "--ulimit memlock=-1" in f.explanation


@pytest.mark.parametrize(
    "env,warn",
    [
        ({"NCCL_SOCKET_IFNAME": "ens"}, "NCCL_SOCKET_IFNAME"),
        ({"NCCL_SOCKET_IFNAME": "=eth"}, "NCCL_SOCKET_IFNAME"),
        ({"NCCL_IB_HCA": "mlx5_1:1"}, "NCCL_IB_HCA"),
        ({"NCCL_SOCKET_IFNAME": "eth"}, None),
        ({"NCCL_SOCKET_IFNAME": "^docker,lo"}, None),
        ({"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_HCA": "=mlx5_0:1"}, None),
    ],
)
def test_nccl_names_interfaces_and_hcas(tmp_path, env, warn, registry):
    facts = _rdma_facts(_rdma_root(tmp_path, capeff="00000000a80465fb"), env)
    findings = run(registry, facts, "platform.rdma")["platform.rdma"]
    warned = [f for f in findings if f.status is Status.WARN]
    if warn:
        assert len(warned) == 1 and warned[0].summary.startswith(warn)
    else:
        assert not warned and findings[0].status is Status.OK


def test_no_hca_skips(tmp_path, registry):
    root = write_tree(tmp_path, {"/sys/class/net/eth0/mtu": "1500\n", "/proc/self/status": "CapEff:\t0\n"})
    assert one(registry, _rdma_facts(root), "platform.rdma").status is Status.SKIP


# --------------------------------------------------------------------------- facts round trip


def test_platform_facts_round_trip_through_json(tmp_path):
    facts = _case39_facts(tmp_path, runtime_class=False)
    doc = json.loads(json.dumps(facts.to_json()))
    again = Facts.from_json(doc)
    assert again.get("platform") == facts.get("platform")


# --------------------------------------------------------------------------- snapshots through the CLI

SNAPSHOTS = HERE / "fixtures" / "facts" / "platform"
EXPECTED = [  # (fixture, check, status, words in the summary or explanation)
    ("case39-pod-runc.json", "platform.container", "fail", ("runtimeClassName: nvidia",)),
    ("case39-pod-runtimeclass.json", "platform.container", "ok", ("Kubernetes pod",)),
    ("docker-host-no-toolkit.json", "platform.toolkit", "fail", ("apt-get install -y nvidia-container-toolkit",)),
    ("docker-host-toolkit.json", "platform.toolkit", "ok", ("1.17.3",)),
    ("blackwell-proprietary.json", "platform.kernel-module", "fail", ("nvidia-driver-570-open",)),
    ("blackwell-open.json", "platform.kernel-module", "ok", ("(open)",)),
    ("ray-no-gpu.json", "platform.visibility", "fail", ("num_gpus=1",)),
    ("slurm-gpu.json", "platform.visibility", "ok", ("Slurm",)),
    ("mig-two-instances.json", "platform.visibility", "warn", ("3g.40gb on GPU 0",)),
    ("mig-one-instance.json", "platform.visibility", "ok", ()),
    ("rdma-container-no-devices.json", "platform.rdma", "warn", ("--cap-add=IPC_LOCK",)),
    ("rdma-container-ready.json", "platform.rdma", "ok", ("mlx5_0",)),
]


def test_every_snapshot_is_listed():
    assert {f.name for f in SNAPSHOTS.glob("*.json")} == {e[0] for e in EXPECTED}


@pytest.mark.parametrize("fixture,check,status,words", EXPECTED)
def test_snapshot_replayed_by_the_cli(fixture, check, status, words, tmp_path):
    proc = run_gpudoctor(
        "check", "platform", "--facts", str(SNAPSHOTS / fixture), "--format", "json", env=env_with(HOME=str(tmp_path))
    )
    report = json.loads(proc.stdout)
    mine = [f for f in report["findings"] if f["check"] == check]
    assert status in [f["status"] for f in mine], mine
    said = "\n".join(f["summary"] + f["explanation"] for f in mine if f["status"] == status)
    for word in words:
        assert word in said, word
    failed = any(f["status"] in ("fail", "error") for f in report["findings"])
    assert proc.returncode == (1 if failed else 0), proc.stderr


def test_the_light_gate_runs_no_modinfo_without_an_nvidia_driver(monkeypatch):
    """No NVIDIA kernel driver loaded: the entrypoint gate (light level) spawns no ``modinfo nvidia``;
    ``gpudoctor check`` (full level) and a node with a driver still ask it."""
    import gpudoctor.collect.nvidia as nvidia
    from gpudoctor.collect import CollectContext, CollectOptions
    from gpudoctor.collect.platform import collect_kmod
    from gpudoctor.system import Files, System
    from gpudoctor.testing import ScriptedRunner, not_found

    def kmod(level: str, absent: bool):
        monkeypatch.setattr(nvidia, "kernel_driver_absent", lambda files: absent)
        runner = ScriptedRunner({("modinfo", "nvidia"): not_found()})
        system = System(runner=runner, files=Files(Path("/")), env={})
        return collect_kmod(CollectContext(system, CollectOptions(probe_level=level))), runner.calls

    km, calls = kmod("light", absent=True)
    assert calls == [] and "no NVIDIA kernel driver is loaded" in km.modinfo.reason
    for level, absent in (("full", True), ("light", False)):
        km, calls = kmod(level, absent)
        assert [c[0] for c in calls] == [("modinfo", "nvidia")] and "not installed" in km.modinfo.reason
