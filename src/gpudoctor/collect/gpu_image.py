"""Collector for the ``gpu_image`` domain: the GPU stack a Dockerfile (``--dockerfile FILE``) builds.

Reads the file with the same parser as the ``build`` domain
(:mod:`gpudoctor.sources.dockerfile`): the final stage's ``FROM`` tag (CUDA
version and flavor of ``nvidia/cuda`` and ``pytorch/pytorch`` images, as
their tags spell them), the torch wheel's CUDA (a ``+cuXYZ`` pin or the
``download.pytorch.org/whl/cuXYZ`` index), steps that compile CUDA code, and
NVIDIA driver packages installed into the image.
"""

from __future__ import annotations

import re

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.gpu_image import GpuImageFacts
from gpudoctor.sources.dockerfile import _expand, commands, instructions

#: nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04 ; nvcr.io/nvidia/cuda:11.8.0-runtime-ubi8
_NVIDIA_CUDA = re.compile(r"(?:^|/)cuda:(\d+)\.(\d+)(?:\.\d+)?-(?:cudnn\d*-)?(devel|runtime|base)\b")
#: pytorch/pytorch:2.3.1-cuda12.1-cudnn8-devel
_PYTORCH = re.compile(r"(?:^|/)pytorch:[\d.]+-cuda(\d+)\.(\d+)-cudnn\d+-(devel|runtime)\b")
_CU = re.compile(r"(?:\+|/whl/)cu(\d{2,3})(\d)\b")
#: driver packages a build must not install (the container toolkit mounts the host's driver)
_DRIVER_PKG = re.compile(r"^(?:nvidia-driver-\d+.*|cuda-drivers(?:-\d+)?|libnvidia-compute-\d+.*|nvidia-utils-\d+.*)$")
#: extensions that pip builds from source with nvcc when no wheel matches
_SOURCE_BUILT = ("flash-attn", "flash_attn", "apex", "xformers", "mmcv", "pytorch3d", "deepspeed", "causal-conv1d")


def _base(ctx_text: str, build_args: dict[str, str] | None = None) -> str | None:
    base = None
    env: dict[str, str] = dict(build_args or {})
    for ins in instructions(ctx_text):
        if ins.keyword == "ARG" and "=" in ins.args:
            k, _, val = ins.args.strip().partition("=")
            env.setdefault(k.strip(), val.strip().strip("\"'"))
        elif ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            if words:
                base = _expand(words[0], env)
    return base


def tag_cuda(image: str) -> tuple[str | None, str | None]:
    """(CUDA ``X.Y``, flavor) an image reference's tag names (``nvidia/cuda``, ``pytorch/pytorch``), else Nones."""
    for pattern in (_NVIDIA_CUDA, _PYTORCH):
        m = pattern.search(image)
        if m:
            return f"{m.group(1)}.{m.group(2)}", m.group(3)
    return None, None


def collect_gpu_image(ctx: CollectContext) -> GpuImageFacts | Unavailable:
    dockerfile: tuple | None = ctx.options.extra.get("dockerfile")
    if not dockerfile:
        return Unavailable("no build file given (--dockerfile FILE)")
    name, text = dockerfile
    return read_image(name, text)


def read_image(name: str, text: str, build_args: dict[str, str] | None = None) -> GpuImageFacts:
    """The GPU side of the image the Dockerfile ``text`` builds (``name`` labels its lines);
    ``build_args`` as ``--build-arg`` / Compose ``build.args`` give them."""
    base = _base(text, build_args)
    cuda, flavor = tag_cuda(base or "")
    parsed = commands(name, text, build_args)
    wheel_cuda = wheel_origin = None
    compiles: list[str] = []
    drivers: list[str] = []
    for cmd in parsed.commands:
        argv = list(cmd.argv)
        words = " ".join(argv)
        setup_py = len(argv) > 2 and argv[1] == "setup.py" and argv[2] in ("build", "build_ext", "install", "develop")
        if cmd.name == "nvcc" or setup_py:
            compiles.append(f"{cmd.origin} {cmd.text}")
        is_pip = cmd.name in ("pip", "pip3") or (len(argv) > 2 and argv[1:3] == ["-m", "pip"])
        if is_pip and "install" in argv:
            if any(a.startswith("torch") for a in argv):
                m = _CU.search(words)
                if m:
                    wheel_cuda, wheel_origin = f"{int(m.group(1))}.{m.group(2)}", cmd.origin
            if "--no-build-isolation" in argv or any(a.split("=")[0].split("[")[0] in _SOURCE_BUILT for a in argv):
                compiles.append(f"{cmd.origin} {cmd.text}")
        if cmd.name in ("apt-get", "apt", "yum", "dnf", "microdnf") and "install" in argv:
            drivers += [f"{cmd.origin} {a}" for a in argv if _DRIVER_PKG.match(a)]
    return GpuImageFacts(
        file=name,
        base=base,
        base_cuda=cuda,
        base_flavor=flavor,
        wheel_cuda=wheel_cuda,
        wheel_origin=wheel_origin,
        compiles=tuple(compiles),
        driver_installs=tuple(drivers),
    )


COLLECTOR = Collector(domain="gpu_image", collect=collect_gpu_image, timeout_s=10.0)
