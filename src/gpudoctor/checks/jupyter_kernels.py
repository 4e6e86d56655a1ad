"""Check ``jupyter.kernels``: does every Jupyter kernel see the GPU the terminal sees?

"CUDA is True in my terminal and False in my notebook": the kernel runs a
different interpreter, or the same one with a different environment. The
reference is the terminal's interpreter (the first ``--python``, else the
activated environment's, else the one running gpudoctor): what the user
tested in the terminal. One finding per
kernelspec, then duplicate display names, then a summary:

- kernel.json cannot be loaded -> ``fail``;
- the interpreter argv runs does not exist (deleted venv) -> ``fail``;
- ``--deep``: the kernel does not start or never answers -> ``fail``;
- ipykernel is not installed in that interpreter -> ``fail``;
- kernel.json ``env`` hides GPUs (``CUDA_VISIBLE_DEVICES`` empty, ``-1`` or
  starting with an invalid entry; ``NVIDIA_VISIBLE_DEVICES`` ``none``/``void``) -> ``fail``;
- torch missing, broken or CPU-only in the kernel while the terminal has a
  CUDA build -> ``fail`` naming both interpreters;
- the kernel's ``LD_LIBRARY_PATH`` lacks directories the terminal's has and
  torch/cuDNN/CUDA fail only in the kernel -> ``fail``; the same when those directories hold
  CUDA libraries and the kernel's environment has a framework that opens them by bare name
  (TensorFlow's dso_loader, ``opens_by_name`` in data/frameworks.toml), whose failure no probe sees;
- two kernels with the same display name -> ``warn``;
- no Python kernel at all -> ``info`` with the registration command.

The classic notebook pitfall (setting ``CUDA_VISIBLE_DEVICES`` in a cell
after CUDA initialised does nothing) cannot be seen statically; the summary
explains it. Sources: ../shared/reference/jupyter-kernels.md (jupyter_client
8.10 ``format_kernel_cmd`` and ``pre_launch``; CUDA Programming Guide,
environment variables; NVIDIA Container Toolkit docs).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.checks import require
from gpudoctor.checks._common import install_command
from gpudoctor.checks._libraries import framework_dists
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.jupyter import JupyterFacts, KernelLaunch, KernelSpecFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, FixRefused, Status, fenced
from gpudoctor.visibility import parse_visible
from gpudoctor.words import plural, verb

__all__ = [
    "CHECK",
    "NOTEBOOK_PITFALL",
    "gpu_hiding_vars",
    "kernel_for_finding",
    "missing_loader_dirs",
    "reference_python",
]

FIX_ARGV = "jupyter.kernel-argv"
FIX_ENV = "jupyter.kernel-env"
FIX_REGISTER = "jupyter.register"

_LOADER_ERROR = re.compile(r"cannot open shared object file|undefined symbol|libcuda|libcudnn|libcudart", re.IGNORECASE)

NOTEBOOK_PITFALL = (
    "**Notebook pitfall:** `os.environ['CUDA_VISIBLE_DEVICES'] = '1'` in a cell only works if it runs before "
    "anything initialises CUDA (`torch.cuda.is_available()`, `.cuda()`, `torch.cuda.device_count()`); CUDA reads "
    "the variable once. After that it has no effect until the kernel is restarted. Put it in kernel.json `env` "
    "(or export it before starting Jupyter) instead, and restart the kernel."
)


def cvd_hides_all(value: str) -> bool:
    """True when ``CUDA_VISIBLE_DEVICES=value`` makes no GPU visible.

    Empty, ``-1``, ``none`` or any list whose first entry is not a device
    index, ``GPU-<uuid>`` or ``MIG-<uuid>`` (CUDA stops at the first invalid
    entry; CUDA Programming Guide, environment variables).
    """
    return parse_visible(value).hides_all


def gpu_hiding_vars(env: dict[str, str]) -> dict[str, str]:
    """The variables of a kernel.json ``env`` (after substitution) that hide every GPU."""
    out = {}
    if "CUDA_VISIBLE_DEVICES" in env and cvd_hides_all(env["CUDA_VISIBLE_DEVICES"]):
        out["CUDA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"]
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() in ("none", "void", ""):
        out["NVIDIA_VISIBLE_DEVICES"] = nvd
    return out


def _ld_dirs(env: dict[str, str]) -> list[str]:
    return [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]


def missing_loader_dirs(reference: ProbeFacts | None, kernel: ProbeFacts | None) -> list[str]:
    """``LD_LIBRARY_PATH`` directories of the reference (terminal) missing from the kernel's, in order."""
    if reference is None or kernel is None:
        return []
    have = set(_ld_dirs(kernel.env))
    return [d for d in _ld_dirs(reference.env) if d not in have]


def _cuda_dirs(facts: Facts, dirs: Sequence[str]) -> dict[str, list[str]]:
    """Of ``dirs``, those the loader facts saw holding CUDA libraries: directory -> library names."""
    from gpudoctor.facts.loader import LoaderFacts

    loader = facts.of(LoaderFacts)
    if isinstance(loader, Unavailable):
        return {}
    held = {d.path.rstrip("/"): [f.name for f in d.libraries] for d in loader.dirs if d.libraries}
    return {d: held[d.rstrip("/")] for d in dirs if held.get(d.rstrip("/"))}


def reference_target(facts: Facts) -> TargetFacts | None:
    """The terminal's target, or None: the first ``--python``; else the activated
    environment's interpreter (``active-env``: what ``python`` means in the user's
    shell when gpudoctor runs from its own venv); else the current interpreter."""
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return None
    terminal = [t for t in targets.targets if t.kind != "kernel"]
    for kind in ("python", "active-env"):
        for t in terminal:
            if t.kind == kind:
                return t
    return terminal[0] if terminal else None


def reference_python(facts: Facts) -> str | None:
    """The terminal's interpreter (probe's ``sys.executable`` when known)."""
    ref = reference_target(facts)
    if ref is None:
        return None
    return ref.probe.executable if isinstance(ref.probe, ProbeFacts) else ref.python


def kernel_for_finding(facts: Facts, finding: Finding, options: dict[str, str] | None = None) -> KernelSpecFacts | None:
    """The kernelspec a ``jupyter.kernels`` finding is about (evidence ``kernel``), or None.

    With ``options["kernel"]`` (``gpudoctor fix ... --set kernel=NAME``), None
    unless the finding is about that kernel, so the fix is planned for it;
    raises FixRefused when no kernelspec has that name at all.
    """
    jupyter = facts.of(JupyterFacts)
    name = finding.evidence.get("kernel") if finding.evidence else None
    if isinstance(jupyter, Unavailable) or not name:
        return None
    wanted = (options or {}).get("kernel")
    if wanted and jupyter.kernel(str(wanted)) is None:
        known = ", ".join(k.name for k in jupyter.kernels) or "none"
        raise FixRefused(f"--set kernel={wanted!r}: Jupyter has no kernelspec of that name (known: {known})")
    if wanted and str(wanted).lower() != str(name).lower():
        return None
    return jupyter.kernel(str(name))


@dataclass
class _Problem:
    status: Status
    code: str
    summary: str
    explanation: str
    fixes: tuple[str, ...] = ()
    commands: tuple[Command, ...] = ()


@dataclass
class _Kernel:
    spec: KernelSpecFacts
    target: TargetFacts | None
    problems: list[_Problem] = field(default_factory=list)


def _q(text: str) -> str:
    return shlex.quote(text)


def _pip_install(probe: ProbeFacts, package: str) -> str:
    """The command that installs ``package`` into the probed interpreter (uv's form in a venv made
    by ``uv venv``: :func:`~gpudoctor.checks._common.install_command`)."""
    return install_command(probe.executable, package, probe.venv_creator)


def _register_cmd(python: str, name: str, display: str, probe: ProbeFacts | None) -> str:
    """Register ``python`` as the kernel ``name``; ipykernel installed first when ``probe`` (that
    interpreter's) lacks it, with uv's installer in a venv made by ``uv venv``."""
    install = (
        ""
        if _has_ipykernel(probe)
        else install_command(python, "ipykernel", probe.venv_creator if probe is not None else None) + " && "
    )
    return f"{install}{_q(python)} -m ipykernel install --user --name {_q(name)} --display-name {_q(display)}"


def _without_connection_file(argv: Sequence[str]) -> list[str]:
    """argv without ``-f {connection_file}`` (ipykernel then writes its own connection file)."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == "-f" and i + 1 < len(argv) and "{connection_file}" in argv[i + 1]:
            skip = True
            continue
        if "{connection_file}" in a:
            continue
        out.append(a)
    return out


def _gpu_vars(env: dict[str, str]) -> dict[str, str]:
    return {n: v for n, v in env.items() if n.startswith(("CUDA_", "NVIDIA_"))}


def _torch_words(probe: ProbeFacts) -> str:
    t = probe.torch
    if not t.installed:
        return "no torch"
    if not t.import_ok:
        return f"torch {t.dist_version or ''} that fails to import".replace("  ", " ")
    if t.cuda:
        return f"torch {t.version} (CUDA {t.cuda} build)"
    if t.hip:
        return f"torch {t.version} (ROCm build)"
    return f"torch {t.version} (CPU-only build)"


def _has_ipykernel(probe: ProbeFacts | None) -> bool:
    return probe is None or probe.distributions is None or "ipykernel" in probe.distributions


def _analyse(k: _Kernel, ref: TargetFacts | None, facts: Facts) -> None:
    spec = k.spec
    interp = spec.interpreter
    ref_probe = ref.probe if ref is not None and isinstance(ref.probe, ProbeFacts) else None
    ref_py = reference_python(facts)
    ref_has_ipk = _has_ipykernel(ref_probe)
    display = spec.display_name or spec.name
    reregister = _register_cmd(ref_py, spec.name, display, ref_probe) if ref_py else None
    register = (
        (Command(reregister, "re-register the kernel from the terminal's environment", "changes"),)
        if reregister
        else ()
    )
    remove = Command(f"jupyter kernelspec remove -y {_q(spec.name)}", "or remove the kernel", "changes")
    if spec.error:
        k.problems.append(
            _Problem(
                Status.FAIL,
                "unloadable",
                f"Jupyter cannot load kernelspec {spec.name}: {spec.error}",
                f"`{spec.kernel_json}` is not a valid kernelspec, so Jupyter does not offer this kernel.\n\n"
                f"Fix the file by hand, or re-register the kernel (this replaces the directory):\n\n"
                f"```\n{reregister}\n```"
                if reregister
                else "Fix the file by hand or delete the kernelspec directory.",
                (FIX_REGISTER,) if reregister else (),
                (*register, remove),
            )
        )
        return
    if interp is None:
        k.problems.append(
            _Problem(
                Status.FAIL,
                "no-argv",
                f"kernelspec {spec.name} has an empty argv",
                "Jupyter cannot start a kernel without a command line.",
                (FIX_REGISTER,),
            )
        )
        return
    can_repoint = ref_py is not None and interp.path != ref_py
    if not interp.exists:
        fixes = ((FIX_ARGV,) if can_repoint else ()) + (FIX_REGISTER,)
        k.problems.append(
            _Problem(
                Status.FAIL,
                "interpreter-missing",
                f"kernel {spec.name} runs {interp.path}, which does not exist",
                f"kernel.json (`{spec.kernel_json}`) starts `{' '.join(spec.argv[:1])}`"
                + (f" ({interp.note})" if interp.note else "")
                + ", and that interpreter is gone (a deleted or moved virtualenv/conda env). Jupyter still lists the "
                "kernel, but it dies on start.\n\n"
                + (
                    f"Point the kernel at the terminal's interpreter "
                    f"(`gpudoctor fix {FIX_ARGV} --set kernel={spec.name}`), or re-register it "
                    f"from the environment you want:\n\n```\n{reregister}\n```\n\n"
                    if reregister
                    else ""
                )
                + f"Or remove it: `jupyter kernelspec remove {spec.name}`.",
                fixes,
                (*register, remove),
            )
        )
        return
    launch = spec.launch
    launch_failed = isinstance(launch, KernelLaunch) and not launch.ok
    if isinstance(launch, KernelLaunch) and not launch.ok:
        tail = f"\n\nLast lines of the kernel's stderr:\n\n```\n{launch.stderr_tail}\n```" if launch.stderr_tail else ""
        by_hand = Command(
            " ".join(shlex.quote(a) for a in _without_connection_file(spec.argv)),
            "start the kernel by hand to see the whole error",
        )
        k.problems.append(
            _Problem(
                Status.FAIL,
                "launch-failed",
                f"kernel {spec.name} does not work when started: {launch.error}",
                f"gpudoctor started the kernel with jupyter_client, as Jupyter does, running `{interp.path}`: "
                f"{launch.error}.{tail}\n\nStart it by hand to see the whole error (a larger `--probe-timeout` helps "
                f"when the machine is just slow):\n\n{fenced(by_hand)}",
                (),
                (by_hand,),
            )
        )
    probe = _kernel_probe(k)
    if isinstance(probe, Unavailable) and launch_failed:
        return
    if isinstance(probe, Unavailable):
        k.problems.append(
            _Problem(
                Status.FAIL,
                "probe-failed",
                f"could not inspect kernel {spec.name}: {probe.reason}",
                f"The probe could not run in `{interp.path}` with the kernel's environment.",
                (),
                (Command(f"{_q(interp.path)} -c 'import sys; print(sys.version)'", "does the interpreter start"),),
            )
        )
        return
    if not _has_ipykernel(probe):
        install_ipk = Command(
            _pip_install(probe, "ipykernel"),
            "install ipykernel where the kernel runs"
            + (" (a venv made by `uv venv` has no pip)" if probe.venv_creator == "uv" else ""),
            "changes",
        )
        k.problems.append(
            _Problem(
                Status.FAIL,
                "no-ipykernel",
                f"ipykernel is not installed in {probe.executable}: kernel {spec.name} cannot start",
                f"Jupyter starts this kernel as `{probe.executable} -m ipykernel_launcher`, and that interpreter has no "
                f"ipykernel. Install it there:\n\n{fenced(install_ipk)}"
                + (
                    f"\n\nor point the kernel at the terminal's interpreter `{ref_py}` "
                    f"(`gpudoctor fix {FIX_ARGV} --set kernel={spec.name}`)."
                    if can_repoint and ref_has_ipk
                    else ""
                ),
                (FIX_ARGV,) if can_repoint and ref_has_ipk else (),
                (install_ipk,),
            )
        )
    hiding = gpu_hiding_vars(spec.env_resolved)
    if hiding:
        shown = ", ".join(f"`{k_}={v!r}`".replace("'", '"') for k_, v in hiding.items())
        k.problems.append(
            _Problem(
                Status.FAIL,
                "hides-gpus",
                f"kernel {spec.name} hides every GPU: kernel.json sets {shown.replace('`', '')}",
                f"kernel.json (`{spec.kernel_json}`) `env` sets {shown}. "
                "`CUDA_VISIBLE_DEVICES` that is empty, `-1` or starts with an invalid entry leaves CUDA no device "
                "(`torch.cuda.is_available()` is False, `device_count()` is 0); `NVIDIA_VISIBLE_DEVICES=none|void` "
                "tells a container runtime to attach no GPU when the kernel runs in a container.\n\n"
                f"Remove them (`gpudoctor fix {FIX_ENV} --set kernel={spec.name}`) and restart the kernel. "
                "To pick one GPU, use an index or "
                '`GPU-<uuid>` instead, e.g. `"CUDA_VISIBLE_DEVICES": "0"`.',
                (FIX_ENV,),
            )
        )
    wrapped = (
        gpu_hiding_vars(dict(spec.interpreter.wrapper_env))
        if spec.interpreter is not None and spec.interpreter.via == "env"
        else {}
    )
    wrapped = {k_: v for k_, v in wrapped.items() if k_ not in hiding}
    if wrapped:
        interp_at = spec.interpreter.argv_index if spec.interpreter is not None else None
        wrapper = spec.argv[: interp_at + 1] if interp_at is not None else spec.argv
        shown = ", ".join(f"{k_}={v!r}".replace("'", '"') for k_, v in wrapped.items())
        k.problems.append(
            _Problem(
                Status.FAIL,
                "hides-gpus",
                f"kernel {spec.name} hides every GPU: its argv runs `env {shown} ...` before the interpreter",
                f"kernel.json (`{spec.kernel_json}`) starts the kernel through an `env` wrapper in `argv` "
                f"(`{' '.join(wrapper)}`), which sets `{shown}` for the kernel "
                "exactly as kernel.json `env` would: CUDA sees no device (`torch.cuda.is_available()` is False).\n\n"
                f"Remove the assignment from argv (`gpudoctor fix {FIX_ENV} --set kernel={spec.name}`) and restart the "
                "kernel. To pick one GPU, use an index or `GPU-<uuid>`.",
                (FIX_ENV,),
            )
        )
        hiding = {**hiding, **wrapped}
    tk = probe.torch
    ref_cuda = ref_probe is not None and ref_probe.torch.import_ok and bool(ref_probe.torch.cuda)
    same_python = ref_probe is not None and (
        probe.executable == ref_probe.executable or probe.prefix == ref_probe.prefix
    )
    if same_python:
        can_repoint = False
    if ref_cuda and (not tk.installed or not tk.import_ok or tk.is_cpu_build) and not same_python:
        rt = ref_probe.torch  # type: ignore[union-attr]
        fixes = ((FIX_ARGV,) if can_repoint else ()) + ((FIX_REGISTER,) if ref_py else ())
        what = (
            "has no torch"
            if not tk.installed
            else "cannot import torch"
            if not tk.import_ok
            else f"has a CPU-only torch {tk.version}"
        )
        k.problems.append(
            _Problem(
                Status.FAIL,
                "no-cuda-torch",
                f"kernel {spec.name} runs {probe.executable}, which {what}; the terminal's {ref_probe.executable} "  # type: ignore[union-attr]
                f"has torch {rt.version} with CUDA {rt.cuda}",
                f"The notebook and the terminal run different Pythons. In the terminal, `{ref_probe.executable}` "  # type: ignore[union-attr]
                f"has {_torch_words(ref_probe)} and "  # type: ignore[arg-type]
                f'`torch.cuda.is_available()` is {rt.cuda_available}; kernel `{spec.name}` ("{display}") runs '
                f"`{probe.executable}` ({interp.via}"
                + (f": {interp.note}" if interp.note else "")
                + f"), which has {_torch_words(probe)}, so the GPU is invisible in the notebook.\n\n"
                "Kernelspecs written by `ipython kernel install` or `jupyter` from another environment record that "
                "environment's interpreter, not the activated one.\n\n"
                + (
                    f"Point the kernel at the terminal's interpreter "
                    f"(`gpudoctor fix {FIX_ARGV} --set kernel={spec.name}`), or re-register it "
                    f"from that environment (replaces the kernelspec):\n\n```\n{reregister}\n```\n\n"
                    if reregister
                    else ""
                )
                + "Then restart the kernel and check `import sys; sys.executable` in a cell.",
                fixes,
                register,
            )
        )
    elif not (hiding and ref_cuda):
        missing = missing_loader_dirs(ref_probe, probe)
        ld_symptom = bool(tk.import_error and _LOADER_ERROR.search(tk.import_error)) or (
            tk.import_ok
            and bool(tk.cuda)
            and ref_probe is not None
            and (
                (ref_probe.torch.cuda_available and not tk.cuda_available)
                or (ref_probe.torch.cudnn_version is not None and tk.cudnn_version is None)
            )
        )
        if ld_symptom and missing:
            dirs = ":".join(missing)
            k.problems.append(
                _Problem(
                    Status.FAIL,
                    "loader-path",
                    f"kernel {spec.name}: CUDA libraries fail to load in the kernel only; its LD_LIBRARY_PATH lacks {dirs}",
                    f"In the terminal `LD_LIBRARY_PATH` contains `{dirs}`, which the kernel's environment does not. "
                    "That happens when the variable is set in a login shell (`~/.bashrc`, `module load`) but Jupyter is "
                    "started by systemd, JupyterHub or an IDE, which never read it. In the kernel: "
                    + (
                        f"`import torch` fails with `{tk.import_error}`."
                        if not tk.import_ok
                        else f"`torch.cuda.is_available()` is {tk.cuda_available}, cuDNN version {tk.cudnn_version}."
                    )
                    + f"\n\nAdd the directories to kernel.json `env` (`gpudoctor fix {FIX_ENV} --set kernel={spec.name}`), "
                    "or set them in the "
                    "Jupyter service's environment, then restart the kernel.",
                    (FIX_ENV,),
                )
            )
        elif missing and not ld_symptom and framework_dists(probe, by_name_only=True) and _cuda_dirs(facts, missing):
            held = _cuda_dirs(facts, missing)
            fws = ", ".join(framework_dists(probe, by_name_only=True))
            libs = sorted({n for names in held.values() for n in names})
            shown = ", ".join(f"`{n}`" for n in libs[:6]) + (" ..." if len(libs) > 6 else "")
            k.problems.append(
                _Problem(
                    Status.FAIL,
                    "loader-path",
                    f"kernel {spec.name}: {fws} cannot find its CUDA libraries in the kernel; the kernel's "
                    f"LD_LIBRARY_PATH lacks {':'.join(held)}",
                    f"In the terminal `LD_LIBRARY_PATH` contains `{':'.join(held)}`, which holds {shown}; the kernel's "
                    f"environment does not. {fws} opens these libraries by bare name when it starts the GPU, so in the "
                    "notebook it logs `Could not load dynamic library ...` and runs on the CPU, while the terminal sees "
                    "the GPU. This happens when the variable is set by `conda activate` (an `activate.d` script), "
                    "`~/.bashrc` or `module load`, but Jupyter was started without it (another environment, "
                    "systemd, JupyterHub, an IDE).\n\n"
                    f"Add the directories to kernel.json `env` (`gpudoctor fix {FIX_ENV} --set kernel={spec.name}`), "
                    "or start Jupyter from the activated environment, then restart the kernel.",
                    (FIX_ENV,),
                )
            )
        elif ld_symptom and not hiding and tk.import_ok:
            k.problems.append(
                _Problem(
                    Status.FAIL,
                    "cuda-kernel-only",
                    f"kernel {spec.name}: CUDA works in the terminal but not in the kernel",
                    f"Same torch build, different result: `torch.cuda.is_available()` is {tk.cuda_available} in the kernel. "
                    f"Compare the kernel's GPU variables {_gpu_vars(probe.env)} "
                    f"with the terminal's.{(' CUDA said: ' + tk.cuda_error) if tk.cuda_error else ''}",
                    (),
                    (
                        Command(
                            f"{_q(probe.executable)} -c 'import torch; print(torch.cuda.is_available())'",
                            "in the terminal: the same interpreter with the terminal's environment",
                        ),
                    ),
                )
            )


def _kernel_probe(k: _Kernel) -> ProbeFacts | Unavailable:
    """The kernel target's probe; else the in-kernel probe of a successful --deep launch."""
    if k.target is not None:
        return k.target.probe
    launch = k.spec.launch
    if isinstance(launch, KernelLaunch) and launch.ok:
        return launch.probe
    return Unavailable("the kernel's interpreter was not probed")


def _ok_summary(k: _Kernel) -> tuple[Status, str]:
    probe = _kernel_probe(k)
    interp = k.spec.interpreter
    if not isinstance(probe, ProbeFacts):
        return Status.OK, f"kernel {k.spec.name} runs {interp.path if interp else '?'}"
    t = probe.torch
    if t.import_ok and t.cuda and t.cuda_available:
        gpus = (
            f", {t.device_count} GPU{'s' if t.device_count != 1 else ''} visible" if t.device_count is not None else ""
        )
        return Status.OK, f"kernel {k.spec.name} runs {probe.executable}: {_torch_words(probe)}, CUDA available{gpus}"
    return Status.OK, f"kernel {k.spec.name} runs {probe.executable}: {_torch_words(probe)}, as in the terminal"


def evaluate(facts: Facts) -> list[Finding]:
    jupyter = require(facts, JupyterFacts)
    targets = facts.of(TargetsFacts)
    by_label: dict[str, TargetFacts] = {}
    if not isinstance(targets, Unavailable):
        by_label = {t.label: t for t in targets.targets}
    ref = reference_target(facts)
    ref_py = reference_python(facts)
    findings: list[Finding] = []
    analysed: list[_Kernel] = []
    for spec in jupyter.kernels:
        if not spec.is_python and spec.error is None:
            findings.append(
                CHECK.finding(
                    Status.INFO,
                    f"kernel {spec.name} is a {spec.language or 'non-Python'} kernel; not checked",
                    f"gpudoctor probes Python kernels only. argv: `{' '.join(spec.argv)}`.",
                    evidence={"kernel": spec.name, "kernel_json": spec.kernel_json},
                    target=f"kernel:{spec.name}",
                )
            )
            continue
        k = _Kernel(spec, by_label.get(f"kernel:{spec.name}"))
        _analyse(k, ref, facts)
        analysed.append(k)
        evidence: dict[str, Any] = {
            "kernel": spec.name,
            "display_name": spec.display_name,
            "kernel_json": spec.kernel_json,
            "argv": list(spec.argv),
            "reference_python": ref_py,
        }
        if spec.interpreter is not None:
            evidence.update(interpreter=spec.interpreter.path, via=spec.interpreter.via)
        if spec.env:
            evidence["env"] = dict(spec.env)
        if isinstance(spec.launch, KernelLaunch):
            evidence["launch_ms"] = round(spec.launch.duration_ms, 1)
        extra = ""
        if spec.shadowed:
            extra = (
                "\n\nNote: " + ", ".join(f"`{s}`" for s in spec.shadowed) + " also define a kernel named "
                f"`{spec.name}` but are ignored: `{spec.resource_dir}` comes first in Jupyter's search path. "
                "Edit this one, or remove the others."
            )
        if k.problems:
            evidence["problems"] = [p.code for p in k.problems]
            first = k.problems[0]
            fixes = tuple(dict.fromkeys(f for p in k.problems for f in p.fixes))
            commands = tuple(dict.fromkeys(c for p in k.problems for c in p.commands))
            body = "\n\n".join(p.explanation for p in k.problems)
            if len(k.problems) > 1:
                body += "\n\nAlso: " + "; ".join(p.summary for p in k.problems[1:])
            findings.append(
                CHECK.finding(
                    Status.worst([p.status for p in k.problems]),
                    first.summary,
                    body + extra,
                    evidence=evidence,
                    fixes=fixes,
                    commands=commands,
                    target=f"kernel:{spec.name}",
                )
            )
        else:
            status, summary = _ok_summary(k)
            findings.append(
                CHECK.finding(
                    status,
                    summary,
                    f"argv: `{' '.join(spec.argv)}`." + extra,
                    evidence=evidence,
                    target=f"kernel:{spec.name}",
                )
            )
    by_display: dict[str, list[str]] = {}
    for spec in jupyter.kernels:
        if spec.error is None:
            by_display.setdefault(spec.display_name, []).append(spec.name)
    for display, names in by_display.items():
        if len(names) > 1:
            findings.append(
                CHECK.finding(
                    Status.WARN,
                    f"{len(names)} kernels share the display name {display!r}: {', '.join(names)}",
                    "The notebook's kernel picker shows only display names, so you cannot tell these apart and may be "
                    "running a different environment than you think. Give each a distinct `display_name` in its "
                    "kernel.json:\n\n"
                    + "\n".join(
                        f"- `{n}`: `{jupyter.kernel(n).kernel_json}` runs "  # type: ignore[union-attr]
                        f"`{' '.join(jupyter.kernel(n).argv[:1])}`"  # type: ignore[union-attr]
                        for n in names
                    ),
                    evidence={"display_name": display, "kernels": names},
                    commands=tuple(
                        Command(
                            f'sed -i \'s|"display_name": *"[^"]*"|"display_name": "{display} ({n})"|\' '
                            f"{_q(jupyter.kernel(n).kernel_json)}",  # type: ignore[union-attr]
                            f"name kernel {n} apart in the picker",
                            "changes",
                        )
                        for n in names[1:]
                        if not set(display + n) & set("'|\"\\&")  # nothing sed or the shell would read
                    ),
                )
            )
    python_kernels = list(analysed)
    if not python_kernels:
        cmd = (
            _register_cmd(
                ref_py,
                _suggest_name(facts),
                _suggest_name(facts),
                ref.probe if ref is not None and isinstance(ref.probe, ProbeFacts) else None,
            )
            if ref_py
            else "python -m ipykernel install --user --name NAME"
        )
        findings.append(
            CHECK.finding(
                Status.INFO,
                "no Python kernel is registered with Jupyter",
                f"Jupyter ({jupyter.server_python}) lists no Python kernelspec in {', '.join(jupyter.kernel_dirs)}. "
                f"To use this environment in notebooks, register it:\n\n```\n{cmd}\n```\n\n" + NOTEBOOK_PITFALL,
                evidence={"kernel_dirs": list(jupyter.kernel_dirs), "reference_python": ref_py},
                fixes=(FIX_REGISTER,) if ref_py else (),
            )
        )
        return findings
    bad = [k.spec.name for k in python_kernels if k.problems]
    worst = Status.worst([f.status for f in findings])
    if bad:
        summary = (
            f"{len(bad)} of {plural(len(python_kernels), 'Python kernel')} "
            f"{verb(len(bad), 'is', 'are')} broken or {verb(len(bad), 'does', 'do')} not see what the "
            f"terminal ({ref_py}) sees: {', '.join(bad)}"
        )
    else:
        summary = (
            f"all {len(python_kernels)} Python kernels match the terminal ({ref_py})"
            if len(python_kernels) > 1
            else f"the Python kernel matches the terminal ({ref_py})"
        )
    findings.append(
        CHECK.finding(
            worst if bad else Status.OK,
            summary,
            f"Kernels were judged against the terminal's interpreter `{ref_py}` (the reference). Jupyter server: "
            f"`{jupyter.server_python}`, {jupyter.server_python_source}; a kernel whose argv says plain `python` runs "
            f"that one. "
            + (
                "Kernels were started for real (--deep). "
                if jupyter.deep
                else "Run `gpudoctor check jupyter --deep` to start each kernel for real. "
            )
            + f"\n\n{NOTEBOOK_PITFALL}",
            evidence={
                "reference_python": ref_py,
                "server_python": jupyter.server_python,
                "failing": bad,
                "kernels": [k.spec.name for k in python_kernels],
            },
        )
    )
    return findings


def _suggest_name(facts: Facts) -> str:
    """A kernel name for the reference environment: its prefix's directory name, lower-cased."""
    ref = reference_target(facts)
    if ref is None or not isinstance(ref.probe, ProbeFacts):
        return "python3"
    base = ref.probe.prefix.rstrip("/").rsplit("/", 1)[-1].lower()
    if base in (".venv", "venv", "env", ".env", "usr", "local", ""):
        parts = [p for p in ref.probe.prefix.strip("/").split("/") if p]
        base = (parts[-2] if len(parts) > 1 else "python3").lower()
    return re.sub(r"[^a-z0-9._-]", "-", base).strip("-.") or "python3"


def suggest_kernel_name(facts: Facts) -> str:
    """Public form of the kernel-name suggestion used by ``jupyter.register``."""
    return _suggest_name(facts)


CHECK = Check(
    id="jupyter.kernels",
    title="Every Jupyter kernel sees the GPU the terminal sees (interpreter, ipykernel, env, loader path)",
    needs=("jupyter", "targets", "loader"),
    evaluate=evaluate,
)
