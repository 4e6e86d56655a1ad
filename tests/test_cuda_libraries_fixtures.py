"""Loader-model, frameworks, WSL and Triton-link findings from facts fixtures (each with a healthy twin),
plus the probe's real framework load test on a gcc-built fake framework."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import _cudalibs as cl
from gpudoctor.data import load_table
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.facts.base import from_jsonable
from gpudoctor.facts.libraries import CudaLibrariesFacts
from gpudoctor.facts.targets import FrameworkLoad
from gpudoctor.model import Status
from gpudoctor.probe import PROBE_SCRIPT
from gpudoctor.registry import load_registry
from gpudoctor.schemas import published_schema
from gpudoctor.testing import (
    make_facts,
    nvidia_facts,
    nvml_device,
    os_facts,
    probe_facts,
    target,
    targets,
    torch_facts,
)

HERE = Path(__file__).resolve().parent / "fixtures" / "facts" / "libraries"
SITE = "/home/user/venv/lib/python3.11/site-packages"
CHECKS = (
    "cuda.libraries",
    "cuda.frameworks",
    "cuda.wsl",
    "torch.compile",
    "cuda.available",
    "cuda.libcuda",
    "cudnn.load",
    "torch.install",
)

#: fixture -> {check: (status, [needles in summary + explanation], [texts that must NOT appear])}
EXPECTED = {
    "libs-nvjitlink-shadow": {
        "cuda.libraries": (
            "fail",
            [
                "/usr/local/cuda-12.2/lib64 (LD_LIBRARY_PATH entry 1) shadows libnvJitLink.so.12",
                "12.2.140",
                "12.4.127",
                "__nvJitLinkComplete_12_4",
                "unset LD_LIBRARY_PATH",
                f"export LD_LIBRARY_PATH={SITE}/nvidia/nvjitlink/lib:$LD_LIBRARY_PATH",
            ],
            ["--force-reinstall"],
        )
    },
    "libs-nvjitlink-ok": {"cuda.libraries": ("ok", ["2 CUDA libraries resolve"], [])},
    "libs-nccl-system-older": {
        "cuda.libraries": (
            "warn",
            [
                "older libnccl.so.2 (2.18.3, /usr/lib/x86_64-linux-gnu/libnccl.so.2)",
                "2.21.5",
                f"{SITE}/nvidia/nccl/lib",
            ],
            [],
        )
    },
    "libs-nccl-system-same": {"cuda.libraries": ("ok", [], [])},
    "libs-cublaslt-not-found": {"cuda.libraries": ("fail", ["libcublasLt.so.12", "found nowhere"], [])},
    "libs-cudnn-shadow-no-torch": {
        "cuda.libraries": (
            "fail",
            [
                "/opt/apps/cudnn/9.0.0/lib (LD_LIBRARY_PATH entry 1) shadows libcudnn.so.9",
                "9.0.0",
                "9.1.0.70",
                "Reinstalling onnxruntime-gpu does not help",
                "unset LD_LIBRARY_PATH",
            ],
            ["--force-reinstall"],
        ),
        "cudnn.load": ("skip", [], []),
    },
    "libs-cudnn-ok-no-torch": {
        "cuda.libraries": ("ok", [], []),
        "torch.install": ("info", ["it uses onnxruntime-gpu 1.19.2"], []),
        "cuda.frameworks": ("ok", ["onnxruntime-gpu 1.19.2 (CUDA 12, cuDNN 9)"], []),
    },
    "frameworks-ort-cudnn-missing": {
        "cuda.frameworks": (
            "fail",
            [
                "onnxruntime-gpu 1.19.2: libonnxruntime_providers_cuda.so does not load",
                "libcudnn.so.9: cannot open shared object file",
                '/home/user/venv/bin/python -m pip install "nvidia-cudnn-cu12==9.*"',
            ],
            ["--force-reinstall"],
        )
    },
    "frameworks-ct2-libcuda-missing-wsl": {
        "cuda.frameworks": (
            "fail",
            [
                "libcuda.so.1: cannot open",
                "NVIDIA **driver**",
                "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH",
            ],
            ["nvidia-cudnn", "pip install"],
        ),
        "cuda.wsl": ("fail", ["libcuda.so.1", "not resolvable"], []),
        # issue 23: the headline is never better than what it summarises: cuda.wsl's failure is its root cause
        "cuda.available": ("fail", ["libcuda.so.1", "WSL 2", "cuda.wsl"], ["no NVIDIA GPU"]),
    },
    "frameworks-cudnn-conflict": {
        "cuda.frameworks": (
            "fail",
            [
                "torch 2.5.1+cu124 needs cuDNN 9 but tensorflow 2.16.1 needs cuDNN 8",
                "`tensorflow>=2.18`",
                "own virtual environment",
            ],
            [],
        )
    },
    "frameworks-agree": {
        "cuda.frameworks": (
            "ok",
            ["torch 2.5.1+cu124 (CUDA 12, cuDNN 9)", "onnxruntime-gpu 1.19.2 (CUDA 12, cuDNN 9)"],
            [],
        )
    },
    "wsl-libcuda-unresolvable": {
        "cuda.wsl": (
            "fail",
            [
                "libcuda.so.1 and libcuda.so",
                "not resolvable",
                "ld.wsl.conf",
                "sudo ldconfig",
                "Do not install a Linux NVIDIA driver inside WSL",
            ],
            [],
        ),
        "cuda.available": ("fail", [], ["no NVIDIA GPU"]),
        "cuda.libcuda": ("fail", ["/usr/lib/wsl/lib"], []),
    },
    "wsl-nvml-driver-ok": {"cuda.libcuda": ("ok", ["/usr/lib/wsl/lib/libcuda.so.1.1"], []), "cuda.wsl": ("ok", [], [])},
    "wsl-linux-driver-inside": {
        "cuda.wsl": (
            "fail",
            [
                "libcuda.so.1 resolves to /usr/lib/x86_64-linux-gnu/libcuda.so.1, not the Windows driver's copy",
                "apt-get remove --purge",
                "Never install a Linux driver inside WSL",
            ],
            [],
        )
    },
    "wsl-libcuda-ok": {"cuda.wsl": ("ok", ["/usr/lib/wsl/lib"], []), "cuda.libcuda": ("ok", [], [])},
    "compile-no-64bit-libcuda-link": {
        "torch.compile": (
            "fail",
            ["no 64-bit libcuda.so", "sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so && sudo ldconfig"],
            [],
        )
    },
    "compile-libcuda-link-ok": {"torch.compile": ("info", [], [])},
}


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def load(name: str) -> Facts:
    return Facts.from_json(json.loads((HERE / f"{name}.json").read_text()))


def run(facts, registry, ids=CHECKS):
    out = {}
    for f in evaluate([registry.checks[i] for i in ids], facts):
        out.setdefault(f.check, f)
    return out


def test_every_fixture_has_expectations_and_every_fail_a_twin():
    assert {p.stem for p in HERE.glob("*.json")} == set(EXPECTED)
    fails = {c for e in EXPECTED.values() for c, (s, _n, _x) in e.items() if s in ("fail", "warn")}
    healthy = {c for e in EXPECTED.values() for c, (s, _n, _x) in e.items() if s in ("ok", "info")}
    assert fails - {"cuda.available", "cuda.libcuda"} <= healthy


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_validates_against_the_published_schema(name):
    jsonschema.validate(json.loads((HERE / f"{name}.json").read_text()), published_schema("facts.schema.json"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_verdicts(name, registry):
    found = run(load(name), registry)
    for check, (status, needles, absent) in EXPECTED[name].items():
        f = found[check]
        text = f.summary + "\n" + f.explanation
        assert f.status.value == status, f"{check}: {f.status.value}: {f.summary}"
        for needle in needles:
            assert needle in text, f"{check}: {needle!r} not in:\n{text}"
        for bad in absent:
            assert bad not in text, f"{check}: {bad!r} must not appear in:\n{text}"


@pytest.mark.parametrize(
    "name", [n for n, e in EXPECTED.items() if all(s in ("ok", "info", "skip") for s, _n, _x in e.values())]
)
def test_healthy_twins_fail_nowhere(name, registry):
    found = run(load(name), registry)
    assert not [c for c, f in found.items() if f.status in (Status.FAIL, Status.ERROR)], {
        c: f.summary for c, f in found.items() if f.status in (Status.FAIL, Status.ERROR)
    }


def test_snapshots_without_the_new_domain_still_load(registry):
    doc = json.loads((HERE / "libs-nvjitlink-shadow.json").read_text())
    del doc["domains"]["cuda_libraries"]
    del doc["domains"]["targets"]["targets"][0]["probe"]["frameworks"]
    found = run(Facts.from_json(doc), registry, ("cuda.libraries", "cuda.frameworks", "cuda.wsl"))
    assert all(f.status == Status.SKIP for f in found.values()), {c: f.summary for c, f in found.items()}


# --------------------------------------------------------------------------- the probe's framework load test


def _probe_module():
    spec = importlib.util.spec_from_file_location("gpudoctor_probe_script_fw", PROBE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_probe_framework_list_mirrors_the_data_table():
    table = {r["name"]: (tuple(r["dists"]), tuple(r["gpu_libs"])) for r in load_table("frameworks")["framework"]}
    probe = {key: (dists, libs) for key, dists, libs in _probe_module().GPU_FRAMEWORKS}
    assert probe == table


@pytest.mark.skipif(cl.gcc() is None, reason="no C compiler to build test libraries")
def test_real_dlopen_of_a_torch_free_frameworks_provider_reports_missing_cudnn(tmp_path, registry):
    site = tmp_path / "site"
    dep = tmp_path / "dep"
    cl.build_so(dep / "libcudnn.so.9", "libcudnn.so.9", "int cudnnCreate(void){return 0;}\n")
    cl.build_so(
        site / "onnxruntime/capi/libonnxruntime_providers_cuda.so",
        "libonnxruntime_providers_cuda.so",
        "int cudnnCreate(void); int provider(void){return cudnnCreate();}\n",
        link=[dep / "libcudnn.so.9"],
    )
    (dep / "libcudnn.so.9").unlink()  # the cuDNN wheel is not installed
    cl.write_dist(Path("/"), str(site), "onnxruntime_gpu", "1.19.2")
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(PROBE_SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(json.dumps(m.framework_load_test()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("LD_LIBRARY_PATH", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    records = {r["name"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])}
    ort = records["onnxruntime-gpu"]
    assert ort["version"] == "1.19.2" and len(ort["loads"]) == 1
    assert ort["loads"][0]["ok"] is False
    assert "libcudnn.so.9: cannot open shared object file" in ort["loads"][0]["error"]
    loads = tuple(from_jsonable(FrameworkLoad, r) for r in records.values())
    probe = probe_facts(torch=torch_facts(installed=False), frameworks=loads, site_packages=(str(site),))
    facts = make_facts(
        targets=targets(target(probe)),
        os=os_facts("ubuntu", "22.04", "jammy"),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts(),
    )
    f = run(facts, registry, ("cuda.frameworks",))["cuda.frameworks"]
    assert f.status == Status.FAIL and "libcudnn.so.9: cannot open" in f.summary
    assert 'pip install "nvidia-cudnn-cu12==9.*"' in f.explanation
    # healthy twin: the library is there again -> the same test loads it
    cl.build_so(dep / "libcudnn.so.9", "libcudnn.so.9", "int cudnnCreate(void){return 0;}\n")
    env["LD_LIBRARY_PATH"] = str(dep)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    ort = {r["name"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])}["onnxruntime-gpu"]
    assert ort["loads"][0]["ok"] is True


@pytest.mark.skipif(cl.gcc() is None, reason="no C compiler to build test libraries")
@pytest.mark.parametrize("driver_present", [False, True])
def test_torch_free_cudnn_diagnosis_with_the_real_loader(tmp_path, registry, driver_present):
    """Case 07's kind without torch: the wheel's libcudnn_cnn_infer.so.8 needs libcuda.so, which the
    loader cannot find -> a driver/loader problem with the WSL remedy; the twin has libcuda.so on the path."""
    site = tmp_path / "site"
    lib = site / "nvidia/cudnn/lib"
    drv = tmp_path / "wsl"
    cl.build_so(drv / "libcuda.so", "libcuda.so", "int cuInit(unsigned f){return 0;}\n")
    cl.build_so(lib / "libcudnn.so.8", "libcudnn.so.8", "unsigned long cudnnGetVersion(void){return 8907;}\n")
    for name in (
        "libcudnn_ops_infer.so.8",
        "libcudnn_ops_train.so.8",
        "libcudnn_adv_infer.so.8",
        "libcudnn_adv_train.so.8",
        "libcudnn_cnn_train.so.8",
    ):
        cl.build_so(lib / name, name, "int f(void){return 0;}\n")
    cl.build_so(
        lib / "libcudnn_cnn_infer.so.8",
        "libcudnn_cnn_infer.so.8",
        "int cuInit(unsigned f); int g(void){return cuInit(0);}\n",
        link=[drv / "libcuda.so"],
    )
    cl.write_dist(Path("/"), str(site), "nvidia_cudnn_cu11", "8.9.7.29")
    env = {k: val for k, val in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = str(site)
    if driver_present:
        env["LD_LIBRARY_PATH"] = str(drv)
    else:
        (drv / "libcuda.so").unlink()
    code = (
        "import importlib.util, json\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(PROBE_SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(json.dumps(m.probe_cudnn({'installed': False}, None, [])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    from gpudoctor.facts.targets import CudnnProbe

    cudnn = from_jsonable(CudnnProbe, json.loads(out.stdout.strip().splitlines()[-1]))
    assert cudnn.applicable and cudnn.expected_major == 8 and cudnn.runtime_version == 8907
    probe = probe_facts(torch=torch_facts(installed=False), cudnn=cudnn, env={"PATH": "/usr/bin"})
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        os=os_facts("ubuntu", "22.04", "jammy", wsl=True),
    )
    f = run(facts, registry, ("cudnn.load",))["cudnn.load"]
    if driver_present:
        assert f.status == Status.OK and "cuDNN 8.9.7" in f.summary and "all 6 sub-libraries" in f.summary
        return
    assert f.status == Status.FAIL and "driver/loader problem" in f.summary
    assert "libcuda.so: cannot open shared object file" in f.explanation
    assert "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH" in f.explanation
    assert "Reinstalling cuDNN does not help" in f.explanation and "--force-reinstall" not in f.explanation
