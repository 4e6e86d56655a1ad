"""The ``launch`` collector on fake roots (JupyterHub configs and Helm values, single-user servers in
``/proc``, Slurm's gres.conf/cgroup.conf, LXD/Incus inside and a scripted ``incus`` outside) and the
``platform.launcher`` findings it feeds, each with its healthy twin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.launch import launch_facts, parse_hub_config
from gpudoctor.collect.platform import collect_platform
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.launch import HubConfig, LaunchFacts, SlurmNodeConfig
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import ScriptedRunner, exits, fake_system, make_facts, ok, write_tree

NVRM_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
GPU_HOST = {"/proc/driver/nvidia/version": NVRM_550, "/dev/nvidia0": "", "/dev/nvidiactl": ""}
CID = "platform.launcher"


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def facts_of(root: Path, env=None, runner=None):
    system = fake_system(root, env=env or {})
    ctx = CollectContext(system, CollectOptions())
    return make_facts(platform=collect_platform(ctx), launch=launch_facts(system.files, system.env, runner))


def launcher_findings(registry, facts):
    return [f for f in evaluate([registry.checks[CID]], facts) if f.check == CID]


def worst(registry, facts):
    return launcher_findings(registry, facts)[0]


# --------------------------------------------------------------------------- JupyterHub config

DOCKER_HUB = """\
import os
c.JupyterHub.spawner_class = "dockerspawner.DockerSpawner"
c.DockerSpawner.image = "quay.io/jupyter/pytorch-notebook:cuda12-latest"
c.DockerSpawner.network_name = os.environ["DOCKER_NETWORK_NAME"]
c.DockerSpawner.extra_host_config = {"shm_size": "2g"}
"""

DOCKER_HUB_GPU = DOCKER_HUB.replace(
    '{"shm_size": "2g"}',
    '{"shm_size": "2g", "device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]}',
).replace("import os", "import os\nimport docker")


def test_docker_spawner_without_device_requests(tmp_path, registry):
    root = write_tree(tmp_path, {**GPU_HOST, "/etc/jupyterhub/jupyterhub_config.py": DOCKER_HUB})
    facts = facts_of(root)
    f = worst(registry, facts)
    assert f.status is Status.WARN and "DockerSpawner requests no GPU" in f.summary
    assert "c.DockerSpawner.extra_host_config" in f.explanation and "DeviceRequest(count=-1" in f.explanation
    assert "docker run --gpus" not in f.explanation
    assert any("shm_size" in s for s in f.evidence["settings"])
    twin = facts_of(write_tree(tmp_path / "t", {**GPU_HOST, "/etc/jupyterhub/jupyterhub_config.py": DOCKER_HUB_GPU}))
    assert [x.status for x in launcher_findings(registry, twin)] == [Status.OK]


def test_docker_spawner_on_a_machine_without_gpu_is_only_info(tmp_path, registry):
    root = write_tree(tmp_path, {"/proc/self/cgroup": "0::/\n", "/etc/jupyterhub/jupyterhub_config.py": DOCKER_HUB})
    assert worst(registry, facts_of(root)).status is Status.INFO


HELM = """\
hub:
  config:
    JupyterHub:
      admin_access: true
singleuser:
  image:
    name: quay.io/jupyter/pytorch-notebook
    tag: cuda12-2024-10-07
  memory:
    limit: 8G
"""

HELM_PROFILES = (
    HELM
    + """\
  profileList:
    - display_name: "GPU server"
      kubespawner_override:
        extra_resource_limits:
          nvidia.com/gpu: "1"
"""
)


def test_zero_to_jupyterhub_values_without_a_gpu_request(tmp_path, registry):
    root = write_tree(tmp_path, {**GPU_HOST, "/usr/local/etc/jupyterhub/secret/values.yaml": HELM})
    facts = facts_of(root)
    f = worst(registry, facts)
    assert f.status is Status.WARN and "KubeSpawner requests no nvidia.com/gpu" in f.summary
    assert "extraResource" in f.explanation and "helm upgrade" in f.explanation
    twin = facts_of(
        write_tree(tmp_path / "t", {**GPU_HOST, "/usr/local/etc/jupyterhub/secret/values.yaml": HELM_PROFILES})
    )
    assert [x.status for x in launcher_findings(registry, twin)] == [Status.OK]


def test_kubespawner_traitlet_in_a_config_d_file(tmp_path, registry):
    files = {
        **GPU_HOST,
        "/etc/jupyterhub/jupyterhub_config.py": 'c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"\n',
        "/etc/jupyterhub/jupyterhub_config.d/50-gpu.py": 'c.KubeSpawner.extra_resource_limits = {"nvidia.com/gpu": "1"}\n',
    }
    facts = facts_of(write_tree(tmp_path, files))
    [f] = launcher_findings(registry, facts)
    assert f.status is Status.OK


SYSTEMD_HUB = """\
c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner"
c.SystemdSpawner.isolate_devices = True
c.SystemdSpawner.mem_limit = "8G"
c.Spawner.env_keep.extend(["LD_LIBRARY_PATH"])
"""


def test_systemd_spawner_isolate_devices(tmp_path, registry):
    facts = facts_of(write_tree(tmp_path, {**GPU_HOST, "/etc/jupyterhub/jupyterhub_config.py": SYSTEMD_HUB}))
    f = worst(registry, facts)
    assert f.status is Status.FAIL and "isolate_devices=True" in f.summary
    assert "PrivateDevices=yes" in f.explanation and "c.SystemdSpawner.isolate_devices = False" in f.explanation
    assert "The single-user servers are started by JupyterHub's **SystemdSpawner**" in f.explanation
    twin_cfg = SYSTEMD_HUB.replace("isolate_devices = True", "isolate_devices = False")
    twin = facts_of(write_tree(tmp_path / "t", {**GPU_HOST, "/etc/jupyterhub/jupyterhub_config.py": twin_cfg}))
    assert [x.status for x in launcher_findings(registry, twin)] == [Status.OK]


def test_hub_config_parser_reads_assignments_and_method_calls():
    text = SYSTEMD_HUB + 'c.Spawner.environment["CUDA_VISIBLE_DEVICES"] = "0"\nc.Spawner.env_keep += ["CUDA_HOME"]\n'
    spawner, settings = parse_hub_config("/etc/jupyterhub/jupyterhub_config.py", text)
    assert spawner == "systemdspawner.SystemdSpawner"
    names = [s.name for s in settings]
    assert "c.SystemdSpawner.isolate_devices" in names and "c.SystemdSpawner.mem_limit" not in names
    assert names.count("c.Spawner.env_keep") == 2
    assert 'c.Spawner.environment["CUDA_VISIBLE_DEVICES"]' in names


def test_a_hub_config_that_does_not_parse_is_reported_not_raised(tmp_path):
    root = write_tree(tmp_path, {"/etc/jupyterhub/jupyterhub_config.py": "c.JupyterHub.spawner_class = (\n"})
    hub = launch_facts(fake_system(root).files, {}, None).hub
    assert isinstance(hub, HubConfig) and hub.errors and "SyntaxError" in hub.errors[0]


# --------------------------------------------------------------------------- single-user servers in /proc


def _server(pid: int, env: dict[str, str], unit: str = "") -> dict[str, str | bytes]:
    cmd = b"/opt/conda/bin/python3.11\0/opt/conda/bin/jupyterhub-singleuser\0--ip=0.0.0.0\0"
    return {
        f"/proc/{pid}/cmdline": cmd,
        f"/proc/{pid}/environ": b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0",
        f"/proc/{pid}/cgroup": f"0::/system.slice/{unit}\n" if unit else "0::/user.slice\n",
    }


def test_running_single_user_server_started_with_an_empty_cuda_visible_devices(tmp_path, registry):
    env = {"JUPYTERHUB_USER": "alice", "JUPYTERHUB_API_TOKEN": "t0k3n", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin"}
    files = {
        **GPU_HOST,
        **_server(4242, env),
        "/proc/17/cmdline": b"/usr/sbin/sshd\0-D\0",
        "/etc/jupyterhub/jupyterhub_config.py": 'c.Spawner.environment = {"CUDA_VISIBLE_DEVICES": ""}\n',
    }
    facts = facts_of(write_tree(tmp_path, files))
    [server] = facts.of(LaunchFacts).singleuser
    assert server.pid == 4242 and "JUPYTERHUB_API_TOKEN" not in server.env
    f = worst(registry, facts)
    assert f.status is Status.FAIL and "alice (pid 4242)" in f.summary and "CUDA_VISIBLE_DEVICES=''" in f.summary
    assert "c.Spawner.environment" in f.explanation and "LocalProcessSpawner" in f.explanation
    twin_env = {**env, "CUDA_VISIBLE_DEVICES": "0"}
    twin = facts_of(write_tree(tmp_path / "t", {**GPU_HOST, **_server(4242, twin_env)}))
    assert [x.status for x in launcher_findings(registry, twin)] == [Status.OK]


# --------------------------------------------------------------------------- Slurm node config


def test_slurm_gres_and_cgroup_conf(tmp_path):
    files = {
        "/etc/slurm/gres.conf": "# GPUs\nAutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[0-3]\nName=mps Count=100\n",
        "/etc/slurm/cgroup.conf": "CgroupPlugin=cgroup/v2\nConstrainCores=yes\nConstrainDevices=yes\n",
    }
    slurm = launch_facts(fake_system(write_tree(tmp_path, files)).files, {}, None).slurm
    assert isinstance(slurm, SlurmNodeConfig) and slurm.constrain_devices
    assert slurm.gres_gpu_lines == ("AutoDetect=nvml", "Name=gpu Type=a100 File=/dev/nvidia[0-3]")
    none = launch_facts(fake_system(write_tree(tmp_path / "n", {"/etc/hostname": "x"})).files, {}, None).slurm
    assert isinstance(none, Unavailable)


# --------------------------------------------------------------------------- LXD / Incus


def test_lxd_container_with_its_own_driver_of_another_version(tmp_path, registry):
    lib = "/usr/lib/x86_64-linux-gnu"
    files = {
        **GPU_HOST,
        "/dev/lxd/sock": "",
        f"{lib}/libcuda.so.1": "",
        f"{lib}/libcuda.so.535.183.01": "",
        f"{lib}/libnvidia-ml.so.1": "",
    }
    facts = facts_of(write_tree(tmp_path, files))
    f = worst(registry, facts)
    assert f.status is Status.FAIL and "535.183.01" in f.summary and "550.127.05" in f.summary
    assert "Driver/library version mismatch" in f.summary
    assert "lxc config set <container> nvidia.runtime=true" in f.explanation and "incus" not in f.explanation
    assert "--no-kernel-module" in f.explanation and "docker" not in f.explanation.lower()
    twin_files = {k.replace("535.183.01", "550.127.05"): v for k, v in files.items()}
    twin = facts_of(write_tree(tmp_path / "t", twin_files))
    [ok_] = launcher_findings(registry, twin)
    assert ok_.status is Status.OK and ok_.summary == "started by LXD"


def _incus_list(gpu: bool, runtime: bool) -> str:
    return json.dumps(
        [
            {
                "name": "trainer",
                "status": "Running",
                "expanded_config": {"image.os": "Ubuntu", **({"nvidia.runtime": "true"} if runtime else {})},
                "expanded_devices": {
                    "root": {"path": "/", "pool": "default", "type": "disk"},
                    **({"gpu0": {"type": "gpu", "gputype": "physical"}} if gpu else {}),
                },
            }
        ]
    )


def test_incus_host_instance_with_a_gpu_device_but_no_nvidia_runtime(tmp_path, registry):
    root = write_tree(tmp_path, {**GPU_HOST, "/usr/bin/incus": ""})
    runner = ScriptedRunner({("incus", "list", "--format", "json"): ok(_incus_list(gpu=True, runtime=False))})
    facts = facts_of(root, runner=runner)
    f = worst(registry, facts)
    assert (
        f.status is Status.WARN and "incus instance trainer has a GPU device (gpu0) but not nvidia.runtime" in f.summary
    )
    assert "incus config set trainer nvidia.runtime=true" in f.explanation
    runner = ScriptedRunner({("incus", "list", "--format", "json"): ok(_incus_list(gpu=True, runtime=True))})
    assert [x.status for x in launcher_findings(registry, facts_of(root, runner=runner))] == [Status.OK]


def test_lxd_host_client_that_fails_is_unavailable(tmp_path):
    root = write_tree(tmp_path, {"/snap/bin/lxc": ""})
    runner = ScriptedRunner(
        {("lxc", "list", "--format", "json"): exits(1, stderr="Error: LXD unix socket not accessible")}
    )
    got = launch_facts(fake_system(root).files, {}, runner).lxd_instances
    assert isinstance(got, Unavailable) and "lxc" in got.reason


def test_hub_that_drops_its_ld_library_path_for_local_servers(tmp_path, registry):
    hub_env = {
        "PATH": "/usr/bin",
        "LD_LIBRARY_PATH": "/usr/local/cuda-12.4/lib64:/opt/cudnn/lib",
        "CUDA_HOME": "/usr/local/cuda-12.4",
    }
    hub = {
        "/proc/900/cmdline": b"/opt/jupyterhub/bin/python3\0/opt/jupyterhub/bin/jupyterhub\0-f\0/etc/jupyterhub/jupyterhub_config.py\0",
        "/proc/900/environ": b"\0".join(f"{k}={v}".encode() for k, v in hub_env.items()) + b"\0",
        "/proc/900/cgroup": "0::/system.slice/jupyterhub.service\n",
    }
    server_env = {"JUPYTERHUB_USER": "alice", "PATH": "/usr/bin", "LD_LIBRARY_PATH": "/usr/local/cuda-12.4/lib64"}
    unit = "jupyter-alice-singleuser.service"
    files = {**GPU_HOST, **hub, **_server(4242, server_env, unit)}
    facts = facts_of(write_tree(tmp_path, files))
    launch = facts.of(LaunchFacts)
    assert launch.hub_process is not None and launch.hub_process.pid == 900
    assert [s.pid for s in launch.singleuser] == [4242] and launch.singleuser[0].unit == unit
    f = worst(registry, facts)
    assert f.status is Status.WARN and "JupyterHub (pid 900) has LD_LIBRARY_PATH, CUDA_HOME" in f.summary
    assert "alice (pid 4242)" in f.summary
    assert 'c.Spawner.env_keep.extend(["LD_LIBRARY_PATH", "CUDA_HOME"])' in f.explanation
    assert f.evidence["lost"]["LD_LIBRARY_PATH"] == "/opt/cudnn/lib"
    # twin: env_keep carried them
    twin_env = {**server_env, "LD_LIBRARY_PATH": hub_env["LD_LIBRARY_PATH"], "CUDA_HOME": hub_env["CUDA_HOME"]}
    twin = facts_of(write_tree(tmp_path / "t", {**GPU_HOST, **hub, **_server(4242, twin_env, unit)}))
    assert [x.status for x in launcher_findings(registry, twin)] == [Status.OK]
    # neighbour: a DockerSpawner container's server has its own environment by design
    cfg = {"/etc/jupyterhub/jupyterhub_config.py": DOCKER_HUB_GPU}
    docker = facts_of(write_tree(tmp_path / "d", {**GPU_HOST, **hub, **_server(4242, server_env), **cfg}))
    assert [x.status for x in launcher_findings(registry, docker)] == [Status.OK]


def test_hub_config_named_on_its_command_line_relative_to_its_cwd(tmp_path, registry):
    hub_env = {
        "PATH": "/opt/anaconda3/envs/pytorch2/bin:/usr/bin",
        "LD_LIBRARY_PATH": "/opt/anaconda3/envs/pytorch2/lib",
    }
    files = {
        **GPU_HOST,
        "/proc/900/cmdline": b"/opt/anaconda3/bin/python\0/opt/anaconda3/bin/jupyterhub\0-f\0jupyterhub_config.py\0",
        "/proc/900/environ": b"\0".join(f"{k}={v}".encode() for k, v in hub_env.items()) + b"\0",
        "/root/jupyterhub_config.py": "c.Spawner.env_keep = ['LD_LIBRARY_PATH']\n",
        **_server(4242, {"JUPYTERHUB_USER": "alex", "PATH": "/usr/bin", "LD_LIBRARY_PATH": hub_env["LD_LIBRARY_PATH"]}),
    }
    root = write_tree(tmp_path, files)
    (root / "proc/900/cwd").symlink_to("/root")
    facts = facts_of(root)
    launch = facts.of(LaunchFacts)
    assert launch.hub_process is not None and launch.hub_process.config == "/root/jupyterhub_config.py"
    assert isinstance(launch.hub, HubConfig) and launch.hub.files == ("/root/jupyterhub_config.py",)
    assert [s.name for s in launch.hub.settings] == ["c.Spawner.env_keep"]
    assert [x.status for x in launcher_findings(registry, facts)] == [Status.OK]


def test_a_containers_server_is_not_compared_with_the_hub(tmp_path, registry):
    hub = {
        "/proc/900/cmdline": b"jupyterhub\0",
        "/proc/900/environ": b"LD_LIBRARY_PATH=/usr/local/cuda/lib64\0",
    }
    server = _server(4242, {"JUPYTERHUB_USER": "alice", "PATH": "/opt/conda/bin"})
    server["/proc/4242/cgroup"] = "0::/system.slice/docker-4f3c2a9b.scope\n"
    facts = facts_of(write_tree(tmp_path, {**GPU_HOST, **hub, **server}))
    assert facts.of(LaunchFacts).singleuser[0].in_container
    assert [x.status for x in launcher_findings(registry, facts)] == [Status.OK]


def test_spawner_environment_values_are_not_kept(tmp_path):
    text = 'c.Spawner.environment = {"LD_LIBRARY_PATH": "/opt/cuda/lib64", "WANDB_API_KEY": "wandb-s3cr3t"}\n'
    text += 'c.Spawner.environment["HF_TOKEN"] = "hf_s3cr3t"\n'
    helm = "singleuser:\n  extraEnv:\n    HF_TOKEN: hf_s3cr3t\n    CUDA_VISIBLE_DEVICES: '0'\n"
    root = write_tree(
        tmp_path,
        {"/etc/jupyterhub/jupyterhub_config.py": text, "/usr/local/etc/jupyterhub/secret/values.yaml": helm},
    )
    hub = launch_facts(fake_system(root).files, {}, None).hub
    assert isinstance(hub, HubConfig)
    shown = repr(hub.settings)
    assert "s3cr3t" not in shown and "/opt/cuda/lib64" not in shown
    assert '"LD_LIBRARY_PATH": ...' in shown and "HF_TOKEN, CUDA_VISIBLE_DEVICES (values not kept)" in shown
