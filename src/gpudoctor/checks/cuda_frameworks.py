"""Check ``cuda.frameworks``: do the GPU frameworks of one environment agree on CUDA and cuDNN?

Evidence: the ``cuda_libraries`` domain's frameworks, found from
distribution metadata without importing them, with the CUDA and cuDNN majors
each release needs (``data/frameworks.toml``, a source per row; the local
version tag ``+cu124`` / ``.post120`` or the distribution name
``cupy-cuda12x`` where the build says it).

One process loads one ``libcudnn.so.N`` and one CUDA runtime major per
SONAME: two frameworks that need different cuDNN majors (or CUDA majors) in one
environment cannot both run on the GPU -> ``fail`` naming both and the
releases that would agree. Otherwise ``ok``; no GPU framework -> ``skip``.
"""

from __future__ import annotations

from itertools import combinations
from typing import List, Optional

from gpudoctor.checks._gpu import per_target
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.libraries import CudaLibrariesFacts, FrameworkInstall
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Finding, Status


def frameworks_of(facts: Facts, label: str) -> Optional[List[FrameworkInstall]]:
    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return None
    return [f for f in cl.frameworks if f.label == label]


def agreeing_releases(framework: str, key: str, major: int) -> List[str]:
    """``framework`` release ranges whose ``key`` (``cudnn_major``/``cuda_major``) equals ``major``."""
    return [f"{framework}{row['versions']}" for row in load_table("frameworks")["requirement"]
            if row["framework"] == framework and row.get(key) == major]


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
    if fws is None:
        return CHECK.finding(Status.SKIP, "GPU frameworks were not looked for (no cuda_libraries facts)",
                             target=t.label)
    if not fws:
        return CHECK.finding(Status.SKIP, f"no GPU framework is installed in {probe.executable}", target=t.label)
    evidence = {"python": probe.executable,
                "frameworks": [{"name": f.name, "dist": f.dist, "version": f.version, "cuda_major": f.cuda_major,
                                "cudnn_major": f.cudnn_major, "source": f.source} for f in fws]}
    for key, what in (("cudnn_major", "cuDNN"), ("cuda_major", "CUDA")):
        for a, b in combinations(fws, 2):
            ma, mb = getattr(a, key), getattr(b, key)
            if not ma or not mb or ma == mb:
                continue
            fix_b = agreeing_releases(b.name, key, ma)
            fix_a = agreeing_releases(a.name, key, mb)
            options = []
            if fix_b:
                options.append(f"keep {a.dist} {a.version} and install {' or '.join(f'`{x}`' for x in fix_b)} "
                               f"({what} {ma})")
            if fix_a:
                options.append(f"keep {b.dist} {b.version} and install {' or '.join(f'`{x}`' for x in fix_a)} "
                               f"({what} {mb})")
            options.append("or give each framework its own virtual environment")
            return CHECK.finding(
                Status.FAIL,
                f"{a.dist} {a.version} needs {what} {ma} but {b.dist} {b.version} needs {what} {mb} in "
                f"{probe.executable}",
                f"A process loads one `{'libcudnn.so' if key == 'cudnn_major' else 'libcudart.so'}` per major; "
                f"whichever framework is imported first decides, and the other fails to load its GPU provider "
                f"(or falls back to the CPU). Versions that agree: " + "; ".join(options) + ".\n\nSources: "
                + "; ".join(f"{f.dist}: {f.source}" for f in (a, b) if f.source),
                evidence=evidence, target=t.label)
    return CHECK.finding(Status.OK, "GPU frameworks agree: " + ", ".join(_desc(f) for f in fws),
                         evidence=evidence, target=t.label)


CHECK = Check(
    id="cuda.frameworks",
    title="GPU frameworks in one environment need the same CUDA and cuDNN majors",
    needs=("targets", "cuda_libraries"),
    evaluate=per_target("cuda.frameworks", assess),
)
