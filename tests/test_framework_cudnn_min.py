"""A framework's cuDNN older than the one it was built against (issue 25): TensorFlow's "Loaded runtime CuDNN
library: 8.2.1 but source was compiled with: 8.9" kind, judged by ``cuda.frameworks`` and the headline even when
no better copy exists on the machine (``cuda.libraries`` has nothing to swap in); twin and a JAX neighbour."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from gpudoctor.engine import evaluate
from gpudoctor.model import Status
from gpudoctor.registry import load_registry

_spec = importlib.util.spec_from_file_location(
    "fwfix", Path(__file__).resolve().parent / "fixtures" / "facts" / "frameworks" / "make_fixtures.py"
)
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)
lf = fx.lf
SYS = "/usr/lib/x86_64-linux-gnu"


def facts_with(key: str, dist: str, version: str, cudnn_min: str, major: int, have: str):
    root = f"{fx.SITE}/{key}/x.so"
    fw = replace(fx.install((key, dist, version, 12, None, major, root)), cudnn_min=cudnn_min)
    path = f"{SYS}/libcudnn.so.{major}"
    res = replace(lf.res(root, path, "ld.so cache"), framework=key, how="dlopen")
    model = lf.model([f"{key}:{root}"], [lf.copy(path, "ld.so cache", have)], [res])
    return lf.base(targets=fx.targets(fx.target(fx.probe(None))), cuda_libraries=lf.libs_facts(model, [fw]))


def run(facts):
    reg = load_registry()
    ids = ("cuda.frameworks", "cuda.libraries", "cuda.available")
    return {f.check: f for f in evaluate([reg.checks[i] for i in ids], facts)}


@pytest.mark.parametrize(
    "key,dist,version,minimum,major,have,bad",
    [
        ("tensorflow", "tensorflow", "2.16.1", "8.9", 8, "8.2.1", True),
        ("tensorflow", "tensorflow", "2.16.1", "8.9", 8, "8.9.7", False),  # twin
        ("jax", "jax-cuda12-plugin", "0.4.35", "9.1", 9, "9.0.0", True),  # neighbour
        ("jax", "jax-cuda12-plugin", "0.4.35", "9.1", 9, "9.5.1", False),
    ],
)
def test_cudnn_older_than_the_build(key, dist, version, minimum, major, have, bad):
    found = run(facts_with(key, dist, version, minimum, major, have))
    fwk, libs, head = found["cuda.frameworks"], found["cuda.libraries"], found["cuda.available"]
    assert libs.status is Status.OK  # one copy only: nothing shadows it
    if not bad:
        assert fwk.status is Status.OK and head.status is Status.OK, (fwk.summary, head.summary)
        return
    assert fwk.status is Status.FAIL
    assert fwk.summary == f"{dist} {version} was built against cuDNN {minimum} but loads cuDNN {have} from {SYS}"
    assert f'"nvidia-cudnn-cu12>={minimum},<{major + 1}"' in fwk.explanation
    assert head.status is Status.FAIL and f"built against cuDNN {minimum} but loads cuDNN {have}" in head.summary
