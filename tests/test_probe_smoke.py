"""The ``--deep`` smoke test (``probe/_smoke.py``) run for real with torch's CPU device standing in
for GPUs, and through the probe with ``--deep`` on a CPU-only torch."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from gpudoctor.facts import Unavailable
from gpudoctor.facts.base import from_jsonable
from gpudoctor.facts.targets import SmokeFacts
from gpudoctor.probe import _smoke, probe_target
from gpudoctor.system import System


class CpuBackend:
    """``n`` devices that are all torch's CPU device: the smoke code runs unchanged."""

    pinned = False
    precision_n = 96  # the per-precision matmul: small on a CPU (a GPU times 4096^3)

    def __init__(self, n=2):
        self.n = n

    def count(self):
        return self.n

    def device(self, i):
        return "cpu"

    def sync(self, i):
        pass

    def can_access_peer(self, i, j):
        return True

    def matmul(self, a, b):
        return a @ b


class WrongMatmul(CpuBackend):
    def matmul(self, a, b):
        out = a @ b
        out[7, 3] += 1000.0  # one corrupted element, as a failing SM would give
        return out


class FailingCopies(CpuBackend):
    def device(self, i):
        return "meta" if i == 1 else "cpu"  # copies to/from meta raise, like a device fault


def decode(doc) -> SmokeFacts:
    return from_jsonable(SmokeFacts, doc)


def test_healthy_run_measures_everything():
    smoke = decode(_smoke.run(torch, budget_s=60, backend=CpuBackend(2)))
    assert [d.device for d in smoke.devices] == ["cpu", "cpu"]
    for d in smoke.devices:
        assert d.matmul_ok is True and d.matmul_rel_error < 1e-5
        for v in (d.h2d_pageable_gbps, d.d2h_pageable_gbps, d.d2d_gbps):
            assert isinstance(v, float) and v > 0
        assert isinstance(d.h2d_pinned_gbps, Unavailable) and "needs CUDA" in d.h2d_pinned_gbps.reason
        assert d.errors == () and d.skipped == ()
        assert set(d.matmul_tflops) == {"fp32", "tf32", "fp16", "bf16"}
        assert all(isinstance(v, float) and v > 0 for v in d.matmul_tflops.values())
    assert [(p.src, p.dst, p.can_access, p.copy_ok) for p in smoke.peers] == [(0, 1, True, True), (1, 0, True, True)]


def test_a_wrong_product_is_caught():
    smoke = decode(_smoke.run(torch, budget_s=60, backend=WrongMatmul(1)))
    (d,) = smoke.devices
    assert d.matmul_ok is False and d.matmul_rel_error > 1e-2


def test_a_failing_device_is_an_error_not_a_crash():
    smoke = decode(_smoke.run(torch, budget_s=60, backend=FailingCopies(2)))
    good, bad = smoke.devices
    assert good.errors == ()
    assert bad.errors and any(e.startswith("matmul:") for e in bad.errors)
    assert any(p.errors for p in smoke.peers)


class NoHalf(CpuBackend):
    def matmul(self, a, b):
        if a.dtype in (torch.float16, torch.bfloat16):
            raise RuntimeError('"addmm_impl_cpu_" not implemented for this dtype')  # as an old build says
        return a @ b


def test_a_precision_the_device_refuses_is_left_out_not_an_error():
    (d,) = decode(_smoke.run(torch, budget_s=60, backend=NoHalf(1))).devices
    assert set(d.matmul_tflops) == {"fp32", "tf32"} and d.errors == ()


def test_the_budget_bounds_the_run():
    smoke = decode(_smoke.run(torch, budget_s=0.0, backend=CpuBackend(2)))
    assert all("matmul" in d.skipped and "precision" in d.skipped and "d2d" in d.skipped for d in smoke.devices)
    assert all(isinstance(d.matmul_tflops, Unavailable) for d in smoke.devices)
    assert all(p.errors == ("skipped: time budget spent",) for p in smoke.peers)


@pytest.mark.slow
def test_probe_with_deep_on_a_cpu_torch_says_no_cuda_device():
    facts = probe_target(System(), sys.executable, timeout_s=120, deep=True)
    assert isinstance(facts.smoke, Unavailable) and "no CUDA device" in facts.smoke.reason


@pytest.mark.gpu
def test_real_gpus_pass_the_smoke_test():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    smoke = decode(_smoke.run(torch, budget_s=60))
    assert smoke.devices and all(d.matmul_ok is True and not d.errors for d in smoke.devices)
    assert all(isinstance(d.h2d_pinned_gbps, float) for d in smoke.devices)
