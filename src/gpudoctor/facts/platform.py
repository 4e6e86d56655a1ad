"""Facts about the platform a GPU job runs on: where (bare metal, VM, WSL,
container, Kubernetes, Slurm, Ray), what the container runtime injected, the
host's NVIDIA Container Toolkit, the NVIDIA kernel module, process limits and
RDMA devices.

Sources (each field names its own):

- container markers: ``/.dockerenv`` (Docker), ``/run/.containerenv``
  (Podman, containers/podman docs "podman-run: .containerenv"), cgroup paths
  in ``/proc/self/cgroup`` and mount sources in ``/proc/self/mountinfo``
  (proc(5)); Kubernetes: the service-account mount
  ``/var/run/secrets/kubernetes.io/serviceaccount`` and
  ``KUBERNETES_SERVICE_HOST`` (Kubernetes docs, "Accessing the API from a Pod");
- Slurm: ``SLURM_JOB_ID`` and the GPU variables of sbatch(1)/srun(1); Ray:
  the variables a Ray worker process inherits (``RAY_*``);
- virtualisation: the ``hypervisor`` CPU flag in ``/proc/cpuinfo`` and DMI
  ``/sys/class/dmi/id/{sys_vendor,product_name}``;
- toolkit: NVIDIA Container Toolkit install guide (package
  ``nvidia-container-toolkit``, ``nvidia-ctk``, the ``nvidia`` runtime in
  ``docker info``, CDI specs in ``/etc/cdi`` and ``/var/run/cdi``);
- kernel module: ``/proc/driver/nvidia/version``, ``modinfo nvidia``
  (``license: Dual MIT/GPL`` for the open modules, ``NVIDIA`` for the
  proprietary ones), ``/sys/module``, ``/lib/modules/<release>``, the UEFI
  ``SecureBoot`` variable in efivarfs;
- limits: getrlimit(2) / ``/proc/<pid>/limits``;
- RDMA: ``/sys/class/infiniband`` (HCAs), ``/dev/infiniband`` (uverbs
  devices), ``CapEff`` in ``/proc/self/status`` (capabilities(7)),
  ``/sys/class/net`` (interfaces for ``NCCL_SOCKET_IFNAME``).
"""

from __future__ import annotations

from dataclasses import field

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass

_NOT_COLLECTED = Unavailable("not collected")


@frozen_dataclass
class RLimit:
    """One resource limit (getrlimit(2)); None means unlimited.

    Attributes:
        soft: the soft limit the process runs under (count, or bytes for memlock).
        hard: the ceiling an unprivileged process may raise the soft limit to.
    """

    soft: int | None
    hard: int | None


@frozen_dataclass
class ProcessLimits:
    """The limits of one process that matter to GPU jobs.

    Attributes:
        source: where they were read, e.g. ``probe of /venv/bin/python``
            (``resource.getrlimit`` inside the target) or ``/proc/self/limits``.
        nofile: RLIMIT_NOFILE (open file descriptors), or Unavailable.
        memlock: RLIMIT_MEMLOCK in bytes (locked memory), or Unavailable.
    """

    source: str
    nofile: RLimit | Unavailable = _NOT_COLLECTED
    memlock: RLimit | Unavailable = _NOT_COLLECTED


@domain("platform")
@frozen_dataclass
class PlatformFacts:
    """Where gpudoctor (and the job it judges) runs, and what the container got.

    Attributes:
        kind: ``bare-metal``, ``vm``, ``wsl`` or ``container`` (a container on
            any of the others).
        hypervisor: the VM's vendor/product from DMI, or "" (bare metal / unknown).
        container_runtime: ``docker``, ``podman``, ``containerd``, ``cri-o``,
            ``lxc``, ``apptainer`` (Apptainer/Singularity), ``container`` (a container whose
            runtime cannot be told) or "".
        markers: the evidence for kind and runtime, e.g. ``/.dockerenv exists``.
        kubernetes: True inside a Kubernetes pod.
        scheduler: ``slurm``, ``ray`` or "" (none seen).
        env: the variables that decide GPU visibility and placement
            (``NVIDIA_VISIBLE_DEVICES``, ``CUDA_VISIBLE_DEVICES``, ``SLURM_*`` GPU
            variables, ``RAY_*`` ids, ``NCCL_SOCKET_IFNAME``, ...), as set.
        device_nodes: ``/dev/nvidia*`` entries (``nvidia0``, ``nvidiactl``, ``nvidia-uvm``), and ``dxg``
            when ``/dev/dxg`` (the WSL 2 GPU device) exists.
        driver_libraries: driver user-space libraries found in the usual
            directories (``libcuda.so.1``, ``libnvidia-ml.so.1`` with their
            directory), which the NVIDIA container runtime mounts in.
        nvidia_smi: path of ``nvidia-smi`` when found in the usual directories, or "".
        proc_driver_version: first line of ``/proc/driver/nvidia/version`` ("" when absent):
            the host kernel module, visible even in a container that got no GPU.
    """

    kind: str
    hypervisor: str = ""
    container_runtime: str = ""
    markers: tuple[str, ...] = ()
    kubernetes: bool = False
    scheduler: str = ""
    env: dict[str, str] = field(default_factory=dict)
    device_nodes: tuple[str, ...] = ()
    driver_libraries: tuple[str, ...] = ()
    nvidia_smi: str = ""
    proc_driver_version: str = ""

    @property
    def in_container(self) -> bool:
        """True when running inside a container (Docker, Podman, a pod...)."""
        return self.kind == "container"


@frozen_dataclass
class DockerInfo:
    """What ``docker info --format '{{json .}}'`` says about runtimes.

    Attributes:
        server_version: e.g. ``27.3.1``.
        runtimes: runtime names (``runc``, ``io.containerd.runc.v2``, ``nvidia``).
        default_runtime: ``DefaultRuntime``.
        cdi_spec_dirs: ``CDISpecDirs`` (Docker 25+ with CDI enabled), empty otherwise.
        security_options: ``SecurityOptions`` (``name=seccomp,profile=builtin``, ``name=rootless``,
            ``name=cgroupns``); ``name=rootless`` marks a rootless daemon.
        operating_system: ``OperatingSystem`` of the daemon (``Ubuntu 22.04.5 LTS``, ``Docker Desktop``).
    """

    server_version: str
    runtimes: tuple[str, ...]
    default_runtime: str
    cdi_spec_dirs: tuple[str, ...] = ()
    security_options: tuple[str, ...] = ()
    operating_system: str = ""

    @property
    def rootless(self) -> bool:
        """The daemon runs rootless (Docker docs, "Rootless mode": ``docker info`` shows ``rootless``)."""
        return any("name=rootless" in o for o in self.security_options)


@frozen_dataclass
class CdiSpec:
    """One CDI spec file (Container Device Interface, cncf-tags/container-device-interface).

    Attributes:
        path: e.g. ``/etc/cdi/nvidia.yaml``.
        kind: ``nvidia.com/gpu`` ("" when not found).
        devices: device names it defines (``0``, ``all``, a UUID...).
        driver_version: the driver version of the libraries it mounts
            (``libcuda.so.<version>``), "" when it names none: a spec generated
            for another driver no longer matches after an upgrade.
        device_nodes: the host device nodes it injects (``deviceNodes`` ``path``/``hostPath``).
        missing_device_nodes: those that do not exist on this host ("failed to stat CDI host device":
            a GPU removed, renumbered ``/dev/dri`` nodes, MIG devices recreated since the spec was made).
    """

    path: str
    kind: str
    devices: tuple[str, ...] = ()
    driver_version: str = ""
    device_nodes: tuple[str, ...] = ()
    missing_device_nodes: tuple[str, ...] = ()


@frozen_dataclass
class ContainerdConfig:
    """The runtimes of a containerd config (``/etc/containerd/config.toml``, k3s and
    microk8s templates).

    Attributes:
        path: the file read.
        default_runtime: ``default_runtime_name`` ("" when not set: ``runc``).
        runtimes: runtime names declared under ``...containerd.runtimes.<name>``.
    """

    path: str
    default_runtime: str
    runtimes: tuple[str, ...] = ()


@domain("container_host")
@frozen_dataclass
class ContainerHostFacts:
    """Container engines on this host and the NVIDIA Container Toolkit that gives them GPUs.

    Attributes:
        engines: engines found (``docker``, ``podman``, ``containerd``), by
            binary or socket.
        docker: ``docker info`` runtimes, or Unavailable (not installed, daemon
            down, not run on an image root).
        toolkit_version: ``nvidia-ctk --version`` (e.g. ``1.17.3``), or Unavailable.
        toolkit_files: toolkit programs found (``/usr/bin/nvidia-ctk``,
            ``nvidia-container-runtime``, ``nvidia-container-cli``).
        toolkit_packages: installed packages from the dpkg database
            (``nvidia-container-toolkit 1.17.3-1``); empty where there is none.
        cdi_specs: CDI specs found in ``/etc/cdi`` and ``/var/run/cdi``.
        containerd: containerd configs found, with their runtimes.
        no_cgroups: ``/etc/nvidia-container-runtime/config.toml`` sets ``no-cgroups = true`` (needed by
            rootless Docker/Podman with the runtime hook; NVIDIA Container Toolkit docs, "Rootless mode").
        docker_desktop: the ``docker`` here is Docker Desktop's WSL integration (``/mnt/wsl/docker-desktop``,
            or ``docker info`` says ``Docker Desktop``), which gives containers the GPU itself.
    """

    engines: tuple[str, ...] = ()
    docker: DockerInfo | Unavailable = _NOT_COLLECTED
    toolkit_version: str | Unavailable = _NOT_COLLECTED
    toolkit_files: tuple[str, ...] = ()
    toolkit_packages: tuple[str, ...] = ()
    cdi_specs: tuple[CdiSpec, ...] = ()
    containerd: tuple[ContainerdConfig, ...] = ()
    no_cgroups: bool = False
    docker_desktop: bool = False


@frozen_dataclass
class Modinfo:
    """The fields of ``modinfo nvidia`` that tell the module apart.

    Attributes:
        filename: the .ko file, e.g. ``/lib/modules/6.8.0-51-generic/updates/dkms/nvidia.ko.zst``.
        version: e.g. ``550.120``.
        license: ``NVIDIA`` (proprietary) or ``Dual MIT/GPL`` (open).
        vermagic: the kernel it was built for.
        signer: module signature signer ("" when unsigned).
    """

    filename: str
    version: str
    license: str
    vermagic: str = ""
    signer: str = ""


@domain("kmod")
@frozen_dataclass
class KernelModuleFacts:
    """The NVIDIA kernel module: loaded or not, which flavour, built for which kernel.

    Attributes:
        kernel_release: the running kernel (``uname -r``, or
            ``/proc/sys/kernel/osrelease``), "" when unknown.
        loaded: ``/sys/module/nvidia`` or ``/proc/driver/nvidia/version`` exists.
        proc_version: first line of ``/proc/driver/nvidia/version`` ("" when not loaded).
        flavour: ``open`` or ``proprietary`` ("Open Kernel Module" in the
            proc line, else the modinfo licence), "" when unknown.
        modinfo: ``modinfo nvidia`` (the module installed for the running
            kernel), or Unavailable.
        nouveau_loaded: ``/sys/module/nouveau`` exists.
        installed_for: kernel releases under ``/lib/modules`` that hold an
            ``nvidia.ko*`` (a DKMS build for another kernel shows here).
        secure_boot: the UEFI SecureBoot variable (True: unsigned modules are
            refused), or Unavailable (legacy boot, efivarfs not mounted).
        dkms_versions: NVIDIA module sources registered with DKMS
            (``/var/lib/dkms/nvidia/<version>``; also ``nvidia-srv``), e.g. ``550.120``.
        kernel_headers: the running kernel's build tree exists (``/lib/modules/<release>/build``),
            which DKMS needs to build the module.
    """

    kernel_release: str = ""
    loaded: bool = False
    proc_version: str = ""
    flavour: str = ""
    modinfo: Modinfo | Unavailable = _NOT_COLLECTED
    nouveau_loaded: bool = False
    installed_for: tuple[str, ...] = ()
    secure_boot: bool | Unavailable = _NOT_COLLECTED
    dkms_versions: tuple[str, ...] = ()
    kernel_headers: bool = False


@domain("limits")
@frozen_dataclass
class LimitsFacts:
    """Resource limits of the doctor's own process tree (``/proc/self/limits``);
    the per-target limits come from each target's probe (``ProbeFacts.limits``).

    Attributes:
        process: the limits read, or Unavailable.
    """

    process: ProcessLimits | Unavailable = _NOT_COLLECTED


@domain("rdma")
@frozen_dataclass
class RdmaFacts:
    """RDMA devices and what a process needs to use them (NCCL's IB/RoCE transport).

    Attributes:
        hcas: HCA names under ``/sys/class/infiniband`` (``mlx5_0``); sysfs shows
            the host's HCAs even in a container.
        dev_infiniband: entries of ``/dev/infiniband`` (``uverbs0``, ``rdma_cm``).
        cap_ipc_lock: CAP_IPC_LOCK in the effective set (``CapEff`` in
            ``/proc/self/status``), or Unavailable.
        net_interfaces: names under ``/sys/class/net``.
        nccl_env: ``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA``, ``NCCL_IB_DISABLE``,
            ``NCCL_NET`` as set.
    """

    hcas: tuple[str, ...] = ()
    dev_infiniband: tuple[str, ...] = ()
    cap_ipc_lock: bool | Unavailable = _NOT_COLLECTED
    net_interfaces: tuple[str, ...] = ()
    nccl_env: dict[str, str] = field(default_factory=dict)
