"""Who holds the GPU: the real ``gpu_holders`` collector on fake ``/proc`` trees (fd symlinks to
``/dev/nvidia*``), compared with NVML's process list and memory in use."""

from __future__ import annotations

import os
from pathlib import Path

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.gpu_holders import collect_gpu_holders, container_of
from gpudoctor.collect.nvidia import collect_nvidia
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.gpu_health import GpuProcess
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.system import System
from gpudoctor.testing import fake_system, gpu_health, make_facts, nvidia_facts, nvml_device, os_facts
from nvml_lib import build_fake_nvml

DOCKER_ID = "3f4e5d6c7b8a" + "0" * 52
TRAIN = "/opt/venv/bin/python train.py --epochs 90"


def proc(root: Path, pid: int, ppid: int, comm: str, cmdline: str = "", fds=(), cgroup="0::/user.slice", start=100):
    d = root / "proc" / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_text("\0".join((cmdline or comm).split()) + "\0")
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n")
    (d / "cgroup").write_text(cgroup + "\n")
    for i, target in enumerate(fds):
        os.symlink(target, d / "fd" / str(i + 3))
    os.symlink("/dev/null", d / "fd" / "0")


def tree(root: Path, uptime: float = 90000.0) -> Path:
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "uptime").write_text(f"{uptime} 1.0\n")
    return root


def holders(root: Path):
    return collect_gpu_holders(CollectContext(fake_system(root), CollectOptions()))


def gpu(used: int, procs=()):
    dev = nvml_device(0, name="NVIDIA A100-SXM4-80GB", memory_mib=81920, health=gpu_health(processes=tuple(procs)))
    return nvidia_facts(devices=[dev.__class__(**{**dev.__dict__, "memory_used_mib": used})])


def check(facts):
    registry = load_registry()
    return evaluate([registry.checks["devices.holders"]], facts)[0]


GPU_FDS = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidia-uvm")


def test_collector_reads_holders_with_parent_age_and_container(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "systemd")
    proc(root, 4100, 1, "python", TRAIN, GPU_FDS, start=100 * 3600 * 20)  # started 20 h after boot
    proc(root, 4200, 1, "nv-hostengine", fds=("/dev/nvidiactl",))
    proc(root, 4300, 1, "bash", "bash", ("/dev/pts/0",))
    proc(
        root,
        5000,
        1,
        "python",
        "python serve.py",
        ("/dev/nvidia1",),
        cgroup=f"0::/system.slice/docker-{DOCKER_ID}.scope",
    )
    facts = holders(root)
    assert facts.readable is True and facts.scanned == 5
    by = {h.pid: h for h in facts.holders}
    assert set(by) == {4100, 4200, 5000}
    h = by[4100]
    assert (h.ppid, h.parent_comm, h.cmdline) == (1, "systemd", TRAIN)
    assert h.devices == ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl")
    assert h.age_s == 18000.0  # 90000 s up, started at 72000 s
    assert by[5000].container == "docker:3f4e5d6c7b8a"


def test_container_of_cgroup_paths():
    assert container_of(f"/kubepods/burstable/pod0b1c2d3e-aaaa-bbbb-cccc-0123456789ab/{DOCKER_ID}") == (
        "k8s:0b1c2d3e-aaaa-bbbb-cccc-0123456789ab"
    )
    assert container_of(f"/machine.slice/libpod-{DOCKER_ID}.scope") == "podman:3f4e5d6c7b8a"
    assert container_of("/lxc.payload.trainer/system.slice") == "lxc:trainer"
    assert container_of("/user.slice/user-1000.slice/session-3.scope") == ""


def test_orphaned_dataloader_workers_of_a_killed_job_are_named_with_the_kill_command(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "systemd")
    for pid in (7001, 7002, 7003, 7004):
        proc(root, pid, 1, "python", TRAIN, GPU_FDS, start=8_000_000)
    finding = check(make_facts(gpu_holders=holders(root), nvidia=gpu(61234), os=os_facts()))
    assert finding.status is Status.WARN
    assert "PID 7001 7002 7003 7004" in finding.summary and "DataLoader workers" in finding.summary
    assert "kill 7001 7002 7003 7004" in finding.explanation
    assert "61234 MiB in use, NVML lists no process" in finding.explanation
    assert "parent 1 systemd" in finding.explanation and "running 2.8 h" in finding.explanation


def test_healthy_twin_the_job_runs_and_nvml_lists_it(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "systemd")
    proc(root, 900, 1, "bash")
    proc(root, 7000, 900, "python", TRAIN, GPU_FDS)
    for pid in (7001, 7002):
        proc(root, pid, 7000, "python", TRAIN, GPU_FDS)
    nv = gpu(61234, [GpuProcess(7000, 60800, "compute", True, "python")])
    finding = check(make_facts(gpu_holders=holders(root), nvidia=nv, os=os_facts()))
    assert finding.status is Status.INFO and "3 process(es)" in finding.summary


def test_pid_1_python_in_a_container_is_the_real_parent_not_an_init(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "python", TRAIN, GPU_FDS)
    proc(root, 30, 1, "python", TRAIN, GPU_FDS)
    nv = gpu(20000, [GpuProcess(2271, 19800, "compute", False, "")])  # NVML names the host PID
    finding = check(make_facts(gpu_holders=holders(root), nvidia=nv, os=os_facts(in_container=True, kind="docker")))
    assert finding.status is Status.INFO


def test_memory_held_from_another_namespace_host_vs_container(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "bash")
    facts = holders(root)
    inside = check(make_facts(gpu_holders=facts, nvidia=gpu(30000), os=os_facts(in_container=True, kind="docker")))
    assert inside.status is Status.WARN and "NVML names" in inside.summary
    assert "Ask the host operator" in inside.explanation and "sudo fuser -v /dev/nvidia*" in inside.explanation
    host = check(make_facts(gpu_holders=facts, nvidia=gpu(30000), os=os_facts()))
    assert host.status is Status.WARN and "host operator" not in host.explanation
    assert "sudo fuser -v /dev/nvidia*" in host.explanation


def test_other_containers_processes_on_the_host_are_named(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "systemd")
    proc(root, 800, 1, "containerd-shim")
    proc(
        root,
        5000,
        800,
        "python",
        "python serve.py",
        ("/dev/nvidia0",),
        cgroup=f"0::/system.slice/docker-{DOCKER_ID}.scope",
    )
    nv = gpu(9000, [GpuProcess(5000, 8800, "compute", True, "python")])
    finding = check(make_facts(gpu_holders=holders(root), nvidia=nv, os=os_facts()))
    assert finding.status is Status.INFO
    assert "container docker:3f4e5d6c7b8a" in finding.explanation and "docker ps --filter id" in finding.explanation


def test_nothing_holds_the_gpu_and_an_unreadable_proc_skips(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "systemd")
    assert check(make_facts(gpu_holders=holders(root), nvidia=gpu(3), os=os_facts())).status is Status.OK
    empty = collect_gpu_holders(CollectContext(fake_system(tmp_path / "none"), CollectOptions()))
    assert isinstance(empty.readable, Unavailable)
    assert check(make_facts(gpu_holders=empty, nvidia=gpu(3), os=os_facts())).status is Status.SKIP


def test_memory_in_use_comes_from_the_real_nvml_path(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=1, MEM_USED_MIB=45000)
    nv = collect_nvidia(CollectContext(System(env=dict(os.environ, LD_LIBRARY_PATH=str(lib))), CollectOptions()))
    assert nv.devices[0].memory_used_mib == 45000
    root = tree(tmp_path / "root")
    proc(root, 1, 0, "bash")
    finding = check(make_facts(gpu_holders=holders(root), nvidia=nv, os=os_facts()))
    assert finding.status is Status.WARN and "45000 MiB in use" in finding.explanation


def test_a_nohup_job_or_a_service_under_init_is_not_an_orphan(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "systemd")
    proc(root, 7000, 1, "python", TRAIN, GPU_FDS)  # nohup'd: its shell exited
    for pid in (7001, 7002):
        proc(root, pid, 7000, "python", TRAIN, GPU_FDS)  # its live DataLoader workers
    proc(root, 8000, 1, "python", "python serve.py", ("/dev/nvidia0",))  # a service
    nv = gpu(
        61234, [GpuProcess(7000, 50000, "compute", True, "python"), GpuProcess(8000, 11000, "compute", True, "python")]
    )
    finding = check(make_facts(gpu_holders=holders(root), nvidia=nv, os=os_facts()))
    assert finding.status is Status.INFO


def test_tini_as_pid_1_with_a_live_job_is_not_orphans(tmp_path):
    root = tree(tmp_path)
    proc(root, 1, 0, "tini")
    proc(root, 7, 1, "python", TRAIN, GPU_FDS)
    for pid in (40, 41):
        proc(root, pid, 7, "python", TRAIN, GPU_FDS)
    nv = gpu(20000, [GpuProcess(123456, 19800, "compute", False, "")])  # host PID as NVML sees it
    finding = check(make_facts(gpu_holders=holders(root), nvidia=nv, os=os_facts(in_container=True, kind="docker")))
    assert finding.status is Status.INFO
