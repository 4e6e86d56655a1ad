"""gpudoctor.versions: one model for the version strings of drivers, CUDA, cuDNN and torch.

The table holds real strings from the facts fixtures and field cases (driver, torch, cuDNN and CUDA
versions as the collectors record them) and garbage, which reads as None and never raises.
"""

from __future__ import annotations

import pytest

from gpudoctor import versions
from gpudoctor.checks._common import best_variant_for_driver
from gpudoctor.checks._gpu import decode_cudnn, v
from gpudoctor.explain import DERIVATIONS

GARBAGE = ["", " ", "N/A", "[N/A]", "ERR!", "12.x", "∞", "１２.４", "unknown", "None", "-1", "12..4", "v", "+cu124"]


@pytest.mark.parametrize(
    ("text", "release", "local", "pre"),
    [
        ("535.104.05", (535, 104, 5), None, False),  # NVML driver version (leading zero is no digit of its own)
        ("550.54.15", (550, 54, 15), None, False),
        ("470.82.01", (470, 82, 1), None, False),
        ("12.4", (12, 4), None, False),  # cuda_driver_version, torch.version.cuda
        ("12.4.127", (12, 4, 127), None, False),  # nvidia-cuda-runtime wheel
        ("V12.4.131", (12, 4, 131), None, False),  # nvcc --version "Cuda compilation tools, release 12.4, V12.4.131"
        ("9.1.0.70", (9, 1, 0, 70), None, False),  # nvidia-cudnn-cu12
        ("8.9.7", (8, 9, 7), None, False),
        ("2.5.1+cu124", (2, 5, 1), "cu124", False),
        ("2.13.0+cu128", (2, 13, 0), "cu128", False),
        ("2.1.0a0+git34ab7f1", (2, 1, 0), "git34ab7f1", True),  # a source build
        ("2.10.0.dev20251209+cu129", (2, 10, 0), "cu129", True),  # a nightly (a dev release)
        (" 22.04\n", (22, 4), None, False),  # surrounding blanks do not matter
    ],
)
def test_real_versions_parse_with_their_parts(text, release, local, pre):
    p = versions.parse(text)
    assert p is not None
    assert p.release[: len(release)] == release
    assert p.local == local
    assert (p.is_prerelease or p.is_devrelease) is pre


@pytest.mark.parametrize("text", [*GARBAGE, None, 12.4, b"12.4"])
def test_garbage_is_none_and_never_raises(text):
    assert versions.parse(text) is None
    assert versions.major_minor(text) is None
    assert versions.v(text) == versions.ZERO
    assert versions.compare(text, "12.4") is None
    assert versions.wheel_cuda(text) is None
    assert versions.cuda_from_int(text) is None
    assert versions.cudnn_from_int(text) is None
    assert versions.underscore(text) is None
    if not isinstance(text, str):
        assert versions.from_tuple_text(text) is None


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        ("535.104.05", "535.104.5", 0),
        ("535.104.05", "525.60.13", 1),  # the CUDA 12.x driver floor
        ("470.82.01", "525.60.13", -1),
        ("12.10", "12.9", 1),  # numeric, not string, order
        ("2.1.0a0+git34ab7f1", "2.1.0", -1),  # a pre-release is older than its release
        ("2.5.1+cu124", "2.5.1", 1),  # a local build sorts after the public one
        ("V12.4.131", "12.4.131", 0),
        ("12.x", "12.4", None),
    ],
)
def test_compare(a, b, order):
    assert versions.compare(a, b) == order
    if order is not None:
        assert versions.compare(b, a) == -order


@pytest.mark.parametrize(
    ("text", "mm"), [("12.4", (12, 4)), ("12", (12, 0)), ("12.4.131", (12, 4)), ("2.5.1+cu124", (2, 5))]
)
def test_major_minor(text, mm):
    assert versions.major_minor(text) == mm


@pytest.mark.parametrize(
    ("value", "cuda"),
    [(12040, "12.4"), ("12040", "12.4"), (11040, "11.4"), (12080, "12.8"), (12020, "12.2"), (9020, "9.2"), (0, "0.0")],
)
def test_cuda_api_integers(value, cuda):
    assert versions.cuda_from_int(value) == cuda
    assert DERIVATIONS["cuda_int"](str(value)) == cuda  # explain's signatures read log values through it


@pytest.mark.parametrize(
    ("value", "parts"),
    [(8902, (8, 9, 2)), (8907, (8, 9, 7)), (90100, (9, 1, 0)), ("90100", (9, 1, 0)), (7605, (7, 6, 5))],
)
def test_cudnn_integers(value, parts):
    assert versions.cudnn_from_int(value) == parts
    if isinstance(value, int):
        assert decode_cudnn(value) == parts


@pytest.mark.parametrize(
    ("tag", "cuda"),
    [("cu118", "11.8"), ("cu124", "12.4"), ("cu129", "12.9"), ("cu92", "9.2"), ("cu100", "10.0"), ("cpu", None)],
)
def test_wheel_tags(tag, cuda):
    assert versions.wheel_cuda(tag) == cuda
    assert versions.wheel_cuda(f"rocm6.1{tag}") is None


def test_log_shapes():
    assert versions.underscore("12_4") == "12.4"
    assert versions.underscore("libcudart.so.12") is None
    assert versions.from_tuple_text("(8, 3, 2)") == "8.3.2"
    assert versions.from_tuple_text("()") is None
    assert versions.split_local("2.1.0a0+git34ab7f1") == ("2.1.0a0", "git34ab7f1")
    assert versions.split_local("2.5.1") == ("2.5.1", "")
    assert versions.libcuda_version("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05") == "535.104.05"
    assert versions.libcuda_version("/usr/local/cuda-11.2/compat/libcuda.so.460.73.01") == "460.73.01"
    assert versions.libcuda_version("/usr/lib/x86_64-linux-gnu/libcuda.so.1") is None
    assert versions.libcuda_version(None) is None


def test_the_checks_read_versions_through_it():
    """The checks' lenient ``v`` is this one: a garbage driver version picks no wheel instead of raising."""
    assert v is versions.v
    assert v("ERR!") == versions.ZERO
    assert best_variant_for_driver("ERR!") is None
    assert best_variant_for_driver("550.54.15") is not None
