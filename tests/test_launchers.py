"""One cause, "no GPU reached the process", in the words of the launcher that started it.

Each case is a fake root (marker files, ``/proc`` entries, config files) read by the real
``platform`` and ``launch`` collectors, plus the environment the launcher gives the process; the
remedy must name that launcher's setting and never another launcher's (no ``docker run --gpus`` for
someone who does not run Docker). Healthy twins: the same launcher with the GPU injected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.launch import collect_launch
from gpudoctor.collect.nvidia import collect_gpu, collect_nvidia
from gpudoctor.collect.platform import collect_platform
from gpudoctor.engine import evaluate
from gpudoctor.facts.platform import PlatformFacts
from gpudoctor.launchers import chain, no_gpu_remedy
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import fake_system, make_facts, probe_facts, target, targets, torch_facts, write_tree

NVRM_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
UUID = "GPU-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
HUB_ENV = {
    "JUPYTERHUB_USER": "alice",
    "JUPYTERHUB_SERVICE_PREFIX": "/user/alice/",
    "JUPYTERHUB_API_URL": "http://hub:8081/hub/api",
    "JUPYTERHUB_API_TOKEN": "secret-token-value",
}


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def collected(tmp_path: Path, files: dict[str, str], env: dict[str, str] | None = None, **domains):
    """Facts from the real collectors on a fake root (platform, launch, nvidia, gpu)."""
    root = write_tree(tmp_path, {"/proc/sys/kernel/osrelease": "6.8.0-51-generic\n", **files})
    system = fake_system(root, env=env or {})
    ctx = CollectContext(system, CollectOptions())
    return make_facts(
        platform=collect_platform(ctx),
        launch=collect_launch(ctx),
        nvidia=collect_nvidia(ctx),
        gpu=collect_gpu(ctx),
        **domains,
    )


def findings(registry, facts, cid):
    return [f for f in evaluate([registry.checks[cid]], facts) if f.check == cid]


def one(registry, facts, cid):
    [f] = findings(registry, facts, cid)
    return f


def text(f):
    return f"{f.summary}\n{f.explanation}"


# the host's kernel module is visible in every container (/proc is the host's), nothing was injected
NOTHING_INJECTED = {"/proc/driver/nvidia/version": NVRM_550}

# (launcher, marker files, env, the words its remedy must have, words it must not have)
SAME_CAUSE = [
    (
        "docker",
        {"/.dockerenv": "", "/proc/self/cgroup": "0::/docker/4f3c2a\n"},
        {},
        ["docker run --gpus all", "deploy:"],
        ["podman", "runtimeClassName", "nvidia.runtime", "--nv", "c.DockerSpawner"],
    ),
    (
        "podman",
        {"/run/.containerenv": 'engine="podman-4.9.3"\n'},
        {"container": "podman"},
        ["podman run --device nvidia.com/gpu=all", "nvidia-ctk cdi generate"],
        ["docker run", "--gpus", "runtimeClassName", "nvidia.runtime"],
    ),
    (
        "kubernetes",
        {
            "/var/run/secrets/kubernetes.io/serviceaccount/token": "x",
            "/proc/self/cgroup": "0::/kubepods/pod1/cri-containerd-ab\n",
        },
        {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "NVIDIA_VISIBLE_DEVICES": UUID},
        ["runtimeClassName: nvidia", "The pod already requests a GPU"],
        ["docker run", "podman", "nvidia.runtime", "c.KubeSpawner"],
    ),
    (
        "lxd",
        {"/dev/lxd/sock": ""},
        {},
        ["lxc config device add <container> gpu0 gpu", "nvidia.runtime=true", "550.127.05"],
        ["docker run", "podman", "runtimeClassName", "incus", "lxc.mount.entry"],
    ),
    (
        "incus",
        {"/dev/incus/sock": ""},
        {},
        ["incus config device add <container> gpu0 gpu", "incus config set <container> nvidia.runtime=true"],
        ["docker run", "podman", "runtimeClassName", "lxc config"],
    ),
    (
        "apptainer",
        {"/.singularity.d/env/90-environment.sh": ""},
        {"APPTAINER_CONTAINER": "/scratch/img.sif", "SLURM_JOB_ID": "4242", "SLURM_JOB_GPUS": "0"},
        ["apptainer exec --nv", "--nvccli", "In this Slurm job", "--gres=gpu:1"],
        ["docker run", "podman", "runtimeClassName", "nvidia.runtime"],
    ),
    (
        "jupyterhub-docker",
        {"/.dockerenv": ""},
        HUB_ENV,
        ["DockerSpawner", "c.DockerSpawner.extra_host_config", "device_requests", "Stop My Server"],
        ["docker run --gpus all", "podman", "KubeSpawner"],
    ),
    (
        "jupyterhub-kube",
        {"/var/run/secrets/kubernetes.io/serviceaccount/token": "x"},
        {**HUB_ENV, "KUBERNETES_SERVICE_HOST": "10.96.0.1"},
        [
            "KubeSpawner",
            'c.KubeSpawner.extra_resource_limits = {"nvidia.com/gpu": "1"}',
            "singleuser:",
            "extraResource",
        ],
        ["docker run", "podman", "device_requests"],
    ),
]


@pytest.mark.parametrize(("launcher", "files", "env", "must", "never"), SAME_CAUSE, ids=[c[0] for c in SAME_CAUSE])
def test_no_gpu_reached_the_container_gets_its_launchers_remedy(tmp_path, registry, launcher, files, env, must, never):
    facts = collected(tmp_path, {**NOTHING_INJECTED, **files}, env)
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL, text(f)
    assert "injected no device nodes" in f.summary
    for word in must:
        assert word in f.explanation, (launcher, word)
    for word in never:
        assert word not in text(f), (launcher, word)
    assert "JUPYTERHUB_API_TOKEN" not in facts.of(PlatformFacts).env


def test_the_remedies_differ_for_every_launcher(tmp_path):
    seen = {}
    for i, (launcher, files, env, _must, _never) in enumerate(SAME_CAUSE):
        facts = collected(tmp_path / str(i), {**NOTHING_INJECTED, **files}, env)
        seen[launcher] = no_gpu_remedy(facts)
    assert len(set(seen.values())) == len(seen)


@pytest.mark.parametrize(("launcher", "files", "env", "must", "never"), SAME_CAUSE, ids=[c[0] for c in SAME_CAUSE])
def test_healthy_twin_with_the_gpu_injected(tmp_path, registry, launcher, files, env, must, never):
    injected = {
        "/dev/nvidia0": "",
        "/dev/nvidiactl": "",
        "/dev/nvidia-uvm": "",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1": "",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.550.127.05": "",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "",
    }
    facts = collected(tmp_path, {**NOTHING_INJECTED, **files, **injected}, env)
    f = one(registry, facts, "platform.container")
    assert f.status is Status.OK and "the GPU was injected" in f.summary
    assert one(registry, facts, "platform.launcher").status is Status.OK


def test_slurm_job_without_a_gpu_request_gets_the_slurm_remedy(tmp_path, registry):
    env = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "1"}
    cuda_torch = torch_facts("2.5.1+cu124", cuda="12.4", cuda_available=False, device_count=0)
    facts = collected(
        tmp_path,
        {"/proc/driver/nvidia/version": NVRM_550, "/dev/nvidia0": "", "/dev/nvidiactl": ""},
        env,
        targets=targets(target(probe_facts(torch=cuda_torch, env=env))),
    )
    f = one(registry, facts, "platform.visibility")
    assert f.status is Status.FAIL and "requested no GPU" in f.summary
    assert "#SBATCH --gres=gpu:1" in f.explanation and "docker" not in text(f).lower()
    assert [x.kind for x in chain(facts)] == ["slurm"]
    # the healthy twin: the job holds a GPU
    env2 = {**env, "SLURM_JOB_GPUS": "0", "CUDA_VISIBLE_DEVICES": "0"}
    ok_torch = torch_facts("2.5.1+cu124", cuda="12.4", cuda_available=True, device_count=1)
    twin = collected(
        tmp_path / "twin",
        {"/proc/driver/nvidia/version": NVRM_550, "/dev/nvidia0": "", "/dev/nvidiactl": ""},
        env2,
        targets=targets(target(probe_facts(torch=ok_torch, env=env2))),
    )
    assert one(registry, twin, "platform.visibility").status is Status.OK


def test_systemd_spawner_private_devices_hides_the_gpu(tmp_path, registry):
    files = {
        "/proc/driver/nvidia/version": NVRM_550,
        "/proc/self/cgroup": "0::/system.slice/jupyter-alice-singleuser.service\n",
    }
    facts = collected(tmp_path, files, HUB_ENV)
    assert [x.name for x in chain(facts)] == ["JupyterHub (SystemdSpawner)"]
    f = one(registry, facts, "platform.launcher")
    assert f.status is Status.FAIL and "sees no /dev/nvidia*" in f.summary
    assert "c.SystemdSpawner.isolate_devices = False" in f.explanation
    assert "docker" not in text(f).lower() and "kubespawner" not in text(f).lower()
    twin = collected(tmp_path / "twin", {**files, "/dev/nvidia0": "", "/dev/nvidiactl": ""}, HUB_ENV)
    f = one(registry, twin, "platform.launcher")
    assert f.status is Status.OK and f.summary == "started by JupyterHub (SystemdSpawner)"


def test_chain_names_every_launcher_outermost_first(tmp_path):
    env = {**HUB_ENV, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "x"}
    facts = collected(tmp_path, {"/var/run/secrets/kubernetes.io/serviceaccount/token": "x"}, env)
    assert [x.kind for x in chain(facts)] == ["jupyterhub", "kubernetes", "torchrun"]
    assert "secret-token-value" not in repr(facts.of(PlatformFacts))


def test_nerdctl_container_gets_the_containerd_remedy(tmp_path, registry):
    files = {**NOTHING_INJECTED, "/proc/self/cgroup": "0::/system.slice/nerdctl-3f1c2b9e8d7a.scope\n"}
    facts = collected(tmp_path, files)
    f = one(registry, facts, "platform.container")
    assert f.status is Status.FAIL and "a containerd container" in f.summary
    assert "nerdctl run --gpus all" in f.explanation and "ctr run --gpus 0" in f.explanation
    assert "docker run" not in f.explanation and "runtimeClassName" not in f.explanation


def test_pod_with_fewer_device_nodes_than_the_plugin_assigned(tmp_path, registry):
    env = {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "NVIDIA_VISIBLE_DEVICES": f"{UUID},GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
    }
    files = {
        **NOTHING_INJECTED,
        "/var/run/secrets/kubernetes.io/serviceaccount/token": "x",
        "/dev/nvidia0": "",
        "/dev/nvidiactl": "",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1": "",
    }
    f = findings(registry, collected(tmp_path, files, env), "platform.launcher")[0]
    assert f.status is Status.WARN and "assigned 2 GPUs" in f.summary and "only 1 device node" in f.summary
    assert "nvidia.com/gpu: 2" in f.explanation
    twin = collected(tmp_path / "t", {**files, "/dev/nvidia1": ""}, env)
    assert [x.status for x in findings(registry, twin, "platform.launcher")] == [Status.OK]


def test_a_cdi_spec_names_its_driver_by_any_versioned_nvidia_library():
    from gpudoctor.collect.platform import parse_cdi_spec

    egl = "  - hostPath: /usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.535.161.07\n"
    assert parse_cdi_spec("/etc/cdi/nvidia.yaml", "kind: nvidia.com/gpu\n" + egl).driver_version == "535.161.07"
    wayland = "  - hostPath: /usr/lib/libnvidia-egl-wayland.so.1.1.13\n"  # its own version, not the driver's
    assert parse_cdi_spec("/etc/cdi/nvidia.yaml", "kind: nvidia.com/gpu\n" + wayland).driver_version == ""


def test_lxd_remedy_from_the_platform_markers_alone(tmp_path):
    # checks that do not ask for the launch facts (nvidia.driver, cuda.libcuda) still tell LXD from raw LXC
    root = write_tree(tmp_path, {**NOTHING_INJECTED, "/dev/incus/sock": "", "/proc/sys/kernel/osrelease": "6.8.0\n"})
    ctx = CollectContext(fake_system(root), CollectOptions())
    facts = make_facts(platform=collect_platform(ctx))
    text_ = no_gpu_remedy(facts)
    assert "incus config device add <container> gpu0 gpu" in text_ and "lxc.mount.entry" not in text_
    raw = write_tree(tmp_path / "raw", {**NOTHING_INJECTED, "/proc/self/cgroup": "0::/lxc.payload.ct101\n"})
    facts = make_facts(platform=collect_platform(CollectContext(fake_system(raw), CollectOptions())))
    assert "lxc.mount.entry: /dev/nvidia0" in no_gpu_remedy(facts)


def test_batchspawner_server_in_a_slurm_job_gets_the_spawner_setting(tmp_path, registry):
    env = {**HUB_ENV, "SLURM_JOB_ID": "777", "SLURM_NTASKS": "1"}
    cuda_torch = torch_facts("2.5.1+cu124", cuda="12.4", cuda_available=False, device_count=0)
    facts = collected(
        tmp_path,
        {"/proc/driver/nvidia/version": NVRM_550, "/dev/nvidia0": "", "/dev/nvidiactl": ""},
        env,
        targets=targets(target(probe_facts(torch=cuda_torch, env=env))),
    )
    assert [x.name for x in chain(facts)] == ["JupyterHub (batchspawner (Slurm))", "Slurm job 777"]
    text_ = no_gpu_remedy(facts)
    assert 'c.SlurmSpawner.req_gres = "gpu:1"' in text_ and "Stop My Server" in text_
    assert "docker" not in text_.lower() and "#SBATCH --gres=gpu:1" in text_
    f = one(registry, facts, "platform.visibility")
    assert f.status is Status.FAIL and 'c.SlurmSpawner.req_gres = "gpu:1"' in f.explanation


def test_cdi_spec_device_nodes_missing_on_a_host_that_shows_its_gpu(tmp_path):
    from gpudoctor.collect.platform import container_host_facts

    spec = (
        "kind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia1\n"
    )
    spec += "    - hostPath: /dev/dri/renderD129\n      path: /dev/dri/renderD128\n"
    host = write_tree(tmp_path / "host", {"/dev/nvidia0": "", "/dev/dri/renderD128": "", "/etc/cdi/nvidia.yaml": spec})
    [cdi] = container_host_facts(fake_system(host).files, None).cdi_specs
    assert cdi.device_nodes == ("/dev/nvidia1", "/dev/dri/renderD129", "/dev/dri/renderD128")
    assert cdi.missing_device_nodes == ("/dev/nvidia1", "/dev/dri/renderD129")
    # an image root shows no GPU device nodes: nothing to compare with
    image = write_tree(tmp_path / "image", {"/etc/cdi/nvidia.yaml": spec})
    assert container_host_facts(fake_system(image).files, None).cdi_specs[0].missing_device_nodes == ()


def test_cdi_spec_naming_nvidia_uvm_before_the_module_is_loaded(tmp_path, registry):
    from gpudoctor.collect.platform import container_host_facts

    spec = (
        "kind: nvidia.com/gpu\ncontainerEdits:\n  deviceNodes:\n  - path: /dev/nvidia-uvm\n  - path: /dev/nvidiactl\n"
    )
    files = {"/usr/bin/podman": "", "/usr/bin/nvidia-ctk": "", "/dev/nvidia0": "", "/dev/nvidiactl": ""}
    host = write_tree(tmp_path, {**files, **NOTHING_INJECTED, "/etc/cdi/nvidia.yaml": spec})
    system = fake_system(host)
    ctx = CollectContext(system, CollectOptions())
    facts = make_facts(
        container_host=container_host_facts(system.files, None),
        platform=collect_platform(ctx),
        nvidia=collect_nvidia(ctx),
        gpu=collect_gpu(ctx),
    )
    f = one(registry, facts, "platform.toolkit")
    assert f.status is Status.FAIL and "/dev/nvidia-uvm" in f.summary
    assert "sudo nvidia-modprobe -u -c=0" in f.explanation and "The spec itself is right" in f.explanation
    assert "cdi generate" not in f.explanation
