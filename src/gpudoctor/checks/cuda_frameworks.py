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
from itertools import combinations

from gpudoctor.checks._gpu import per_target
from gpudoctor.checks._libcuda import libcuda_commands, libcuda_remedy
from gpudoctor.checks._libraries import WHEEL_STEM, agreeing_releases, frameworks_of
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.libraries import FrameworkInstall
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status

_MISSING = re.compile(r"(lib[A-Za-z0-9_+-]+\.so(?:\.\d+)*): cannot open shared object file")


def load_remedy(
    facts: Facts, probe: ProbeFacts, fw: FrameworkInstall | None, error: str
) -> tuple[str, tuple[Command, ...]]:
    """What to do about one failed ``dlopen`` of a framework library (Markdown, and the commands)."""
    from gpudoctor.collect.libraries import family_of

    m = _MISSING.search(error)
    lib = m.group(1) if m else ""
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
            f'{probe.executable} -m pip install "{wheel}{pin}"', f"install {lib} from its wheel", "changes"
        )
        return (
            f"`{lib}` is not installed where the loader looks. Install it from its wheel:\n\n```\n"
            f'{probe.executable} -m pip install "{wheel}{pin}"\n```\n\nSome frameworks do not search the '
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
            remedy, commands = load_remedy(facts, probe, fw, first.error or "")
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
    for key, what in (("cudnn_major", "cuDNN"), ("cuda_major", "CUDA")):
        for a, b in combinations(fws, 2):
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
