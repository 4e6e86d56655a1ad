"""Collector for the ``jupyter`` domain: every kernelspec, as the Jupyter server would launch it.

Steps (all I/O through the System bundle):

1. The server's interpreter: ``CollectOptions.extra["jupyter_python"]`` if
   given, else the ``#!`` interpreter of the ``jupyter`` command on the
   diagnosed PATH (``jupyter``, ``jupyter-lab``, ``jupyter-notebook``), else the
   interpreter running gpudoctor.
2. That interpreter runs ``probe/_kernelspecs.py`` (jupyter_client's
   ``KernelSpecManager`` listing, reproduced on ``jupyter_core.paths`` without
   importing jupyter_client) with the diagnosed environment; if it cannot (no
   jupyter_client there), gpudoctor's own interpreter does.
3. Per kernelspec: kernel.json's exact text, the interpreter ``argv`` really
   runs (:func:`resolve_interpreter`) and the environment Jupyter gives it
   (:func:`kernel_environment`).
4. With ``--deep`` (``CollectOptions.deep``), each Python kernel is started for
   real (:mod:`gpudoctor.kernel_launch`), probed from inside, and shut down.

Inside ``--root`` (an image) interpreters cannot be run, so the domain is
Unavailable.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from string import Template
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.jupyter import JupyterFacts, KernelInterpreter, KernelSpecFacts
from gpudoctor.system import Files, System

__all__ = [
    "COLLECTOR",
    "LISTER_SCRIPT",
    "collect",
    "find_server_python",
    "kernel_environment",
    "resolve_interpreter",
    "target_environment",
]

#: The script the server's interpreter runs to list kernelspecs.
LISTER_SCRIPT = Path(__file__).resolve().parent.parent / "probe" / "_kernelspecs.py"
LISTER_MARKER = "@@gpudoctor-kernelspecs@@"
LISTER_TIMEOUT_S = 30.0

_JUPYTER_COMMANDS = ("jupyter", "jupyter-lab", "jupyter-notebook", "jupyter-server")
_CONDA_NAMES = ("conda", "mamba", "micromamba")
_CONDA_VALUE_OPTIONS = ("-n", "--name", "-p", "--prefix", "--cwd")


# --------------------------------------------------------------------------- helpers (pure or files-only)


def which(name: str, path_var: str, files: Files) -> str | None:
    """First executable file called ``name`` on ``path_var`` (``os.pathsep`` list), or None."""
    for d in (path_var or "").split(os.pathsep):
        if not d:
            continue
        candidate = posixpath.join(d, name)
        if files.is_file(candidate) and os.access(files.host_path(candidate), os.X_OK):
            return candidate
    return None


def _shebang_interpreter(text: str, path_var: str, files: Files) -> str | None:
    """Interpreter named by a console script's ``#!`` line (or pip's ``/bin/sh`` exec trampoline)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("#!"):
        return None
    words = lines[0][2:].split()
    if not words:
        return None
    if posixpath.basename(words[0]) == "env" and len(words) > 1:
        rest = [w for w in words[1:] if not w.startswith("-")]
        return which(rest[0], path_var, files) if rest else None
    if posixpath.basename(words[0]) == "sh" and len(lines) > 1 and lines[1].startswith("'''exec'"):
        parts = lines[1].split()
        return parts[1].strip("'\"") if len(parts) > 1 else None
    return words[0]


def find_server_python(system: System, override: str | None = None) -> tuple[str, str]:
    """(interpreter of the Jupyter server, how it was chosen). Never raises."""
    if override:
        return override, "given with jupyter_python"
    path_var = system.env.get("PATH", "")
    for cmd in _JUPYTER_COMMANDS:
        script = which(cmd, path_var, system.files)
        if script is None:
            continue
        text = system.files.read_text_or_none(script) or ""
        interp = _shebang_interpreter(text[:2048], path_var, system.files)
        if interp and system.files.is_file(interp):
            return interp, f"the interpreter of `{cmd}` on PATH ({script})"
    return sys.executable, "gpudoctor's own interpreter (no `jupyter` command found on PATH)"


def kernel_environment(
    server_env: Mapping[str, str], spec_env: Mapping[str, str], language: str = "python"
) -> dict[str, str]:
    """The environment Jupyter gives a kernel process (jupyter_client 8 ``pre_launch``).

    A copy of the server's environment; each kernel.json ``env`` value with
    ``$VAR``/``${VAR}`` substituted from the server's environment
    (``string.Template.safe_substitute``: unknown names stay verbatim) then
    set; ``PYTHONEXECUTABLE`` removed for Python kernels.
    """
    env = dict(server_env)
    env.update(resolve_spec_env(server_env, spec_env))
    if language.lower().startswith("python"):
        env.pop("PYTHONEXECUTABLE", None)
    return env


def resolve_spec_env(server_env: Mapping[str, str], spec_env: Mapping[str, str]) -> dict[str, str]:
    """kernel.json ``env`` after ``${VAR}`` substitution from ``server_env``."""
    return {k: Template(str(v)).safe_substitute(server_env) for k, v in spec_env.items()}


def target_environment(server_env: Mapping[str, str], spec: KernelSpecFacts) -> dict[str, str]:
    """The environment the kernel's interpreter ends up with: :func:`kernel_environment`
    plus an ``env VAR=...`` wrapper's assignments."""
    env = kernel_environment(server_env, spec.env, spec.language or "python")
    if spec.interpreter is not None:
        env.update(spec.interpreter.wrapper_env)
    return env


def _conda_root(conda: str, env: Mapping[str, str], files: Files) -> str | None:
    exe = (
        conda
        if "/" in conda
        else (
            env.get("CONDA_EXE")
            if posixpath.basename(env.get("CONDA_EXE", "")) == conda
            else which(conda, env.get("PATH", ""), files)
        )
    )
    if not exe:
        return None
    exe = files.realpath(exe)
    parent = posixpath.dirname(exe)
    if posixpath.basename(parent) in ("bin", "condabin"):
        return posixpath.dirname(parent)
    return None


def _conda_env_prefix(
    conda: str, name: str | None, prefix: str | None, env: Mapping[str, str], files: Files, home: str
) -> str | None:
    if prefix:
        return prefix
    if not name:
        return env.get("CONDA_PREFIX")
    root = _conda_root(conda, env, files)
    if name == "base":
        return root
    candidates = [posixpath.join(d, name) for d in env.get("CONDA_ENVS_PATH", "").split(os.pathsep) if d]
    if root:
        candidates.append(posixpath.join(root, "envs", name))
    candidates.append(posixpath.join(home, ".conda", "envs", name))
    for c in candidates:
        if files.is_dir(c):
            return c
    return candidates[0] if candidates else None


def resolve_interpreter(
    argv: tuple[str, ...],
    server_python: str,
    server_version: str,
    env: Mapping[str, str],
    files: Files,
    home: str = "~",
) -> KernelInterpreter | None:
    """The Python a kernelspec's ``argv`` runs, as Jupyter would start it.

    ``env`` is the kernel's environment (for PATH lookups); ``server_version``
    is the server's ``major.minor``. Handles a plain ``python``/``python3``/
    ``python3.X`` (replaced by ``server_python``, as ``format_kernel_cmd`` does),
    absolute paths, bare names on PATH, ``conda|mamba|micromamba run -n ENV
    CMD`` and ``env [-i] VAR=value CMD``. Returns None for an empty argv.
    """
    if not argv:
        return None
    major = server_version.split(".")[0]
    first = argv[0]
    if first in ("python", f"python{major}", f"python{server_version}"):
        return KernelInterpreter(
            server_python,
            0,
            "server-python",
            files.is_file(server_python),
            note=f"`{first}` is replaced by the Jupyter server's interpreter",
        )
    base = posixpath.basename(first)
    if base in _CONDA_NAMES and len(argv) > 1 and argv[1] == "run":
        name = prefix = None
        i = 2
        while i < len(argv) and argv[i].startswith("-"):
            opt = argv[i]
            key, _, inline = opt.partition("=")
            if key in _CONDA_VALUE_OPTIONS:
                value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
                i += 1 if inline else 2
                if key in ("-n", "--name"):
                    name = value
                elif key in ("-p", "--prefix"):
                    prefix = value
                continue
            i += 1
        if i >= len(argv):
            return KernelInterpreter(
                first, None, "conda-run", False, name or prefix, note="`conda run` with no command"
            )
        env_prefix = _conda_env_prefix(first, name, prefix, env, files, home)
        cmd = argv[i]
        if "/" in cmd:
            path = cmd
        elif env_prefix:
            path = posixpath.join(env_prefix, "bin", cmd)
        else:
            path = cmd
        note = "" if env_prefix else f"conda environment {name or prefix!r} not found"
        return KernelInterpreter(path, i, "conda-run", files.is_file(path), name or prefix, note=note)
    if base == "env":
        assigns: dict[str, str] = {}
        i = 1
        clear = False
        while i < len(argv):
            tok = argv[i]
            if tok in ("-i", "--ignore-environment", "-"):
                clear = True
            elif tok in ("-u", "--unset", "-C", "--chdir"):
                i += 1
            elif tok.startswith("-"):
                pass
            elif "=" in tok:
                k, _, v = tok.partition("=")
                assigns[k] = v
            else:
                break
            i += 1
        if i >= len(argv):
            return KernelInterpreter(first, None, "env", False, wrapper_env=assigns, note="`env` with no command")
        cmd = argv[i]
        path_var = assigns.get("PATH", "" if clear else env.get("PATH", ""))
        path = cmd if "/" in cmd else (which(cmd, path_var, files) or cmd)
        note = "" if "/" in path else f"`{cmd}` is not on the kernel's PATH"
        return KernelInterpreter(path, i, "env", files.is_file(path), wrapper_env=assigns, note=note)
    if "/" in first:
        return KernelInterpreter(first, 0, "absolute", files.is_file(first))
    found = which(first, env.get("PATH", ""), files)
    if found:
        return KernelInterpreter(found, 0, "path-lookup", True)
    return KernelInterpreter(first, 0, "path-lookup", False, note=f"`{first}` is not on the kernel's PATH")


def _is_python_kernel(language: str, argv: tuple[str, ...]) -> bool:
    return language.lower().startswith("python") or any("ipykernel" in a for a in argv)


# --------------------------------------------------------------------------- listing


def _run_lister(system: System, python: str) -> dict[str, Any] | str:
    """The lister's document, or a one-line reason it failed."""
    result = system.runner.run([python, str(LISTER_SCRIPT)], timeout_s=LISTER_TIMEOUT_S, env=dict(system.env))
    if result.error:
        return result.describe_failure()
    out = result.stdout
    end = out.rfind(LISTER_MARKER)
    start = out.rfind(LISTER_MARKER, 0, end) if end >= 0 else -1
    if start < 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python} could not list kernelspecs (exit status {result.returncode}): {tail}"
    try:
        return json.loads(out[start + len(LISTER_MARKER) : end])
    except ValueError as exc:
        return f"{python} printed an unreadable kernelspec list: {exc}"


def _spec_facts(entry: Mapping[str, Any], doc: Mapping[str, Any], system: System) -> KernelSpecFacts:
    name = str(entry["name"])
    resource_dir = str(entry["resource_dir"])
    kernel_json = posixpath.join(resource_dir, "kernel.json")
    builtin = bool(entry.get("builtin"))
    text = None if builtin else system.files.read_text_or_none(kernel_json)
    shadowed = tuple(str(s) for s in entry.get("shadowed", ()))
    if "spec" not in entry:
        return KernelSpecFacts(
            name=name,
            resource_dir=resource_dir,
            kernel_json=kernel_json,
            kernel_json_text=text,
            builtin=builtin,
            error=str(entry.get("error") or "unreadable kernelspec"),
            shadowed=shadowed,
        )
    spec = entry["spec"]
    argv = tuple(str(a) for a in spec.get("argv") or ())
    language = str(spec.get("language") or "")
    spec_env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    metadata = spec.get("metadata") or {}
    provisioner = None
    if isinstance(metadata, dict) and isinstance(metadata.get("kernel_provisioner"), dict):
        provisioner = metadata["kernel_provisioner"].get("provisioner_name")
    is_python = _is_python_kernel(language, argv)
    kenv = kernel_environment(system.env, spec_env, language)
    interpreter = (
        resolve_interpreter(argv, doc["executable"], doc["version"], kenv, system.files, system.home)
        if is_python
        else None
    )
    return KernelSpecFacts(
        name=name,
        resource_dir=resource_dir,
        kernel_json=kernel_json,
        kernel_json_text=text,
        builtin=builtin,
        error=None,
        display_name=str(spec.get("display_name") or ""),
        language=language,
        argv=argv,
        interrupt_mode=str(spec.get("interrupt_mode") or "signal"),
        env=spec_env,
        env_resolved=resolve_spec_env(system.env, spec_env),
        metadata_json=json.dumps(metadata, sort_keys=True, separators=(",", ":")),
        provisioner=str(provisioner) if provisioner else None,
        is_python=is_python,
        interpreter=interpreter,
        shadowed=shadowed,
    )


def collect(ctx: CollectContext):
    system = ctx.system
    if not ctx.options.kernels:
        return Unavailable("Jupyter kernels were not looked for (the gate leaves them out)")
    if not system.files.is_live:
        return Unavailable(
            f"kernelspecs inside --root {system.files.root} cannot be listed by running Jupyter from here"
        )
    server, source = find_server_python(system, (ctx.options.extra or {}).get("jupyter_python"))
    doc = _run_lister(system, server)
    if isinstance(doc, str) and os.path.realpath(server) != os.path.realpath(sys.executable):
        reason = doc
        doc = _run_lister(system, sys.executable)
        source = f"gpudoctor's own interpreter ({server} could not list kernelspecs: {reason})"
        if isinstance(doc, str):
            return Unavailable(f"kernelspecs could not be listed: {reason}; with {sys.executable}: {doc}")
    elif isinstance(doc, str):
        return Unavailable(f"kernelspecs could not be listed: {doc}")
    kernels = [_spec_facts(e, doc, system) for e in doc.get("specs", ())]
    if ctx.options.deep:
        from gpudoctor.kernel_launch import launch_and_probe

        timeout = ctx.options.probe_timeout_s
        runnable = [i for i, k in enumerate(kernels) if k.is_python and k.error is None]
        with ThreadPoolExecutor(max_workers=max(1, min(4, len(runnable)))) as pool:
            launches = list(
                pool.map(lambda i: launch_and_probe(kernels[i], doc["executable"], system.env, timeout), runnable)
            )
        from dataclasses import replace

        for i, launch in zip(runnable, launches):
            kernels[i] = replace(kernels[i], launch=launch)
    return JupyterFacts(
        server_python=str(doc["executable"]),
        server_python_source=source,
        server_python_version=str(doc["version"]),
        jupyter_client_version=str(doc.get("jupyter_client", "?")),
        data_dir=str(doc.get("data_dir", "")),
        kernel_dirs=tuple(str(d) for d in doc.get("kernel_dirs", ())),
        kernels=tuple(kernels),
        deep=bool(ctx.options.deep),
    )


COLLECTOR = Collector(domain="jupyter", collect=collect, timeout_s=300.0, runs_probes=True)
