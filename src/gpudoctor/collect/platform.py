"""Collectors for the ``platform``, ``container_host``, ``kmod``, ``limits`` and
``rdma`` domains (see :mod:`gpudoctor.facts.platform` for the sources).

Files are read through ``System.files`` (so ``--root`` and fake roots work);
the only commands are read-only and run on the live system, each with a
timeout: ``docker info --format '{{json .}}'``, ``nvidia-ctk --version`` and
``modinfo nvidia``. A missing or hung command becomes an Unavailable fact.
"""

from __future__ import annotations

import dataclasses
import json
import platform as _platform
import re
from collections.abc import Mapping

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.platform import (
    CdiSpec,
    ContainerdConfig,
    ContainerHostFacts,
    DockerInfo,
    KernelModuleFacts,
    LimitsFacts,
    Modinfo,
    PlatformFacts,
    ProcessLimits,
    RdmaFacts,
    RLimit,
)
from gpudoctor.system import Files, Runner

#: seconds for each read-only command
COMMAND_TIMEOUT_S = 8.0

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

#: variables that decide GPU visibility and placement (kept in PlatformFacts.env)
PLATFORM_ENV = (
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_VERSION",
    "KUBERNETES_SERVICE_HOST",
    "SLURM_JOB_ID",
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "SLURM_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_JOB_GRES",
    "SLURM_STEP_GRES",
    "SLURM_TRES_PER_TASK",
    "SLURM_LOCALID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_STEP_ID",
    "SLURM_GPU_BIND",
    "SLURM_CONF",
    "LOCAL_RANK",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "ACCELERATE_USE_DEEPSPEED",
    "ACCELERATE_MIXED_PRECISION",
    "ACCELERATE_DYNAMO_BACKEND",
    "CROSS_RANK",
    "LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "JUPYTERHUB_USER",
    "JUPYTERHUB_SERVICE_PREFIX",
    "JUPYTERHUB_SERVER_NAME",
    "JUPYTERHUB_API_URL",
    "RAY_JOB_ID",
    "RAY_NODE_ID",
    "RAY_RAYLET_PID",
    "RAY_ADDRESS",
    "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    "APPTAINER_CONTAINER",
    "SINGULARITY_CONTAINER",
    "container",
)

#: where the NVIDIA container runtime (or a host driver install) puts the driver libraries
DRIVER_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/wsl/lib",
    "/.singularity.d/libs",
)
DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/nvidia/bin", "/snap/bin")

# (substring of a cgroup path or mount source, runtime); order matters: the most specific first
_CGROUP_RUNTIMES = (
    ("libpod", "podman"),
    ("cri-containerd", "containerd"),
    ("nerdctl-", "containerd"),  # nerdctl's systemd scope: nerdctl-<id>.scope
    ("crio-", "cri-o"),
    ("/docker/", "docker"),
    ("docker-", "docker"),
    ("/lxc/", "lxc"),
    ("lxc.payload", "lxc"),
)
_MOUNT_RUNTIMES = (
    ("/var/lib/containers/storage", "podman"),
    ("libpod", "podman"),
    ("io.containerd.runtime", "containerd"),
    ("/var/lib/containerd/", "containerd"),
    ("/var/lib/docker/containers/", "docker"),
    ("/var/lib/docker/", "docker"),
    ("/var/lib/kubelet/pods/", "kubernetes"),
)


# --------------------------------------------------------------------------- platform


def _hypervisor(files: Files) -> str:
    """VM vendor/product from DMI when the CPU says it runs under a hypervisor."""
    cpuinfo = files.read_text_or_none("/proc/cpuinfo") or ""
    flagged = any(line.startswith("flags") and " hypervisor" in line for line in cpuinfo.splitlines())
    vendor = (files.read_text_or_none("/sys/class/dmi/id/sys_vendor") or "").strip()
    product = (files.read_text_or_none("/sys/class/dmi/id/product_name") or "").strip()
    known = (
        "QEMU",
        "KVM",
        "VMware",
        "VirtualBox",
        "Xen",
        "Virtual Machine",
        "Amazon EC2",
        "Google Compute Engine",
        "OpenStack",
        "innotek",
    )
    dmi_vm = any(k.lower() in f"{vendor} {product}".lower() for k in known)
    if flagged or dmi_vm:
        return " ".join(x for x in (vendor, product) if x) or "a hypervisor (CPU flag)"
    return ""


#: mount points a container runtime sets up for the container itself; a host that RUNS containers
#: also lists their overlay mounts (under /var/lib/docker, /var/lib/kubelet...), so only these count
_OWN_MOUNT_POINTS = (
    "/",
    "/etc/hostname",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/run/secrets/kubernetes.io/serviceaccount",
)


def own_mounts(mountinfo: str) -> str:
    """The lines of ``/proc/self/mountinfo`` (proc(5)) whose mount point is one of the container's own."""
    keep = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] in _OWN_MOUNT_POINTS:
            keep.append(line)
    return "\n".join(keep)


def detect_runtime(files: Files, env: Mapping[str, str]) -> tuple[str, tuple[str, ...], bool]:
    """(container runtime or "", markers, kubernetes) from marker files, cgroups, mountinfo and env."""
    markers: list[str] = []
    runtime = ""
    if files.exists("/.dockerenv"):
        markers.append("/.dockerenv exists")
        runtime = "docker"
    if files.exists("/run/.containerenv"):
        markers.append("/run/.containerenv exists")
        runtime = "podman"
    cgroup = "\n".join(files.read_text_or_none(p) or "" for p in ("/proc/self/cgroup", "/proc/1/cgroup"))
    for word, name in _CGROUP_RUNTIMES:
        if word in cgroup:
            markers.append(f"a cgroup path names {word.strip('/-.')}")
            runtime = runtime or name
            break
    kube = False
    if "kubepods" in cgroup:
        markers.append("a cgroup path names kubepods")
        kube = True
    mountinfo = own_mounts(files.read_text_or_none("/proc/self/mountinfo") or "")
    for word, name in _MOUNT_RUNTIMES:
        if word in mountinfo:
            markers.append(f"/proc/self/mountinfo mounts from {word}")
            if name == "kubernetes":
                kube = True
            elif not runtime:
                runtime = name
    if files.is_dir(SERVICE_ACCOUNT):
        markers.append(f"{SERVICE_ACCOUNT} is mounted")
        kube = True
    if env.get("KUBERNETES_SERVICE_HOST"):
        markers.append("KUBERNETES_SERVICE_HOST is set")
        kube = True
    if files.exists("/.singularity.d") or env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER"):
        markers.append("/.singularity.d exists (Apptainer/Singularity)")
        runtime = runtime or "apptainer"
    for sock, name in (("/dev/lxd/sock", "LXD"), ("/dev/incus/sock", "Incus")):
        if files.exists(sock):
            markers.append(f"{sock} exists ({name} guest API)")
            runtime = runtime or "lxc"
    if env.get("container"):
        markers.append(f"container={env['container']} in the environment")
        runtime = runtime or env["container"]
    if (kube or markers) and not runtime:
        runtime = "container"
    return runtime, tuple(markers), kube


def _scheduler(env: Mapping[str, str]) -> str:
    if env.get("SLURM_JOB_ID"):
        return "slurm"
    if any(k.startswith("RAY_") and k in env for k in ("RAY_JOB_ID", "RAY_NODE_ID", "RAY_RAYLET_PID")):
        return "ray"
    return ""


def collect_platform(ctx: CollectContext) -> PlatformFacts | Unavailable:
    files, env = ctx.system.files, ctx.system.env
    runtime, markers, kube = detect_runtime(files, env)
    if not files.is_live and not markers and not files.is_dir("/proc"):
        return Unavailable(
            f"where a job runs belongs to a running system; --root {files.root} has no /proc and no container markers"
        )
    osrel = files.read_text_or_none("/proc/sys/kernel/osrelease") or (_platform.release() if files.is_live else "")
    wsl = "microsoft" in osrel.lower() or files.exists("/usr/lib/wsl/lib") or files.exists("/dev/dxg")
    hyper = _hypervisor(files)
    kind = "container" if runtime else "wsl" if wsl else "vm" if hyper else "bare-metal"
    try:
        nodes = tuple(n for n in files.listdir("/dev") if n.startswith("nvidia") or n == "dxg")
    except OSError:
        nodes = ()
    libs = []
    for d in DRIVER_LIB_DIRS:
        for name in DRIVER_LIBS:
            if files.exists(f"{d}/{name}"):
                libs.append(f"{d}/{name}")
    smi = next((f"{d}/nvidia-smi" for d in BIN_DIRS if files.is_file(f"{d}/nvidia-smi")), "")
    proc = (files.read_text_or_none("/proc/driver/nvidia/version") or "").strip().splitlines()
    keep = {k: env[k] for k in PLATFORM_ENV if k in env}
    keep.update({k: v for k, v in env.items() if k.startswith(("SLURM_GPU", "SLURM_JOB_GPU"))})
    return PlatformFacts(
        kind=kind,
        hypervisor=hyper,
        container_runtime=runtime if runtime else "",
        markers=markers,
        kubernetes=kube,
        scheduler=_scheduler(env),
        env=keep,
        device_nodes=nodes,
        driver_libraries=tuple(libs),
        nvidia_smi=smi,
        proc_driver_version=proc[0] if proc else "",
    )


# --------------------------------------------------------------------------- container host


def parse_docker_info(text: str) -> DockerInfo | Unavailable:
    """``docker info --format '{{json .}}'`` output -> DockerInfo (Unavailable if not JSON)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return Unavailable("docker info did not print JSON")
    if not isinstance(doc, dict):
        return Unavailable("docker info did not print a JSON object")
    runtimes = doc.get("Runtimes") or {}
    return DockerInfo(
        server_version=str(doc.get("ServerVersion") or ""),
        runtimes=tuple(sorted(runtimes)) if isinstance(runtimes, dict) else (),
        default_runtime=str(doc.get("DefaultRuntime") or ""),
        cdi_spec_dirs=tuple(doc.get("CDISpecDirs") or ()),
        security_options=tuple(str(o) for o in doc.get("SecurityOptions") or ()),
        operating_system=str(doc.get("OperatingSystem") or ""),
    )


_CTK_VERSION = re.compile(r"version\s+(\d+\.\d+\.\d+\S*)", re.IGNORECASE)
#: a driver library named by the driver's version (libcuda.so.550.127.05, libEGL_nvidia.so.535.161.07,
#: libnvidia-ml.so...): what a CDI spec mounts; libnvidia-egl-wayland.so.1.1.13 (its own version) does not match
_SO_VERSION = re.compile(
    r"lib(?:cuda|nvidia-ml|nvidia-[a-z]+|EGL_nvidia|GLX_nvidia|GLESv2_nvidia|GLESv1_CM_nvidia)\.so\.(\d{3}\.\d+(?:\.\d+)?)"
)


def parse_cdi_spec(path: str, text: str) -> CdiSpec:
    """The kind, device names and driver version of a CDI spec (YAML or JSON), read line-wise."""
    kind_m = re.search(r"""["']?kind["']?\s*:\s*["']?([\w./-]+)""", text)
    names = re.findall(r"""-?\s*["']?name["']?\s*:\s*["']?([\w.:-]+)["']?""", text)
    ver = _SO_VERSION.search(text)
    nodes = re.findall(r"""["']?(?:hostPath|path)["']?\s*:\s*["']?(/dev/[\w./-]+)""", text)
    return CdiSpec(
        path=path,
        kind=kind_m.group(1) if kind_m else "",
        devices=tuple(dict.fromkeys(names)),
        driver_version=ver.group(1) if ver else "",
        device_nodes=tuple(dict.fromkeys(nodes)),
    )


_CONTAINERD_CONFIGS = (
    "/etc/containerd/config.toml",
    "/var/snap/microk8s/current/args/containerd-template.toml",
    "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
    "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
)

#: where the GPU Operator's toolkit container installs the runtime on the node (GPU Operator docs,
#: "Container Toolkit": ``/usr/local/nvidia/toolkit``)
OPERATOR_TOOLKIT_DIR = "/usr/local/nvidia/toolkit"


def parse_containerd_config(path: str, text: str) -> ContainerdConfig:
    """default_runtime_name and declared runtimes (line-wise: templates are not always valid TOML)."""
    default = re.search(r"""default_runtime_name\s*=\s*["']([^"']*)["']""", text)
    runtimes = re.findall(r"""\.runtimes\.["']?([\w.-]+?)["']?\]""", text)
    return ContainerdConfig(
        path=path,
        default_runtime=default.group(1) if default else "",
        runtimes=tuple(dict.fromkeys(r for r in runtimes if not r.endswith(".options"))),
    )


def _dpkg_packages(files: Files, names: tuple[str, ...]) -> tuple[str, ...]:
    status = files.read_text_or_none("/var/lib/dpkg/status") or ""
    out = []
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if fields.get("Package") in names and "install ok installed" in fields.get("Status", ""):
            out.append(f"{fields['Package']} {fields.get('Version', '')}".strip())
    return tuple(out)


def query_host_tools(runner: Runner) -> tuple[DockerInfo | Unavailable, str | Unavailable]:
    """Run ``docker info --format '{{json .}}'`` and ``nvidia-ctk --version`` (read-only, timeouts)."""
    result = runner.run(["docker", "info", "--format", "{{json .}}"], timeout_s=COMMAND_TIMEOUT_S)
    docker: DockerInfo | Unavailable
    parsed = parse_docker_info(result.stdout) if result.error is None else None
    if isinstance(parsed, DockerInfo) and parsed.server_version:
        docker = parsed
    elif result.error is None and result.stdout.strip().startswith("{"):
        # the client prints its half of the JSON and exits 1 when the daemon does not answer
        tail = (result.stderr.strip().splitlines() or ["no daemon answer"])[-1]
        docker = Unavailable(f"the Docker daemon did not answer: {tail}")
    else:
        docker = Unavailable(result.describe_failure())
    result = runner.run(["nvidia-ctk", "--version"], timeout_s=COMMAND_TIMEOUT_S)
    ctk: str | Unavailable
    if result.ok:
        m = _CTK_VERSION.search(result.stdout)
        ctk = m.group(1) if m else Unavailable(f"nvidia-ctk --version printed no version: {result.stdout.strip()[:80]}")
    else:
        ctk = Unavailable(result.describe_failure())
    return docker, ctk


def container_host_facts(files: Files, runner: Runner | None) -> ContainerHostFacts:
    """The container_host facts; commands run only when ``runner`` is given."""
    engines = []
    for name, paths in (
        ("docker", ("/usr/bin/docker", "/usr/local/bin/docker", "/var/run/docker.sock", "/run/docker.sock")),
        ("podman", ("/usr/bin/podman", "/usr/local/bin/podman")),
        (
            "containerd",
            (
                "/usr/bin/containerd",
                "/usr/local/bin/containerd",
                "/run/containerd/containerd.sock",
                "/snap/bin/microk8s",
                "/usr/local/bin/k3s",
            ),
        ),
    ):
        if any(files.exists(p) for p in paths):
            engines.append(name)
    toolkit_files = tuple(
        f"{d}/{n}"
        for d in (*BIN_DIRS, OPERATOR_TOOLKIT_DIR)
        for n in ("nvidia-ctk", "nvidia-container-runtime", "nvidia-container-cli", "nvidia-container-runtime-hook")
        if files.is_file(f"{d}/{n}")
    )
    specs = []
    try:  # an image root has no device nodes to compare a spec with: only a root that shows the GPU's
        shows_devices = any(n.startswith("nvidia") for n in files.listdir("/dev"))
    except OSError:
        shows_devices = False
    for d in ("/etc/cdi", "/var/run/cdi"):
        for path in files.glob(d, "*"):
            if path.endswith((".yaml", ".yml", ".json")):
                spec = parse_cdi_spec(path, files.read_text_or_none(path) or "")
                missing = tuple(n for n in spec.device_nodes if shows_devices and not files.exists(n))
                specs.append(dataclasses.replace(spec, missing_device_nodes=missing))
    configs = tuple(
        parse_containerd_config(p, files.read_text_or_none(p) or "") for p in _CONTAINERD_CONFIGS if files.is_file(p)
    )
    if configs and "containerd" not in engines:
        engines.append("containerd")
    packages = _dpkg_packages(
        files,
        (
            "nvidia-container-toolkit",
            "nvidia-container-toolkit-base",
            "libnvidia-container1",
            "libnvidia-container-tools",
        ),
    )
    runtime_config = files.read_text_or_none("/etc/nvidia-container-runtime/config.toml") or ""
    no_cgroups = bool(re.search(r"(?m)^\s*no-cgroups\s*=\s*true\b", runtime_config))
    if runner is not None:
        docker, ctk = query_host_tools(runner)
    else:
        docker = Unavailable(f"docker info is only run on the live system, not on an image root ({files.root})")
        ctk = Unavailable("nvidia-ctk is only run on the live system")
    return ContainerHostFacts(
        engines=tuple(engines),
        docker=docker,
        toolkit_version=ctk,
        toolkit_files=toolkit_files,
        toolkit_packages=packages,
        cdi_specs=tuple(specs),
        containerd=configs,
        no_cgroups=no_cgroups,
        docker_desktop=files.is_dir("/mnt/wsl/docker-desktop")
        or (isinstance(docker, DockerInfo) and "docker desktop" in docker.operating_system.lower()),
    )


def collect_container_host(ctx: CollectContext) -> ContainerHostFacts:
    """Host-side facts; the commands run only on a live host (not on an image root, and not inside a
    container, where the toolkit is the host's business and a mounted docker.sock is another machine's)."""
    files = ctx.system.files
    runtime, _markers, _kube = detect_runtime(files, ctx.system.env)
    facts = container_host_facts(files, ctx.system.runner if files.is_live and not runtime else None)
    if files.is_live and runtime:
        reason = "not run inside a container: the NVIDIA Container Toolkit belongs to the host"
        facts = dataclasses.replace(facts, docker=Unavailable(reason), toolkit_version=Unavailable(reason))
    return facts


# --------------------------------------------------------------------------- kernel module


def parse_modinfo(text: str) -> Modinfo | Unavailable:
    """``modinfo nvidia`` output -> Modinfo (first value of each field)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    if "filename" not in fields:
        return Unavailable("modinfo printed no filename")
    return Modinfo(
        filename=fields["filename"],
        version=fields.get("version", ""),
        license=fields.get("license", ""),
        vermagic=fields.get("vermagic", ""),
        signer=fields.get("signer", ""),
    )


def flavour_of(proc_line: str, modinfo: Modinfo | Unavailable) -> str:
    """``open``/``proprietary`` from the proc line ("Open Kernel Module"), else the modinfo licence."""
    if proc_line:
        return "open" if "open kernel module" in proc_line.lower() else "proprietary"
    if isinstance(modinfo, Modinfo) and modinfo.license:
        return "open" if "gpl" in modinfo.license.lower() else "proprietary"
    return ""


def _secure_boot(files: Files) -> bool | Unavailable:
    base = "/sys/firmware/efi/efivars"
    try:
        names = [n for n in files.listdir(base) if n.startswith("SecureBoot-")]
    except OSError:
        return Unavailable("no EFI variables (legacy BIOS boot, or efivarfs not mounted)")
    if not names:
        return Unavailable("the SecureBoot EFI variable is not set")
    try:
        data = files.host_path(f"{base}/{names[0]}").read_bytes()
    except OSError as exc:
        return Unavailable(f"{names[0]} cannot be read: {exc.strerror}")
    return bool(data[-1]) if data else Unavailable(f"{names[0]} is empty")


def kernel_module_facts(
    files: Files, runner: Runner | None, kernel_release: str = "", modinfo_skipped: str = ""
) -> KernelModuleFacts:
    """The kmod facts; ``modinfo nvidia`` runs only when ``runner`` is given and ``modinfo_skipped``
    (the reason it is not run, for the Unavailable) is empty."""
    release = kernel_release or (files.read_text_or_none("/proc/sys/kernel/osrelease") or "").strip()
    proc = (files.read_text_or_none("/proc/driver/nvidia/version") or "").strip().splitlines()
    proc_line = proc[0] if proc else ""
    loaded = bool(proc_line) or files.is_dir("/sys/module/nvidia")
    modinfo: Modinfo | Unavailable
    if modinfo_skipped:
        modinfo = Unavailable(f"modinfo nvidia {modinfo_skipped}")
    elif runner is not None:
        result = runner.run(["modinfo", "nvidia"], timeout_s=COMMAND_TIMEOUT_S)
        if result.ok:
            modinfo = parse_modinfo(result.stdout)
        elif result.error is None and "not found" in (result.stderr + result.stdout):
            modinfo = Unavailable(
                f"no nvidia module is installed for kernel {release or 'the running kernel'}: "
                f"{(result.stderr or result.stdout).strip().splitlines()[-1]}"
            )
        else:
            modinfo = Unavailable(result.describe_failure())
    else:
        modinfo = Unavailable("modinfo is only run on the live system")
    installed = []
    try:
        releases = files.listdir("/lib/modules")
    except OSError:
        releases = []
    for rel in releases:
        if any(True for _ in files.glob(f"/lib/modules/{rel}", "**/nvidia.ko*")):
            installed.append(rel)
    dkms = []
    for name in ("nvidia", "nvidia-srv"):
        try:
            dkms += [v for v in files.listdir(f"/var/lib/dkms/{name}") if v[:1].isdigit()]
        except OSError:
            pass
    return KernelModuleFacts(
        dkms_versions=tuple(sorted(set(dkms))),
        kernel_headers=bool(release) and files.exists(f"/lib/modules/{release}/build"),
        kernel_release=release,
        loaded=loaded,
        proc_version=proc_line,
        flavour=flavour_of(proc_line, modinfo),
        modinfo=modinfo,
        nouveau_loaded=files.is_dir("/sys/module/nouveau"),
        installed_for=tuple(installed),
        secure_boot=_secure_boot(files),
    )


def collect_kmod(ctx: CollectContext) -> KernelModuleFacts:
    """The kmod facts. At the light level (the entrypoint gate) on a machine with no NVIDIA kernel
    driver, ``modinfo nvidia`` is not run (the installed modules are still listed from /lib/modules)."""
    from gpudoctor.collect.nvidia import kernel_driver_absent

    files = ctx.system.files
    live = files.is_live
    skip = ""
    if live and ctx.options.probe_level == "light" and kernel_driver_absent(files):
        skip = "not run: no NVIDIA kernel driver is loaded here (the light gate skips it; `gpudoctor check` runs it)"
    return kernel_module_facts(
        files, ctx.system.runner if live else None, _platform.release() if live else "", modinfo_skipped=skip
    )


# --------------------------------------------------------------------------- limits


_LIMIT_ROWS = {"Max open files": "nofile", "Max locked memory": "memlock"}


def parse_proc_limits(text: str, source: str) -> ProcessLimits:
    """``/proc/<pid>/limits`` text -> ProcessLimits (``unlimited`` -> None)."""
    found: dict[str, RLimit | Unavailable] = {}
    for line in text.splitlines():
        for label, key in _LIMIT_ROWS.items():
            if line.startswith(label):
                parts = line[len(label) :].split()
                if len(parts) >= 2:
                    soft, hard = (None if p == "unlimited" else int(p) for p in parts[:2])
                    found[key] = RLimit(soft, hard)
    missing = Unavailable(f"{source} has no such row")
    return ProcessLimits(source=source, nofile=found.get("nofile", missing), memlock=found.get("memlock", missing))


def collect_limits(ctx: CollectContext) -> LimitsFacts | Unavailable:
    files = ctx.system.files
    text = files.read_text_or_none("/proc/self/limits")
    if text is None:
        return Unavailable("/proc/self/limits cannot be read (limits belong to a running process, not an image root)")
    return LimitsFacts(process=parse_proc_limits(text, "/proc/self/limits"))


# --------------------------------------------------------------------------- rdma

CAP_IPC_LOCK = 14  # capabilities(7)


def cap_ipc_lock(status_text: str) -> bool | Unavailable:
    """CAP_IPC_LOCK (bit 14) in ``CapEff`` of ``/proc/<pid>/status``."""
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split()[1], 16) >> CAP_IPC_LOCK & 1)
            except (IndexError, ValueError):
                return Unavailable(f"CapEff is not understood: {line.strip()}")
    return Unavailable("/proc/self/status has no CapEff line")


def collect_rdma(ctx: CollectContext) -> RdmaFacts:
    files, env = ctx.system.files, ctx.system.env

    def names(path: str) -> tuple[str, ...]:
        try:
            return tuple(files.listdir(path))
        except OSError:
            return ()

    status = files.read_text_or_none("/proc/self/status")
    cap = cap_ipc_lock(status) if status is not None else Unavailable("/proc/self/status cannot be read")
    nccl = {k: env[k] for k in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET") if k in env}
    return RdmaFacts(
        hcas=names("/sys/class/infiniband"),
        dev_infiniband=names("/dev/infiniband"),
        cap_ipc_lock=cap,
        net_interfaces=names("/sys/class/net"),
        nccl_env=nccl,
    )


COLLECTORS = (
    Collector(domain="platform", collect=collect_platform, timeout_s=10.0),
    Collector(domain="container_host", collect=collect_container_host, timeout_s=25.0),
    Collector(domain="kmod", collect=collect_kmod, timeout_s=15.0),
    Collector(domain="limits", collect=collect_limits, timeout_s=5.0),
    Collector(domain="rdma", collect=collect_rdma, timeout_s=5.0),
)

__all__ = [
    "COLLECTORS",
    "cap_ipc_lock",
    "collect_container_host",
    "collect_kmod",
    "collect_limits",
    "collect_platform",
    "collect_rdma",
    "container_host_facts",
    "detect_runtime",
    "flavour_of",
    "kernel_module_facts",
    "parse_cdi_spec",
    "parse_containerd_config",
    "parse_docker_info",
    "parse_modinfo",
    "parse_proc_limits",
    "query_host_tools",
]
