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
"""

from __future__ import annotations

import re
from typing import Any

from gpudoctor.checks._common import driver_install_commands, driver_version, pip_install_command, split_local
from gpudoctor.checks._gpu import (
    DriverVerdict,
    cuda_build_skip,
    driver_max_cuda,
    forward_compat_supported,
    gpu_devices,
    judge_driver,
    per_target,
    v,
    variant_for,
)
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status

UPGRADE_HOWTO = (
    "Debian/Ubuntu: `sudo ubuntu-drivers install` or `sudo apt-get install nvidia-driver-{branch}`; "
    "RHEL/Fedora: `sudo dnf module install nvidia-driver:{branch}-dkms` (or the distro's akmod); "
    "then reboot and run `gpudoctor check cuda` again. A new CUDA *toolkit* alone does not "
    "replace the driver."
)


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
    m = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", lc.path)
    return m.group(1) if m else None


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
            probe.executable, variant, public if keep else None, python_version=probe.python_version
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


CHECK = Check(
    id="cuda.driver",
    title="NVIDIA driver new enough for each target torch's CUDA runtime",
    needs=("targets", "nvidia", "gpu"),
    evaluate=per_target("cuda.driver", assess),
)
