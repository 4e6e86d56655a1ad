"""``platform.image-gpu`` (issue 25): a Dockerfile's GPU stack, read by the real parser, each kind with a
neighbour and the healthy twin."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpudoctor.checks.platform_image_gpu import CHECK
from gpudoctor.collect.gpu_image import collect_gpu_image
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.model import Status
from gpudoctor.testing import make_facts, no_nvidia, nvidia_facts, nvml_device


def image(text: str):
    return collect_gpu_image(SimpleNamespace(options=SimpleNamespace(extra={"dockerfile": ("Dockerfile", text)})))


def judge(text: str, host=None):
    facts = make_facts(gpu_image=image(text), nvidia=host or no_nvidia())
    (f,) = evaluate([CHECK], facts)
    return f


FLASH = (
    "ARG CUDA=12.1.1\n"
    "FROM nvidia/cuda:${CUDA}-cudnn8-{flavor}-ubuntu22.04\n"
    "RUN pip install torch==2.3.1 --index-url https://download.pytorch.org/whl/cu121\n"
    "RUN pip install flash-attn --no-build-isolation\n"
)


def test_tag_and_wheel_are_read_with_args_expanded():
    img = image(FLASH.replace("{flavor}", "devel"))
    assert img.base == "nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04"
    assert (img.base_cuda, img.base_flavor, img.wheel_cuda) == ("12.1", "devel", "12.1")
    assert (
        img.wheel_origin == "Dockerfile:3" and img.compiles and img.compiles[0].startswith("Dockerfile:4 pip install")
    )


def test_compiling_on_a_runtime_image_fails_and_names_the_devel_tag():
    f = judge(FLASH.replace("{flavor}", "runtime"))
    assert f.status is Status.FAIL and "a runtime image without nvcc" in f.summary
    assert "FROM nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04" in f.explanation


def test_healthy_twin_the_same_build_on_the_devel_image():
    f = judge(FLASH.replace("{flavor}", "devel"))
    assert f.status is Status.OK and "(CUDA 12.1 devel)" in f.summary


def test_devel_cuda_11_8_with_a_cu124_wheel_and_an_extension_build_fails():
    text = (
        "FROM nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04\n"
        "RUN pip install torch==2.4.1+cu124 --extra-index-url https://download.pytorch.org/whl/cu124\n"
        "RUN cd /src/ext && python setup.py install\n"
    )
    f = judge(text)
    assert f.status is Status.FAIL
    assert "nvcc is CUDA 11.8, but the torch wheel (Dockerfile:2) is CUDA 12.4" in f.summary
    assert "mismatches the version that was used to compile PyTorch" in f.explanation


def test_a_driver_installed_in_the_image_fails():
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN apt-get update && apt-get install -y nvidia-driver-550 curl\n"
    )
    f = judge(text)
    assert f.status is Status.FAIL and "installs an NVIDIA driver into the image (Dockerfile:2 nvidia-driver-550)" in (
        f.summary
    )
    # neighbour: the compat package is not a driver
    ok = judge("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN apt-get install -y cuda-compat-12-4\n")
    assert ok.status is Status.OK


@pytest.mark.parametrize("host_cuda,status", [("12.2", Status.FAIL), ("12.4", Status.OK)])
def test_base_cuda_vs_the_host_driver(host_cuda, status):
    host = nvidia_facts("535.154.05" if host_cuda == "12.2" else "550.54.15", host_cuda, [nvml_device()])
    f = judge("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN pip install torch\n", host)
    assert f.status is status
    if status is Status.FAIL:
        assert "unsatisfied condition: cuda>=12.4" in f.explanation


def test_pytorch_image_tag_and_no_dockerfile():
    img = image("FROM pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime\n")
    assert (img.base_cuda, img.base_flavor) == ("12.1", "runtime")
    none = collect_gpu_image(SimpleNamespace(options=SimpleNamespace(extra={})))
    assert isinstance(none, Unavailable)
