"""Facts about what starts the process and the settings that give it GPUs: Slurm's node
configuration, JupyterHub's spawner configuration and the single-user servers it started, LXD/Incus
(inside a container: its guest API socket and the user-space driver installed in it; on the host:
the instances and their GPU settings).

Sources (each field names its own):

- Slurm: ``gres.conf(5)`` (``Name=gpu File=/dev/nvidia[0-3]``, ``AutoDetect=nvml``) and
  ``cgroup.conf(5)`` (``ConstrainDevices=yes``: a job sees only the GPUs of its allocation);
- JupyterHub: ``jupyterhub_config.py`` and ``jupyterhub_config.d/*.py`` (traitlets config,
  ``c.JupyterHub.spawner_class``, ``c.Spawner.env_keep``, ``c.Spawner.environment``,
  dockerspawner ``extra_host_config``, kubespawner ``extra_resource_limits`` / ``extra_pod_config``,
  systemdspawner ``isolate_devices``), the Zero to JupyterHub Helm values (``singleuser.extraResource``,
  ``singleuser.profileList[].kubespawner_override``), and a running single-user server's
  ``/proc/<pid>/environ`` (the spawner sets ``JUPYTERHUB_*`` there);
- LXD/Incus: the guest API socket ``/dev/lxd/sock`` / ``/dev/incus/sock`` (LXD docs "Communication
  between instance and host"), ``nvidia.runtime`` and ``gpu`` devices in ``incus list --format json``
  / ``lxc list --format json`` (``expanded_config``, ``expanded_devices``);
- the user-space driver in a container: the ``libcuda.so.<version>`` file behind ``libcuda.so.1``.
"""

from __future__ import annotations

from dataclasses import field

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass

_NOT_COLLECTED = Unavailable("not collected")


@frozen_dataclass
class SlurmNodeConfig:
    """The GPU parts of a Slurm node's configuration.

    Attributes:
        gres_conf: the ``gres.conf`` read ("" when none was found).
        gres_gpu_lines: its GPU lines (``Name=gpu ...``, ``AutoDetect=...``), comments dropped.
        cgroup_conf: the ``cgroup.conf`` read ("" when none was found).
        constrain_devices: ``ConstrainDevices=yes`` there (the job's device cgroup hides the GPUs it was
            not given); False when the file says no or does not set it.
    """

    gres_conf: str = ""
    gres_gpu_lines: tuple[str, ...] = ()
    cgroup_conf: str = ""
    constrain_devices: bool = False


@frozen_dataclass
class HubSetting:
    """One setting found in a JupyterHub configuration.

    Attributes:
        name: the traitlet or Helm key, e.g. ``c.KubeSpawner.extra_resource_limits``,
            ``singleuser.extraResource.limits``.
        value: its value as written (Python or YAML text, shortened).
        file: where it was found.
    """

    name: str
    value: str
    file: str


@frozen_dataclass
class HubConfig:
    """A JupyterHub configuration readable on this machine (or image root).

    Attributes:
        files: the files read (config files, ``jupyterhub_config.d`` entries, Helm values).
        spawner: the spawner class (``dockerspawner.DockerSpawner``, ``kubespawner.KubeSpawner``,
            ``systemdspawner.SystemdSpawner``, an entry-point name such as ``docker``), "" when not set
            (JupyterHub's default: ``LocalProcessSpawner``); ``kubespawner.KubeSpawner`` for Helm values.
        settings: the settings that decide what the single-user servers get (GPU requests, device
            isolation, environment).
        errors: files that could not be read or parsed, with the reason.
    """

    files: tuple[str, ...] = ()
    spawner: str = ""
    settings: tuple[HubSetting, ...] = ()
    errors: tuple[str, ...] = ()

    def get(self, *names: str) -> tuple[HubSetting, ...]:
        """The settings whose name ends with one of ``names`` (``extra_resource_limits`` matches
        ``c.KubeSpawner.extra_resource_limits``)."""
        return tuple(s for s in self.settings if any(s.name == n or s.name.endswith("." + n) for n in names))


@frozen_dataclass
class SingleUserServer:
    """A running JupyterHub single-user server (or the hub itself) found in ``/proc``.

    Attributes:
        pid: its process id.
        command: its command line (shortened).
        env: the variables of its environment that decide GPUs and libraries (tokens dropped).
        unit: its systemd unit (``jupyter-alice-singleuser.service`` under SystemdSpawner), "" when none.
        in_container: its cgroup names a container (Docker, Podman, containerd, a pod, LXC), as
            DockerSpawner's and KubeSpawner's servers are; their environment is the image's by design.
        config: for the hub: the config file its command line names (``-f``/``--config``, resolved
            against its working directory), "" when none.
    """

    pid: int
    command: str
    env: dict[str, str] = field(default_factory=dict)
    unit: str = ""
    in_container: bool = False
    config: str = ""


@frozen_dataclass
class LxdInstance:
    """An LXD/Incus instance as the host's ``incus``/``lxc list --format json`` shows it.

    Attributes:
        name: the instance name.
        status: ``Running``, ``Stopped``...
        nvidia_runtime: ``nvidia.runtime`` is true in its expanded config (the host's driver user-space
            is passed in by libnvidia-container).
        gpu_devices: names of its ``type: gpu`` devices (expanded, profiles included).
    """

    name: str
    status: str = ""
    nvidia_runtime: bool = False
    gpu_devices: tuple[str, ...] = ()


@domain("launch")
@frozen_dataclass
class LaunchFacts:
    """What starts the processes here, and the settings that give them GPUs.

    Attributes:
        slurm: the node's Slurm GPU configuration, or Unavailable (no ``gres.conf``/``cgroup.conf``).
        hub: the JupyterHub configuration found, or Unavailable.
        singleuser: JupyterHub single-user servers running here (readable ``/proc/<pid>``).
        unit: the systemd unit of gpudoctor's own process (``/proc/self/cgroup``), "" when none.
        lxd_api: ``lxd`` or ``incus`` when the container has that guest API socket, "" otherwise.
        container_driver_version: the version of the ``libcuda.so.<version>`` installed in this
            container or root (e.g. ``535.183.01``), "" when none is found.
        container_driver_file: the file it was read from.
        lxd_instances: the host's LXD/Incus instances (``incus``/``lxc list --format json``), or
            Unavailable (no LXD/Incus, inside a container, an image root).
        lxd_tool: the command that listed them (``incus`` or ``lxc``), "" when none answered.
        hub_process: the running JupyterHub process (its environment is what ``c.Spawner.env_keep``
            passes on to local and systemd single-user servers), None when none is readable.
    """

    slurm: SlurmNodeConfig | Unavailable = _NOT_COLLECTED
    hub: HubConfig | Unavailable = _NOT_COLLECTED
    singleuser: tuple[SingleUserServer, ...] = ()
    unit: str = ""
    lxd_api: str = ""
    container_driver_version: str = ""
    container_driver_file: str = ""
    lxd_instances: tuple[LxdInstance, ...] | Unavailable = _NOT_COLLECTED
    lxd_tool: str = ""
    hub_process: SingleUserServer | None = None
