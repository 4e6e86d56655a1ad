"""Check ``cuda.libcuda``: can each target load the driver's ``libcuda.so.1``?

``libcuda.so.1`` is the user-space half of the NVIDIA driver; torch wheels do
not ship it. The probe ``dlopen``s it for real in the target (no ``cuInit``).

- it does not load on a machine with an NVIDIA GPU -> ``fail`` with the loader
  error verbatim and the remedy for the environment: a container started
  without the NVIDIA runtime (or with ``NVIDIA_DRIVER_CAPABILITIES`` lacking
  ``compute``), WSL without ``/usr/lib/wsl/lib`` on the loader path, or a host
  missing the driver's compute-library package;
- it loads, but its version differs from the kernel module's -> ``fail``
  ("Driver/library version mismatch": reboot or reinstall one version);
- it is the CUDA toolkit's link-time stub (``.../stubs/libcuda.so``, reached through
  ``LD_LIBRARY_PATH`` or an ld.so.conf entry) -> ``fail``: every driver call returns
  ``CUDA_ERROR_STUB_LIBRARY`` (34, "CUDA driver is a stub library"); the remedy names the
  ``LD_LIBRARY_PATH`` value without the stubs directory;
- it is a cuda-compat (forward-compatibility) copy: ``fail`` on a GPU that does
  not support it (error 804) or when older than the kernel driver (error 803),
  else ``ok``;
- loads -> ``ok``; no NVIDIA GPU/driver at all -> ``skip``.
"""

from __future__ import annotations

import os
from typing import Any

from gpudoctor.checks._common import driver_version, in_container
from gpudoctor.checks._gpu import (
    arch_name,
    forward_compat_supported,
    gpu_devices,
    has_nvidia_gpu,
    last_driver_branch,
    per_target,
    v,
)
from gpudoctor.checks._libcuda import WSL_LIB, caps_without_compute, libcuda_commands, libcuda_remedy
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.loader import LoaderFacts
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.versions import libcuda_version


def _runtime_missing(facts: Facts, probe: ProbeFacts) -> bool:
    """A container that may have been started without the NVIDIA runtime (not under WSL, not a
    capabilities setting, NVIDIA facts present): ``nvidia.driver`` then says the same, with the
    remedy, when it fails in this run (the finding names it in ``caused_by``; the report folds it
    only when that finding is there)."""
    os_facts = facts.of(OsFacts)
    if (not isinstance(os_facts, Unavailable) and os_facts.wsl) or not in_container(facts):
        return False
    if caps_without_compute(probe):
        return False
    return not isinstance(facts.of(NvidiaDriverFacts), Unavailable)


def is_stub(path: str | None) -> bool:
    """Whether ``path`` is the CUDA toolkit's link-time stub ``libcuda.so`` (it lives in a ``stubs``
    directory: ``/usr/local/cuda/lib64/stubs``, ``.../targets/x86_64-linux/lib/stubs``; the
    ``cuda-driver-dev`` package). CUDA Driver API reference: ``CUDA_ERROR_STUB_LIBRARY`` (34)."""
    return bool(path) and "/stubs/" in (path or "") and os.path.basename(path or "").startswith("libcuda.so")


def _path_without(probe: ProbeFacts, drop: list[str], why: str) -> Command:
    """``LD_LIBRARY_PATH`` without the entries in ``drop`` (``unset`` when nothing is left)."""
    gone = {os.path.normpath(d) for d in drop}
    rest = [e for e in probe.env.get("LD_LIBRARY_PATH", "").split(":") if e and os.path.normpath(e) not in gone]
    return Command(f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH", why)


def _stub(facts: Facts, probe: ProbeFacts, t: TargetFacts, path: str, evidence: dict[str, Any]) -> Finding:
    """The finding for a target that loaded the toolkit's stub libcuda instead of the driver's."""
    stub_dir = os.path.dirname(path)
    ld = probe.env.get("LD_LIBRARY_PATH")
    entries = [e for e in (ld or "").split(":") if e]
    on_path = [e for e in entries if "stubs" in e.rstrip("/").split("/")[-1:]]
    if on_path:
        rest = [e for e in entries if e not in on_path]
        commands: tuple[Command, ...] = (_path_without(probe, on_path, "the loader path without the stubs"),)
        where = f"`LD_LIBRARY_PATH` lists `{on_path[0]}`"
        todo = (
            "Take the stubs directory out of `LD_LIBRARY_PATH` (where it is set: shell profile, job script, "
            "Dockerfile `ENV`, kernel.json `env`, an environment module):\n\n```\n"
            + (f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH")
            + "\n```\n\nStubs are for *linking* (`-L.../stubs`, `LIBRARY_PATH`), never for running."
        )
    else:
        where = f"the loader finds `{stub_dir}` first (an `/etc/ld.so.conf.d/` entry or an RPATH)"
        todo = (
            f"Remove the `/etc/ld.so.conf.d/` entry that names `{stub_dir}` (`grep -r stubs /etc/ld.so.conf.d/`), "
            f"then `sudo ldconfig`. Stubs are for *linking* only, never for running."
        )
        commands = (
            Command("grep -r stubs /etc/ld.so.conf.d/", "the loader configuration entry that names the stubs"),
            Command("sudo ldconfig", "after removing it: rebuild the loader cache", "root"),
        )
    kernel = driver_version(facts)
    drv = f" {kernel}" if kernel else ""
    return CHECK.finding(
        Status.FAIL,
        f"{probe.executable} loads the CUDA toolkit's stub libcuda ({path}) instead of the NVIDIA driver's",
        f"`{path}` is the empty link-time stub that ships with the CUDA toolkit; every driver call in it fails "
        f"with `CUDA_ERROR_STUB_LIBRARY` (34: `CUDA driver is a stub library`), so `torch.cuda.is_available()` "
        f"is False although the real driver{drv} is installed. {where}, which comes before the driver's "
        f"`libcuda.so.1`.\n\n{todo}",
        evidence=evidence,
        target=t.label,
        commands=commands,
    )


def _forward_compat(
    facts: Facts,
    probe: ProbeFacts,
    t: TargetFacts,
    path: str,
    compat_version: str,
    kernel: str | None,
    evidence: dict[str, Any],
) -> Finding | None:
    """Judge a cuda-compat ``libcuda`` (NVIDIA CUDA Compatibility guide, Forward Compatibility;
    runtime errors 803 ``cudaErrorSystemDriverMismatch`` and 804 ``cudaErrorCompatNotSupportedOnDevice``)."""
    compat_dir = os.path.dirname(path)
    unsupported = [g.name for g in gpu_devices(facts, probe) if forward_compat_supported(g.name) is False]
    if unsupported:
        return CHECK.finding(
            Status.FAIL,
            f"a forward-compatibility libcuda ({path}) is loaded on {', '.join(unsupported)}, which does not support it",
            f"`{compat_dir}` holds NVIDIA's cuda-compat driver libraries, which work only on data-center GPUs and "
            f"Jetson. On this GPU CUDA fails with error 804 (`forward compatibility was attempted on non supported "
            f"HW`). Remove `{compat_dir}` from `LD_LIBRARY_PATH` (or `/etc/ld.so.conf.d/`, then `sudo ldconfig`) and "
            f"use a torch build for a CUDA the installed driver {kernel or ''} supports.",
            evidence=evidence,
            target=t.label,
            commands=(_path_without(probe, [compat_dir], "the loader path without the cuda-compat libraries"),),
        )
    branch = int(compat_version.split(".")[0])
    dropped = [
        (g.name, arch_name(g.cc) or f"compute capability {g.cc}", last)
        for g in gpu_devices(facts, probe)
        if g.cc and (last := last_driver_branch(g.cc)) is not None and branch > last
    ]
    if dropped:
        name, arch, last = dropped[0]
        return CHECK.finding(
            Status.FAIL,
            f"the forward-compatibility libcuda {compat_version} ({path}) no longer supports {name} ({arch}): "
            f"CUDA finds no device",
            f"`{compat_dir}` holds the user-space driver of branch R{branch}; {arch} GPUs are supported only up to "
            f"driver branch R{last}, so with this libcuda CUDA reports no device (`CUDA_ERROR_NO_DEVICE`; TensorFlow "
            f"and JAX print `kernel version {kernel or '?'} does not match DSO version {compat_version}`). "
            f"Forward compatibility cannot bring a newer CUDA to this GPU. Load the driver's own libcuda "
            f"{kernel or ''}: remove `{compat_dir}` from `LD_LIBRARY_PATH` (or `/etc/ld.so.conf.d/`, then "
            f"`sudo ldconfig`; in a container image, `rm -rf {compat_dir}` or use an image of a CUDA release the "
            f"R{last} driver supports), and install a framework build for that CUDA.",
            evidence=evidence,
            target=t.label,
            commands=(_path_without(probe, [compat_dir], "the loader path without the cuda-compat libraries"),),
        )
    if kernel and v(compat_version) < v(kernel):
        return CHECK.finding(
            Status.FAIL,
            f"the forward-compatibility libcuda {compat_version} ({path}) is older than the driver {kernel}",
            f"cuda-compat only helps when it is *newer* than the kernel driver; an older one fails with error 803 "
            f"(`system has unsupported display driver / cuda driver combination`). The installed driver is already "
            f"new enough: remove `{compat_dir}` from `LD_LIBRARY_PATH` / `/etc/ld.so.conf.d/` and run `sudo ldconfig`.",
            evidence=evidence,
            target=t.label,
            commands=(_path_without(probe, [compat_dir], "the loader path without the cuda-compat libraries"),),
        )
    return CHECK.finding(
        Status.OK,
        f"libcuda.so.1 loads from the forward-compatibility package {path} "
        f"(driver {compat_version} on kernel module {kernel or '?'})",
        evidence=evidence,
        target=t.label,
    )


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.libcuda`` finding for one target (pure)."""
    gpu = has_nvidia_gpu(facts)
    lc = probe.libcuda
    if isinstance(lc, Unavailable):
        return CHECK.finding(Status.SKIP, f"libcuda.so.1 was not tested: {lc.reason}", target=t.label)
    evidence: dict[str, Any] = {"python": probe.executable, "loaded": lc.loaded, "path": lc.path, "error": lc.error}
    loader = facts.of(LoaderFacts)
    if isinstance(loader, LoaderFacts) and not isinstance(loader.ldconfig, Unavailable):
        evidence["ldconfig"] = [f"{e.name} => {e.path}" for e in loader.ldconfig if e.name.startswith("libcuda.")]
    if probe.env.get("LD_LIBRARY_PATH") is not None:
        evidence["LD_LIBRARY_PATH"] = probe.env["LD_LIBRARY_PATH"]
    if not gpu and not lc.loaded:
        return CHECK.finding(
            Status.SKIP,
            "no NVIDIA GPU or driver here, so libcuda.so.1 is not expected",
            evidence=evidence,
            target=t.label,
        )
    if not lc.loaded:
        # with the runtime missing, nvidia.driver says the same: start the container with the GPU
        caused_by = ("nvidia.driver",) if _runtime_missing(facts, probe) else ()
        return CHECK.finding(
            Status.FAIL,
            f"libcuda.so.1 (the driver's CUDA library) cannot be loaded in {probe.executable}",
            f"The dynamic loader says:\n\n```\n{lc.error}\n```\n\nWithout `libcuda.so.1` no CUDA program can start "
            f"(`torch.cuda.is_available()` is False).\n\n{libcuda_remedy(facts, probe)}",
            evidence=evidence,
            target=t.label,
            caused_by=caused_by,
            commands=libcuda_commands(facts, probe),
        )
    if is_stub(lc.path):
        if gpu:
            return _stub(facts, probe, t, lc.path or "", evidence)
        return CHECK.finding(  # an image build on a CPU host: the stub is there for linking
            Status.SKIP,
            f"no NVIDIA GPU or driver here; the libcuda found ({lc.path}) is the CUDA toolkit's link-time stub, "
            f"which is fine for building and never used for running",
            evidence=evidence,
            target=t.label,
        )
    kernel = driver_version(facts)
    named = libcuda_version(os.path.basename(lc.path or ""))
    compat = "/compat/" in (lc.path or "") or (lc.path or "").rstrip("/").split("/")[-2:-1] == ["compat"]
    if compat and named:
        found = _forward_compat(facts, probe, t, lc.path or "", named, kernel, evidence)
        if found is not None:
            return found
    elif kernel and named and named != kernel and not (lc.path or "").startswith(WSL_LIB + "/"):
        # (WSL 2's libcuda.so.1.1 carries no driver version in its name)
        return CHECK.finding(
            Status.FAIL,
            f"libcuda {named} does not match the loaded kernel module {kernel} (driver/library version mismatch)",
            f"`{lc.path}` belongs to driver {named}, but the running kernel module is {kernel}. CUDA and NVML "
            f'fail with "Driver/library version mismatch". This happens after a driver upgrade without a reboot, '
            f"or when a second driver's libraries (a cuda-compat directory, an old copy on `LD_LIBRARY_PATH`) "
            f"shadow the system ones. Reboot (or reload the `nvidia` module); if that does not help, remove the "
            f"foreign `libcuda.so*` from the loader path.",
            evidence=evidence,
            target=t.label,
            commands=(
                Command("sudo reboot", "load the kernel module of the installed driver libraries", "root"),
                Command("ldconfig -p | grep libcuda.so", "every libcuda the loader knows (a foreign one to remove)"),
            ),
        )
    api = lc.driver_api_version
    cuda = f" (driver supports CUDA ≤ {api // 1000}.{(api % 1000) // 10})" if api else ""
    return CHECK.finding(
        Status.OK, f"libcuda.so.1 loads from {lc.path or 'the loader path'}{cuda}", evidence=evidence, target=t.label
    )


CHECK = Check(
    id="cuda.libcuda",
    title="the driver's libcuda.so.1 loads in each target",
    needs=("targets", "nvidia", "gpu", "os", "loader", "cuda_libraries", "platform"),
    evaluate=per_target("cuda.libcuda", assess),
)
