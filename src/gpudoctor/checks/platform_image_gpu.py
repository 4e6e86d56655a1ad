"""Check ``platform.image-gpu``: does the image a Dockerfile builds fit the GPU stack?

Evidence: the ``gpu_image`` domain (``--dockerfile FILE``): the final
``FROM`` tag's CUDA and flavor, the torch wheel's CUDA, steps that compile
CUDA code, NVIDIA driver packages installed; and the host driver's CUDA
(``nvidia`` domain) when gpudoctor runs on the host that will run it.

In order:

1. an NVIDIA driver package installed in the image -> ``fail``: the NVIDIA
   Container Toolkit mounts the host driver's user-space libraries into the
   container; a second ``libcuda`` from the image of another version gives
   "driver/library version mismatch" / ``CUDA_ERROR_SYSTEM_DRIVER_MISMATCH`` (NVIDIA
   Container Toolkit docs: the driver is not part of the image);
2. the base image's CUDA newer than the host driver supports -> ``fail``: the
   ``nvidia/cuda`` images set ``NVIDIA_REQUIRE_CUDA=cuda>=X.Y`` and the container
   toolkit refuses to start them ("unsatisfied condition: cuda>=X.Y");
3. the build compiles CUDA code on a ``runtime``/``base`` image -> ``fail``:
   only ``devel`` images carry ``nvcc`` and the headers;
4. a ``devel`` image whose CUDA major differs from the torch wheel's -> ``fail``:
   ``torch.utils.cpp_extension`` refuses "The detected CUDA version (X)
   mismatches the version that was used to compile PyTorch (Y)";
5. otherwise ``ok``; no ``--dockerfile`` -> ``skip``.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._common import driver_install_commands
from gpudoctor.checks._gpu import driver_max_cuda
from gpudoctor.checks._image import evidence_of, verdict
from gpudoctor.facts import Facts
from gpudoctor.facts.gpu_image import GpuImageFacts
from gpudoctor.model import Check, Finding, Status


def evaluate(facts: Facts) -> list[Finding]:
    img = require(facts, GpuImageFacts)
    fault = verdict(img, driver_max_cuda(facts), driver_install_commands(facts))
    if fault is not None:
        return [
            CHECK.finding(
                fault.status, fault.summary, fault.explanation, evidence=fault.evidence, commands=fault.commands
            )
        ]
    return [
        CHECK.finding(
            Status.OK,
            f"{img.file}: {img.base or 'the base image'}"
            + (f" (CUDA {img.base_cuda} {img.base_flavor})" if img.base_cuda else "")
            + " fits the GPU stack it builds",
            evidence=evidence_of(img),
        )
    ]


CHECK = Check(
    id="platform.image-gpu",
    title="the image a Dockerfile builds fits the GPU stack: base CUDA, devel for compiling, no driver inside",
    needs=("gpu_image", "nvidia"),
    evaluate=evaluate,
)
