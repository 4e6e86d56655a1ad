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
from gpudoctor.checks._gpu import driver_max_cuda, v
from gpudoctor.facts import Facts
from gpudoctor.facts.gpu_image import GpuImageFacts
from gpudoctor.model import Check, Command, Finding, Status


def _devel(base: str, cuda: str | None) -> str:
    """The ``-devel`` tag of the same base (``...-runtime-ubuntu22.04`` -> ``...-devel-ubuntu22.04``)."""
    for flavor in ("-runtime", "-base"):
        if flavor in base:
            return base.replace(flavor, "-devel", 1)
    return f"nvidia/cuda:{cuda}.0-devel-ubuntu22.04" if cuda else "a -devel image"


def evaluate(facts: Facts) -> list[Finding]:
    img = require(facts, GpuImageFacts)
    evidence = {
        "file": img.file,
        "FROM": img.base,
        "base_cuda": img.base_cuda,
        "flavor": img.base_flavor,
        "wheel_cuda": img.wheel_cuda,
        "compiles": list(img.compiles),
    }
    if img.driver_installs:
        where = img.driver_installs[0]
        return [
            CHECK.finding(
                Status.FAIL,
                f"{img.file} installs an NVIDIA driver into the image ({where})",
                f"`{where}`: with the NVIDIA Container Toolkit the container gets the **host's** driver libraries "
                f"mounted in at start; a driver installed in the image adds a second `libcuda.so` of another version, "
                f"and CUDA fails with `Failed to initialize NVML: Driver/library version mismatch` or "
                f"`CUDA_ERROR_SYSTEM_DRIVER_MISMATCH` on any host whose driver differs. Delete that package from the "
                f"`RUN` line; the image needs no driver (for a newer CUDA on an older data-center driver, install "
                f"`cuda-compat-<X>-<Y>` instead).",
                evidence=evidence,
            )
        ]
    host = driver_max_cuda(facts)
    if img.base_cuda and host and v(img.base_cuda) > v(host):
        return [
            CHECK.finding(
                Status.FAIL,
                f"{img.base} needs CUDA {img.base_cuda}; this host's driver supports CUDA {host}",
                f"The `nvidia/cuda` images set `NVIDIA_REQUIRE_CUDA=cuda>={img.base_cuda}`, and the NVIDIA Container "
                f"Toolkit refuses to start the container on a driver that supports only CUDA {host} "
                f"(`nvidia-container-cli: requirement error: unsatisfied condition: cuda>={img.base_cuda}`). Use a "
                f"base image of CUDA {host} or older (the wheels bring their own CUDA runtime), or upgrade the host "
                f"driver.",
                evidence={**evidence, "host_cuda": host},
                commands=tuple(
                    Command(c.text, "or keep the base image: " + c.purpose[0].lower() + c.purpose[1:], c.safety)
                    for c in driver_install_commands(facts)
                ),
            )
        ]
    if img.compiles and img.base_flavor in ("runtime", "base"):
        return [
            CHECK.finding(
                Status.FAIL,
                f"{img.file} compiles CUDA code on {img.base}, a {img.base_flavor} image without nvcc",
                f"`{img.compiles[0]}` needs `nvcc` and the CUDA headers, which only the `devel` images carry; the "
                f"build stops with `nvcc: not found` / `CUDA_HOME environment variable is not set`. Build on the "
                f"devel image of the same CUDA (and copy the result into the runtime image in a second stage):\n\n"
                f"```\nFROM {_devel(img.base or '', img.base_cuda)}\n```",
                evidence=evidence,
            )
        ]
    if (
        img.base_flavor == "devel"
        and img.base_cuda
        and img.wheel_cuda
        and v(img.base_cuda).major != v(img.wheel_cuda).major
        and img.compiles
    ):
        return [
            CHECK.finding(
                Status.FAIL,
                f"{img.base}'s nvcc is CUDA {img.base_cuda}, but the torch wheel ({img.wheel_origin}) is CUDA "
                f"{img.wheel_cuda}: extension builds refuse",
                f"`torch.utils.cpp_extension` compares nvcc's CUDA with torch's: `The detected CUDA version "
                f"({img.base_cuda}) mismatches the version that was used to compile PyTorch ({img.wheel_cuda})`, a "
                f"hard error across majors. Use a CUDA {img.wheel_cuda} devel base image, or install the torch build "
                f"for CUDA {img.base_cuda} (`--index-url https://download.pytorch.org/whl/cu"
                f"{img.base_cuda.replace('.', '')}`).",
                evidence=evidence,
                commands=(
                    Command(
                        "pip install torch --index-url https://download.pytorch.org/whl/cu"
                        + "".join(img.base_cuda.split(".")[:2]),
                        f"in the build file: the torch build for the base image's CUDA {img.base_cuda}",
                        "changes",
                    ),
                ),
            )
        ]
    return [
        CHECK.finding(
            Status.OK,
            f"{img.file}: {img.base or 'the base image'}"
            + (f" (CUDA {img.base_cuda} {img.base_flavor})" if img.base_cuda else "")
            + " fits the GPU stack it builds",
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="platform.image-gpu",
    title="the image a Dockerfile builds fits the GPU stack: base CUDA, devel for compiling, no driver inside",
    needs=("gpu_image", "nvidia"),
    evaluate=evaluate,
)
