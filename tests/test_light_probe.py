"""The light probe (no framework import) agrees with the full probe on every fact both collect.

Real child processes: the real torch installed here, and a fake CUDA build of torch
(version.py + dist-info + a torch.cuda asking the driver) with a gcc-built fake
libcuda.so.1 and cuDNN on the loader path.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from dataclasses import asdict

import pytest

from _fakecuda import GccMissing, build_fake_cuda
from gpudoctor.facts import Unavailable
from gpudoctor.probe import parse_probe_output, probe_argv

TORCH_FIELDS = (
    "installed",
    "dist_version",
    "version",
    "cuda",
    "hip",
    "cuda_available",
    "device_count",
    "devices",
    "driver_api_version",
)
HEADER_FIELDS = (
    "probe_version",
    "executable",
    "python_version",
    "implementation",
    "prefix",
    "base_prefix",
    "is_venv",
    "is_conda",
    "include_dir",
    "env",
    "site_packages",
    "distributions",
    "libcuda",
    "cuda_driver",
)


def _run(level, env):
    proc = subprocess.run(probe_argv(sys.executable, level), capture_output=True, text=True, env=env, timeout=120)
    return parse_probe_output(proc.stdout)


def _both(env):
    return _run("light", env), _run("full", env)


def _real(p):
    return os.path.realpath(p) if p else p


def assert_agree(light, full):
    assert light.level == "light" and full.level == "full"
    assert light.torch.import_tried is False and full.torch.import_tried is True
    for name in HEADER_FIELDS:
        assert getattr(light, name) == getattr(full, name), name
    for name in TORCH_FIELDS:
        assert getattr(light.torch, name) == getattr(full.torch, name), name
    assert _real(light.torch.location) == _real(full.torch.location)
    lc, fc = light.cudnn, full.cudnn
    assert not isinstance(lc, Unavailable) and not isinstance(fc, Unavailable)
    assert lc.applicable == fc.applicable
    if fc.applicable:
        assert lc.expected_major == fc.expected_major
        assert _real(lc.library_path) == _real(fc.library_path)
        assert lc.runtime_version == fc.runtime_version
        assert [(s.name, s.ok, _real(s.path)) for s in lc.sublibraries] == [
            (s.name, s.ok, _real(s.path)) for s in fc.sublibraries
        ]
    # what only an import can tell is reported as not known, never guessed
    assert isinstance(light.mapped_libraries, Unavailable) and isinstance(light.triton, Unavailable)


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    try:
        return build_fake_cuda(tmp_path_factory.mktemp("fakecuda"))
    except GccMissing:
        pytest.skip("gcc is not installed: cannot build the fake libcuda.so.1")


def _fake_env(fake, **extra):
    site, libdir = fake
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUDA")}
    env.update(PYTHONPATH=str(site), LD_LIBRARY_PATH=str(libdir), **extra)
    return env


def test_real_torch_here_light_and_full_agree():
    pytest.importorskip("torch")
    env = dict(os.environ)
    light, full = _both(env)
    assert light.torch.installed and light.torch.version == full.torch.version
    assert_agree(light, full)


def test_fake_cuda_torch_two_gpus_agree_and_carry_the_driver_api(fake):
    light, full = _both(_fake_env(fake, FAKE_CUDA_COUNT="2", FAKE_CUDA_CC="9.0", FAKE_CUDA_MEM_MIB="81559"))
    assert_agree(light, full)
    assert light.torch.cuda == "12.4" and light.torch.cuda_available and light.torch.device_count == 2
    assert [d.capability for d in light.torch.devices] == ["9.0", "9.0"]
    drv = light.cuda_driver
    assert drv.init_ok and drv.driver_api_version == 12040
    assert [(d.total_memory_mib, d.context_ok) for d in drv.devices] == [(81559, True), (81559, True)]
    assert light.cudnn.runtime_version == 90100 and all(s.ok for s in light.cudnn.sublibraries)


@pytest.mark.parametrize(
    "extra,available",
    [
        ({"FAKE_CUDA_INIT_RC": "100"}, False),  # cuInit: no device
        ({"FAKE_CUDA_DRIVER": "11080"}, False),  # driver older than the CUDA 12 runtime
        ({"FAKE_CUDA_COUNT": "0"}, False),
        ({"FAKE_CUDA_CTX_FAIL": "1", "FAKE_CUDA_COUNT": "3"}, True),
    ],
)
def test_fake_cuda_faults_light_and_full_agree(fake, extra, available):
    light, full = _both(_fake_env(fake, **extra))
    assert_agree(light, full)
    assert light.torch.cuda_available is available
    if extra.get("FAKE_CUDA_INIT_RC") == "100":
        assert "CUDA_ERROR_NO_DEVICE" in light.cuda_driver.init_error
        assert "CUDA_ERROR_NO_DEVICE" in light.torch.cuda_error
    if "FAKE_CUDA_CTX_FAIL" in extra:
        assert [d.context_ok for d in light.cuda_driver.devices] == [True, False, True]
        assert "CUDA_ERROR_UNKNOWN" in light.cuda_driver.devices[1].context_error


def test_missing_cudnn_sublibrary_is_seen_by_both(fake, tmp_path):
    import shutil

    site, libdir = fake
    broken = tmp_path / "site"
    shutil.copytree(site, broken, symlinks=True)
    (broken / "nvidia" / "cudnn" / "lib" / "libcudnn_cnn.so.9").unlink()
    light, full = _both(_fake_env((broken, libdir)))
    assert_agree(light, full)
    bad = [s.name for s in light.cudnn.sublibraries if not s.ok]
    assert bad == ["libcudnn_cnn.so.9"]


def test_no_libcuda_on_a_cuda_build(fake, tmp_path):
    site, _libdir = fake
    empty = tmp_path / "nolib"
    empty.mkdir()
    light, full = _both(_fake_env((site, empty)))
    assert_agree(light, full)
    assert not light.libcuda.loaded and not light.torch.cuda_available and light.torch.device_count == 0


def test_light_probe_never_imports_a_framework(fake, tmp_path):
    """A torch whose import would crash the process does not disturb the light probe."""
    import shutil

    site, libdir = fake
    poisoned = tmp_path / "site"
    shutil.copytree(site, poisoned, symlinks=True)
    (poisoned / "torch" / "__init__.py").write_text("import os\nos._exit(42)\n")
    light = _run("light", _fake_env((poisoned, libdir)))
    assert light.torch.version == "2.4.0+cu124" and light.torch.cuda_available
    assert asdict(light)["torch"]["import_ok"] is False  # not tried, so not claimed


def test_checks_declare_levels_and_the_engine_runs_the_cheapest(fake):
    from gpudoctor import engine
    from gpudoctor.collect import CollectOptions
    from gpudoctor.registry import load_registry
    from gpudoctor.system import System

    checks = load_registry().checks
    light_ids = ["torch.install", "cuda.driver", "cuda.libcuda", "cuda.context", "cudnn.load"]
    assert engine.probe_level([checks[i] for i in light_ids]) == "light"
    assert engine.probe_level([checks["cuda.driver"], checks["torch.compile"]]) == "full"
    assert engine.probe_level([checks["dataloader.shm"]]) == "light"  # reads no target

    site, libdir = fake
    env = _fake_env(fake)
    system = System.live()
    system = dataclasses.replace(system, env=env)
    for ids, level in ((["torch.install", "cuda.context"], "light"), (["torch.install", "torch.compile"], "full")):
        report = engine.run([checks[i] for i in ids], system, CollectOptions(offline=True, kernels=False))
        probe = report.facts.get("targets").targets[0].probe
        assert probe.level == level, (ids, probe)
        assert probe.torch.version == "2.4.0+cu124"  # the fake torch, through PYTHONPATH in the target's env
    # --deep pins the full probe even for a light selection
    report = engine.run(
        [checks["torch.install"]],
        system,
        CollectOptions(offline=True, kernels=False, probe_level="full", probe_level_fixed=True),
    )
    assert report.facts.get("targets").targets[0].probe.level == "full"
