"""The GPU judgement of an image build (a Dockerfile's ``gpu_image`` facts), shared by
``platform.image-gpu`` (``--dockerfile``) and ``platform.compose-gpu`` (a Compose service's
``build:``).

In order: an NVIDIA driver installed into the image; the base image's CUDA newer than the
host driver supports; CUDA code compiled on a ``runtime``/``base`` image; a ``devel`` image
whose CUDA major differs from the torch wheel's while the build compiles extensions.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from gpudoctor.checks._gpu import v
from gpudoctor.facts.gpu_image import GpuImageFacts
from gpudoctor.model import Command, Status
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class Verdict:
    """A fault of an image build: status, one-line summary, explanation, evidence, remedy commands."""

    status: Status
    summary: str
    explanation: str
    evidence: dict[str, Any] = field(default_factory=dict)
    commands: tuple[Command, ...] = ()


def evidence_of(img: GpuImageFacts) -> dict[str, Any]:
    """The evidence every image verdict shows."""
    return {
        "file": img.file,
        "FROM": img.base,
        "base_cuda": img.base_cuda,
        "flavor": img.base_flavor,
        "wheel_cuda": img.wheel_cuda,
        "compiles": list(img.compiles),
    }


def devel_tag(base: str, cuda: str | None) -> str:
    """The ``-devel`` tag of the same base (``...-runtime-ubuntu22.04`` -> ``...-devel-ubuntu22.04``)."""
    for flavor in ("-runtime", "-base"):
        if flavor in base:
            return base.replace(flavor, "-devel", 1)
    return f"nvidia/cuda:{cuda}.0-devel-ubuntu22.04" if cuda else "a -devel image"


def verdict(img: GpuImageFacts, host: str | None, driver_commands: tuple[Command, ...] = ()) -> Verdict | None:
    """The first fault of the image ``img`` describes on a host whose driver supports CUDA ``host``
    (None: not known), or None when it fits; ``driver_commands`` install a newer host driver (the
    alternative to an older base image)."""
    evidence = evidence_of(img)
    if img.driver_installs:
        where = img.driver_installs[0]
        return Verdict(
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
    if img.base_cuda and host and v(img.base_cuda) > v(host):
        return Verdict(
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
                for c in driver_commands
            ),
        )
    if img.compiles and img.base_flavor in ("runtime", "base"):
        return Verdict(
            Status.FAIL,
            f"{img.file} compiles CUDA code on {img.base}, a {img.base_flavor} image without nvcc",
            f"`{img.compiles[0]}` needs `nvcc` and the CUDA headers, which only the `devel` images carry; the "
            f"build stops with `nvcc: not found` / `CUDA_HOME environment variable is not set`. Build on the "
            f"devel image of the same CUDA (and copy the result into the runtime image in a second stage):\n\n"
            f"```\nFROM {devel_tag(img.base or '', img.base_cuda)}\n```",
            evidence=evidence,
        )
    if (
        img.base_flavor == "devel"
        and img.base_cuda
        and img.wheel_cuda
        and v(img.base_cuda).major != v(img.wheel_cuda).major
        and img.compiles
    ):
        return Verdict(
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
    return None
