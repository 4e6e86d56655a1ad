"""Report areas: the groups a person reads a report by.

Every check belongs to one area. A built-in check's area is its row in the
catalogue (``data/checks.toml``, :mod:`gpudoctor.catalogue`); a plug-in may
declare it (``Check.area``); otherwise the area follows from its id by the
longest matching prefix in :data:`PREFIX_AREAS` (a plug-in ``cudnn.x`` ->
``libraries``, ``pip.x`` -> ``sources``). Ids that match nothing land in ``other``.

The console and markdown renderers show one header line per area, in the
order of :data:`AREAS` (gpudoctor's own errors first, then the causal chain
of a GPU job: the stack first, the package sources last); an area declared by a plug-in that is not listed here
is shown after the known ones under its own name.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudoctor import catalogue

__all__ = ["AREAS", "PREFIX_AREAS", "area_for", "area_rank", "area_title"]

#: area key -> title shown in the report, in display order.
AREAS: Mapping[str, str] = {
    "gpudoctor": "gpudoctor itself (collectors, plug-ins)",
    "gpu": "GPU stack",
    "libraries": "CUDA libraries and frameworks",
    "platform": "Platform (containers, schedulers, kernel modules, limits)",
    "devices": "Device health",
    "notebooks": "Notebooks",
    "data": "Data pipeline",
    "sources": "Package sources",
    "other": "Other checks",
}

#: check-id prefix (a whole dotted component or more) -> area key, for ids
#: without a catalogue row (plug-ins). The longest prefix that matches wins.
PREFIX_AREAS: Mapping[str, str] = {
    "nvidia": "gpu",
    "cuda": "gpu",
    "torch": "gpu",
    "amp": "gpu",
    "gpu": "gpu",
    "cudnn": "libraries",
    "libraries": "libraries",
    "frameworks": "libraries",
    "nccl": "libraries",
    "triton": "libraries",
    "platform": "platform",
    "container": "platform",
    "kubernetes": "platform",
    "k8s": "platform",
    "limits": "platform",
    "rdma": "platform",
    "devices": "devices",
    "jupyter": "notebooks",
    "dataloader": "data",
    "pip": "sources",
    "uv": "sources",
    "conda": "sources",
    "apt": "sources",
    "sources": "sources",
    "dockerfile": "sources",
    "build": "sources",
    "index": "sources",
    "collect": "gpudoctor",
    "gpudoctor": "gpudoctor",
    # the families of `explain`'s signatures (data/errors.toml), so a match lands in its area
    "nvidia-smi": "gpu",
    "nvml": "gpu",
    "precision": "gpu",
    "python.no-module-torch": "gpu",
    "lib": "libraries",
    "cublas": "libraries",
    "compile": "libraries",
    "jit": "libraries",
    "python.headers-absent": "libraries",
    "tf": "libraries",
    "jax": "libraries",
    "xla": "libraries",
    "onnxruntime": "libraries",
    "lightning": "libraries",
    "vllm": "libraries",
    "bitsandbytes": "libraries",
    "numpy": "libraries",
    "torchvision": "libraries",
    "dist": "platform",
    "slurm": "platform",
    "ray": "platform",
    "docker": "platform",
    "apptainer": "platform",
    "lxc": "platform",
    "wsl": "platform",
    "windows": "platform",
    "kmod": "platform",
    "dkms": "platform",
    "installer": "platform",
    "xorg": "platform",
    "kernel": "platform",
    "os": "platform",
    "nvrm": "devices",
    "notebook": "notebooks",
    "shm": "data",
    "poetry": "sources",
    "net": "sources",
    "tls": "sources",
    "hf": "sources",
}


def area_for(check_id: str, declared: str | None = None) -> str:
    """The area key of a check: ``declared`` when given, else its catalogue row's, else by id prefix.

    ``area_for("cudnn.load") == "libraries"``, ``area_for("x.y") == "other"``.
    """
    if declared:
        return declared
    row = catalogue.row(check_id)
    if row is not None:
        return row.area
    parts = check_id.split(".")
    for n in range(len(parts), 0, -1):
        area = PREFIX_AREAS.get(".".join(parts[:n]))
        if area is not None:
            return area
    return "other"


def area_title(area: str) -> str:
    """Display title of an area key (a plug-in's own area: the key itself)."""
    return AREAS.get(area, area)


def area_rank(area: str) -> tuple[int, str]:
    """Sort key: known areas in :data:`AREAS` order (``other`` last), unknown
    (plug-in) areas by name just before ``other``."""
    keys = list(AREAS)
    if area == "other":
        return (len(keys) + 1, area)
    if area in AREAS:
        return (keys.index(area), area)
    return (len(keys), area)
