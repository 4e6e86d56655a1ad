"""Check ``cuda.frameworks``: do the GPU frameworks of one environment agree on CUDA and cuDNN?

Evidence: the ``cuda_libraries`` domain's frameworks, found from
distribution metadata without importing them, with the CUDA and cuDNN majors
each release needs (``data/frameworks.toml``, a source per row; the local
version tag ``+cu124`` / ``.post120`` or the distribution name
``cupy-cuda12x`` where the build says it).

One process loads one ``libcudnn.so.N`` and one CUDA runtime major per
SONAME: two frameworks that need different cuDNN majors (or CUDA majors) in one
environment cannot both run on the GPU -> ``fail`` naming both and the
releases that would agree.

Before that, the probe's real ``dlopen`` of each framework's GPU provider
libraries: a failure -> ``fail`` with the loader's error verbatim and the
remedy for its kind: a missing ``libcuda`` is a driver/loader problem (never
"reinstall cuDNN"), a missing CUDA library is installed from its ``nvidia-*``
wheel, an undefined versioned symbol is a shadowing copy (see
``cuda.libraries``). Otherwise ``ok``; no GPU framework -> ``skip``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import combinations

from gpudoctor.checks._common import install_command
from gpudoctor.checks._gpu import per_target
from gpudoctor.checks._libcuda import libcuda_commands, libcuda_remedy
from gpudoctor.checks._libraries import WHEEL_STEM, agreeing_releases, frameworks_of
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.libraries import FrameworkInstall
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status

_MISSING = re.compile(r"(lib[A-Za-z0-9_+-]+\.so(?:\.\d+)*): cannot open shared object file")


def load_remedy(
    facts: Facts, probe: ProbeFacts, fw: FrameworkInstall | None, error: str, label: str = ""
) -> tuple[str, tuple[Command, ...]]:
    """What to do about one failed ``dlopen`` of a framework library (Markdown, and the commands)."""
    from gpudoctor.checks._libraries import activation_commands, activation_hint, target_model
    from gpudoctor.collect.libraries import family_of

    m = _MISSING.search(error)
    lib = m.group(1) if m else ""
    model = target_model(facts, label) if label else None
    present = [c for c in (model.copies if model else ()) if lib and c.name == lib]
    if present and not lib.startswith(("libcuda.so", "libnvidia-ml")):
        dirs = list(dict.fromkeys(c.directory for c in present))
        ort = (
            " onnxruntime-gpu 1.21 and later can load them itself: `onnxruntime.preload_dlls()` before creating the "
            "session."
            if fw is not None and fw.name == "onnxruntime-gpu"
            else ""
        )
        return (
            f"`{lib}` is installed (`{present[0].path}`), but not in a directory the loader searches for this "
            f"library: installing it again changes nothing.{ort}\n\n" + activation_hint(probe, dirs)
        ), activation_commands(probe, dirs)
    if lib.startswith("libcuda.so") or lib.startswith("libnvidia-ml"):
        return (
            f"`{lib}` belongs to the NVIDIA **driver**, not to the framework or cuDNN: reinstalling them does "
            f"not help.\n\n" + libcuda_remedy(facts, probe)
        ), libcuda_commands(facts, probe)
    if "undefined symbol" in error or "version `" in error:
        return (
            "The library was found but an older copy of one of its dependencies was loaded instead of the one "
            "it was built against — see `cuda.libraries` for the directory that shadows it and the "
            "`LD_LIBRARY_PATH` change."
        ), ()
    fam = family_of(lib) if lib else None
    if fam in WHEEL_STEM:
        so_major = re.search(r"\.so\.(\d+)", lib)
        cuda = (
            fw.cuda_major if fw and fw.cuda_major else (int(so_major.group(1)) if so_major and fam != "cudnn" else 12)
        )
        pin = f"=={so_major.group(1)}.*" if so_major and fam == "cudnn" else ""
        wheel = f"nvidia-{WHEEL_STEM[fam]}-cu{cuda}"
        install = Command(
            install_command(probe.executable, f'"{wheel}{pin}"', probe.venv_creator),
            f"install {lib} from its wheel",
            "changes",
        )
        return (
            f"`{lib}` is not installed where the loader looks. Install it from its wheel:\n\n```\n"
            f"{install.text}\n```\n\nSome frameworks do not search the "
            f"`nvidia/*/lib` wheel directories by themselves; if the error stays, add the wheel's `lib` "
            f"directory to `LD_LIBRARY_PATH` in the environment's activation script."
        ), (install,)
    return "Reinstall the framework's GPU package, or fix the file the loader names.", ()


def _load_failure(facts: Facts, t: TargetFacts, probe: ProbeFacts, fws: list[FrameworkInstall]) -> Finding | None:
    loads = probe.frameworks
    if isinstance(loads, Unavailable):
        return None
    for fl in loads:
        bad = [x for x in fl.loads if not x.ok]
        fw = next((f for f in fws if f.name == fl.name), None)
        if fl.error and not bad:
            return CHECK.finding(
                Status.FAIL,
                f"the GPU libraries of {fl.dist} {fl.version} could not be load-tested: {fl.error}",
                f"The probe's `dlopen` test of {fl.dist} did not complete ({fl.error}). A crash "
                f"inside a library's initialiser usually means mixed CUDA versions in one process.",
                evidence={"python": probe.executable},
                target=t.label,
            )
        if bad:
            first = bad[0]
            remedy, commands = load_remedy(facts, probe, fw, first.error or "", t.label)
            return CHECK.finding(
                Status.FAIL,
                f"{fl.dist} {fl.version}: {first.name} does not load: {first.error}",
                f"The probe opened {fl.dist}'s GPU provider libraries with `dlopen` (RTLD_NOW) in "
                f"`{probe.executable}`:\n\n```\n" + "\n".join(f"{x.name}: {x.error}" for x in bad) + "\n```\n\n"
                f"Without them {fl.dist} falls back to the CPU or fails at its first GPU call.\n\n" + remedy,
                evidence={"python": probe.executable, "failed": [f"{x.path}: {x.error}" for x in bad]},
                target=t.label,
                commands=commands,
            )
    return None


def driver_remedy(fw: FrameworkInstall, python: str, driver_major: int | None, venv_creator: str | None = None) -> str:
    """The choices when the driver is older than ``fw``'s CUDA (Markdown): a newer driver, or a build of the
    framework for the CUDA the driver runs (``data/frameworks.toml`` rows, or the ``-cudaNNx`` dist)."""
    from gpudoctor.checks._common import UPGRADE_HOWTO

    options = [
        f"1. **Upgrade the driver** to one that supports CUDA {fw.cuda_version or fw.cuda_major}: "
        + UPGRADE_HOWTO.format(branch="<branch>")
    ]
    alt: list[str] = []
    if driver_major:
        alt = [f"`{x}`" for x in agreeing_releases(fw.name, "cuda_major", driver_major)]
        m = re.match(r"^(cupy-cuda|tensorrt-cu)(\d+)(x|-libs)$", fw.dist)
        if m and int(m.group(2)) != driver_major:
            alt.append(f"`{m.group(1)}{driver_major}{m.group(3)}` (uninstall `{fw.dist}` first)")
    if alt:
        options.append(
            f"2. **Or keep the driver** and install a {fw.dist} build for CUDA {driver_major}: "
            + " or ".join(alt)
            + f" (`{install_command(python, '...', venv_creator)}`)."
        )
    else:
        options.append(
            f"2. {fw.dist} publishes no build for the driver's CUDA {driver_major or ''} that gpudoctor "
            f"knows of: the driver must be upgraded."
        )
    return "\n".join(options)


def _driver_too_old(
    facts: Facts, t: TargetFacts, probe: ProbeFacts, fws: list[FrameworkInstall], evidence: Mapping[str, object]
) -> Finding | None:
    """``fail`` for the first framework (torch aside: ``cuda.driver`` judges it) whose CUDA the driver is too
    old to run (NVIDIA CUDA Compatibility guide: within a major, minor-version compatibility; across majors, a
    newer driver)."""
    from gpudoctor.checks._gpu import driver_max_cuda
    from gpudoctor.checks._usability import driver_fit

    for fw in fws:
        if fw.name == "torch" or not fw.known:
            continue
        fit = driver_fit(facts, probe, fw)
        if fit is None or fit[0] != "too-old":
            continue
        max_cuda = driver_max_cuda(facts, probe)
        major = int(max_cuda.split(".")[0]) if max_cuda else None
        from gpudoctor.checks._common import driver_install_commands

        keep = agreeing_releases(fw.name, "cuda_major", major) if major else []
        return CHECK.finding(
            Status.FAIL,
            f"{fw.dist} {fw.version} needs CUDA {fw.cuda_version or fw.cuda_major}, newer than the driver "
            f"supports ({max_cuda or 'unknown'}) in {probe.executable}",
            f"{fit[1]}. The framework's CUDA runtime refuses to start on it (`CUDA driver version is insufficient "
            f"for CUDA runtime version`; TensorFlow then lists no GPU, JAX says `CUDA backend failed to "
            f"initialize`), so it runs on the CPU or not at all.\n\n"
            + driver_remedy(fw, probe.executable, major, probe.venv_creator)
            + (f"\n\nSource: {fw.source}" if fw.source else ""),
            evidence={**evidence, "driver_max_cuda": max_cuda},
            target=t.label,
            commands=(
                *driver_install_commands(facts),
                *(
                    Command(
                        install_command(probe.executable, f'"{r}"', probe.venv_creator),
                        f"or keep the driver: CUDA {major}",
                        "changes",
                    )
                    for r in keep[:1]
                ),
            ),
        )
    return None


def _cudnn_below_build(
    facts: Facts, t: TargetFacts, probe: ProbeFacts, fws: list[FrameworkInstall], evidence: Mapping[str, object]
) -> Finding | None:
    """``fail`` when the cuDNN a framework loads is older than the one it was built against (TensorFlow:
    "Loaded runtime CuDNN library: 8.2.1 but source was compiled with: 8.9.4. CuDNN library needs to have
    matching major version and equal or higher minor version"; JAX: "Found cuDNN version ..., but JAX was
    built against version ..., which is newer")."""
    from gpudoctor.checks._gpu import v
    from gpudoctor.checks._libraries import target_model, version_of

    model = target_model(facts, t.label)
    if model is None:
        return None
    for fw in fws:
        if not fw.cudnn_min or not fw.cudnn_major or fw.name == "torch":  # torch: cudnn.load judges it
            continue
        for r in model.resolutions:
            if r.framework != fw.name or r.needed != f"libcudnn.so.{fw.cudnn_major}" or not r.path:
                continue
            have = version_of(model, r.path)
            if not have or v(have) >= v(fw.cudnn_min):
                continue
            own = version_of(model, r.without_env) if r.without_env and r.without_env != r.path else None
            better = f" (without `LD_LIBRARY_PATH` it would get `{r.without_env}`, {own})" if own else ""
            install = install_command(
                probe.executable,
                f'"nvidia-cudnn-cu{fw.cuda_major or 12}>={fw.cudnn_min},<{fw.cudnn_major + 1}"',
                probe.venv_creator,
            )
            return CHECK.finding(
                Status.FAIL,
                f"{fw.dist} {fw.version} was built against cuDNN {fw.cudnn_min} but loads cuDNN {have} from "
                f"{r.directory}",
                f"{fw.dist} refuses an older cuDNN minor at start (TensorFlow: `Loaded runtime CuDNN library: {have} "
                f"but source was compiled with: {fw.cudnn_min}...`; JAX: `Found cuDNN version ..., but JAX was built "
                f"against version ..., which is newer`) and runs without its GPU kernels. The copy it gets is "
                f"`{r.path}` ({r.path_origin or r.via}){better}.\n\nInstall cuDNN {fw.cudnn_min} or newer of major "
                f"{fw.cudnn_major} where it looks (`{install}`), or take `{r.directory}` off the "
                f"loader path." + (f"\n\nSource: {fw.source}" if fw.source else ""),
                evidence={**evidence, "cudnn_loaded": f"{r.path} ({have})"},
                target=t.label,
                commands=(
                    Command(
                        install,
                        f"a cuDNN {fw.cudnn_major} no older than {fw.dist} was built with",
                        "changes",
                    ),
                ),
            )
    return None


def _desc(f: FrameworkInstall) -> str:
    parts = []
    if f.cuda_major:
        parts.append(f"CUDA {f.cuda_major}")
    if f.cudnn_major:
        parts.append(f"cuDNN {f.cudnn_major}")
    return f"{f.dist} {f.version}" + (f" ({', '.join(parts)})" if parts else "")


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.frameworks`` finding for one target (pure)."""
    fws = frameworks_of(facts, t.label)
    failed = _load_failure(facts, t, probe, fws or [])
    if failed is not None:
        return failed
    if fws is None:
        return CHECK.finding(
            Status.SKIP, "GPU frameworks were not looked for (no cuda_libraries facts)", target=t.label
        )
    if not fws:
        return CHECK.finding(Status.SKIP, f"no GPU framework is installed in {probe.executable}", target=t.label)
    evidence = {
        "python": probe.executable,
        "frameworks": [
            {
                "name": f.name,
                "dist": f.dist,
                "version": f.version,
                "cuda_major": f.cuda_major,
                "cudnn_major": f.cudnn_major,
                "source": f.source,
            }
            for f in fws
        ],
    }
    too_old = _driver_too_old(facts, t, probe, fws, evidence)
    if too_old is not None:
        return too_old
    below = _cudnn_below_build(facts, t, probe, fws, evidence)
    if below is not None:
        return below
    for key, what in (("cudnn_major", "cuDNN"), ("cuda_major", "CUDA")):
        for a, b in combinations([f for f in fws if f.known], 2):
            ma, mb = getattr(a, key), getattr(b, key)
            if not ma or not mb or ma == mb:
                continue
            fix_b = agreeing_releases(b.name, key, ma)
            fix_a = agreeing_releases(a.name, key, mb)
            options = []
            if fix_b:
                options.append(
                    f"keep {a.dist} {a.version} and install {' or '.join(f'`{x}`' for x in fix_b)} ({what} {ma})"
                )
            if fix_a:
                options.append(
                    f"keep {b.dist} {b.version} and install {' or '.join(f'`{x}`' for x in fix_a)} ({what} {mb})"
                )
            options.append("or give each framework its own virtual environment")
            agree = ([(a, fix_b[0])] if fix_b else []) + ([(b, fix_a[0])] if fix_a else [])
            return CHECK.finding(
                Status.FAIL,
                f"{a.dist} {a.version} needs {what} {ma} but {b.dist} {b.version} needs {what} {mb} in "
                f"{probe.executable}",
                f"A process loads one `{'libcudnn.so' if key == 'cudnn_major' else 'libcudart.so'}` per major; "
                f"whichever framework is imported first decides, and the other fails to load its GPU provider "
                f"(or falls back to the CPU). Versions that agree: "
                + "; ".join(options)
                + ".\n\nSources: "
                + "; ".join(f"{f.dist}: {f.source}" for f in (a, b) if f.source),
                evidence=evidence,
                target=t.label,
                commands=tuple(
                    Command(
                        install_command(probe.executable, f'"{req}"', probe.venv_creator),
                        f"keep {kept.dist}: {what} as it needs",
                        "changes",
                    )
                    for kept, req in agree
                ),
            )
    return CHECK.finding(
        Status.OK, "GPU frameworks agree: " + ", ".join(_desc(f) for f in fws), evidence=evidence, target=t.label
    )


CHECK = Check(
    id="cuda.frameworks",
    title="GPU frameworks in one environment need the same CUDA and cuDNN majors",
    needs=("targets", "cuda_libraries"),
    evaluate=per_target("cuda.frameworks", assess),
)
