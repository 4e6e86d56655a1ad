"""Is CUDA usable in a target? Decided from the driver API and from every GPU framework installed there.

Pure reasoning over facts, shared by ``cuda.available`` (the headline) and
``cuda.frameworks``; torch is one framework among others, and "torch is not
installed" is a fact about torch, never a verdict on CUDA:

- the driver API (light probe: ``libcuda.so.1`` loads, ``cuInit``, device
  count, a context per device) says whether any CUDA program can start;
- per installed framework (``data/frameworks.toml``), the verdict is
  ``usable`` (its GPU libraries load and resolve, the driver runs its CUDA
  major), ``broken`` (with the finding that says why: a library missing or
  shadowed, a provider that does not load, a driver older than its CUDA, a
  conflict with another framework of the environment), or ``unknown`` (a
  GPU package gpudoctor has no table row for, or nothing to judge it by).
"""

from __future__ import annotations

import os

from gpudoctor.checks._common import driver_version
from gpudoctor.checks._gpu import driver_max_cuda, judge_driver, v
from gpudoctor.checks._libraries import frameworks_of
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.libraries import CudaLibrariesFacts, FrameworkInstall, Resolution
from gpudoctor.facts.targets import CudaDriverProbe, ProbeFacts, TargetFacts
from gpudoctor.model import Check, Finding, Status
from gpudoctor.records import frozen_dataclass
from gpudoctor.words import plural

__all__ = ["DriverApi", "FrameworkVerdict", "driver_api", "driver_fit", "framework_verdicts", "headline_without_torch"]


@frozen_dataclass
class DriverApi:
    """What the CUDA driver API said in the target.

    Attributes:
        state: ``usable`` (cuInit ok, >= 1 device, every context opened), ``unusable`` or ``unknown``
            (not probed).
        devices: the number of devices it enumerates (0 when unknown or none).
        text: a short account for a summary (``cuInit ok, 2 GPUs``).
    """

    state: str
    devices: int = 0
    text: str = ""


def driver_api(probe: ProbeFacts) -> DriverApi:
    """The light probe's CUDA driver API record, judged."""
    drv = probe.cuda_driver
    if not isinstance(drv, CudaDriverProbe):
        return DriverApi("unknown", 0, f"the CUDA driver API was not probed ({drv.reason})")
    if not drv.loaded:
        return DriverApi("unusable", 0, f"libcuda.so.1 does not load: {drv.error}")
    if not drv.init_ok:
        return DriverApi("unusable", 0, f"cuInit fails: {drv.init_error}")
    n = drv.device_count or len(drv.devices)
    if not n:
        return DriverApi("unusable", 0, "cuInit works but the driver enumerates no GPU")
    bad = [d for d in drv.devices if d.context_ok is False]
    if bad:
        return DriverApi("unusable", n, f"no context opens on {len(bad)} of {n} GPUs")
    return DriverApi("usable", n, f"cuInit works and the driver API sees {plural(n, 'GPU')}")


def driver_fit(facts: Facts, probe: ProbeFacts, fw: FrameworkInstall) -> tuple[str, str] | None:
    """(fit, text) of the driver for ``fw``'s CUDA: fit ``too-old`` when the driver's CUDA major is older than
    the framework's, ``minor-compat`` when only minor-version compatibility runs it; None when fine or
    unknown. Rule: NVIDIA CUDA Compatibility guide (minor-version compatibility within a major)."""
    if not fw.cuda_major:
        return None
    max_cuda = driver_max_cuda(facts, probe)
    driver = driver_version(facts)
    wanted = fw.cuda_version or f"{fw.cuda_major}.0"
    if driver:
        verdict = judge_driver(driver, wanted)
        if verdict.fit == "too-old":
            floor = f" (CUDA {fw.cuda_major}.x needs a driver >= {verdict.floor})" if verdict.floor else ""
            return "too-old", f"driver {driver} is older than CUDA {wanted} of {fw.dist} {fw.version} allows{floor}"
        if verdict.fit == "minor-compat" and fw.cuda_version:
            return (
                "minor-compat",
                f"driver {driver} supports CUDA {max_cuda or '?'}, older than the CUDA {wanted} {fw.dist} is built "
                f"with: it runs through minor-version compatibility, but PTX it JIT-compiles cannot load",
            )
        return None
    if max_cuda and v(max_cuda).major < fw.cuda_major:
        return "too-old", f"the driver supports CUDA {max_cuda}, older than the CUDA {fw.cuda_major} of {fw.dist}"
    return None


@frozen_dataclass
class FrameworkVerdict:
    """One framework's verdict in one target.

    Attributes:
        fw: the installed framework.
        state: ``usable``, ``broken`` or ``unknown``.
        reason: one line: why broken / unknown, or what was checked for usable.
        check: the check whose finding carries the cause (``cuda.libraries``, ``cuda.frameworks``,
            ``cuda.driver``), "" when none.
    """

    fw: FrameworkInstall
    state: str
    reason: str
    check: str = ""


def _resolutions(facts: Facts, label: str, name: str) -> list[Resolution]:
    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return []
    model = next((t for t in cl.targets if t.label == label), None)
    if model is None:
        return []
    mine = [r for r in model.resolutions if r.framework == name]
    if mine or any(r.framework for r in model.resolutions):
        return mine
    # an older snapshot without attribution: a resolution belongs to the framework owning its consumer root
    roots = {os.path.normpath(p) for fw, _s, p in (r.partition(":") for r in model.roots) if fw == name}
    return [r for r in model.resolutions if os.path.normpath(r.consumer) in roots]


def framework_verdicts(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> list[FrameworkVerdict]:
    """The verdict of every GPU framework installed in target ``t`` (torch included), in table order."""
    from gpudoctor.checks._libraries import DRIVER_FAMILIES, target_model, version_of

    out: list[FrameworkVerdict] = []
    fws = frameworks_of(facts, t.label) or []
    loads = probe.frameworks if not isinstance(probe.frameworks, Unavailable) else ()
    model = target_model(facts, t.label)
    for fw in fws:
        if not fw.known:
            out.append(FrameworkVerdict(fw, "unknown", f"{fw.dist} {fw.version}: gpudoctor has no table for it"))
            continue
        fl = next((x for x in loads if x.name == fw.name), None)
        bad = [x for x in fl.loads if not x.ok] if fl else []
        if bad:
            out.append(
                FrameworkVerdict(fw, "broken", f"{bad[0].name} does not load: {bad[0].error}", "cuda.frameworks")
            )
            continue
        fit = driver_fit(facts, probe, fw)
        if fit and fit[0] == "too-old":
            out.append(FrameworkVerdict(fw, "broken", fit[1], "cuda.frameworks"))
            continue
        broken = None
        carrier = "cuda.libraries"
        for r in _resolutions(facts, t.label, fw.name):
            if r.family in DRIVER_FAMILIES:
                continue
            if r.path is None:
                how = "opens by name" if r.how == "dlopen" else "needs"
                there = [c.directory for c in (model.copies if model else ()) if c.name == r.needed]
                where = (
                    f"is installed in {there[0]} but in no directory it searches"
                    if there
                    else ("is found nowhere on the loader path")
                )
                broken = f"{r.needed}, which it {how}, {where}"
                break
            if r.missing:
                broken = f"{r.needed} resolves to {r.path}, which lacks {r.missing[0].split(',')[0]}"
                break
            have = version_of(model, r.path) if model is not None else None
            if fw.cudnn_min and r.needed == f"libcudnn.so.{fw.cudnn_major}" and have and v(have) < v(fw.cudnn_min):
                broken = f"it was built against cuDNN {fw.cudnn_min} but loads cuDNN {have} from {r.directory}"
                carrier = "cuda.frameworks"
                break
            if model is not None and r.without_env and os.path.normpath(r.without_env) != os.path.normpath(r.path):
                mine, own = version_of(model, r.path), version_of(model, r.without_env)
                if mine and own and v(mine) < v(own):
                    broken = f"{r.needed} resolves to {mine} from {r.directory} ({r.via}) instead of its own {own}"
                    break
        if broken:
            out.append(FrameworkVerdict(fw, "broken", broken, carrier))
            continue
        if not fw.gpu_libs and fl is None:
            out.append(FrameworkVerdict(fw, "unknown", f"no GPU provider library of {fw.dist} {fw.version} was found"))
            continue
        what = "its GPU libraries load" if fl else "its CUDA libraries resolve"
        out.append(FrameworkVerdict(fw, "usable", what))
    return out


def _conflict(verdicts: list[FrameworkVerdict]) -> str | None:
    known = [x.fw for x in verdicts if x.fw.known]
    for key, what in (("cudnn_major", "cuDNN"), ("cuda_major", "CUDA")):
        for i, a in enumerate(known):
            for b in known[i + 1 :]:
                ma, mb = getattr(a, key), getattr(b, key)
                if ma and mb and ma != mb:
                    return f"{a.dist} {a.version} needs {what} {ma} but {b.dist} {b.version} needs {what} {mb}"
    return None


def framework_fault(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding | None:
    """The first installed framework that cannot use CUDA here, as a ``fail`` finding of the check that carries
    the cause (``cuda.libraries`` / ``cuda.frameworks``), or None: the last step of the headline's causal order,
    so a library the loader model finds missing or shadowed counts even when torch itself reported CUDA."""
    verdicts = framework_verdicts(facts, t, probe)
    broken = next((x for x in verdicts if x.state == "broken"), None)
    if broken is not None:
        return Finding(
            check=broken.check,
            status=Status.FAIL,
            summary=f"{broken.fw.dist} {broken.fw.version}: {broken.reason}",
            explanation=f"{broken.fw.dist} cannot use the GPU: {broken.reason}. See `{broken.check}` for the "
            f"loader's path, the copy it needs and the exact remedy.",
            target=t.label,
        )
    conflict = _conflict(verdicts)
    if conflict:
        return Finding(
            check="cuda.frameworks",
            status=Status.FAIL,
            summary=conflict,
            explanation="One process loads one copy per library major; see `cuda.frameworks` for the releases "
            "that agree.",
            target=t.label,
        )
    return None


def headline_without_torch(
    check: Check, facts: Facts, t: TargetFacts, probe: ProbeFacts, fault: Finding | None
) -> Finding | None:
    """The headline of a target where torch is not installed, or None to keep the torch-centred verdict
    (a platform/driver fault and no GPU framework at all: the driver first, then which torch to install).

    ``fault``: the platform/driver fault found before any target (nouveau bound, no device in the
    container...), which comes first whatever the framework."""
    python = probe.executable
    verdicts = framework_verdicts(facts, t, probe)
    api = driver_api(probe)
    evidence: dict[str, object] = {
        "without_torch": True,  # gpudoctor.causes: torch.install is no root cause of this headline
        "python": python,
        "torch": None,
        "driver_api": api.text,
        "frameworks": {f"{x.fw.dist} {x.fw.version}": f"{x.state}: {x.reason}" for x in verdicts},
    }
    if fault is None and not verdicts and api.state == "unknown":
        # provisional (gpudoctor.causes): a platform or driver fault of this run comes first and the
        # headline then names both, the driver before torch
        evidence.update({"headline": "torch", "torch_problem": "torch is not installed"})
        return check.finding(
            Status.SKIP,
            f"CUDA usability in {python} is not known: no GPU framework is installed (torch is not installed, see "
            f"torch.install) and the CUDA driver API was not probed",
            "torch's absence says nothing about CUDA; this snapshot has no driver API result to decide from.",
            evidence=evidence,
            target=t.label,
        )
    if fault is not None:
        if not verdicts:
            return None  # the torch-centred text names both: the driver, then which torch build to install
        evidence["root_cause_check"] = fault.check
        return check.finding(
            Status.FAIL,
            f"CUDA is unavailable in {python}: {fault.summary}",
            f"Root cause (from `{fault.check}`), before any framework can use the GPU:\n\n{fault.explanation}",
            evidence=evidence,
            target=t.label,
        )
    if api.state == "unusable":
        # the finding that says why (cuda.libcuda, cuda.context) is the root cause the cause graph names
        return check.finding(
            Status.FAIL,
            f"CUDA is unavailable in {python}: {api.text}",
            f"The CUDA driver API itself fails in this environment ({api.text}), so no framework can use the GPU.",
            evidence=evidence,
            target=t.label,
        )
    broken = [x for x in verdicts if x.state == "broken"]
    if broken:
        x = broken[0]
        evidence["root_cause_check"] = x.check
        others = "".join(f"\n- {y.fw.dist} {y.fw.version}: {y.state} ({y.reason})" for y in verdicts if y is not x)
        api_txt = f" The driver itself works ({api.text})." if api.state == "usable" else ""
        return check.finding(
            Status.FAIL,
            f"CUDA is unavailable to {x.fw.dist} {x.fw.version} in {python}: {x.reason}",
            f"{x.fw.dist} cannot use the GPU: {x.reason}.{api_txt} See `{x.check}` for the loader's path, the copy "
            f"it needs and the exact remedy.\n\ntorch is not installed here, which is not a fault: it is not the "
            f"framework this environment uses." + (f"\n\nOther GPU frameworks here:{others}" if others else ""),
            evidence=evidence,
            target=t.label,
        )
    conflict = _conflict(verdicts)
    if conflict:
        evidence["root_cause_check"] = "cuda.frameworks"
        return check.finding(
            Status.FAIL,
            f"CUDA is unusable for one of two frameworks in {python}: {conflict}",
            "One process loads one copy per library major; see `cuda.frameworks` for the releases that agree.",
            evidence=evidence,
            target=t.label,
        )
    usable = [x for x in verdicts if x.state == "usable"]
    unknown = [x for x in verdicts if x.state == "unknown"]
    parts = [f"{x.fw.dist} {x.fw.version} ({x.reason})" for x in usable]
    unk = "; not modelled: " + ", ".join(f"{x.fw.dist} {x.fw.version}" for x in unknown) if unknown else ""
    if api.state == "usable":
        fws = f"; {', '.join(parts)}" if parts else "; no GPU framework is installed (torch is not installed)"
        return check.finding(
            Status.OK,
            f"CUDA works in {python}: {api.text}{fws}{unk}",
            "Decided from the CUDA driver API in this environment and from each GPU framework installed in it."
            + (
                " torch is not installed here; `torch.install` says which build fits this driver if you want it."
                if not parts
                else ""
            ),
            evidence=evidence,
            target=t.label,
        )
    if usable:
        return check.finding(
            Status.OK,
            f"CUDA is usable by {', '.join(parts)} in {python}{unk} ({api.text})",
            "Decided from each GPU framework's libraries; run `gpudoctor check` (the full probe) for the "
            "driver API's own answer.",
            evidence=evidence,
            target=t.label,
        )
    return check.finding(
        Status.SKIP,
        f"CUDA usability is unknown in {python}: "
        + ", ".join(f"{x.fw.dist} {x.fw.version} ({x.reason})" for x in unknown)
        + f"; {api.text}",
        "gpudoctor knows no rule for the GPU packages installed here; it does not call them broken.",
        evidence=evidence,
        target=t.label,
    )
