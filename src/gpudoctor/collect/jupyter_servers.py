"""Collector for the ``jupyter_servers`` domain: running Jupyter servers and their real environment.

The kernels of a running server inherit the *server's* environment, not the
terminal's (jupyter_client ``pre_launch``): a server started by systemd,
JupyterHub or a desktop launcher often lacks the ``LD_LIBRARY_PATH``,
``PATH`` or CUDA variables the terminal has. Servers are found the way
``jupyter server list --json`` finds them: the ``jpserver-<pid>.json`` (and
classic ``nbserver-<pid>.json``) files in Jupyter's runtime directory
(``$JUPYTER_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/jupyter``... as
jupyter_core's ``jupyter_runtime_dir``: ``<data dir>/runtime``). Each
server's environment is read from ``/proc/<pid>/environ`` and its systemd
unit from ``/proc/<pid>/cgroup``. Live system only (an image root runs no server).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.jupyter import JupyterServer, JupyterServersFacts

#: Variables compared between the server (its kernels) and the terminal.
RELEVANT = (
    "PATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "XLA_FLAGS",
    "TRITON_LIBCUDA_PATH",
)


def relevant(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` that decide what a kernel loads and sees (plus JupyterHub markers)."""
    out = {k: v for k, v in env.items() if k in RELEVANT or k.startswith("CUDA_") or k.startswith("JUPYTERHUB_")}
    return {k: v for k, v in out.items() if not (k.startswith("JUPYTERHUB_") and "TOKEN" in k)}


def runtime_dir(env: Mapping[str, str], home: str) -> str:
    """jupyter_core's ``jupyter_runtime_dir()`` on Linux: ``$JUPYTER_RUNTIME_DIR``, else
    ``<jupyter data dir>/runtime`` (``$JUPYTER_DATA_DIR`` or ``$XDG_DATA_HOME/jupyter`` or
    ``~/.local/share/jupyter``)."""
    if env.get("JUPYTER_RUNTIME_DIR"):
        return env["JUPYTER_RUNTIME_DIR"]
    data = env.get("JUPYTER_DATA_DIR") or f"{env.get('XDG_DATA_HOME') or home + '/.local/share'}/jupyter"
    return f"{data}/runtime"


def _service(cgroup: str) -> str:
    for line in cgroup.splitlines():
        m = re.search(r"/([^/]+\.service)(?:/|$)", line)
        if m and not m.group(1).startswith("user@"):
            return m.group(1)
    return ""


def collect_servers(ctx: CollectContext) -> JupyterServersFacts | Unavailable:
    files, env, home = ctx.system.files, ctx.system.env, ctx.system.home
    if not files.is_live:
        return Unavailable("an image root runs no Jupyter server")
    rdir = runtime_dir(env, home)
    servers: list[JupyterServer] = []
    names = []
    if files.is_dir(rdir):
        try:
            names = sorted(n for n in files.listdir(rdir) if re.match(r"^(jpserver|nbserver)-\d+\.json$", n))
        except OSError:
            names = []
    for name in names:
        path = f"{rdir}/{name}"
        try:
            info = json.loads(files.read_text(path))
        except (OSError, ValueError):
            continue
        digits = re.search(r"\d+", name)
        pid = int(info.get("pid") or (digits.group(0) if digits else 0))
        url = str(info.get("url") or "")
        alive = files.exists(f"/proc/{pid}")
        raw = None
        error = ""
        if alive:
            try:
                raw = files.host_path(f"/proc/{pid}/environ").read_bytes()
            except OSError as exc:
                error = f"/proc/{pid}/environ: {exc.strerror or exc} (another user's server: run as that user)"
        else:
            error = "the process is gone (a stale runtime file)"
        server_env: dict[str, str] = {}
        if raw is not None:
            for item in raw.split(b"\0"):
                k, sep, v = item.decode("utf-8", "replace").partition("=")
                if sep:
                    server_env[k] = v
        cgroup = files.read_text_or_none(f"/proc/{pid}/cgroup") or "" if alive else ""
        servers.append(
            JupyterServer(
                pid=pid,
                url=url,
                info_file=path,
                alive=alive,
                env=relevant(server_env),
                env_error=error,
                service=_service(cgroup),
                hub=any(k.startswith("JUPYTERHUB_") for k in server_env),
            )
        )
    return JupyterServersFacts(runtime_dir=rdir, servers=tuple(servers), terminal_env=relevant(env))


COLLECTOR = Collector(domain="jupyter_servers", collect=collect_servers, timeout_s=10.0)
