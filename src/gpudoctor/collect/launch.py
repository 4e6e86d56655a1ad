"""Collector for the ``launch`` domain (see :mod:`gpudoctor.facts.launch` for the sources).

Everything is read through ``System.files`` (so ``--root`` and fake roots work): Slurm's
``gres.conf``/``cgroup.conf``, JupyterHub's config files and Helm values, ``/proc/<pid>/cmdline``,
``environ`` and ``cgroup`` of running single-user servers, the LXD/Incus guest socket and the
``libcuda.so.<version>`` installed in a container. The only commands, ``incus list --format json``
and ``lxc list --format json`` (read-only, with a timeout), run on a live host, not inside a
container, and only where that client is installed.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.collect.jupyter_servers import _service, relevant
from gpudoctor.collect.platform import DRIVER_LIB_DIRS, detect_runtime
from gpudoctor.facts import Unavailable
from gpudoctor.facts.launch import (
    HubConfig,
    HubSetting,
    LaunchFacts,
    LxdInstance,
    SingleUserServer,
    SlurmNodeConfig,
)
from gpudoctor.system import Files, Runner

COMMAND_TIMEOUT_S = 8.0

SLURM_DIRS = ("/etc/slurm", "/etc/slurm-llnl", "/usr/local/etc/slurm", "/usr/local/etc", "/opt/slurm/etc")

#: where JupyterHub deployments keep their configuration: a plain install (/etc/jupyterhub,
#: /srv/jupyterhub), The Littlest JupyterHub (/opt/tljh/config), the Zero to JupyterHub hub image
#: (/usr/local/etc/jupyterhub, with the Helm values mounted under secret/ or config/)
HUB_DIRS = ("/etc/jupyterhub", "/srv/jupyterhub", "/opt/tljh/config", "/usr/local/etc/jupyterhub")
HELM_VALUES = (
    "/usr/local/etc/jupyterhub/secret/values.yaml",
    "/usr/local/etc/jupyterhub/config/values.yaml",
    "/etc/jupyterhub/values.yaml",
    "/etc/jupyterhub/config.yaml",
)

#: the last component of the traitlets that decide what a single-user server gets
HUB_TRAITS = frozenset(
    {
        "spawner_class",
        "env_keep",
        "environment",
        "extra_host_config",
        "extra_create_kwargs",
        "extra_resource_limits",
        "extra_resource_guarantees",
        "extra_pod_config",
        "extra_container_config",
        "profile_list",
        "isolate_devices",
        "unit_extra_properties",
        "image",
        "runtime",
    }
)

#: command-line words of a JupyterHub single-user server
_SINGLEUSER = re.compile(r"jupyterhub-singleuser|jupyter-labhub|SingleUser(Lab|Notebook)App")

#: variables of a single-user server kept besides :func:`gpudoctor.collect.jupyter_servers.relevant`
_SERVER_EXTRA = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")

_LIBCUDA_VERSION = re.compile(r"^libcuda\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


# --------------------------------------------------------------------------- Slurm


def slurm_config(files: Files, env: Mapping[str, str]) -> SlurmNodeConfig | Unavailable:
    """gres.conf GPU lines and cgroup.conf ``ConstrainDevices`` from the config directory
    (``$SLURM_CONF``'s directory first, then the usual ones)."""
    dirs = list(SLURM_DIRS)
    if env.get("SLURM_CONF"):
        dirs.insert(0, env["SLURM_CONF"].rsplit("/", 1)[0] or "/")
    gres = next((f"{d}/gres.conf" for d in dirs if files.is_file(f"{d}/gres.conf")), "")
    cgroup = next((f"{d}/cgroup.conf" for d in dirs if files.is_file(f"{d}/cgroup.conf")), "")
    if not gres and not cgroup:
        return Unavailable("no gres.conf or cgroup.conf in " + ", ".join(dirs[:3]) + "...")
    lines = []
    for raw in (files.read_text_or_none(gres) or "").splitlines() if gres else ():
        line = raw.split("#", 1)[0].strip()
        if line and re.search(r"(?i)\bname=gpu\b|\bautodetect=", line):
            lines.append(line)
    constrain = False
    for raw in (files.read_text_or_none(cgroup) or "").splitlines() if cgroup else ():
        m = re.match(r"(?i)\s*ConstrainDevices\s*=\s*(\w+)", raw)
        if m:
            constrain = m.group(1).lower() in ("yes", "true", "1")
    return SlurmNodeConfig(gres_conf=gres, gres_gpu_lines=tuple(lines), cgroup_conf=cgroup, constrain_devices=constrain)


# --------------------------------------------------------------------------- JupyterHub


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dotted(node: ast.AST) -> str:
    """``c.KubeSpawner.extra_resource_limits`` for an attribute chain rooted at a name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def parse_hub_config(path: str, text: str) -> tuple[str, list[HubSetting]]:
    """(spawner class, settings) of one ``jupyterhub_config.py``; raises SyntaxError/ValueError.

    Assignments ``c.X.y = ...`` (also ``+=``, subscripts ``c.X.y["k"] = ...``) and method calls
    ``c.X.y.extend(...)`` / ``.append`` / ``.update`` are read for the traitlets in
    :data:`HUB_TRAITS`; the value is kept as its source text."""
    tree = ast.parse(text, filename=path)
    spawner = ""
    out: list[HubSetting] = []
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("extend", "append", "update")
            and node.args
        ):
            pairs = [(node.func.value, node.args[0])]
        for target, value in pairs:
            key = ""
            if isinstance(target, ast.Subscript):
                sub = ast.get_source_segment(text, target.slice) or ""
                key = f"[{sub}]"
                target = target.value
            name = _dotted(target)
            if not name.startswith("c.") or name.rsplit(".", 1)[-1] not in HUB_TRAITS:
                continue
            source = ast.get_source_segment(text, value) or ""
            if name.endswith(".environment"):
                # the variables' names say what reaches the servers; their values may be secrets
                source = (
                    "{"
                    + ", ".join(
                        f"{(ast.get_source_segment(text, k) if k is not None else '**') or '?'}: ..."
                        for k in value.keys
                    )
                    + "}"
                    if isinstance(value, ast.Dict)
                    else "..."
                )
            if name.endswith(".spawner_class"):
                spawner = source.strip("'\" ")
            out.append(HubSetting(name + key, _short(source), path))
    return spawner, out


def _walk_yaml(prefix: str, value: Any, path: str, out: list[HubSetting]) -> None:
    """Settings from Helm values: the GPU and environment keys of ``singleuser`` and ``hub.config``."""
    if not isinstance(value, dict):
        return
    for key, sub in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if name == "singleuser.extraEnv" or (name.startswith("hub.config.") and str(key) == "environment"):
            names = (
                list(sub)
                if isinstance(sub, dict)
                else [str(e.get("name", "?")) for e in sub or [] if isinstance(e, dict)]
            )
            out.append(HubSetting(name, _short(", ".join(names) + " (values not kept)"), path))
        elif name in (
            "singleuser.extraResource",
            "singleuser.extraPodConfig",
            "singleuser.profileList",
            "singleuser.image",
        ) or (name.startswith("hub.config.") and str(key) in HUB_TRAITS):
            out.append(HubSetting(name, _short(json.dumps(sub, default=str)), path))
        elif name in ("singleuser", "hub", "hub.config") or name.startswith("hub.config."):
            _walk_yaml(name, sub, path, out)


def hub_config(files: Files, named: str = "") -> HubConfig | Unavailable:
    """The JupyterHub configuration files under the usual directories (and ``named``, the file a running
    hub's command line names), read and parsed."""
    paths: list[str] = [named] if named and files.is_file(named) else []
    for d in HUB_DIRS:
        if files.is_file(f"{d}/jupyterhub_config.py") and f"{d}/jupyterhub_config.py" not in paths:
            paths.append(f"{d}/jupyterhub_config.py")
        if files.is_dir(f"{d}/jupyterhub_config.d"):
            paths += sorted(p for p in files.glob(f"{d}/jupyterhub_config.d", "*.py"))
    values = [p for p in HELM_VALUES if files.is_file(p)]
    if not paths and not values:
        return Unavailable("no jupyterhub_config.py, jupyterhub_config.d or Helm values in " + ", ".join(HUB_DIRS))
    spawner = ""
    settings: list[HubSetting] = []
    errors: list[str] = []
    for p in paths:
        try:
            found, items = parse_hub_config(p, files.read_text(p))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
            errors.append(f"{p}: {type(exc).__name__}: {exc}")
            continue
        spawner = found or spawner
        settings += items
    for p in values:
        import yaml

        try:
            doc = yaml.safe_load(files.read_text(p))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            errors.append(f"{p}: {type(exc).__name__}: {_short(str(exc), 120)}")
            continue
        _walk_yaml("", doc, p, settings)
        spawner = spawner or "kubespawner.KubeSpawner"  # the Zero to JupyterHub chart runs KubeSpawner
    return HubConfig(files=tuple(paths + values), spawner=spawner, settings=tuple(settings), errors=tuple(errors))


def _environ(raw: bytes) -> dict[str, str]:
    out = {}
    for item in raw.split(b"\0"):
        k, sep, val = item.decode("utf-8", "replace").partition("=")
        if sep and k:
            out[k] = val
    return out


#: the hub's own command line: ``jupyterhub`` (argv[0] or a Python's argv[1]), not ``jupyterhub-singleuser``
_HUB = re.compile(r"^(?:\S*/)?(?:python[\d.]*\s+(?:\S*/)?)?jupyterhub(?:\s|$)")


_CONTAINER_CGROUP = re.compile(r"docker|kubepods|libpod|cri-containerd|crio-|nerdctl|lxc")


def _config_arg(files: Files, pid: int, argv: list[str]) -> str:
    """The config file named by a hub's ``-f PATH`` / ``--config PATH`` / ``--config=PATH``, made absolute
    against its working directory (``/proc/<pid>/cwd``)."""
    path = ""
    for i, arg in enumerate(argv):
        if arg in ("-f", "--config", "--JupyterHub.config_file") and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith(("--config=", "--JupyterHub.config_file=")):
            path = arg.split("=", 1)[1]
    if path and not path.startswith("/"):
        cwd = files.readlink(f"/proc/{pid}/cwd") or ""
        path = f"{cwd.rstrip('/')}/{path}" if cwd.startswith("/") else ""
    return path


def _process(files: Files, pid: int, argv: list[str], hub: bool = False) -> SingleUserServer:
    try:
        env = _environ(files.read_bytes(f"/proc/{pid}/environ"))
    except OSError:
        env = {}
    keep = relevant(env)
    keep.update({k: env[k] for k in _SERVER_EXTRA if k in env})
    cgroup = files.read_text_or_none(f"/proc/{pid}/cgroup") or ""
    return SingleUserServer(
        pid=pid,
        command=_short(" ".join(argv), 200),
        env=keep,
        unit=_service(cgroup),
        in_container=bool(_CONTAINER_CGROUP.search(cgroup)),
        config=_config_arg(files, pid, argv) if hub else "",
    )


def hub_processes(files: Files, limit: int = 64) -> tuple[tuple[SingleUserServer, ...], SingleUserServer | None]:
    """(single-user servers, the hub) in ``/proc`` (by command line), with their environment."""
    try:
        pids = sorted(int(n) for n in files.listdir("/proc") if n.isdigit())
    except OSError:
        return (), None
    out: list[SingleUserServer] = []
    hub = None
    for pid in pids:
        try:
            raw = files.read_bytes(f"/proc/{pid}/cmdline")
        except OSError:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
        cmd = " ".join(argv)
        if hub is None and _HUB.search(cmd) and not _SINGLEUSER.search(cmd):
            hub = _process(files, pid, argv, hub=True)
            continue
        if not _SINGLEUSER.search(cmd) or len(out) >= limit:
            continue
        out.append(_process(files, pid, argv))
    return tuple(out), hub


def singleuser_servers(files: Files, limit: int = 64) -> tuple[SingleUserServer, ...]:
    """JupyterHub single-user servers in ``/proc`` (by command line), with their environment."""
    return hub_processes(files, limit)[0]


# --------------------------------------------------------------------------- LXD / Incus


def container_driver(files: Files) -> tuple[str, str]:
    """(version, file) of the ``libcuda.so.<version>`` in the usual library directories."""
    for d in DRIVER_LIB_DIRS:
        try:
            names = files.listdir(d)
        except OSError:
            continue
        for n in sorted(names):
            m = _LIBCUDA_VERSION.match(n)
            if m:
                return m.group(1), f"{d}/{n}"
    return "", ""


def parse_lxd_list(text: str) -> tuple[LxdInstance, ...] | Unavailable:
    """``incus list --format json`` / ``lxc list --format json`` -> instances."""
    try:
        doc = json.loads(text)
    except ValueError:
        return Unavailable("the instance list is not JSON")
    if not isinstance(doc, list):
        return Unavailable("the instance list is not a JSON array")
    out = []
    for inst in doc:
        if not isinstance(inst, dict):
            continue
        config = inst.get("expanded_config") or inst.get("config") or {}
        devices = inst.get("expanded_devices") or inst.get("devices") or {}
        out.append(
            LxdInstance(
                name=str(inst.get("name") or ""),
                status=str(inst.get("status") or ""),
                nvidia_runtime=str(config.get("nvidia.runtime", "")).lower() == "true",
                gpu_devices=tuple(
                    sorted(k for k, d in devices.items() if isinstance(d, dict) and d.get("type") == "gpu")
                ),
            )
        )
    return tuple(out)


LXD_CLIENTS = (
    ("incus", ("/usr/bin/incus", "/usr/local/bin/incus", "/usr/sbin/incus")),
    ("lxc", ("/snap/bin/lxc", "/usr/bin/lxc", "/usr/local/bin/lxc")),
)


def lxd_instances(files: Files, runner: Runner) -> tuple[tuple[LxdInstance, ...] | Unavailable, str]:
    """Ask the installed LXD/Incus client for its instances: (instances, tool)."""
    tried = []
    for tool, paths in LXD_CLIENTS:
        if not any(files.is_file(p) for p in paths):
            continue
        result = runner.run([tool, "list", "--format", "json"], timeout_s=COMMAND_TIMEOUT_S)
        if result.ok:
            return parse_lxd_list(result.stdout), tool
        tried.append(f"{tool}: {result.describe_failure()}")
    return Unavailable("; ".join(tried) or "no incus or lxc client installed"), ""


# --------------------------------------------------------------------------- the domain


def launch_facts(files: Files, env: Mapping[str, str], runner: Runner | None) -> LaunchFacts:
    """The launch facts; the LXD/Incus client runs only when ``runner`` is given."""
    version, lib = container_driver(files)
    api = "incus" if files.exists("/dev/incus/sock") else "lxd" if files.exists("/dev/lxd/sock") else ""
    instances: tuple[LxdInstance, ...] | Unavailable
    tool = ""
    if runner is not None:
        instances, tool = lxd_instances(files, runner)
    else:
        instances = Unavailable("the LXD/Incus client is asked only on a live host, not in a container or image root")
    servers, hub = hub_processes(files)
    return LaunchFacts(
        slurm=slurm_config(files, env),
        hub=hub_config(files, hub.config if hub is not None else ""),
        singleuser=servers,
        hub_process=hub,
        unit=_service(files.read_text_or_none("/proc/self/cgroup") or ""),
        lxd_api=api,
        container_driver_version=version,
        container_driver_file=lib,
        lxd_instances=instances,
        lxd_tool=tool,
    )


def collect_launch(ctx: CollectContext) -> LaunchFacts:
    files = ctx.system.files
    runtime, _markers, _kube = detect_runtime(files, ctx.system.env)
    runner = ctx.system.runner if files.is_live and not runtime else None
    return launch_facts(files, ctx.system.env, runner)


COLLECTOR = Collector(domain="launch", collect=collect_launch, timeout_s=15.0)

__all__ = [
    "COLLECTOR",
    "collect_launch",
    "container_driver",
    "hub_config",
    "hub_processes",
    "launch_facts",
    "lxd_instances",
    "parse_hub_config",
    "parse_lxd_list",
    "singleuser_servers",
    "slurm_config",
]
