"""Fix ``jupyter.kernel-env``: remove GPU-hiding variables from kernel.json ``env``, add missing loader paths.

- ``CUDA_VISIBLE_DEVICES`` that hides every GPU (empty, ``-1``, invalid first
  entry) and ``NVIDIA_VISIBLE_DEVICES=none|void`` are removed;
- ``LD_LIBRARY_PATH`` directories the terminal has and the kernel lacks are
  prepended (to kernel.json's own value, or to ``${LD_LIBRARY_PATH}`` when the
  server environment has one, which Jupyter substitutes at launch).

Key order and indentation are kept; an ``env`` left empty is removed (the
shape ``ipykernel install`` writes). Addresses ``jupyter.kernels``;
``--set kernel=NAME`` picks the kernel when several need it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from gpudoctor.checks.jupyter_kernels import gpu_hiding_vars, kernel_for_finding, missing_loader_dirs, reference_target
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import ProbeFacts, TargetsFacts
from gpudoctor.fixes._kernel_json import JsonStyle, dump_kernel_json, load_kernel_json, require_scope
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused


def _kernel_probe(facts: Facts, name: str) -> ProbeFacts | None:
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return None
    for t in targets.targets:
        if t.label == f"kernel:{name}" and isinstance(t.probe, ProbeFacts):
            return t.probe
    return None


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    """A FixPlan editing ``env``, or None when nothing needs changing. Raises FixRefused on malformed kernel.json."""
    spec = kernel_for_finding(facts, finding, dict(options or {}))
    if spec is None:
        return None
    if spec.builtin:
        raise FixRefused(f"kernel {spec.name} is ipykernel's built-in spec (no kernel.json to edit)")
    jupyter = facts.get("jupyter")
    require_scope(spec.kernel_json, getattr(jupyter, "data_dir", ""), (options or {}).get("scope"))
    data = load_kernel_json(spec.kernel_json_text, spec.kernel_json)
    env = data.get("env", {})
    if not isinstance(env, dict):
        raise FixRefused(f"{spec.kernel_json}: `env` is not an object; fix it by hand")
    new_env = dict(env)
    changes = []
    for name in gpu_hiding_vars({k: str(v) for k, v in spec.env_resolved.items()}):
        if name in new_env:
            del new_env[name]
            changes.append(f"remove {name}")
    interp = spec.interpreter
    if interp is not None and interp.via == "env" and interp.argv_index is not None:
        argv = data.get("argv")
        if not isinstance(argv, list) or tuple(str(a) for a in argv) != spec.argv:
            raise FixRefused(f"{spec.kernel_json} changed since it was read (argv differs); run the check again")
        hidden = gpu_hiding_vars(dict(interp.wrapper_env))
        if hidden:
            kept = [
                a
                for i, a in enumerate(argv)
                if not (i < interp.argv_index and "=" in str(a) and str(a).split("=", 1)[0] in hidden)
            ]
            wrapper = kept[: kept.index(argv[interp.argv_index])] if argv[interp.argv_index] in kept else []
            if [w for w in wrapper if str(w).rsplit("/", 1)[-1] != "env"] == [] and wrapper:
                kept = kept[len(wrapper) :]  # nothing left for `env` to do: run the interpreter directly
            data["argv"] = kept
            changes += [f"remove {n} from the env wrapper in argv" for n in hidden]
    ref = reference_target(facts)
    kprobe = _kernel_probe(facts, spec.name)
    missing = missing_loader_dirs(ref.probe if ref is not None and isinstance(ref.probe, ProbeFacts) else None, kprobe)
    if missing:
        add = ":".join(missing)
        if "LD_LIBRARY_PATH" in new_env and str(new_env["LD_LIBRARY_PATH"]):
            new_env["LD_LIBRARY_PATH"] = f"{add}:{new_env['LD_LIBRARY_PATH']}"
        elif kprobe is not None and kprobe.env.get("LD_LIBRARY_PATH"):
            new_env["LD_LIBRARY_PATH"] = f"{add}:${{LD_LIBRARY_PATH}}"
        else:
            new_env["LD_LIBRARY_PATH"] = add
        changes.append(f"add {add} to LD_LIBRARY_PATH")
    if not changes:
        return None
    if new_env:
        data["env"] = new_env
    else:
        data.pop("env", None)
    new_text = dump_kernel_json(data, JsonStyle.detect(spec.kernel_json_text or ""))
    return FixPlan(
        fix=FIX.id,
        description=f"kernel {spec.name}: " + "; ".join(changes),
        edits=(
            verified_edit(
                spec.kernel_json,
                spec.kernel_json_text,
                new_text,
                f'in {spec.kernel_json}, set "env" to {json.dumps(new_env)}',
                meaning=lambda a, b: None if b == data else "its content would differ",
                kind="json",
            ),
        ),
        addresses=FIX.addresses,
        notes=(f"Restart kernel {spec.name!r} so it starts with the new environment.",),
    )


FIX = Fix(
    id="jupyter.kernel-env",
    title="Remove GPU-hiding variables from a kernel's env and add the terminal's loader paths",
    addresses=("jupyter.kernels",),
    plan=plan,
)
