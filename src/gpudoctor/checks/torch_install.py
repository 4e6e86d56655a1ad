"""Check ``torch.install``: is PyTorch installed and importable in each target,
and is its build the right kind for this machine?

Per target interpreter:

- the probe could not run -> ``fail`` with the reason;
- torch not installed -> ``fail`` with the install command for this machine;
- ``import torch`` raises -> ``fail`` with the error verbatim and the likely cause;
- CPU-only build on a machine with an NVIDIA GPU -> ``fail`` with the exact
  ``pip install ... --index-url`` command for a CUDA build the driver runs;
- CPU-only build and no NVIDIA GPU -> ``info``;
- a CUDA or ROCm build that imports -> ``ok`` (whether CUDA works is judged
  by the ``cuda.*`` checks).
"""

from __future__ import annotations

import re
import shlex

from gpudoctor.checks import require
from gpudoctor.checks._common import (
    best_variant_for_driver,
    distinct_targets,
    driver_install_commands,
    driver_version,
    newest_torch_for_python,
    nvidia_gpu_count,
    pip_install_command,
    split_local,
    wheel_variants,
)
from gpudoctor.checks._libraries import framework_dists, frameworks_of, path_remedy, shadowing, target_model, version_of
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import KERNEL_KIND, ProbeFacts, TargetFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced
from gpudoctor.probe import MIN_PYTHON, python_supported
from gpudoctor.versions import v

_MISSING_SO = re.compile(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file")
_UNDEFINED = re.compile(r"undefined symbol: (\S+)")


def _install_hint(python: str, facts: Facts, python_version: str | None = None, venv_creator: str | None = None) -> str:
    """The pip command that installs a torch this machine can use, for ``python`` (whose version,
    when known, caps the torch named: :func:`~gpudoctor.checks._common.pip_install_command`)."""
    last = newest_torch_for_python(python_version)
    note = (
        f"\n\nPython {'.'.join(python_version.split('.')[:2])} cannot install torch releases after "
        f"{last}; for a current torch create an environment with Python 3.10 or newer."
        if python_version and last
        else ""
    )
    if nvidia_gpu_count(facts) and driver_version(facts) is None:
        return _hint_without_driver(python, python_version, venv_creator) + note
    if nvidia_gpu_count(facts):
        variant = best_variant_for_driver(driver_version(facts), python_version)
        if variant is None:
            which = "any current PyTorch CUDA build" if not last else f"any PyTorch CUDA build up to torch {last}"
            return f"The NVIDIA driver is too old for {which}; upgrade the driver first (see `nvidia.driver`)." + note
        return (
            f"Install a CUDA build the driver can run:\n\n```\n"
            f"{pip_install_command(python, variant, python_version=python_version, venv_creator=venv_creator)}\n```"
            + note
        )
    cpu = {"index_url": "https://download.pytorch.org/whl/cpu"}
    return (
        "This machine has no NVIDIA GPU, so the CPU build is the right one:\n\n"
        f"```\n{pip_install_command(python, cpu, python_version=python_version, venv_creator=venv_creator)}\n```" + note
    )


def _install_commands(
    python: str, facts: Facts, python_version: str | None = None, keep: str = "", venv_creator: str | None = None
) -> tuple[Command, ...]:
    """The commands of :func:`_install_hint` (and of :func:`_same_version_hint` for ``keep``, the
    installed version), preferred first."""
    from gpudoctor.checks._gpu import variant_for

    out: list[Command] = []
    driver = driver_version(facts)
    gpus = nvidia_gpu_count(facts)
    public = split_local(keep)[0]
    if keep and driver and public:
        variant = variant_for(public, driver)
        if variant is not None and v(variant["first_torch"]) <= v(public) <= v(variant["newest_torch"]):
            cmd = pip_install_command(python, variant, public, python_version=python_version, venv_creator=venv_creator)
            out.append(Command(cmd, f"keep torch {public}, take its CUDA {variant['cuda']} build", "changes"))
    if gpus and driver is None:
        out.append(Command("gpudoctor check", "once the driver works: names the exact torch build"))
        return tuple(out)
    variant = (
        best_variant_for_driver(driver, python_version)
        if gpus
        else {"index_url": "https://download.pytorch.org/whl/cpu", "cuda": "cpu"}
    )
    if variant is not None:
        what = f"a CUDA {variant['cuda']} build this driver runs" if gpus else "the CPU build (no NVIDIA GPU here)"
        out.append(
            Command(
                pip_install_command(python, variant, python_version=python_version, venv_creator=venv_creator),
                what,
                "changes",
            )
        )
    elif not out:  # the driver is too old for every build this Python can install: the driver first
        out.extend(driver_install_commands(facts))
    return tuple(out)


def _conda_commands(probe: ProbeFacts) -> tuple[Command, ...]:
    """The commands of :func:`_conda_hint` (none outside conda)."""
    if not probe.is_conda:
        return ()
    prefix = probe.prefix
    return (
        Command(f"conda remove -p {prefix} cpuonly", "drop the package that pins the CPU build", "changes"),
        Command(
            f'conda install -p {prefix} -c conda-forge "pytorch=*=cuda*"', "conda's CUDA build of torch", "changes"
        ),
    )


def _cpu_origin(version: str) -> str:
    """Where a CPU-only build came from, by its local version tag (PyTorch wheel naming:
    ``+cpu`` wheels are served only by the CPU index download.pytorch.org/whl/cpu)."""
    if split_local(version)[1] == "cpu":
        return (
            " The `+cpu` tag means pip took it from the PyTorch CPU index (`--index-url`/`--extra-index-url "
            "https://download.pytorch.org/whl/cpu`): in a requirements file, `pip.conf`, the project's uv/Poetry "
            "index settings, or a package whose install instructions name that index. Reinstall "
            "torchvision/torchaudio from the same CUDA index as torch, or installing them later brings "
            "the CPU build back."
        )
    return ""


def _same_version_hint(
    python: str, version: str, facts: Facts, python_version: str | None, venv_creator: str | None = None
) -> str:
    """The command that keeps the installed torch release and swaps in its CUDA build, when a CUDA
    variant the driver runs published it (``data/torch_wheels.toml``); "" otherwise."""
    from gpudoctor.checks._gpu import variant_for

    driver = driver_version(facts)
    public = split_local(version)[0]
    if driver is None or not public:
        return ""
    variant = variant_for(public, driver)
    if variant is None or not (v(variant["first_torch"]) <= v(public) <= v(variant["newest_torch"])):
        return ""
    cmd = pip_install_command(python, variant, public, python_version=python_version, venv_creator=venv_creator)
    return (
        f"Keep torch {public} (what your other packages were resolved against) and take its CUDA "
        f"{variant['cuda']} build, which driver {driver} runs:\n\n```\n{cmd}\n```\n\nOr move to the newest "
        f"release. "
    )


def _conda_hint(probe: ProbeFacts) -> str:
    """In a conda environment torch often comes from a conda channel (a ``cpu_`` build, the ``cpuonly`` /
    ``pytorch-mutex=*=cpu`` packages pin it there; pytorch/pytorch #32369): replacing it with pip mixes two
    package managers over one package, so the conda way comes first, with the command that tells which
    installed it. "" outside conda."""
    if not probe.is_conda:
        return ""
    prefix = probe.prefix
    return (
        f"This is a conda environment. See which tool installed torch: `conda list -p {prefix} '^(pytorch|torch|"
        f"cpuonly|pytorch-mutex)$'` (channel `pypi` = pip). If conda did, replace the CPU build with conda, not "
        f"pip (remove `cpuonly` first if it is listed):\n\n{fenced(*_conda_commands(probe))}\n\nIf pip did: "
    )


def _hint_without_driver(python: str, python_version: str | None, venv_creator: str | None = None) -> str:
    """An NVIDIA GPU but no known driver version (none installed, or not visible): the build
    cannot be matched to the driver yet, so name the install order and the command per driver
    branch (the newest CUDA build, and the newest build of the CUDA major before it, whose
    ``min_driver`` is lower: ``data/torch_wheels.toml``, NVIDIA CUDA Toolkit release notes)."""
    head = (
        "No NVIDIA driver version is known here (see `nvidia.driver`), so the build cannot be matched to "
        "the driver yet. Make the driver work first (install it; in a container, start it with the GPU); once "
        "`nvidia-smi` works, `gpudoctor check` names the exact build."
    )
    newest = best_variant_for_driver(None, python_version)
    if newest is None:
        return head
    options = [(newest, f"driver {newest['min_driver']} or newer")]
    older_floor = [r["min_driver"] for r in wheel_variants() if v(r["min_driver"]) < v(newest["min_driver"])]
    if older_floor:
        floor = max(older_floor, key=v)
        older = best_variant_for_driver(floor, python_version)
        if older is not None and older["name"] != newest["name"]:
            options.append((older, f"driver {floor} up to {newest['min_driver']}"))
    lines = [head, "", "The command by driver branch:"]
    for variant, branch in options:
        lines += [
            "",
            f"- {branch} (CUDA {variant['cuda']} build):",
            "",
            f"  ```\n  {pip_install_command(python, variant, python_version=python_version, venv_creator=venv_creator)}\n  ```",
        ]
    return "\n".join(lines)


#: a CUDA toolkit's library directory on LD_LIBRARY_PATH (``/usr/local/cuda-12.0/lib64``,
#: ``/usr/local/cuda/targets/x86_64-linux/lib``); not the container runtime's ``/usr/local/nvidia/lib64``
#: and a conda prefix's ``lib`` (its cudatoolkit/cuda-* packages: pytorch/pytorch #134929)
_TOOLKIT_LIB = re.compile(
    r"/cuda(?:-\d+(?:\.\d+)?)?/(?:lib64|lib|targets/[^/]+/lib)/?$"
    r"|/(?:conda|miniconda3?|anaconda3?|miniforge3?|mambaforge)(?:/envs/[^/]+)?/lib/?$"
)
_NVJITLINK = re.compile(r"undefined symbol: __nvJitLink\w*_(\d+)_(\d+)")


def _without_toolkit_dirs(ld_library_path: str | None) -> tuple[list[str], str] | None:
    """(toolkit directories on ``LD_LIBRARY_PATH``, the value without them), or None when there are none."""
    entries = [e for e in (ld_library_path or "").split(":") if e]
    toolkit = [e for e in entries if _TOOLKIT_LIB.search(e)]
    if not toolkit:
        return None
    rest = [e for e in entries if e not in toolkit]
    return toolkit, (f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH")


def _import_error_cause(error: str, ld_library_path: str | None = None, python: str = "python") -> str:
    """The likely cause of an ``import torch`` failure and its remedy; ``ld_library_path`` (the
    target's) names the toolkit directories that shadow the ``nvidia-*`` wheels' libraries."""
    shadow = _without_toolkit_dirs(ld_library_path)
    m = _NVJITLINK.search(error)
    if m:
        need = f"{m.group(1)}.{m.group(2)}"
        where = (
            f"`LD_LIBRARY_PATH` lists `{shadow[0][0]}` (a CUDA toolkit's or conda's library directory), whose older "
            f"`libnvJitLink.so.{m.group(1)}` is found before the wheel's. Take it out:\n\n```\n{shadow[1]}\n```\n\n"
            if shadow
            else "An older `libnvJitLink` is found first (`LD_LIBRARY_PATH`, `LD_PRELOAD`, or an outdated wheel). "
        )
        return (
            f"cuSPARSE/cuFFT from the `nvidia-*` wheels need nvJitLink ≥ {need}, but an older `libnvJitLink` was "
            f"loaded. {where}If the wheel itself is old (a partial upgrade), update it: "
            f"`{python} -m pip install -U 'nvidia-nvjitlink-cu{m.group(1)}>={need}'`."
        )
    m = _MISSING_SO.search(error)
    if m:
        lib = m.group(1)
        if "cudnn" in lib or "cublas" in lib or "cudart" in lib or "nccl" in lib or "cusparse" in lib:
            return (
                f"`{lib}` is a CUDA library that torch loads from the `nvidia-*` pip wheels. They are missing or "
                f"not where torch looks: reinstall torch with its dependencies (`pip install --force-reinstall "
                f"torch ...`), and check that `LD_LIBRARY_PATH` does not point at an incompatible copy."
            )
        if lib.startswith("libcuda.so"):
            return (
                "`libcuda.so.1` belongs to the NVIDIA driver, not to torch: the driver is missing, or this "
                "container was started without the NVIDIA runtime (`platform.container` names the remedy for this "
                "platform)."
            )
        return f"`{lib}` could not be found by the dynamic loader; install the package that provides it."
    m = _UNDEFINED.search(error)
    if m and shadow:
        return (
            f"An undefined symbol means torch and one of its libraries come from different versions. "
            f"`LD_LIBRARY_PATH` lists `{shadow[0][0]}` (a CUDA toolkit's or conda's library directory), whose "
            f"libraries are found "
            f"before the `nvidia-*` wheels' own; take it out:\n\n```\n{shadow[1]}\n```\n\nIf it still fails, "
            f"reinstall torch with `--force-reinstall` (a partial upgrade)."
        )
    if m:
        return (
            "An undefined symbol means torch and one of its libraries come from different versions "
            "(a partial upgrade, or a library on `LD_LIBRARY_PATH` shadowing the wheel's). Reinstall torch "
            "with `--force-reinstall` and remove foreign library paths from `LD_LIBRARY_PATH`."
        )
    if "numpy" in error.lower():
        return "NumPy is missing or its ABI does not match this torch; `pip install -U numpy` or pin `numpy<2`."
    return "Reinstall torch in this environment (`pip install --force-reinstall torch`) and retry."


def _shadowed(facts: Facts, label: str) -> tuple[str, str] | None:
    """(cause, explanation) when the loader model shows a CUDA library shadowed for this target (issue 11)."""
    model = target_model(facts, label)
    if model is None:
        return None
    bad = shadowing(model)
    if not bad:
        return None
    res, good, _why = bad[0]
    mine, theirs = version_of(model, res.path) or "?", version_of(model, good) if good else None
    cause = (
        f"{res.directory} ({res.via}) supplies {res.needed} {mine}"
        + (f" instead of the wheel's {theirs}" if theirs else "")
        + (f", which lacks {res.missing[0].split(',')[0]}" if res.missing else "")
    )
    return cause, (
        f"The files of torch are fine; the dynamic loader binds `{res.needed}` for "
        f"`{res.consumer}` from `{res.directory}` ({res.via}). Reinstalling torch does not help "
        f"(see `cuda.libraries`).\n\n{path_remedy(model, res, good)}"
    )


def python_torch_table() -> str:
    """The Markdown table of which torch releases each older Python can install (``data/python_torch.toml``)."""
    from gpudoctor.data import load_table

    rows = ["| Python | newest torch it can install |", "|---|---|"]
    rows += [f"| {r['python']} | {r['last_torch']} |" for r in load_table("python_torch")["python"]]
    rows.append("| 3.10 and newer | current releases |")
    return "\n".join(rows)


def _unsupported_python(t: TargetFacts) -> Finding:
    """A target whose Python is older than the probe supports (Python 2.7, say): what runs there and what does not."""
    floor = ".".join(map(str, MIN_PYTHON))
    last = newest_torch_for_python(t.python_version)
    torch_note = f"the newest torch for Python {t.python_version} is {last}" if last else "no torch release supports it"
    return CHECK.finding(
        Status.FAIL,
        f"{t.python} is Python {t.python_version}: gpudoctor's probe needs Python {floor} or newer, and {torch_note}",
        f"gpudoctor inspects an interpreter by running a small standard-library script in it; that script "
        f"runs on Python {floor} and newer, so `{t.python}` (Python {t.python_version}) was not inspected.\n\n"
        f"Which torch releases each Python can install (PyTorch RELEASE.md compatibility matrix and the "
        f"wheels' Requires-Python):\n\n{python_torch_table()}\n\n"
        f"Create an environment with a current Python and point gpudoctor at it:\n\n"
        f"```\npython3 -m venv ~/venvs/torch && ~/venvs/torch/bin/python -m pip install torch\n"
        f"gpudoctor check --python ~/venvs/torch/bin/python\n```",
        commands=(
            Command(
                "python3 -m venv ~/venvs/torch && ~/venvs/torch/bin/python -m pip install torch",
                "an environment with a current Python and torch",
                "changes",
            ),
            Command("gpudoctor check --python ~/venvs/torch/bin/python", "check it"),
        ),
        evidence={
            "python": t.python,
            "python_version": t.python_version,
            "probe_minimum": floor,
            "last_torch": last or "none",
        },
        target=t.label,
    )


def _evaluate_target(t: TargetFacts, facts: Facts) -> Finding:
    probe = t.probe
    if isinstance(probe, Unavailable) and t.python_version and not python_supported(t.python_version):
        return _unsupported_python(t)
    if isinstance(probe, Unavailable):
        evidence: dict[str, object] = {"python": t.python}
        # a kernelspec whose interpreter is gone: jupyter.kernels says so, with the fix
        gone = t.kind == KERNEL_KIND and re.search(r"(does not exist|was not found)$", probe.reason)
        return CHECK.finding(
            Status.FAIL,
            f"could not inspect {t.python}: {probe.reason}",
            "gpudoctor runs a small stdlib-only script in each target interpreter to see its torch. "
            "That failed; run the interpreter by hand to see why.",
            evidence=evidence,
            target=t.label,
            commands=(Command(f"{shlex.quote(t.python)} -c 'import sys; print(sys.version)'", "does it start at all"),),
            caused_by=("jupyter.kernels",) if gone else (),
        )
    tf = probe.torch
    evidence = {"python": probe.executable, "python_version": probe.python_version}
    if not tf.installed:
        # issue 11: an environment built on another GPU framework does not need torch
        others = [f"{f.dist} {f.version}" for f in frameworks_of(facts, t.label) or [] if f.name != "torch"]
        if not others:
            # without the cuda_libraries domain (a light run, a partial snapshot): the probe's distributions
            others = framework_dists(probe, besides="torch")
        if others:
            return CHECK.finding(
                Status.INFO,
                f"PyTorch is not installed in {probe.executable}; it uses {', '.join(others)}",
                evidence=evidence,
                target=t.label,
            )
        return CHECK.finding(
            Status.FAIL,
            f"PyTorch is not installed in {probe.executable}",
            f"`import torch` cannot work in this interpreter.\n\n{_install_hint(probe.executable, facts, probe.python_version, probe.venv_creator)}",
            evidence=evidence,
            target=t.label,
            commands=_install_commands(probe.executable, facts, probe.python_version, venv_creator=probe.venv_creator),
        )
    evidence["torch"] = tf.version or tf.dist_version or "?"
    if tf.import_failed:
        evidence["import_error"] = tf.import_error or ""
        shadow = _shadowed(facts, t.label)
        if shadow is not None:
            return CHECK.finding(
                Status.FAIL,
                f"`import torch` fails in {probe.executable}: {shadow[0]}",
                f"torch {tf.dist_version or ''} is installed but does not import:\n\n```\n{tf.import_error}\n```\n\n"
                f"{shadow[1]}",
                evidence=evidence,
                target=t.label,
                caused_by=("cuda.libraries",),  # it names the shadowing directory and both versions
            )
        return CHECK.finding(
            Status.FAIL,
            f"`import torch` fails in {probe.executable}: {tf.import_error}",
            f"torch {tf.dist_version or ''} is installed but does not import:\n\n```\n{tf.import_error}\n```\n\n"
            f"{_import_error_cause(tf.import_error or '', probe.env.get('LD_LIBRARY_PATH'), probe.executable)}",
            evidence=evidence,
            target=t.label,
            commands=(
                Command(f"{shlex.quote(probe.executable)} -c 'import torch'", "the whole import error, by hand"),
            ),
        )
    if tf.hip:
        evidence["hip"] = tf.hip
        return CHECK.finding(
            Status.INFO,
            f"torch {tf.version} is a ROCm (HIP {tf.hip}) build",
            "ROCm builds target AMD GPUs; gpudoctor's CUDA checks do not apply to them.",
            evidence=evidence,
            target=t.label,
        )
    if tf.cuda:
        evidence["cuda"] = tf.cuda
        verb = "imports" if tf.import_tried else "is installed (import not tried: light probe)"
        return CHECK.finding(
            Status.OK,
            f"torch {tf.version} (CUDA {tf.cuda} build) {verb} in {probe.executable}",
            evidence=evidence,
            target=t.label,
        )
    gpus = nvidia_gpu_count(facts)
    if gpus:
        return CHECK.finding(
            Status.FAIL,
            f"torch {tf.version} in {probe.executable} is a CPU-only build, but this machine has "
            f"{gpus} NVIDIA GPU{'s' if gpus != 1 else ''}",
            f"A CPU-only build (`torch.version.cuda is None`) never uses the GPU: "
            f"`torch.cuda.is_available()` is always False.{_cpu_origin(tf.version or '')}\n\n"
            f"{_conda_hint(probe)}"
            f"{_same_version_hint(probe.executable, tf.version or '', facts, probe.python_version, probe.venv_creator)}"
            f"{_install_hint(probe.executable, facts, probe.python_version, probe.venv_creator)}",
            evidence=evidence,
            target=t.label,
            commands=(
                *_conda_commands(probe),
                *_install_commands(
                    probe.executable,
                    facts,
                    probe.python_version,
                    keep=tf.version or "",
                    venv_creator=probe.venv_creator,
                ),
            ),
        )
    return CHECK.finding(
        Status.INFO,
        f"torch {tf.version} is a CPU-only build; this machine has no NVIDIA GPU, so that is expected",
        "CPU builds are the right choice without an NVIDIA GPU. On a GPU machine you would need a CUDA build.",
        evidence=evidence,
        target=t.label,
    )


def evaluate(facts: Facts) -> list[Finding]:
    targets = require(facts, TargetsFacts)
    return [_evaluate_target(t, facts) for t in distinct_targets(targets)]


CHECK = Check(
    id="torch.install",
    title="PyTorch installed, importable, and the right build for this machine",
    needs=("targets", "gpu", "nvidia", "cuda_libraries"),
    evaluate=evaluate,
)
