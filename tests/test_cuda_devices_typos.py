"""cuda.devices: a misspelled GPU-selection variable selects nothing (cBio/cbio-cluster #1 exports
CUDA_VISABLE_DEVICES; open-mmlab/mmagic #1580 documents CUDA_VISIBLE=0). Neighbours that are not
typos: other vendors' HIP_VISIBLE_DEVICES, a saved CUDA_VISIBLE_DEVICES_ORIG, CUDA's other
variables; the twin sets the exact name."""

from __future__ import annotations

import pytest

from gpudoctor.checks.cuda_devices import CHECK, misspelled_vars
from gpudoctor.model import Status
from gpudoctor.testing import make_facts, nvidia_facts, nvml_device, pci_gpus, probe_facts, target, targets, torch_facts


@pytest.mark.parametrize(
    ("env", "meant"),
    [
        ({"CUDA_VISABLE_DEVICES": "0"}, "CUDA_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE": "0"}, "CUDA_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE_DEVICE": "1"}, "CUDA_VISIBLE_DEVICES"),
        ({"NVIDIA_VISIBLE_DEVICE": "all"}, "NVIDIA_VISIBLE_DEVICES"),
        ({"CUDA_DEVICE_ORDERING": "PCI_BUS_ID"}, "CUDA_DEVICE_ORDER"),
    ],
)
def test_near_misses_are_named_with_the_variable_meant(env, meant):
    assert misspelled_vars(env) == [(next(iter(env)), meant)]


@pytest.mark.parametrize(
    "env",
    [
        {"HIP_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES_ORIG": "0,1"},
        {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "CUDA_MODULE_LOADING": "LAZY", "NVIDIA_DRIVER_CAPABILITIES": "all"},
        {"CUDA_VISIBLE": "0", "CUDA_VISIBLE_DEVICES": "1"},  # the real one is set: the typo changes nothing
    ],
)
def test_other_variables_are_not_typos(env):
    assert misspelled_vars(env) == []


def finding(env):
    devs = [nvml_device(i) for i in range(2)]
    probe = probe_facts(env={"PATH": "/usr/bin", **env}, torch=torch_facts("2.5.1+cu124", "12.4", device_count=2))
    facts = make_facts(targets=targets(target(probe)), nvidia=nvidia_facts(devices=devs), gpu=pci_gpus(2))
    (f,) = CHECK.evaluate(facts)
    return f


def test_the_typo_warns_with_the_rename_and_the_twin_is_ok():
    f = finding({"CUDA_VISABLE_DEVICES": "0"})
    assert f.status is Status.WARN
    assert "export CUDA_VISIBLE_DEVICES=0" in f.explanation and "unset CUDA_VISABLE_DEVICES" in f.explanation
    assert finding({"CUDA_VISIBLE_DEVICES": "0"}).status is Status.OK
