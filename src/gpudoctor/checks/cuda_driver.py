"""Check ``cuda.driver``: is the NVIDIA driver new enough for the CUDA runtime
inside each target's torch build?

Rules (NVIDIA CUDA Toolkit Release Notes, Tables 2 and 3; CUDA Compatibility
guide): a torch built for CUDA X.Y runs fully on a driver >= the X.Y toolkit
driver, and through minor-version compatibility on a driver >= the floor of
major X; below the floor ``torch.cuda.is_available()`` is False ("The NVIDIA
driver on your system is too old"). Forward compatibility (cuda-compat) is
offered only when every GPU is a data-center/Jetson part that supports it.

- driver below the floor -> ``fail`` naming both versions, the minimum driver,
  and two remedies (upgrade the driver; or the exact ``pip install ...
  --index-url`` of a torch build for a CUDA the driver supports);
- driver between floor and toolkit driver -> ``ok`` (minor-version compatibility noted);
- CPU/ROCm build, no driver, torch not importable -> ``skip`` with the reason.

The same rule holds for every framework that brings its own CUDA runtime (JAX, TensorFlow, CuPy,
ONNX Runtime, PaddlePaddle, ...): the ``cuda_libraries`` domain names each GPU framework of a
target and the CUDA major its build needs, and the target's ``nvidia-cuda-runtime`` /
``nvidia-cuda-nvcc`` / ``nvidia-cuda-nvrtc`` wheels (``cuda_wheels``) give the CUDA minor it
runs (JAX compiles PTX with the wheel's ``ptxas``, so an older driver cannot load that PTX). One
finding per such framework, judged like torch; a framework whose CUDA major is unknown is left
out. The domains are read when the run collected them (``gpudoctor check`` does; the gate's
light run does not, and then only torch is judged).
"""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.checks import require
from gpudoctor.checks._common import (
    UPGRADE_HOWTO,
    driver_install_commands,
    driver_version,
    install_command,
    pip_install_command,
    split_local,
)
from gpudoctor.checks._gpu import (
    DriverVerdict,
    cuda_build_skip,
    driver_max_cuda,
    forward_compat_supported,
    gpu_devices,
    judge_driver,
    per_target,
    target_probes,
    v,
    variant_for,
)
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import ProbeFacts, TargetFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.versions import libcuda_version


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.driver`` finding for one target (pure)."""
    reason = cuda_build_skip(probe)
    if reason:
        return CHECK.finding(Status.SKIP, reason, target=t.label)
    tf = probe.torch
    cuda = tf.cuda or ""  # set: cuda_build_skip() above passed only CUDA builds
    driver = driver_version(facts)
    max_cuda = driver_max_cuda(facts, probe)
    evidence: dict[str, Any] = {
        "torch": tf.version,
        "torch.version.cuda": tf.cuda,
        "driver": driver,
        "driver_max_cuda": max_cuda,
    }
    if tf.cuda_error:
        evidence["torch_cuda_error"] = tf.cuda_error
    if driver is None:
        return CHECK.finding(
            Status.SKIP, "no NVIDIA driver version is known (see nvidia.driver)", evidence=evidence, target=t.label
        )
    verdict = judge_driver(driver, cuda)
    evidence.update({"toolkit_driver": verdict.toolkit_driver, "minimum_driver": verdict.floor, "fit": verdict.fit})
    max_txt = f" (CUDA ≤ {max_cuda})" if max_cuda else ""
    if verdict.fit == "unknown":
        return CHECK.finding(
            Status.SKIP, f"CUDA {tf.cuda} is not in gpudoctor's driver table", evidence=evidence, target=t.label
        )
    if verdict.fit == "full":
        return CHECK.finding(
            Status.OK,
            f"NVIDIA driver {driver}{max_txt} runs torch {tf.version} (CUDA {tf.cuda}; "
            f"needs ≥ {verdict.toolkit_driver})",
            evidence=evidence,
            target=t.label,
        )
    if verdict.fit == "minor-compat":
        return CHECK.finding(
            Status.OK,
            f"NVIDIA driver {driver}{max_txt} runs torch {tf.version} (CUDA {tf.cuda}) through CUDA minor-version "
            f"compatibility",
            f"The driver is at least the CUDA {cuda.split('.')[0]}.x floor ({verdict.floor}) but older than the "
            f"CUDA {tf.cuda} toolkit driver ({verdict.toolkit_driver}). PyTorch works; features that need the "
            f"newer driver are unavailable, and PTX built by CUDA {tf.cuda} cannot be JIT-compiled by this driver "
            f"(`the provided PTX was compiled with an unsupported toolchain`). Upgrading the driver to "
            f"≥ {verdict.toolkit_driver} removes these limits.",
            evidence=evidence,
            target=t.label,
        )
    compat = _compat_version(probe)
    if (
        compat
        and judge_driver(compat, cuda).fit != "too-old"
        and all(forward_compat_supported(g.name) for g in gpu_devices(facts, probe))
    ):
        evidence["forward_compat_libcuda"] = probe.libcuda.path  # type: ignore[union-attr]
        return CHECK.finding(
            Status.OK,
            f"NVIDIA driver {driver} is older than CUDA {tf.cuda} needs, but the forward-compatibility "
            f"libcuda {compat} bridges it",
            evidence=evidence,
            target=t.label,
        )
    return _too_old(facts, t, probe, verdict, max_txt, evidence)


def _compat_version(probe: ProbeFacts) -> str | None:
    """Version of a cuda-compat ``libcuda.so.<version>`` the target loaded, or None."""
    lc = probe.libcuda
    if isinstance(lc, Unavailable) or not lc.loaded or not lc.path or "/compat/" not in lc.path:
        return None
    return libcuda_version(lc.path)


def _too_old(
    facts: Facts, t: TargetFacts, probe: ProbeFacts, verdict: DriverVerdict, max_txt: str, evidence: dict[str, Any]
) -> Finding:
    tf = probe.torch
    cuda = tf.cuda or ""  # a CUDA build (assess() passed cuda_build_skip)
    branch = verdict.floor.split(".")[0] if verdict.floor else "550"
    public = split_local(tf.version or "")[0]
    remedies: list[str] = [
        f"1. **Upgrade the NVIDIA driver** to {verdict.floor} or newer (for every CUDA {tf.cuda} feature: "
        f"≥ {verdict.toolkit_driver}; any newer production branch also works). "
        + UPGRADE_HOWTO.format(branch=max(int(branch), 535))
    ]
    variant = variant_for(tf.version, verdict.driver)
    commands = list(driver_install_commands(facts))
    if variant is not None:
        keep = v_published(variant, public)
        cmd = pip_install_command(
            probe.executable,
            variant,
            public if keep else None,
            python_version=probe.python_version,
            venv_creator=probe.venv_creator,
        )
        extra = " (reinstall torchvision/torchaudio from the same index if you use them)"
        commands.append(Command(cmd, f"or keep the driver: torch for CUDA {variant['cuda']}", "changes"))
        remedies.append(
            f"2. **Or keep the driver** and install a torch build for CUDA {variant['cuda']}, which this driver "
            f"runs{extra}:\n\n```\n{cmd}\n```"
        )
    else:
        remedies.append("2. No current PyTorch CUDA build runs on this driver: upgrading the driver is the only way.")
    gpus = gpu_devices(facts, probe)
    if gpus and all(forward_compat_supported(g.name) for g in gpus):
        mm = cuda.replace(".", "-")
        remedies.append(
            f"3. These GPUs support NVIDIA's forward-compatibility package: install `cuda-compat-{mm}` from NVIDIA's "
            f"CUDA repository and run with `LD_LIBRARY_PATH=/usr/local/cuda-{tf.cuda}/compat:$LD_LIBRARY_PATH` "
            f"(data-center GPUs only; the kernel driver stays {verdict.driver}; check NVIDIA's forward-compatibility "
            f"table that this driver branch is supported by that package)."
        )
    summary = (
        f"the NVIDIA driver {verdict.driver}{max_txt} is too old for torch {tf.version} (CUDA {tf.cuda}): "
        f"it needs ≥ {verdict.floor}"
    )
    explanation = (
        f"torch {tf.version} in `{probe.executable}` bundles the CUDA {tf.cuda} runtime. CUDA {cuda.split('.')[0]}.x "
        f"needs a Linux driver ≥ **{verdict.floor}** (minor-version compatibility; ≥ {verdict.toolkit_driver} "
        f"for all CUDA {tf.cuda} features), but this machine runs **{verdict.driver}**{max_txt}. "
        f'`torch.cuda.is_available()` is False and CUDA calls fail with "The NVIDIA driver on your system is too '
        f'old".\n\nFix it one of these ways:\n\n' + "\n\n".join(remedies)
    )
    return CHECK.finding(Status.FAIL, summary, explanation, evidence=evidence, target=t.label, commands=tuple(commands))


def v_published(variant: dict[str, Any], public: str) -> bool:
    """True when ``public`` (e.g. ``2.1.0``) was published for ``variant``."""
    return bool(public) and v(variant["first_torch"]) <= v(public) <= v(variant["newest_torch"])


#: ``nvidia-*`` wheels whose version is the CUDA release a framework runs (runtime, PTX compiler, NVRTC).
_RUNTIME_WHEELS = re.compile(r"^nvidia-cuda-(?:runtime|nvcc|nvrtc)-cu(\d+)$")


def framework_cuda(facts: Facts, label: str) -> list[tuple[str, str, str, str, str]]:
    """(framework, dist, version, CUDA ``X.Y``, where X.Y comes from) for every non-torch GPU framework of
    target ``label`` whose CUDA major is known. X.Y is the newest ``nvidia-cuda-runtime/nvcc/nvrtc-cuX``
    wheel of that major in the target, else ``X.0`` (only the major's floor can then be judged)."""
    if "cuda_libraries" not in facts.domains:
        return []  # the gate's light run: its domain module is not even imported
    from gpudoctor.facts.libraries import CudaLibrariesFacts
    from gpudoctor.facts.loader import CudaWheelsFacts

    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return []
    wheels: dict[int, tuple[str, str]] = {}
    cw = facts.of(CudaWheelsFacts)
    if not isinstance(cw, Unavailable):
        for tw in cw.targets:
            if tw.label != label:
                continue
            for d in tw.dists:
                m = _RUNTIME_WHEELS.match(d.name.lower())
                if m and v(d.version).major == int(m.group(1)):
                    major = int(m.group(1))
                    if major not in wheels or v(d.version) > v(wheels[major][1]):
                        wheels[major] = (d.name, d.version)
    out = []
    for fw in cl.frameworks:
        if fw.label != label or fw.name == "torch" or not fw.cuda_major:
            continue
        if fw.cuda_major in wheels:
            name, version = wheels[fw.cuda_major]
            xy = ".".join(version.split(".")[:2])
            out.append((fw.name, fw.dist, fw.version, xy, f"{name} {version}"))
        else:
            out.append((fw.name, fw.dist, fw.version, f"{fw.cuda_major}.0", ""))
    return out


def assess_framework(
    facts: Facts, t: TargetFacts, probe: ProbeFacts, fw: tuple[str, str, str, str, str]
) -> Finding | None:
    """The ``cuda.driver`` finding for one non-torch framework of a target (None: nothing to judge)."""
    name, dist, version, cuda, basis = fw
    driver = driver_version(facts)
    if driver is None:
        return None
    verdict = judge_driver(driver, cuda)
    if verdict.fit == "unknown":
        return None
    max_cuda = driver_max_cuda(facts, probe)
    max_txt = f" (CUDA ≤ {max_cuda})" if max_cuda else ""
    major = cuda.split(".")[0]
    exact = bool(basis)
    evidence: dict[str, Any] = {
        "framework": name,
        "dist": f"{dist}=={version}",
        "cuda": cuda,
        "cuda_from": basis or "the build's CUDA major",
        "driver": driver,
        "driver_max_cuda": max_cuda,
        "toolkit_driver": verdict.toolkit_driver,
        "minimum_driver": verdict.floor,
        "fit": verdict.fit,
    }
    what = f"{dist} {version} (CUDA {cuda}, from {basis})" if exact else f"{dist} {version} (a CUDA {major}.x build)"
    if verdict.fit == "full" or (verdict.fit == "minor-compat" and not exact):
        return CHECK.finding(
            Status.OK, f"NVIDIA driver {driver}{max_txt} runs {what}", evidence=evidence, target=t.label
        )
    if verdict.fit == "minor-compat":
        return CHECK.finding(
            Status.OK,
            f"NVIDIA driver {driver}{max_txt} runs {what} through CUDA minor-version compatibility",
            f"The driver is at least the CUDA {major}.x floor ({verdict.floor}) but older than the CUDA {cuda} "
            f"toolkit driver ({verdict.toolkit_driver}). {dist} runs; PTX produced by the CUDA {cuda} compiler "
            f"cannot be loaded by this driver, so frameworks that compile PTX at run time (JAX/XLA, Triton, CuPy "
            f"kernels) fall back to slower paths or report that the driver is older than the PTX compiler. "
            f"Upgrading the driver to ≥ {verdict.toolkit_driver} removes these limits.",
            evidence=evidence,
            target=t.label,
        )
    branch = verdict.floor.split(".")[0] if verdict.floor else "550"
    older = [m for m in (int(major) - 1,) if m >= 11 and max_cuda and v(max_cuda).major >= m]
    alt = ""
    commands = list(driver_install_commands(facts, str(max(int(branch), 535))))
    if older:
        req = _cuda_extra(name, older[0])
        how = (
            "`" + install_command(probe.executable, f'"{req}"', probe.venv_creator) + "`"
            if req
            else f"its CUDA {older[0]} build (the project's install guide names the package or extra)"
        )
        if req:
            commands.append(
                Command(
                    install_command(probe.executable, f'"{req}"', probe.venv_creator),
                    f"or keep the driver: {name} for CUDA {older[0]}",
                    "changes",
                )
            )
        alt = (
            f"\n\n2. **Or keep the driver** and install {name} for CUDA {older[0]} (this driver runs CUDA "
            f"≤ {max_cuda}) in `{probe.executable}`: {how}."
        )
    return CHECK.finding(
        Status.FAIL,
        f"the NVIDIA driver {driver}{max_txt} is too old for {what}: it needs ≥ {verdict.floor}",
        f"`{dist}` {version} in `{probe.executable}` runs on the CUDA {cuda if exact else major + '.x'} runtime"
        + (f" ({basis})" if exact else "")
        + f". CUDA {major}.x needs a Linux driver ≥ **{verdict.floor}** (minor-version compatibility), but "
        f'this machine runs **{driver}**{max_txt}: the framework finds no usable GPU ("CUDA driver version is '
        f'insufficient for CUDA runtime version", `cudaErrorInsufficientDriver`, CUDA error 35).\n\n'
        f"1. **Upgrade the NVIDIA driver** to {verdict.floor} or newer. "
        + UPGRADE_HOWTO.format(branch=max(int(branch), 535))
        + alt,
        evidence=evidence,
        target=t.label,
        commands=tuple(commands),
    )


def _cuda_extra(name: str, major: int) -> str:
    """The pip requirement of ``name`` built for CUDA ``major`` (the projects' documented spellings), or ""."""
    if name == "jax":
        return f"jax[cuda{major}]"
    if name == "cupy":
        return f"cupy-cuda{major}x"
    if name == "tensorrt":
        return f"tensorrt-cu{major}"
    return ""


def evaluate(facts: Facts) -> list[Finding]:
    """torch per target (:func:`assess`), then every other framework with its own CUDA runtime."""
    require(facts, TargetsFacts)
    out: list[Finding] = []
    for f, (t, probe) in zip(per_target("cuda.driver", assess)(facts), target_probes(facts)):
        extra = []
        if probe is not None:
            for fw in framework_cuda(facts, t.label):
                finding = assess_framework(facts, t, probe, fw)
                if finding is not None:
                    extra.append(finding)
        # a torch that is not a CUDA build says nothing when another framework was judged
        if not (extra and f.status == Status.SKIP):
            out.append(f)
        out += extra
    return out


CHECK = Check(
    id="cuda.driver",
    title="NVIDIA driver new enough for each target framework's CUDA runtime",
    needs=("targets", "nvidia", "gpu"),
    evaluate=evaluate,
)
