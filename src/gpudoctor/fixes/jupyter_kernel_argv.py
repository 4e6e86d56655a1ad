"""Fix ``jupyter.kernel-argv``: point a kernelspec's interpreter at the one with the CUDA torch.

Edits the kernel's ``kernel.json`` (key order and indentation kept): the
interpreter token of ``argv`` becomes the terminal's interpreter (the
reference target), or ``options["python"]``. A ``conda run -n ENV`` wrapper is
dropped with it (it would activate the environment the kernel should no
longer use); an ``env VAR=...`` wrapper is kept. Addresses ``jupyter.kernels``;
``--set kernel=NAME`` picks the kernel when several need it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from gpudoctor.checks._common import install_command
from gpudoctor.checks.jupyter_kernels import kernel_for_finding, reference_python, reference_target
from gpudoctor.facts import Facts
from gpudoctor.fixes._kernel_json import JsonStyle, dump_kernel_json, load_kernel_json, require_scope
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    """A FixPlan rewriting argv, or None when the finding names no editable kernel or nothing would change.

    Raises FixRefused when kernel.json is malformed or changed since the facts were collected.
    """
    spec = kernel_for_finding(facts, finding, dict(options or {}))
    if spec is None or spec.interpreter is None or spec.interpreter.argv_index is None:
        return None
    if spec.builtin:
        raise FixRefused(
            f"kernel {spec.name} is ipykernel's built-in spec (no kernel.json to edit); "
            "register a kernel instead (`gpudoctor fix jupyter.register`)"
        )
    new_python = (options or {}).get("python") or reference_python(facts)
    if not new_python:
        return None
    if not (options or {}).get("python"):
        ref = reference_target(facts)
        dists = getattr(getattr(ref, "probe", None), "distributions", None)
        if isinstance(dists, dict) and "ipykernel" not in dists:
            # the kernel would die at start: the user must install it first (gpudoctor does not run pip)
            install = install_command(
                new_python, "ipykernel", getattr(getattr(ref, "probe", None), "venv_creator", None)
            )
            raise FixRefused(
                f"{new_python} has no ipykernel, so kernel {spec.name} would die at start with it. "
                f"First run `{install}`, then this fix again"
            )
    if not new_python.startswith("/"):
        # Jupyter resolves a bare name on the server's PATH at launch: the very ambiguity being repaired
        raise FixRefused(
            f"--set python={new_python!r}: give the interpreter's absolute path, e.g. /home/user/venvs/train/bin/python"
        )
    jupyter = facts.get("jupyter")
    require_scope(spec.kernel_json, getattr(jupyter, "data_dir", ""), (options or {}).get("scope"))
    data = load_kernel_json(spec.kernel_json_text, spec.kernel_json)
    argv = data.get("argv")
    if not isinstance(argv, list) or tuple(str(a) for a in argv) != spec.argv:
        raise FixRefused(f"{spec.kernel_json} changed since it was read (argv differs); run the check again")
    idx = spec.interpreter.argv_index
    if spec.interpreter.via == "conda-run":
        new_argv = [new_python] + argv[idx + 1 :]
    else:
        new_argv = list(argv)
        new_argv[idx] = new_python
    if new_argv == argv:
        return None
    data["argv"] = new_argv
    new_text = dump_kernel_json(data, JsonStyle.detect(spec.kernel_json_text or ""))
    return FixPlan(
        fix=FIX.id,
        description=f"kernel {spec.name}: run {new_python} instead of {spec.interpreter.path}",
        edits=(
            verified_edit(
                spec.kernel_json,
                spec.kernel_json_text,
                new_text,
                f'in {spec.kernel_json}, set "argv" to {json.dumps(new_argv)}',
                meaning=lambda a, b: None if b == data else "its content would differ",
                kind="json",
            ),
        ),
        addresses=FIX.addresses,
        notes=(f"Restart kernel {spec.name!r} (Kernel > Restart) and check `import sys; sys.executable`.",),
    )


FIX = Fix(
    id="jupyter.kernel-argv",
    title="Point a Jupyter kernel's argv at the interpreter with the CUDA torch",
    addresses=("jupyter.kernels",),
    plan=plan,
)
