"""devices.ecc: corrected (single-bit) ECC errors rising since the driver loaded, through the real NVML
worker and a gcc-built fake libnvidia-ml.so.1 (ECC counters set at build time)."""

from __future__ import annotations

import os

import pytest

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.nvidia import collect_nvidia
from gpudoctor.engine import evaluate
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.system import System
from gpudoctor.testing import make_facts, os_facts, pci_gpus
from nvml_lib import build_fake_nvml


@pytest.mark.parametrize(
    "vol, agg, status",
    [
        (4200, 4300, Status.WARN),  # nearly all of the lifetime's corrected errors are recent
        (4200, 90000, Status.OK),  # an old GPU with a long history: no recent rise
        (12, 12, Status.OK),  # a handful: normal
    ],
)
def test_corrected_errors_rising_since_the_driver_loaded(tmp_path, vol, agg, status):
    lib = build_fake_nvml(tmp_path / "lib", ECC_VOL_CORR=vol, ECC_AGG_CORR=agg)
    nv = collect_nvidia(CollectContext(System(env=dict(os.environ, LD_LIBRARY_PATH=str(lib))), CollectOptions()))
    finding = evaluate([load_registry().checks["devices.ecc"]], make_facts(nvidia=nv, gpu=pci_gpus(1), os=os_facts()))[
        0
    ]
    assert finding.status is status, finding.summary
    if status is Status.WARN:
        assert (
            "rising" in finding.summary and f"{vol} corrected ECC errors since the driver loaded" in finding.explanation
        )
