"""Check ``jupyter.server-env``: do the kernels of a running Jupyter server get the terminal's loader paths?

A kernel's environment is the *server's* environment plus kernel.json
``env`` (jupyter_client ``pre_launch``; jupyter-kernels.md §3), not the
terminal's. For every running server (``jupyter_servers`` facts:
runtime-dir JSON + ``/proc/<pid>/environ``) and every Python kernel, the
kernel's environment is computed from the server's and compared with the
terminal's:

- an ``LD_LIBRARY_PATH`` entry, a CUDA/conda/venv ``PATH`` entry, or a
  ``CUDA_*``/``NVIDIA_*``/``LD_PRELOAD`` variable the terminal has and the
  kernel lacks -> ``fail``, naming the variables and the setting that fixes
  it: JupyterHub ``c.Spawner.environment`` / ``c.Spawner.env_keep``, a
  systemd ``Environment=`` line, or the shell the server is started from;
- a server whose environment cannot be read -> ``info``;
- ``ok`` when nothing is lost; ``skip`` when no server runs.
"""

from __future__ import annotations

import re
import shlex

from gpudoctor.checks import SkipCheck, require
from gpudoctor.collect.jupyter import target_environment
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.jupyter import JupyterFacts, JupyterServer, JupyterServersFacts
from gpudoctor.model import Check, Command, Finding, Status

CHECK_ID = "jupyter.server-env"
_PATH_WORTH = re.compile(r"cuda|nvidia|conda|mamba|venv|virtualenvs|\.local/bin", re.IGNORECASE)


def lost(terminal: dict[str, str], kernel: dict[str, str]) -> dict[str, str]:
    """Variable -> what the kernel lacks of the terminal's value (entries for path lists)."""
    out: dict[str, str] = {}
    for var, value in terminal.items():
        if var.startswith("JUPYTERHUB_") or var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
            continue
        have = kernel.get(var)
        if var in ("PATH", "LD_LIBRARY_PATH"):
            mine = set((have or "").split(":"))
            missing = [
                e
                for e in value.split(":")
                if e and e not in mine and (var == "LD_LIBRARY_PATH" or _PATH_WORTH.search(e))
            ]
            if missing:
                out[var] = ":".join(missing)
        elif var.startswith(("CUDA_", "NVIDIA_")) or var in ("LD_PRELOAD", "XLA_FLAGS", "TRITON_LIBCUDA_PATH"):
            if have is None:
                out[var] = value
    return out


def remedy(server: JupyterServer, missing: dict[str, str], terminal: dict[str, str]) -> str:
    """Where to set the variables for this server, in operator terms."""
    values = {k: terminal[k] for k in missing}
    if server.hub:
        env_py = ", ".join(f'"{k}": "{v}"' for k, v in values.items())
        keep = ", ".join(f'"{k}"' for k in missing)
        return (
            "This server was started by JupyterHub: the spawner decides its environment. In "
            "`jupyterhub_config.py` set\n\n"
            f"    c.Spawner.environment = {{{env_py}}}\n\n"
            f"or pass the Hub's own values through with `c.Spawner.env_keep.extend([{keep}])`, then restart "
            "the user's server (Hub control panel > Stop My Server > Start)."
        )
    if server.service:
        lines = "\n".join(f'    Environment="{k}={v}"' for k, v in values.items())
        return (
            f"This server runs as the systemd unit `{server.service}`, which does not read shell profiles. "
            f"Add the variables to the unit (`systemctl edit {server.service}`):\n\n    [Service]\n{lines}\n\n"
            f"then `systemctl restart {server.service}`."
        )
    exports = "\n".join(f"    export {k}={v}" for k, v in values.items())
    return (
        "Start the server from a shell that has them (the terminal's values):\n\n"
        f"{exports}\n    jupyter lab\n\n"
        'or set them per kernel in kernel.json `env` (`"LD_LIBRARY_PATH": "...:${LD_LIBRARY_PATH}"`).'
    )


def remedy_commands(server: JupyterServer, values: dict[str, str]) -> tuple[Command, ...]:
    """:func:`remedy` as commands; none for a JupyterHub spawner (its configuration file decides)."""
    if server.hub:
        return ()
    if server.service:
        return (
            Command(f"systemctl edit {server.service}", "add the variables as Environment= lines of [Service]", "root"),
            Command(f"systemctl restart {server.service}", "start the server with them", "root"),
        )
    assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in values.items())
    return (Command(f"env {assign} jupyter lab", "start the server with the terminal's values", "changes"),)


def evaluate(facts: Facts) -> list[Finding]:
    servers = require(facts, JupyterServersFacts)
    jupyter = facts.of(JupyterFacts)
    alive = [s for s in servers.servers if s.alive]
    if not alive:
        raise SkipCheck("no running Jupyter server (no live jpserver-<pid>.json in Jupyter's runtime directory)")
    kernels = [] if isinstance(jupyter, Unavailable) else [k for k in jupyter.kernels if k.is_python and not k.error]
    out: list[Finding] = []
    for server in alive:
        where = f"pid {server.pid}" + (f", {server.url}" if server.url else "")
        if server.env_error:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.INFO,
                    summary=f"Jupyter server ({where}): its environment could not be read",
                    explanation=server.env_error,
                    evidence={"pid": server.pid},
                )
            )
            continue
        per_kernel: dict[str, dict[str, str]] = {}
        for spec in kernels or ():
            kenv = target_environment(server.env, spec)
            miss = lost(servers.terminal_env, kenv)
            if miss:
                per_kernel[spec.name] = miss
        if not kernels:
            miss = lost(servers.terminal_env, server.env)
            if miss:
                per_kernel["(any kernel)"] = miss
        if not per_kernel:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.OK,
                    summary=f"Jupyter server ({where}) gives its kernels the terminal's loader paths "
                    f"and CUDA variables",
                    evidence={"pid": server.pid},
                )
            )
            continue
        union: dict[str, str] = {}
        for miss in per_kernel.values():
            for k, v in miss.items():
                if k in ("PATH", "LD_LIBRARY_PATH"):
                    entries = set(union.get(k, "").split(":")) | set(v.split(":"))
                    union[k] = ":".join(e for e in servers.terminal_env[k].split(":") if e in entries)
                else:
                    union.setdefault(k, v)
        union = dict(sorted(union.items()))
        names = ", ".join(sorted(union))
        kernel_list = ", ".join(sorted(per_kernel))
        detail = "\n".join(f"- `{k}`: the terminal has `{v}`; the kernels do not" for k, v in union.items())
        origin = "JupyterHub" if server.hub else (f"systemd unit {server.service}" if server.service else "a shell")
        out.append(
            Finding(
                check=CHECK_ID,
                status=Status.FAIL,
                summary=f"kernels of the Jupyter server ({where}, started by {origin}) lose {names} that the terminal "
                f"has: {kernel_list}",
                explanation=(
                    f"A kernel gets the server's environment plus its kernel.json `env`, not the terminal's. "
                    f"The server's environment (`/proc/{server.pid}/environ`) lacks what the terminal has, so "
                    f"a notebook can load other CUDA/cuDNN libraries (or none) than `python` in the terminal "
                    f"does.\n\n{detail}\n\n{remedy(server, union, servers.terminal_env)}"
                ),
                evidence={
                    "pid": server.pid,
                    "service": server.service,
                    "hub": server.hub,
                    "lost": union,
                    "kernels": sorted(per_kernel),
                },
                commands=remedy_commands(server, union),
            )
        )
    return out


CHECK = Check(
    id=CHECK_ID,
    title="Kernels of a running Jupyter server get the terminal's loader paths and CUDA variables",
    needs=("jupyter_servers", "jupyter"),
    evaluate=evaluate,
)
