"""``platform.rank-binding``: a scheduler that binds one GPU per task, judged together with the rank a
distributed launcher gives the process: "each task sees one GPU, so cuda:LOCAL_RANK fails for every
rank but 0", with the remedy of that scheduler and launcher; healthy twins where the rank fits."""

from __future__ import annotations

import pytest

from gpudoctor.engine import evaluate
from gpudoctor.facts.launch import LaunchFacts, SlurmNodeConfig
from gpudoctor.facts.platform import PlatformFacts
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import make_facts, probe_facts, target, targets, torch_facts

CID = "platform.rank-binding"


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def run(registry, env, device_count, kind="bare-metal", launch=None, **platform):
    p = PlatformFacts(kind=kind, env=dict(env), **platform)
    torch = torch_facts("2.5.1+cu124", cuda="12.4", cuda_available=device_count > 0, device_count=device_count)
    facts = make_facts(platform=p, targets=targets(target(probe_facts(torch=torch, env=env))))
    if launch is not None:
        facts = facts.with_domains(launch=launch)
    [f] = [f for f in evaluate([registry.checks[CID]], facts) if f.check == CID]
    return f


SLURM_STEP = {
    "SLURM_JOB_ID": "88121",
    "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_STEP_GPUS": "1",
    "SLURM_GPUS_PER_TASK": "1",
    "CUDA_VISIBLE_DEVICES": "0",
}


def test_torchrun_inside_one_slurm_task_bound_to_one_gpu(registry):
    env = {**SLURM_STEP, "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"}
    env.update({"TORCHELASTIC_RUN_ID": "88121", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "4"})
    f = run(registry, env, 1, scheduler="slurm")
    assert f.status is Status.FAIL
    assert "LOCAL_RANK=2 but this process sees 1 GPU(s)" in f.summary and "fails for every rank but 0" in f.summary
    assert "Slurm binds the GPUs" in f.summary
    assert "srun torchrun --nproc-per-node=$SLURM_GPUS_ON_NODE" in f.explanation
    assert "--ntasks-per-node=1" in f.explanation and "invalid device ordinal" in f.explanation
    assert "docker" not in f.explanation.lower()


def test_rank_zero_of_that_job_is_told_too(registry):
    env = {**SLURM_STEP, "SLURM_NTASKS": "1", "TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4"}
    f = run(registry, env, 1, scheduler="slurm")
    assert f.status is Status.FAIL and "4 ranks run on this node but each sees 1 GPU(s)" in f.summary


def test_srun_tasks_bound_by_gpus_per_task_use_slurm_localid(registry):
    env = {**SLURM_STEP, "SLURM_LOCALID": "3", "SLURM_PROCID": "3"}
    slurm = SlurmNodeConfig("/etc/slurm/gres.conf", ("AutoDetect=nvml",), "/etc/slurm/cgroup.conf", True)
    f = run(registry, env, 1, scheduler="slurm", launch=LaunchFacts(slurm=slurm))
    assert f.status is Status.WARN  # the code may select cuda:0; only SLURM_LOCALID is known
    assert "`ConstrainDevices=yes` in `/etc/slurm/cgroup.conf`" in f.explanation
    assert f.evidence["gres.conf"] == ["AutoDetect=nvml"]
    assert "SLURM_LOCALID=3" in f.summary
    assert "--gpus-per-task=1" in f.explanation and "srun --gpu-bind=none" in f.explanation
    assert "torch.cuda.set_device(0)" in f.explanation


def test_accelerate_on_a_host_with_one_visible_gpu(registry):
    env = {"ACCELERATE_MIXED_PRECISION": "bf16", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0"}
    f = run(registry, env, 1)
    assert f.status is Status.FAIL and "LOCAL_RANK=1" in f.summary
    assert "accelerate launch --num_processes=N" in f.explanation
    assert "srun" not in f.explanation and "torchrun" not in f.explanation


def test_deepspeed_launcher(registry):
    env = {"CROSS_RANK": "0", "LOCAL_SIZE": "2", "LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "3"}
    f = run(registry, env, 1)
    assert f.status is Status.FAIL
    assert "deepspeed --num_gpus=N" in f.explanation and "--include localhost:0,1" in f.explanation


def test_kubernetes_pod_with_fewer_gpus_than_ranks(registry):
    env = {"TORCHELASTIC_RUN_ID": "job", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "NVIDIA_VISIBLE_DEVICES": "GPU-1"}
    f = run(registry, env, 1, kind="container", container_runtime="containerd", kubernetes=True)
    assert f.status is Status.FAIL and "Kubernetes binds the GPUs" in f.summary
    assert "nvidia.com/gpu: N" in f.explanation and "nprocPerNode" in f.explanation


def test_ray_actor_with_one_gpu(registry):
    env = {"RAY_NODE_ID": "abc", "LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "1"}
    f = run(registry, env, 1, scheduler="ray")
    assert f.status is Status.FAIL and "ray.train.torch.get_device()" in f.explanation


@pytest.mark.parametrize(
    ("env", "count", "extra"),
    [
        # torchrun in one Slurm task that holds all 4 GPUs
        (
            {
                "SLURM_JOB_ID": "1",
                "SLURM_NTASKS": "1",
                "TORCHELASTIC_RUN_ID": "1",
                "LOCAL_RANK": "3",
                "LOCAL_WORLD_SIZE": "4",
            },
            4,
            {"scheduler": "slurm"},
        ),
        # one task per GPU that selects cuda:0: LOCAL_RANK is 0 in every task
        (
            {"SLURM_JOB_ID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "CUDA_VISIBLE_DEVICES": "0"},
            1,
            {"scheduler": "slurm"},
        ),
        ({"ACCELERATE_MIXED_PRECISION": "no", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}, 2, {}),
    ],
)
def test_healthy_twins(registry, env, count, extra):
    f = run(registry, env, count, **extra)
    assert f.status is Status.OK and "fits the" in f.summary


def test_not_a_distributed_launch_is_skipped(registry):
    f = run(registry, {"CUDA_VISIBLE_DEVICES": "0"}, 1)
    assert f.status is Status.SKIP
