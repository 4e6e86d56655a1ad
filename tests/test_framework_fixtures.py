"""Per-framework fixtures (issue 25): torch, TensorFlow, JAX, CuPy and onnxruntime-gpu each with the
framework's CUDA newer than the driver, a shadowed library, a missing library and a conflict with another
framework of the environment, and a healthy twin of each (tests/fixtures/facts/frameworks/make_fixtures.py).

Each fault is diagnosed by name by its carrier check, with the winning and the needed copy; the headline
(``cuda.available``) names the framework, never "torch is not installed"; every twin fails nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.schemas import published_schema

HERE = Path(__file__).resolve().parent / "fixtures" / "facts" / "frameworks"
SITE = "/home/user/venv/lib/python3.11/site-packages"
PY = "/home/user/venv/bin/python"
CONDA = "/opt/conda/envs/ml"
SCRIPT = f"{CONDA}/etc/conda/activate.d/env_vars.sh"
CHECKS = ("cuda.available", "cuda.libraries", "cuda.frameworks", "cuda.driver", "cudnn.load", "torch.install")

#: fixture -> {check: (status, needles in summary + explanation)}
EXPECTED: dict[str, dict[str, tuple[str, list[str]]]] = {
    # ------------------------------------------------------------------ the framework's CUDA newer than the driver
    "torch-driver-old": {
        "cuda.driver": ("fail", ["470.82.01", "torch 2.5.1+cu124 (CUDA 12.4)", "525.60.13"]),
        "cuda.available": ("fail", ["too old for torch 2.5.1+cu124"]),
    },
    "tensorflow-driver-old": {
        "cuda.frameworks": (
            "fail",
            ["tensorflow 2.16.1 needs CUDA 12.3", "(11.4)", "Upgrade the driver", "`tensorflow>=2.12,<2.15`"],
        ),
        "cuda.available": ("fail", ["unavailable to tensorflow 2.16.1", "470.82.01"]),
    },
    "jax-driver-old": {
        "cuda.frameworks": ("fail", ["jax-cuda12-plugin 0.4.35 needs CUDA 12", "(11.4)", "driver must be upgraded"]),
        "cuda.available": ("fail", ["unavailable to jax-cuda12-plugin 0.4.35"]),
    },
    "cupy-driver-old": {
        "cuda.frameworks": ("fail", ["cupy-cuda12x 13.3.0 needs CUDA 12", "`cupy-cuda11x` (uninstall `cupy-cuda12x`"]),
        "cuda.available": ("fail", ["unavailable to cupy-cuda12x 13.3.0"]),
    },
    "onnxruntime-driver-old": {
        "cuda.frameworks": ("fail", ["onnxruntime-gpu 1.19.2 needs CUDA 12", "`onnxruntime-gpu>=1.15,<1.18`"]),
        "cuda.available": ("fail", ["unavailable to onnxruntime-gpu 1.19.2"]),
    },
    # ------------------------------------------------------------------ a shadowing copy of a library it loads by name
    "torch-shadowed": {
        "cuda.libraries": (
            "fail",
            [
                f"{CONDA}/lib (LD_LIBRARY_PATH entry 1, set by {SCRIPT}) shadows libcudnn.so.9",
                "binds 9.0.0",
                f"instead of 9.1.0.70 from {SITE}/nvidia/cudnn/lib",
                f"grep -n LD_LIBRARY_PATH {SCRIPT}",
            ],
        ),
        "cuda.available": ("fail", ["shadows libcudnn.so.9", "9.0.0"]),
    },
    "tensorflow-shadowed": {
        "cuda.libraries": (
            "fail",
            [
                f"{CONDA}/lib (LD_LIBRARY_PATH entry 2, set by {SCRIPT}) shadows libcudnn.so.8",
                "tensorflow (dlopen) binds 8.2.1",
                f"instead of 8.9.7 from {SITE}/nvidia/cudnn/lib",
                "tensorflow opens `libcudnn.so.8` by name at run time",
            ],
        ),
        "cuda.available": ("fail", ["unavailable to tensorflow 2.16.1", "shadows libcudnn.so.8", "binds 8.2.1"]),
    },
    "jax-shadowed": {
        "cuda.libraries": (
            "fail",
            [
                "/usr/local/cuda-12.1/lib64 (LD_LIBRARY_PATH entry 1, from the process environment) shadows "
                "libcusparse.so.12",
                "binds 12.1.0.106",
                "instead of 12.3.1.170",
                "unset LD_LIBRARY_PATH",
            ],
        ),
        "cuda.available": ("fail", ["unavailable to jax-cuda12-plugin 0.4.35"]),
    },
    "cupy-shadowed": {
        "cuda.libraries": (
            "fail",
            ["shadows libcublas.so.12", "binds 12.1.3.1", "instead of 12.4.5.8 from /usr/local/cuda-12.4/lib64"],
        ),
        "cuda.available": ("fail", ["unavailable to cupy-cuda12x 13.3.0"]),
    },
    "onnxruntime-shadowed": {
        "cuda.libraries": (
            "fail",
            ["shadows libcublasLt.so.12", "binds 12.1.3.1", f"instead of 12.4.5.8 from {SITE}/nvidia/cublas/lib"],
        ),
        "cuda.available": ("fail", ["unavailable to onnxruntime-gpu 1.19.2"]),
    },
    # ------------------------------------------------------------------ the library missing
    "torch-missing": {
        "cuda.libraries": ("fail", ["libcublasLt.so.12, needed by libtorch_cuda.so, is found nowhere", "torch==2.5.1"]),
        "cuda.available": ("fail", ["libcublasLt.so.12"]),
    },
    "tensorflow-missing": {
        "cuda.libraries": (
            "fail",
            ["libcudnn.so.8, needed by tensorflow (dlopen by name), is found nowhere", "nvidia-cudnn-cu12"],
        ),
        "cuda.available": ("fail", ["unavailable to tensorflow 2.16.1", "libcudnn.so.8"]),
    },
    "jax-missing": {
        "cuda.libraries": ("fail", ["libcusolver.so.11, needed by xla_cuda_plugin.so", "nvidia-cusolver-cu12"]),
        "cuda.available": ("fail", ["unavailable to jax-cuda12-plugin 0.4.35"]),
    },
    "cupy-missing": {
        "cuda.libraries": ("fail", ["libnvrtc.so.12", "is found nowhere", "nvidia-cuda-nvrtc-cu12"]),
        "cuda.available": ("fail", ["unavailable to cupy-cuda12x 13.3.0"]),
    },
    "onnxruntime-missing": {
        "cuda.libraries": ("fail", ["libcudnn.so.9, needed by libonnxruntime_providers_cuda.so", "nvidia-cudnn-cu12"]),
        "cuda.available": ("fail", ["unavailable to onnxruntime-gpu 1.19.2"]),
    },
    # ------------------------------------------------------------------ two frameworks needing different majors
    "torch-conflict": {
        "cuda.frameworks": (
            "fail",
            ["torch 2.5.1+cu124 needs cuDNN 9 but onnxruntime-gpu 1.18.0 needs cuDNN 8", "`onnxruntime-gpu>=1.18.1`"],
        ),
        "cuda.available": ("fail", ["needs cuDNN 9 but onnxruntime-gpu 1.18.0 needs cuDNN 8"]),
    },
    "tensorflow-conflict": {
        "cuda.frameworks": (
            "fail",
            ["tensorflow 2.16.1 needs CUDA 12 but cupy-cuda11x 13.3.0 needs CUDA 11", "`tensorflow>=2.12,<2.15`"],
        ),
        "cuda.available": ("fail", ["tensorflow 2.16.1 needs CUDA 12 but cupy-cuda11x 13.3.0 needs CUDA 11"]),
    },
    "jax-conflict": {
        "cuda.frameworks": (
            "fail",
            ["jax-cuda12-plugin 0.4.35 needs cuDNN 9 but torch 2.3.1+cu121 needs cuDNN 8", "`torch>=2.4`"],
        ),
        "cuda.available": ("fail", ["needs cuDNN 9 but torch 2.3.1+cu121 needs cuDNN 8"]),
    },
    "cupy-conflict": {
        "cuda.frameworks": ("fail", ["cupy-cuda12x 13.3.0 needs CUDA 12 but tensorflow 2.14.1 needs CUDA 11"]),
        "cuda.available": ("fail", ["cupy-cuda12x 13.3.0 needs CUDA 12"]),
    },
    "onnxruntime-conflict": {
        "cuda.frameworks": (
            "fail",
            ["onnxruntime-gpu 1.19.2 needs cuDNN 9 but tensorflow 2.16.1 needs cuDNN 8", "`tensorflow>=2.18`"],
        ),
        "cuda.available": ("fail", ["onnxruntime-gpu 1.19.2 needs cuDNN 9 but tensorflow 2.16.1 needs cuDNN 8"]),
    },
}
FRAMEWORKS = ("torch", "tensorflow", "jax", "cupy", "onnxruntime")
KINDS = ("driver-old", "shadowed", "missing", "conflict")


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def load(name: str) -> Facts:
    return Facts.from_json(json.loads((HERE / f"{name}.json").read_text()))


def run(name: str, registry) -> dict:
    out: dict = {}
    for f in evaluate([registry.checks[i] for i in CHECKS], load(name)):
        out.setdefault(f.check, f)
    return out


def test_every_framework_has_every_kind_and_a_twin():
    names = {p.stem for p in HERE.glob("*.json")}
    assert names == {f"{fw}-{k}{s}" for fw in FRAMEWORKS for k in KINDS for s in ("", "-ok")}
    assert set(EXPECTED) == {n for n in names if not n.endswith("-ok")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_validates_against_the_published_schema(name):
    jsonschema.validate(json.loads((HERE / f"{name}.json").read_text()), published_schema("facts.schema.json"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fault_is_diagnosed_by_name(name, registry):
    found = run(name, registry)
    for check, (status, needles) in EXPECTED[name].items():
        f = found[check]
        text = f.summary + "\n" + f.explanation
        assert f.status.value == status, f"{check}: {f.status.value}: {f.summary}"
        for needle in needles:
            assert needle in text, f"{check}: {needle!r} not in:\n{text}"
    head = found["cuda.available"].summary
    assert "torch is not installed" not in head and "no NVIDIA GPU" not in head


@pytest.mark.parametrize("name", sorted(f"{n}-ok" for n in EXPECTED))
def test_healthy_twin_fails_nowhere(name, registry):
    found = run(name, registry)
    bad = {c: f.summary for c, f in found.items() if f.status in (Status.FAIL, Status.ERROR, Status.WARN)}
    assert not bad, bad
    head = found["cuda.available"]
    assert head.status == Status.OK and head.summary.startswith(f"CUDA works in {PY}")
