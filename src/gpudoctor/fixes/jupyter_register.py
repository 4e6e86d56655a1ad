"""Fix ``jupyter.register``: create a kernelspec for the terminal's environment, without running pip.

Writes ``<jupyter data dir>/kernels/<name>/kernel.json`` with the content
``python -m ipykernel install --user --name NAME`` writes (ipykernel 7.4
``install``/``get_kernel_dict``, ``json.dump(indent=1)``, no trailing
newline): argv ``[PYTHON, -Xfrozen_modules=off (CPython), -m,
ipykernel_launcher, -f, {connection_file}]``, ``display_name`` = the name as
given (or ``options["display_name"]``), ``language`` python, ipykernel's
``metadata``. Re-registering an existing name replaces its kernel.json, as
ipykernel does. The logo files ipykernel copies are cosmetic and not written.

Where: the user data directory, unless a kernelspec of that name sits in a
directory Jupyter searches earlier (a ``JUPYTER_PATH`` entry): that one is
replaced, since a new user-dir copy would be shadowed by it.

Options: ``name`` (default: the environment's directory name; the kernel the
finding names only when that name is about this environment, not a stale one), ``display_name``, ``python`` (default: the
terminal's interpreter). Addresses ``jupyter.kernels``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from gpudoctor.checks._common import install_command
from gpudoctor.checks.jupyter_kernels import (
    kernel_for_finding,
    reference_target,
    suggest_kernel_name,
)
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.jupyter import JupyterFacts
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.fixes._kernel_json import scope_kernels_dir
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused

_NAME = re.compile(r"^[a-z0-9._-]+$")


def kernel_dict(python: str, display_name: str, cpython: bool = True, ipykernel_major: int = 7) -> dict[str, Any]:
    """The kernel.json dict ``ipykernel install`` writes (7.x shape; 6.x has a smaller ``metadata``)."""
    argv = (
        [python]
        + (["-Xfrozen_modules=off"] if cpython else [])
        + ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    )
    d: dict[str, Any] = {"argv": argv, "display_name": display_name, "language": "python"}
    if ipykernel_major >= 7:
        d["metadata"] = {"debugger": True, "supported_encryption": ["curve"]}
        d["kernel_protocol_version"] = "5.5"
    else:
        d["metadata"] = {"debugger": True}
    return d


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    """A FixPlan creating (or replacing) one kernelspec. Raises FixRefused for a bad name."""
    options = options or {}
    jupyter = facts.of(JupyterFacts)
    if isinstance(jupyter, Unavailable) or not jupyter.data_dir:
        return None
    ref = reference_target(facts)
    probe = ref.probe if ref is not None and isinstance(ref.probe, ProbeFacts) else None
    python = options.get("python") or (probe.executable if probe else (ref.python if ref else None))
    if not python:
        return None
    existing = kernel_for_finding(facts, finding)
    suggested = suggest_kernel_name(facts)
    # the finding's kernel name only when it names this environment (case 13: train-venv for .../train);
    # a stale name of another environment would mislabel the new kernel
    keep = existing is not None and (suggested in existing.name.lower() or existing.name.lower() in suggested)
    name = options.get("name") or (existing.name if keep and existing is not None else suggested)
    if not _NAME.match(name.lower()):
        raise FixRefused(f"kernel name {name!r} is invalid: use letters, digits, '-', '.' and '_' only")
    display = options.get("display_name") or name
    ipk = (probe.distributions or {}).get("ipykernel") if probe else None
    major = int(ipk.split(".")[0]) if ipk and ipk.split(".")[0].isdigit() else 7
    text = json.dumps(kernel_dict(python, display, probe is None or probe.implementation == "cpython", major), indent=1)
    scope = (options.get("scope") or "").strip()
    kernels = scope_kernels_dir(scope, jupyter.data_dir, probe.prefix if probe else "")
    path = posixpath.join(kernels, name.lower(), "kernel.json")
    old = None
    same = jupyter.kernel(name)
    if (
        not scope  # --scope: that scope's directory, nothing else
        and same is not None
        and not same.builtin
        and same.kernel_json
        and same.kernel_json != path
        and _before(jupyter, same.kernel_json, path)
    ):
        # an earlier directory (JUPYTER_PATH) holds this name: Jupyter would keep finding that one, so replace it
        path = same.kernel_json
    if same is not None and same.kernel_json == path:
        old = same.kernel_json_text
    notes = []
    if probe is not None and probe.distributions is not None and "ipykernel" not in probe.distributions:
        notes.append(
            f"ipykernel is not installed in {python}; install it before starting the kernel: "
            + install_command(python, "ipykernel", probe.venv_creator if python == probe.executable else None)
        )
    if same is not None and same.kernel_json == path and not path.startswith(jupyter.data_dir.rstrip("/") + "/"):
        notes.append(
            f"{path} is where Jupyter finds kernel {name!r} first (an earlier JUPYTER_PATH entry), so it "
            "is replaced there; a copy in the user data directory would be shadowed."
        )
    if same is not None and same.kernel_json != path:
        notes.append(
            f"a kernel named {name!r} already exists at {same.resource_dir}; the new one in the user "
            "data directory "
            + (
                "takes precedence over it."
                if _before(jupyter, path, same.resource_dir)
                else f"is shadowed by it: remove the old one with `jupyter kernelspec remove {name}`."
            )
        )
    notes.append(f"Select kernel {display!r} in the notebook (restart it if it was running).")
    return FixPlan(
        fix=FIX.id,
        description=f"register kernel {name.lower()!r} ({display}) running {python}",
        edits=(
            verified_edit(
                path,
                old,
                text,
                f"write {path} with:\n{text}",
                meaning=lambda a, b: None if b == json.loads(text) else "content differs",
                kind="json",
            ),
        ),
        addresses=FIX.addresses,
        notes=tuple(notes),
    )


def _before(jupyter: JupyterFacts, new_path: str, other_dir: str) -> bool:
    def rank(p: str) -> int:
        for i, d in enumerate(jupyter.kernel_dirs):
            if p.startswith(d.rstrip("/") + "/"):
                return i
        return len(jupyter.kernel_dirs)

    return rank(new_path) < rank(other_dir)


FIX = Fix(
    id="jupyter.register",
    title="Register the terminal's environment as a Jupyter kernel (like `ipykernel install --user`)",
    addresses=("jupyter.kernels",),
    plan=plan,
)
