"""One loader model for every framework (issue 25), compared with the real loader.

A TensorFlow-like ``libtensorflow_framework.so.2`` (gcc-built stub, RUNPATH to
the wheel's ``nvidia/cudnn/lib``) opens ``libcudnn.so.8`` by name at run time
with ``dlopen``, as TensorFlow's DSO loader does. The conda environment's
``etc/conda/activate.d/env_vars.sh`` puts ``$CONDA_PREFIX/lib`` (an older
cuDNN) on ``LD_LIBRARY_PATH``. The script is sourced by a real bash, the
program runs, and ``/proc/<pid>/maps`` of that child says which copy the real
loader mapped; the model must predict the same copy, say it came from that
script, and ``cuda.libraries`` must name both versions and the script.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import _cudalibs as cl
from gpudoctor.collect.activation import replay
from gpudoctor.collect.libraries import _frameworks, family_of, model_target
from gpudoctor.engine import evaluate
from gpudoctor.facts.libraries import CudaLibrariesFacts
from gpudoctor.registry import load_registry
from gpudoctor.system import Files
from gpudoctor.testing import make_facts, nvidia_facts, nvml_device, probe_facts, target, targets, torch_facts

needs_gcc = pytest.mark.skipif(cl.gcc() is None or shutil.which("bash") is None, reason="no gcc/bash")

TF_SOURCE = (
    "#include <dlfcn.h>\n#include <stdio.h>\n"
    'int tf_load(void) { void *h = dlopen("libcudnn.so.8", RTLD_NOW | RTLD_GLOBAL);\n'
    '  if (!h) { fprintf(stderr, "%s\\n", dlerror()); return 1; } return 0; }\n'
)


def _versioned(directory: Path, version: str) -> Path:
    """``libcudnn.so.<version>`` with SONAME ``libcudnn.so.8`` and the ``libcudnn.so.8`` link to it."""
    real = cl.build_so(
        directory / f"libcudnn.so.{version}", "libcudnn.so.8", f"int cudnnGetVersion(void){{return {version[0]};}}\n"
    )
    os.symlink(real.name, directory / "libcudnn.so.8")
    return real


def _tree(tmp_path: Path, script: bool) -> dict[str, Path]:
    prefix = tmp_path / "envs" / "tf"
    (prefix / "conda-meta").mkdir(parents=True)
    site = prefix / "lib/python3.11/site-packages"
    wheel = _versioned(site / "nvidia/cudnn/lib", "8.9.7")
    conda = _versioned(prefix / "lib", "8.2.1")
    # the other libraries TF 2.16 opens by name, each in its wheel's directory (present: only cuDNN is at stake)
    others = {
        "cuda_runtime": "libcudart.so.12",
        "cublas": "libcublas.so.12",
        "cufft": "libcufft.so.11",
        "cusolver": "libcusolver.so.11",
        "cusparse": "libcusparse.so.12",
    }
    for comp, name in others.items():
        cl.build_so(site / f"nvidia/{comp}/lib/{name}", name, "int f(void){return 0;}\n")
    cl.build_so(site / "nvidia/cublas/lib/libcublasLt.so.12", "libcublasLt.so.12", "int g(void){return 0;}\n")
    tf = cl.build_so(
        site / "tensorflow/libtensorflow_framework.so.2",
        "libtensorflow_framework.so.2",
        TF_SOURCE,
        runpath=["$ORIGIN/../nvidia/cudnn/lib", *(f"$ORIGIN/../nvidia/{c}/lib" for c in others)],
    )
    cl.write_dist(Path("/"), str(site), "tensorflow", "2.16.1")
    cl.write_dist(Path("/"), str(site), "nvidia_cudnn_cu12", "8.9.7.29", ["nvidia/cudnn/lib/libcudnn.so.8"])
    app_c = tmp_path / "app.c"
    app_c.write_text(
        "#include <unistd.h>\nint tf_load(void);\n"
        'int main(void) { char b; if (tf_load()) return 3; if (write(1, "ready\\n", 6) != 6) return 9;\n'
        "  return (int)read(0, &b, 1); }\n"
    )
    app = tmp_path / "python"
    subprocess.run(
        [
            cl.gcc(),
            "-o",
            str(app),
            str(app_c),
            f"-L{tf.parent}",
            "-l:libtensorflow_framework.so.2",
            f"-Wl,-rpath,{tf.parent}",
            "-Wl,--enable-new-dtags",
        ],
        check=True,
        capture_output=True,
    )
    activate = prefix / "etc/conda/activate.d/env_vars.sh"
    if script:
        activate.parent.mkdir(parents=True)
        # the line the TF 2.16 workaround (tensorflow/tensorflow#63362) and many guides add; with LD_LIBRARY_PATH
        # unset it leaves an empty first entry, so the conda lib is entry 2
        activate.write_text("export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CONDA_PREFIX/lib/\n")
    return {"prefix": prefix, "site": site, "wheel": wheel, "conda": conda, "tf": tf, "app": app, "script": activate}


def _real_mapped(t: dict[str, Path], activated: bool) -> str:
    """Run the program the way a user does (``conda activate`` sources the script in bash); the cuDNN mapped."""
    env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(t["prefix"])}
    source = f". {t['script']} && " if activated else ""
    proc = subprocess.Popen(
        ["bash", "-c", f"{source}exec {t['app']}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read()
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
    finally:
        proc.communicate(b"x", timeout=10)
    paths = {ln.split(None, 5)[5] for ln in maps.splitlines() if len(ln.split(None, 5)) == 6}
    (cudnn,) = [p for p in paths if family_of(os.path.basename(p)) == "cudnn"]
    return os.path.realpath(cudnn)


def _model(t: dict[str, Path], kind: str = "current"):
    files = Files(Path("/"))
    probe = probe_facts(
        str(t["app"]),
        torch_facts(installed=False),
        env={"PATH": "/usr/bin:/bin"},
        site_packages=(str(t["site"]),),
        prefix=str(t["prefix"]),
        is_conda=True,
    )
    fws = _frameworks(files, "current", (str(t["site"]),))
    return probe, fws, model_target(files, "current", probe, [], fws, kind=kind)


@needs_gcc
@pytest.mark.parametrize("activated", [True, False])
def test_model_predicts_the_cudnn_a_real_dlopen_by_name_maps(tmp_path, activated):
    t = _tree(tmp_path, script=True)
    mapped = _real_mapped(t, activated)
    _probe, _fws, model = _model(t, kind="current" if activated else "kernel")  # a kernel is never activated
    (res,) = [r for r in model.resolutions if r.needed == "libcudnn.so.8"]
    assert res.how == "dlopen" and res.framework == "tensorflow" and res.consumer == str(t["tf"])
    assert os.path.realpath(res.path) == mapped
    if activated:
        assert mapped == str(t["conda"])
        assert res.path_origin == f"LD_LIBRARY_PATH entry 2, set by {t['script']}"
        assert model.activation == (str(t["script"]),)
    else:
        assert mapped == str(t["wheel"]) and res.via == "RUNPATH" and not model.activation


@needs_gcc
def test_the_activation_script_shadowing_cudnn_is_named_with_both_versions(tmp_path):
    t = _tree(tmp_path, script=True)
    probe, fws, model = _model(t)
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((model,), tuple(fws)),
    )
    registry = load_registry()
    found = {
        f.check: f for f in evaluate([registry.checks["cuda.libraries"], registry.checks["cuda.available"]], facts)
    }
    f = found["cuda.libraries"]
    text = f.summary + "\n" + f.explanation
    assert f.status.value == "fail", text
    for needle in (
        f"{t['prefix']}/lib (LD_LIBRARY_PATH entry 2, set by {t['script']}) shadows libcudnn.so.8",
        "tensorflow (dlopen) binds 8.2.1",
        "instead of 8.9.7",
        "tensorflow opens `libcudnn.so.8` by name at run time",
        f"grep -n LD_LIBRARY_PATH {t['script']}",
    ):
        assert needle in text, needle
    head = found["cuda.available"]
    assert head.status.value == "fail" and "unavailable to tensorflow 2.16.1" in head.summary
    assert "torch is not installed here, which is not a fault" in head.explanation


@needs_gcc
def test_healthy_twin_without_the_script_resolves_the_wheels_cudnn(tmp_path):
    t = _tree(tmp_path, script=False)
    assert _real_mapped(t, activated=False) == str(t["wheel"])
    probe, fws, model = _model(t)
    (res,) = [r for r in model.resolutions if r.needed == "libcudnn.so.8"]
    assert os.path.realpath(res.path) == str(t["wheel"]) and res.path_origin == ""
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((model,), tuple(fws)),
    )
    (f,) = evaluate([load_registry().checks["cuda.libraries"]], facts)
    assert f.status.value == "ok", f.summary


@needs_gcc
def test_missing_cudnn_opened_by_name_is_found_nowhere(tmp_path):
    """Neighbour: neither the wheel nor the conda copy exists -> the real dlopen fails, the model says not found."""
    t = _tree(tmp_path, script=False)
    for p in (t["wheel"], t["conda"]):
        p.unlink()
        (p.parent / "libcudnn.so.8").unlink()
    proc = subprocess.run([str(t["app"])], capture_output=True, text=True, input="x", env={"PATH": "/usr/bin"})
    assert proc.returncode == 3 and "libcudnn.so.8: cannot open shared object file" in proc.stderr
    probe, fws, model = _model(t)
    (res,) = [r for r in model.resolutions if r.needed == "libcudnn.so.8"]
    assert res.path is None and res.via == "not found"
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((model,), tuple(fws)),
    )
    (f,) = evaluate([load_registry().checks["cuda.libraries"]], facts)
    assert f.status.value == "fail"
    assert "libcudnn.so.8, needed by tensorflow (dlopen by name), is found nowhere" in f.summary


# --------------------------------------------------------------------------- the activation replay itself


@pytest.mark.parametrize(
    "line,env_llp,expect",
    [
        ("export LD_LIBRARY_PATH=$CONDA_PREFIX/lib:$LD_LIBRARY_PATH", "/a", ["/env/lib", "/a"]),
        ('export LD_LIBRARY_PATH="${CONDA_PREFIX}/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"', "", ["/env/lib"]),
        (
            'CUDNN_PATH=$(dirname $(python -c "import nvidia.cudnn;print(nvidia.cudnn.__file__)"))\n'
            "export LD_LIBRARY_PATH=$CUDNN_PATH/lib:$CONDA_PREFIX/lib/:$LD_LIBRARY_PATH",
            "",
            ["/env/site/nvidia/cudnn/lib", "/env/lib/", ""],  # the empty tail entry is real: ld.so reads "."
        ),
        ("export LD_LIBRARY_PATH=$(some-command):$LD_LIBRARY_PATH", "/a", None),  # unknown value: not invented
    ],
)
def test_activation_replay(tmp_path, line, env_llp, expect):
    root = tmp_path / "root"
    script = root / "env/etc/conda/activate.d/env_vars.sh"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n" + line + "\n")
    files = Files(root)
    act = replay(files, "/env", {"LD_LIBRARY_PATH": env_llp}, "/env/site", already_active=False)
    if expect is None:
        assert act is None
        return
    assert act is not None and list(act.ld_library_path) == expect
    assert act.origins[0] == "/env/etc/conda/activate.d/env_vars.sh"
    assert act.scripts == ("/env/etc/conda/activate.d/env_vars.sh",)


# --------------------------------------------------------------------------- installed but not searched (ORT's kind)


@needs_gcc
@pytest.mark.parametrize("on_path", [False, True])
def test_a_wheel_copy_outside_every_searched_directory_is_named_with_the_way_to_reach_it(tmp_path, on_path):
    """microsoft/onnxruntime#25609's kind: nvidia-cudnn-cu12 is installed, but the CUDA provider has no RUNPATH to
    it, so the real dlopen fails and the model says the copy exists where the loader does not look; the twin puts
    the wheel's directory on LD_LIBRARY_PATH and both the real loader and the model find it."""
    site = tmp_path / "site"
    wheel = site / "nvidia/cudnn/lib"
    cl.build_so(wheel / "libcudnn.so.9", "libcudnn.so.9", "int cudnnCreate(void){return 0;}\n")
    provider = cl.build_so(
        site / "onnxruntime/capi/libonnxruntime_providers_cuda.so",
        "libonnxruntime_providers_cuda.so",
        "int cudnnCreate(void); int provider(void){return cudnnCreate();}\n",
        link=[wheel / "libcudnn.so.9"],
    )
    cl.write_dist(Path("/"), str(site), "onnxruntime_gpu", "1.22.0")
    cl.write_dist(Path("/"), str(site), "nvidia_cudnn_cu12", "9.5.1.17", ["nvidia/cudnn/lib/libcudnn.so.9"])
    env = {"PATH": "/usr/bin:/bin"} | ({"LD_LIBRARY_PATH": str(wheel)} if on_path else {})
    code = f"import ctypes; ctypes.CDLL({str(provider)!r}, mode=ctypes.RTLD_GLOBAL); print('loaded')"
    real = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env)
    files = Files(Path("/"))
    probe = probe_facts(str(tmp_path / "bin/python"), torch_facts(installed=False), env=env, site_packages=(str(site),))
    fws = _frameworks(files, "current", (str(site),))
    model = model_target(files, "current", probe, [], fws)
    (res,) = [r for r in model.resolutions if r.needed == "libcudnn.so.9"]
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((model,), tuple(fws)),
    )
    (f,) = evaluate([load_registry().checks["cuda.libraries"]], facts)
    if on_path:
        assert real.stdout.strip() == "loaded" and res.path == str(wheel / "libcudnn.so.9")
        assert f.status.value == "ok", f.summary
        return
    assert "libcudnn.so.9: cannot open shared object file" in real.stderr and res.path is None
    assert f.status.value == "fail"
    assert f.summary == (
        f"libcudnn.so.9 9.5.1.17 is installed in {wheel} (wheel), but onnxruntime-gpu does not search there"
    )
    assert f"export LD_LIBRARY_PATH={wheel}" in f.explanation and "onnxruntime.preload_dlls()" in f.explanation
    assert "pip install" not in f.explanation


@needs_gcc
@pytest.mark.parametrize("on_path", [False, True])
def test_cupy_opens_nvrtc_by_name_from_python(tmp_path, on_path):
    """AInseven/ComfyUI-fastblend#5's kind: torch's nvidia-cuda-nvrtc-cu12 wheel holds libnvrtc.so.12, CuPy opens
    it by name from Python (ctypes), which searches no wheel directory: the real ctypes load and the model agree;
    the twin has the directory on LD_LIBRARY_PATH."""
    site = tmp_path / "site"
    lib = site / "nvidia/cuda_nvrtc/lib"
    cl.build_so(lib / "libnvrtc.so.12", "libnvrtc.so.12", "int nvrtcVersion(int *a, int *b){*a=12;*b=1;return 0;}\n")
    cl.write_dist(Path("/"), str(site), "cupy_cuda12x", "13.0.0")
    cl.write_dist(Path("/"), str(site), "nvidia_cuda_nvrtc_cu12", "12.1.105", ["nvidia/cuda_nvrtc/lib/libnvrtc.so.12"])
    env = {"PATH": "/usr/bin:/bin"} | ({"LD_LIBRARY_PATH": str(lib)} if on_path else {})
    real = subprocess.run(
        ["python3", "-c", "import ctypes; ctypes.CDLL('libnvrtc.so.12'); print('loaded')"],
        capture_output=True,
        text=True,
        env=env,
    )
    files = Files(Path("/"))
    probe = probe_facts(str(tmp_path / "bin/python"), torch_facts(installed=False), env=env, site_packages=(str(site),))
    fws = _frameworks(files, "current", (str(site),))
    model = model_target(files, "current", probe, [], fws)
    (res,) = [r for r in model.resolutions if r.needed == "libnvrtc.so.12"]
    assert res.how == "dlopen" and res.consumer == "dlopen" and res.framework == "cupy"
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((model,), tuple(fws)),
    )
    (f,) = evaluate([load_registry().checks["cuda.libraries"]], facts)
    if on_path:
        assert real.stdout.strip() == "loaded" and res.path == str(lib / "libnvrtc.so.12")
        assert f.status.value == "ok", f.summary
        return
    assert "libnvrtc.so.12: cannot open shared object file" in real.stderr and res.path is None
    assert f.summary == f"libnvrtc.so.12 12.1.105 is installed in {lib} (wheel), but cupy does not search there"
    assert "`dlopen` from Python" in f.explanation and f"export LD_LIBRARY_PATH={lib}" in f.explanation


def test_an_unknown_cuda_package_is_reported_as_unknown_not_broken(tmp_path):
    """mxnet-cu112 has no row in the frameworks table: it is listed as a framework of unknown needs (never broken,
    never judged); tensorrt-cu12 beside tensorrt-cu12-libs is the same framework, not an unknown one."""
    site = tmp_path / "site"
    for dist, version in (("mxnet_cu112", "1.9.1"), ("tensorrt_cu12", "10.0.1"), ("tensorrt_cu12_libs", "10.0.1")):
        cl.write_dist(Path("/"), str(site), dist, version)
    fws = {f.dist: f for f in _frameworks(Files(Path("/")), "current", (str(site),))}
    assert set(fws) == {"mxnet-cu112", "tensorrt-cu12-libs"}
    assert fws["mxnet-cu112"].known is False and fws["mxnet-cu112"].cuda_major == 11
    assert fws["tensorrt-cu12-libs"].known is True
    probe = probe_facts(str(tmp_path / "bin/python"), torch_facts(installed=False), site_packages=(str(site),))
    from gpudoctor.facts.targets import CudaDriverDevice, CudaDriverProbe

    drv = CudaDriverProbe(True, None, True, None, 12040, 1, (CudaDriverDevice(0, "NVIDIA L4", context_ok=True),))
    probe = replace(probe, cuda_driver=drv)
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((), (fws["mxnet-cu112"],)),
    )
    (head,) = evaluate([load_registry().checks["cuda.available"]], facts)
    assert head.status.value == "ok" and "not modelled: mxnet-cu112 1.9.1" in head.summary


# --------------------------------------------------------------------------- CTranslate2 and PaddlePaddle ([[load]] rows)

CT2_SOURCE = (
    "#include <dlfcn.h>\n#include <stdio.h>\n"
    "const char *ct2_load(void) {{ static char err[512]; const char *names[] = {{{names}}};\n"
    "  for (int i = 0; i < {count}; i++) if (!dlopen(names[i], RTLD_NOW | RTLD_GLOBAL)) {{\n"
    '    snprintf(err, sizeof err, "%s", dlerror()); return err; }}\n'
    '  return "loaded"; }}\n'
)


#: what CTranslate2 4.0-4.4 opens by name (frameworks.toml [[load]])
CT2_44 = ("libcublas.so.12", "libcudnn_ops_infer.so.8", "libcudnn_cnn_infer.so.8")


def _ct2_tree(tmp_path: Path, version: str, cudnn: str, names: tuple[str, ...]) -> dict[str, Path]:
    """A ctranslate2 wheel (its library auditwheel-renamed with a hash, RUNPATH $ORIGIN, opening ``names`` by
    SONAME as its CUDA_DYNAMIC_LOADING cuBLAS and its cuDNN code do) beside the nvidia-cublas-cu12 and
    nvidia-cudnn-cu12 wheels (cuDNN 8: libcudnn_ops_infer/cnn_infer; cuDNN 9: libcudnn_ops/cnn)."""
    site = tmp_path / "site"
    cublas = cl.build_so(
        site / "nvidia/cublas/lib/libcublas.so.12", "libcublas.so.12", "int cublasCreate_v2(void){return 0;}\n"
    )
    major = cudnn.split(".")[0]
    subs = ("libcudnn_ops_infer", "libcudnn_cnn_infer") if major == "8" else ("libcudnn_ops", "libcudnn_cnn")
    cudnn_dir = site / "nvidia/cudnn/lib"
    for stem in ("libcudnn", *subs):
        cl.build_so(cudnn_dir / f"{stem}.so.{major}", f"{stem}.so.{major}", "int f(void){return 0;}\n")
    ct2 = cl.build_so(
        site / "ctranslate2.libs/libctranslate2-d2f4e1b7.so.4.4.0",
        "libctranslate2-d2f4e1b7.so.4.4.0",
        CT2_SOURCE.format(names=", ".join(f'"{n}"' for n in names), count=len(names)),
        runpath=["$ORIGIN"],
    )
    cl.write_dist(Path("/"), str(site), "ctranslate2", version)
    cl.write_dist(Path("/"), str(site), "nvidia_cublas_cu12", "12.4.5.8", ["nvidia/cublas/lib/libcublas.so.12"])
    cl.write_dist(
        Path("/"),
        str(site),
        "nvidia_cudnn_cu12",
        cudnn,
        [f"nvidia/cudnn/lib/{stem}.so.{major}" for stem in ("libcudnn", *subs)],
    )
    return {"site": site, "cublas": cublas.parent, "cudnn": cudnn_dir, "ct2": ct2}


def _judge(tmp_path: Path, site: Path, env: dict[str, str]):
    files = Files(Path("/"))
    probe = probe_facts(str(tmp_path / "bin/python"), torch_facts(installed=False), env=env, site_packages=(str(site),))
    fws = _frameworks(files, "current", (str(site),))
    model = model_target(files, "current", probe, [], fws)
    facts = make_facts(
        targets=targets(target(probe)),
        nvidia=nvidia_facts(devices=[nvml_device()]),
        cuda_libraries=CudaLibrariesFacts((model,), tuple(fws)),
    )
    (f,) = evaluate([load_registry().checks["cuda.libraries"]], facts)
    return model, f


def _real_ct2(lib: Path, env: dict[str, str]) -> str:
    code = f"import ctypes; f = ctypes.CDLL({str(lib)!r}).ct2_load; f.restype = ctypes.c_char_p; print(f().decode())"
    return subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env).stdout.strip()


@needs_gcc
@pytest.mark.parametrize("on_path", [True, False])
def test_ctranslate2_opens_cublas_and_cudnn_by_name_from_its_hashed_library(tmp_path, on_path):
    """SYSTRAN/faster-whisper's kind: CTranslate2 4.4 opens libcublas.so.12 and cuDNN 8's sub-libraries by SONAME from
    ctranslate2.libs/libctranslate2-<hash>.so; the nvidia wheels are found only through LD_LIBRARY_PATH (the
    faster-whisper README's line). The real dlopen and the model agree, with the path set (twin) and without."""
    t = _ct2_tree(tmp_path, "4.4.0", "8.9.7.29", CT2_44)
    env = {"PATH": "/usr/bin:/bin"} | ({"LD_LIBRARY_PATH": f"{t['cublas']}:{t['cudnn']}"} if on_path else {})
    real = _real_ct2(t["ct2"], env)
    model, f = _judge(tmp_path, t["site"], env)
    got = {r.needed: r for r in model.resolutions if r.framework == "ctranslate2"}
    assert set(got) == set(CT2_44)
    assert all(r.how == "dlopen" and r.consumer == str(t["ct2"]) for r in got.values())
    if on_path:
        assert real == "loaded" and got["libcudnn_ops_infer.so.8"].path == str(t["cudnn"] / "libcudnn_ops_infer.so.8")
        assert f.status.value == "ok", f.summary
        return
    assert real == "libcublas.so.12: cannot open shared object file: No such file or directory"
    assert all(r.path is None for r in got.values())
    assert f.status.value == "fail"
    assert (
        f.summary
        == f"libcublas.so.12 12.4.5.8 is installed in {t['cublas']} (wheel), but ctranslate2 does not search there"
    )


@needs_gcc
def test_ctranslate2_4_4_with_only_cudnn_9_names_the_major_and_both_ways_out(tmp_path):
    """Neighbour, the wrong major (SYSTRAN/faster-whisper#885, OpenNMT/CTranslate2#1826): cuDNN 9 is installed and on
    LD_LIBRARY_PATH, CTranslate2 4.4 opens libcudnn_ops_infer.so.8: the real dlopen fails, the model finds no copy, and the
    remedy pins cuDNN 8 or moves CTranslate2 to 4.5 (cuDNN 9) instead of reinstalling the cuDNN 9 wheel."""
    t = _ct2_tree(tmp_path, "4.4.0", "9.1.0.70", CT2_44)
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f"{t['cublas']}:{t['cudnn']}"}
    assert _real_ct2(t["ct2"], env) == (
        "libcudnn_ops_infer.so.8: cannot open shared object file: No such file or directory"
    )
    model, f = _judge(tmp_path, t["site"], env)
    (res,) = [r for r in model.resolutions if r.needed == "libcudnn_ops_infer.so.8"]
    assert res.path is None and res.framework == "ctranslate2"
    text = f.summary + "\n" + f.explanation
    assert f.status.value == "fail" and "libcudnn_ops_infer.so.8, needed by ctranslate2 (dlopen by name)" in f.summary
    assert f"libcudnn.so.9 (cuDNN 9) is here ({t['cudnn']}/libcudnn.so.9)" in text
    assert "nvidia-cudnn-cu12==8.*" in text and "`ctranslate2>=4.5`" in text
    twin = _ct2_tree(
        tmp_path / "twin", "4.5.0", "9.1.0.70", ("libcublas.so.12", "libcudnn_ops.so.9", "libcudnn_cnn.so.9")
    )
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f"{twin['cublas']}:{twin['cudnn']}"}
    assert _real_ct2(twin["ct2"], env) == "loaded"
    assert _judge(tmp_path, twin["site"], env)[1].status.value == "ok"


@needs_gcc
@pytest.mark.parametrize("dev_link", [False, True])
def test_paddle_opens_the_unversioned_cudnn_name(tmp_path, dev_link):
    """PaddlePaddle 2.5 (built without WITH_PIP_CUDA_LIBRARIES) opens `libcudnn.so`, the development name that
    only the -dev package or the cuDNN tarball creates: with libcudnn.so.8 alone on the path the real dlopen fails
    and the model says so, naming the versioned copy and the link to make; the twin has the link."""
    site = tmp_path / "site"
    cuda = tmp_path / "usr/local/cuda/lib64"
    for name in ("libcudnn.so.8", "libcublas.so.11", "libcublasLt.so.11", "libcurand.so.10"):
        real = cl.build_so(cuda / f"{name}.0", name, "int f(void){return 0;}\n")
        os.symlink(real.name, cuda / name)
        stem = name.split(".so")[0] + ".so"
        if stem != "libcudnn.so" or dev_link:
            os.symlink(name, cuda / stem)
    name = "libpaddle.so" if dev_link else "core_avx.so"  # 2.4+ and 2.0-2.3 layouts
    paddle = cl.build_so(
        site / f"paddle/fluid/{name}",
        name,
        CT2_SOURCE.replace("ct2_load", "paddle_load").format(
            names='"libcudnn.so", "libcublas.so", "libcublasLt.so", "libcurand.so"', count=4
        ),
        runpath=["$ORIGIN/../libs"],
    )
    cl.write_dist(Path("/"), str(site), "paddlepaddle_gpu", "2.5.2.post117" if dev_link else "2.2.2.post110")
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(cuda)}
    code = (
        f"import ctypes; f = ctypes.CDLL({str(paddle)!r}).paddle_load; f.restype = ctypes.c_char_p; print(f().decode())"
    )
    real = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env).stdout.strip()
    model, f = _judge(tmp_path, site, env)
    (res,) = [r for r in model.resolutions if r.needed == "libcudnn.so"]
    assert res.how == "dlopen" and res.framework == "paddlepaddle-gpu" and res.consumer == str(paddle)
    if dev_link:
        assert real == "loaded" and res.path == str(cuda / "libcudnn.so")
        assert f.status.value == "ok", f.summary
        return
    assert real == "libcudnn.so: cannot open shared object file: No such file or directory" and res.path is None
    text = f.summary + "\n" + f.explanation
    assert f.status.value == "fail" and "libcudnn.so, needed by paddlepaddle-gpu (dlopen by name)" in f.summary
    assert f"Only the versioned libcudnn.so.8 is here ({cuda}/libcudnn.so.8)" in text
    assert f"ln -s libcudnn.so.8 {cuda}/libcudnn.so" in text and "FLAGS_cudnn_dir" in text


@needs_gcc
def test_the_cudnn_downgrade_is_not_offered_when_torch_beside_needs_cudnn_9(tmp_path):
    """The classic faster-whisper + torch 2.4+ environment (OpenNMT/CTranslate2#1826): torch needs the cuDNN 9 wheel,
    so the remedy moves CTranslate2 to 4.5 and says why the cuDNN wheel stays; it never pins the wheel back to 8."""
    t = _ct2_tree(tmp_path, "4.4.0", "9.1.0.70", CT2_44)
    cl.write_dist(Path("/"), str(t["site"]), "torch", "2.5.1")
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f"{t['cublas']}:{t['cudnn']}"}
    _model, f = _judge(tmp_path, t["site"], env)
    text = f.summary + "\n" + f.explanation
    assert "`ctranslate2>=4.5`" in text and "torch 2.5.1 here needs cuDNN 9" in text
    assert "==8.*" not in text


@needs_gcc
@pytest.mark.parametrize("toolkit_first", [True, False])
def test_ctranslate2_cublas_shadowed_by_an_older_toolkit_on_ld_library_path(tmp_path, toolkit_first):
    """Neighbour, shadowed: a CUDA 12.1 toolkit directory before the wheel's on LD_LIBRARY_PATH gives CTranslate2's
    dlopen the older cuBLAS (the real process binds the copy whose cublasCreate_v2 returns 1); the model names the
    directory, both versions and the wheel's copy. Twin: the wheel's directory first."""
    t = _ct2_tree(tmp_path, "4.4.0", "8.9.7.29", CT2_44)
    old = tmp_path / "usr/local/cuda-12.1/lib64"
    real = cl.build_so(old / "libcublas.so.12.1.3.1", "libcublas.so.12", "int cublasCreate_v2(void){return 1;}\n")
    os.symlink(real.name, old / "libcublas.so.12")
    dirs = [str(old), str(t["cublas"])] if toolkit_first else [str(t["cublas"]), str(old)]
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ":".join([*dirs, str(t["cudnn"])])}
    code = (
        f"import ctypes; f = ctypes.CDLL({str(t['ct2'])!r}).ct2_load; f.restype = ctypes.c_char_p; "
        "assert f() == b'loaded'; print(ctypes.CDLL('libcublas.so.12').cublasCreate_v2())"
    )
    bound = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env).stdout.strip()
    model, f = _judge(tmp_path, t["site"], env)
    (res,) = [r for r in model.resolutions if r.needed == "libcublas.so.12"]
    if not toolkit_first:
        assert bound == "0" and res.path == str(t["cublas"] / "libcublas.so.12")
        assert f.status.value == "ok", f.summary
        return
    assert bound == "1" and res.path == str(old / "libcublas.so.12")
    assert f.status.value == "fail"
    assert f.summary == (
        f"{old} (LD_LIBRARY_PATH entry 1, from the process environment) shadows libcublas.so.12: ctranslate2 (dlopen) "
        f"binds 12.1.3.1 from there instead of 12.4.5.8 from {t['cublas']}"
    )


@needs_gcc
@pytest.mark.parametrize("shipped", [True, False])
def test_tensorrt_opens_its_builder_resource_by_its_full_release(tmp_path, shipped):
    """NVIDIA/TensorRT#3983's kind: libnvinfer.so.10 opens libnvinfer_builder_resource.so.<X.Y.Z> by name when a
    builder is made; the 10.2.0 wheel lacked the file. The real dlopen and the model agree; the twin ships it."""
    site = tmp_path / "site"
    libs = site / "tensorrt_libs"
    if shipped:
        cl.build_so(libs / "libnvinfer_builder_resource.so.10.2.0", "libnvinfer_builder_resource.so.10.2.0", "int r;\n")
    nvinfer = cl.build_so(
        libs / "libnvinfer.so.10",
        "libnvinfer.so.10",
        CT2_SOURCE.replace("ct2_load", "trt_load").format(names='"libnvinfer_builder_resource.so.10.2.0"', count=1),
        runpath=["$ORIGIN"],
    )
    cl.write_dist(Path("/"), str(site), "tensorrt_cu12_libs", "10.2.0")
    env = {"PATH": "/usr/bin:/bin"}
    code = (
        f"import ctypes; f = ctypes.CDLL({str(nvinfer)!r}).trt_load; f.restype = ctypes.c_char_p; print(f().decode())"
    )
    real = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env).stdout.strip()
    model, f = _judge(tmp_path, site, env)
    (res,) = [r for r in model.resolutions if r.needed == "libnvinfer_builder_resource.so.10.2.0"]
    assert res.how == "dlopen" and res.framework == "tensorrt" and res.consumer == str(nvinfer)
    if shipped:
        assert real == "loaded" and res.path == str(libs / "libnvinfer_builder_resource.so.10.2.0")
        assert f.status.value == "ok", f.summary
        return
    assert real.startswith("libnvinfer_builder_resource.so.10.2.0: cannot open shared object file") and res.path is None
    assert f.status.value == "fail"
    assert "libnvinfer_builder_resource.so.10.2.0, needed by tensorrt (dlopen by name), is found nowhere" in f.summary
    assert "pip install -U tensorrt-cu12-libs" in f.explanation and "10.2.0.post1" in f.explanation
