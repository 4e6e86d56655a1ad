"""``torch.extensions`` (issue 25): TORCH_CUDA_ARCH_LIST vs the GPUs present, with neighbours and twins."""

from __future__ import annotations

import pytest

from gpudoctor.checks.torch_extensions import CHECK, covers, parse_arch_list
from gpudoctor.engine import evaluate
from gpudoctor.model import Status
from gpudoctor.testing import make_facts, nvidia_facts, nvml_device, probe_facts, target, targets, torch_facts


def judge(arch_list: str | None, *gpus: tuple[str, str]):
    env = {"TORCH_CUDA_ARCH_LIST": arch_list} if arch_list is not None else {}
    devices = [nvml_device(i, name=n, cc=cc) for i, (n, cc) in enumerate(gpus)]
    facts = make_facts(
        targets=targets(target(probe_facts(torch=torch_facts("2.5.1+cu124", "12.4"), env=env))),
        nvidia=nvidia_facts(devices=devices),
    )
    (f,) = evaluate([CHECK], facts)
    return f


def test_a_list_without_the_gpus_capability_fails_and_names_the_list_that_covers_it():
    f = judge("7.0;7.5", ("NVIDIA GeForce RTX 4090", "8.9"))
    assert f.status is Status.FAIL
    assert "cannot run on NVIDIA GeForce RTX 4090 (compute capability 8.9)" in f.summary
    assert 'export TORCH_CUDA_ARCH_LIST="7.0;7.5;8.9"' in f.explanation
    assert "no kernel image is available" in f.explanation


def test_healthy_twin_the_same_list_with_the_gpu_added():
    f = judge("7.0;7.5;8.9", ("NVIDIA GeForce RTX 4090", "8.9"))
    assert f.status is Status.OK and "covers every GPU here (8.9)" in f.summary


def test_neighbour_ptx_of_an_older_arch_covers_a_newer_gpu():
    assert judge("8.0+PTX", ("NVIDIA H100 80GB HBM3", "9.0")).status is Status.OK
    # SASS sm_80 runs on an 8.9 GPU (same major), not on 9.0 (another major); 8.6 SASS not on an 8.0 GPU
    assert judge("8.0", ("NVIDIA GeForce RTX 4090", "8.9")).status is Status.OK
    assert judge("8.0", ("NVIDIA H100 80GB HBM3", "9.0")).status is Status.FAIL
    assert judge("8.6", ("NVIDIA A100-SXM4-80GB", "8.0")).status is Status.FAIL


def test_one_of_two_gpus_uncovered_is_named():
    f = judge("8.0", ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA GeForce RTX 2080 Ti", "7.5"))
    assert f.status is Status.FAIL and "RTX 2080 Ti (compute capability 7.5)" in f.summary
    assert "A100" not in f.summary


@pytest.mark.parametrize("value", [None, "Ampere;Hopper"])
def test_unset_or_named_entries_are_skipped(value):
    assert judge(value, ("NVIDIA A100-SXM4-80GB", "8.0")).status is Status.SKIP


def test_parse_and_cover_rules():
    assert parse_arch_list("7.5;8.0 8.6+PTX") == [(7, 5, False), (8, 0, False), (8, 6, True)]
    assert covers([(8, 0, False)], (8, 6)) and not covers([(8, 6, False)], (8, 0))
    assert covers([(7, 5, True)], (9, 0)) and not covers([(9, 0, True)], (8, 9))
