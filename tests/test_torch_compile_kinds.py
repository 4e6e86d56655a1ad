"""torch.compile kinds found in the field corpus.

- It exists from torch 2.0 on, including its nightlies and pre-releases: a ``2.0.0.dev20230120``
  nightly (pytorch/pytorch #92745, run under Singularity) or an NGC ``2.0.0a0+1767026`` build is
  judged, never skipped as "older than 2.0"; 1.13 is skipped.
- The missing compiler is installed where the user is: on a host with sudo and the distribution's
  package manager; in a Docker/podman container in the image (pytorch/pytorch #116696, the CUDA
  runtime images); under Apptainer in the definition file (the image is read-only)."""

from __future__ import annotations

import pytest

from gpudoctor.checks.torch_compile import CHECK
from gpudoctor.facts.targets import ToolchainFacts, TritonFacts
from gpudoctor.model import Status
from gpudoctor.testing import (
    make_facts,
    nvidia_facts,
    nvml_device,
    os_facts,
    pci_gpus,
    probe_facts,
    target,
    targets,
    torch_facts,
)


def run(version: str, compiler: bool, os_=None):
    tc = ToolchainFacts(True, "/opt/conda/include/python3.10/Python.h", "/usr/bin/gcc" if compiler else None, None)
    probe = probe_facts(
        "/opt/conda/bin/python",
        torch_facts(version, "11.7", cuda_available=True, device_count=1),
        python_version="3.10.8",
        toolchain=tc,
        triton=TritonFacts(True, "2.0.0", True),
    )
    domains = dict(targets=targets(target(probe)), nvidia=nvidia_facts(devices=[nvml_device()]), gpu=pci_gpus(1))
    if os_ is not None:
        domains["os"] = os_
    facts = make_facts(**domains)
    (f,) = CHECK.evaluate(facts)
    return f


@pytest.mark.parametrize("version", ["2.0.0.dev20230120+cu117", "2.0.0a0+1767026", "2.0.0rc1"])
def test_pre_releases_of_2_0_are_judged(version):
    f = run(version, compiler=False)
    assert f.status is Status.FAIL and "no C compiler" in f.summary


def test_twin_a_2_0_nightly_with_a_compiler_meets_the_prerequisites():
    assert run("2.0.0.dev20230120+cu117", compiler=True).status is Status.INFO


def test_torch_1_13_has_no_torch_compile():
    f = run("1.13.1+cu117", compiler=False)
    assert f.status is Status.SKIP and "arrived in torch 2.0" in f.summary


@pytest.mark.parametrize(
    ("distro", "kind", "wanted", "unwanted"),
    [
        (("ubuntu", "22.04", "jammy"), None, "sudo apt-get install build-essential", "RUN "),
        (("ubuntu", "22.04", "jammy"), "docker", "RUN apt-get update && apt-get install -y build-essential", "sudo"),
        (("debian", "12", "bookworm"), "podman", "RUN apt-get update", "sudo"),
        (("rocky", "9.4", ""), "docker", "RUN dnf install -y gcc gcc-c++", "apt-get"),
        (("ubuntu", "20.04", "focal"), "apptainer", "%post\n    apt-get update", "RUN "),
    ],
)
def test_the_compiler_is_installed_where_the_user_is(distro, kind, wanted, unwanted):
    f = run("2.5.1+cu124", compiler=False, os_=os_facts(*distro, in_container=kind is not None, kind=kind))
    assert f.status is Status.FAIL
    assert wanted in f.explanation and unwanted not in f.explanation
    assert "g++" in f.explanation  # the CPU path's compiler is missing too
