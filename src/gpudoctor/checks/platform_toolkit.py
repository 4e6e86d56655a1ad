"""Check ``platform.toolkit``: on a host with Docker, Podman or containerd, can
containers get the GPU (NVIDIA Container Toolkit installed and configured)?

Sources: NVIDIA Container Toolkit install guide (packages, ``nvidia-ctk
runtime configure --runtime=docker|containerd``, restart the engine); its CDI
page (Podman needs ``/etc/cdi/nvidia.yaml`` from ``nvidia-ctk cdi generate``;
a spec names the driver's library files, so it goes stale when the driver is
upgraded and must be regenerated); Kubernetes RuntimeClass docs.

- in a container, no engine, or no NVIDIA GPU/driver on the host -> ``skip``;
- no toolkit at all -> ``fail`` with the install commands of this distro and
  the configure command per engine;
- a CDI spec for another driver version, or naming device nodes that no longer exist -> ``fail`` (regenerate);
- Podman without a CDI spec, containerd without an ``nvidia`` runtime -> ``fail``;
- Docker without the runtime hook (only ``nvidia-container-toolkit-base``)
  and without the ``nvidia`` runtime -> ``fail`` (``could not select device
  driver``: Docker's ``--gpus`` needs ``nvidia-container-runtime-hook``, looked
  up when the daemon starts; moby ``daemon/nvidia_linux.go``);
- rootless Docker without ``no-cgroups = true`` -> ``fail`` (toolkit docs,
  "Rootless mode");
- Docker without the ``nvidia`` runtime registered -> ``warn``;
- containerd with ``nvidia`` declared but ``runc`` as default -> ``info``
  (pods need ``runtimeClassName: nvidia``);
- otherwise ``ok``.
"""

from __future__ import annotations

from gpudoctor.checks import SkipCheck, require
from gpudoctor.checks._common import distro_family, driver_version
from gpudoctor.checks._platform import platform_of
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import PciGpuFacts
from gpudoctor.facts.platform import ContainerHostFacts, DockerInfo
from gpudoctor.model import Check, Command, Finding, Status

CONFIGURE = {
    "docker": "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
    "containerd": "sudo nvidia-ctk runtime configure --runtime=containerd && sudo systemctl restart containerd",
    "podman": "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml",
}


RUNTIME_CLASS = """```yaml
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
```"""


def containerd_flavour(path: str) -> str:
    """``k3s``, ``microk8s`` or ``containerd``: who writes this containerd config."""
    if "/rancher/k3s/" in path:
        return "k3s"
    if "/snap/microk8s/" in path:
        return "microk8s"
    if "/rancher/rke2/" in path:
        return "rke2"
    return "containerd"


def containerd_register(path: str) -> str:
    """Markdown: how to give the containerd behind ``path`` the ``nvidia`` runtime.

    k3s regenerates its ``config.toml`` at every start and adds the ``nvidia`` runtime itself when it finds
    ``nvidia-container-runtime`` (k3s docs, "Advanced Options: NVIDIA Container Runtime Support"; the
    RuntimeClass and ``--default-runtime`` since k3s-io/k3s #8700);
    MicroK8s gets it from its ``nvidia`` addon (MicroK8s docs, "Addon: nvidia"); plain containerd from
    ``nvidia-ctk runtime configure`` (NVIDIA Container Toolkit install guide).
    """
    who = containerd_flavour(path)
    if who == "rke2":
        return (
            "RKE2 writes this file itself at every start and adds the `nvidia` runtime when it finds "
            '`nvidia-container-runtime` on the node (RKE2 docs, "Deploy NVIDIA operator"): install the NVIDIA '
            "Container Toolkit on the node and restart RKE2, "
            "`sudo systemctl restart rke2-agent` (servers: `rke2-server`)."
        )
    if who == "k3s":
        return (
            "k3s writes this file itself at every start and adds the `nvidia` runtime when it finds "
            "`nvidia-container-runtime`; `nvidia-ctk runtime configure` would edit a file k3s ignores. With the "
            "NVIDIA Container Toolkit installed on the node, restart k3s:\n\n```\nsudo systemctl restart k3s   "
            "# agents: k3s-agent\ngrep -A2 'runtimes.\"nvidia\"' " + path + "\n```\n\nthen check that the `nvidia` "
            f"RuntimeClass exists (`kubectl get runtimeclass`; k3s releases since Dec 2023 create it, older ones "
            f"do not):\n\n{RUNTIME_CLASS}"
        )
    if who == "microk8s":
        return (
            "MicroK8s configures its containerd through the GPU addon (the NVIDIA GPU Operator):\n\n```\n"
            "sudo microk8s enable nvidia   # older releases: microk8s enable gpu\n```"
        )
    return (
        f"Register the NVIDIA runtime with containerd:\n\n```\n{CONFIGURE['containerd']}\n```\n\n(add "
        f"`--set-as-default` to make every container use it; the GPU Operator does this for Kubernetes nodes)."
    )


def containerd_default(path: str) -> str:
    """The sentence that makes ``nvidia`` the default runtime of the containerd behind ``path``."""
    who = containerd_flavour(path)
    if who == "k3s":
        return (
            "start k3s with `--default-runtime=nvidia` (or `default-runtime: nvidia` in "
            "`/etc/rancher/k3s/config.yaml`; releases since Dec 2023, k3s-io/k3s #8700) and restart it."
        )
    if who == "microk8s":
        return "the MicroK8s `nvidia` addon sets it; re-run `sudo microk8s enable nvidia`."
    return "`sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default` and restart containerd."


def install_commands(facts: Facts) -> str:
    """Markdown code block(s) installing the toolkit for this distro (every family when unknown)."""
    family = distro_family(facts)
    rows = [r for r in load_table("platform")["toolkit_install"] if not family or r["family"] == family]
    blocks = []
    for r in rows:
        head = "" if family else f"{r['family']} family:\n\n"
        blocks.append(head + "```\n" + "\n".join(r["commands"]) + "\n```")
    return "\n\n".join(blocks)


def install_command_list(facts: Facts) -> tuple[Command, ...]:
    """:func:`install_commands` as data: one command line per distribution family."""
    family = distro_family(facts)
    rows = [r for r in load_table("platform")["toolkit_install"] if not family or r["family"] == family]
    return tuple(
        Command(
            " && ".join(r["commands"]),
            ("" if family else f"{r['family']} family: ") + "install the NVIDIA Container Toolkit",
            "root",
        )
        for r in rows
    )


def configure(engine: str) -> Command:
    """:data:`CONFIGURE` of ``engine`` as a command."""
    return Command(CONFIGURE[engine], f"give {engine} the NVIDIA runtime", "root")


def regenerate(path: str) -> tuple[Command, ...]:
    return (
        Command(f"sudo nvidia-ctk cdi generate --output={path}", "write the CDI spec from this host's devices", "root"),
        Command("nvidia-ctk cdi list", "the devices the spec offers"),
    )


def _host_has_gpu(facts: Facts) -> bool:
    pci = facts.of(PciGpuFacts)
    return driver_version(facts) is not None or (not isinstance(pci, Unavailable) and bool(pci.devices))


def evaluate(facts: Facts) -> list[Finding]:
    host = require(facts, ContainerHostFacts)
    p = platform_of(facts)
    if p is not None and p.in_container:
        raise SkipCheck("running inside a container: the toolkit is a host matter")
    if not host.engines:
        raise SkipCheck("no container engine (Docker, Podman, containerd) on this host")
    if not _host_has_gpu(facts):
        raise SkipCheck("no NVIDIA GPU or driver on this host")
    if host.docker_desktop and host.engines == ("docker",):
        # Docker docs, "GPU support in Docker Desktop for Windows": the WSL 2 backend passes the GPU itself
        raise SkipCheck(
            "Docker Desktop's WSL 2 backend gives containers the GPU itself (`docker run --gpus=all ...`); "
            "no NVIDIA Container Toolkit is needed in this distribution"
        )
    docker = host.docker if isinstance(host.docker, DockerInfo) else None
    evidence: dict[str, object] = {
        "engines": list(host.engines),
        "toolkit_files": list(host.toolkit_files),
        "toolkit_packages": list(host.toolkit_packages),
        "nvidia-ctk": host.toolkit_version if isinstance(host.toolkit_version, str) else str(host.toolkit_version),
        "docker_runtimes": list(docker.runtimes) if docker else str(host.docker),
        "cdi_specs": [f"{s.path} ({s.kind}, driver {s.driver_version or '?'})" for s in host.cdi_specs],
        "containerd": [
            f"{c.path}: default={c.default_runtime or 'runc'} runtimes={','.join(c.runtimes)}" for c in host.containerd
        ],
    }
    installed = bool(
        host.toolkit_files
        or host.toolkit_packages
        or isinstance(host.toolkit_version, str)
        or (docker and "nvidia" in docker.runtimes)
        or any("nvidia" in c.runtimes for c in host.containerd)
    )
    engines = ", ".join(host.engines)
    if not installed:
        setup = "\n".join(CONFIGURE[e] for e in host.engines if e in CONFIGURE)
        return [
            CHECK.finding(
                Status.FAIL,
                f"{engines} on this GPU host, but the NVIDIA Container Toolkit is not installed",
                f"Containers started here cannot get the GPU: no `nvidia-ctk`, no `nvidia-container-runtime`, no "
                f"`nvidia-container-toolkit` package, no `nvidia` runtime in `docker info` and no CDI spec in `/etc/cdi` "
                f"or `/var/run/cdi`. Install it:\n\n{install_commands(facts)}\n\nthen configure each engine:\n\n"
                f"```\n{setup}\n```",
                evidence=evidence,
                commands=(*install_command_list(facts), *(configure(e) for e in host.engines if e in CONFIGURE)),
            )
        ]
    hook = any(f.endswith("/nvidia-container-runtime-hook") for f in host.toolkit_files) or any(
        pkg.split()[0] == "nvidia-container-toolkit" for pkg in host.toolkit_packages
    )
    if "docker" in host.engines and not hook and not (docker and "nvidia" in docker.runtimes):
        return [
            CHECK.finding(
                Status.FAIL,
                "Docker cannot give containers a GPU: the NVIDIA Container Toolkit's runtime hook "
                "(nvidia-container-runtime-hook, package nvidia-container-toolkit) is not installed",
                f"Only part of the toolkit is here ({', '.join(host.toolkit_files or host.toolkit_packages)}): "
                f"`nvidia-ctk` comes from `nvidia-container-toolkit-base`, but Docker's `--gpus` needs "
                f"`nvidia-container-runtime-hook` on the daemon's PATH at start-up; without it `docker run --gpus "
                f'all` fails with `could not select device driver "" with capabilities: [[gpu]]`. Install the '
                f"full package, then configure and restart Docker:\n\n{install_commands(facts)}\n\n"
                f"```\n{CONFIGURE['docker']}\n```",
                evidence=evidence,
                commands=(*install_command_list(facts), configure("docker")),
            )
        ]
    if docker and docker.rootless and not host.no_cgroups:
        return [
            CHECK.finding(
                Status.FAIL,
                "rootless Docker with the NVIDIA runtime hook, but `no-cgroups` is not set: GPU containers fail "
                "to start",
                "A rootless daemon may not change device cgroups, so the hook's `nvidia-container-cli` fails "
                "(`mount error: failed to add device rules ... operation not permitted`). Configure the toolkit "
                "for rootless mode:\n\n```\nsudo nvidia-ctk config --set nvidia-container-cli.no-cgroups "
                "--in-place\nnvidia-ctk runtime configure --runtime=docker --config=$HOME/.config/docker/daemon.json"
                "\nsystemctl --user restart docker\n```\n\n(or, Docker 25+, skip the hook: CDI devices need no "
                "cgroup changes, `docker run --device nvidia.com/gpu=all ...` after "
                "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`).",
                evidence=evidence,
                commands=(
                    Command(
                        "sudo nvidia-ctk config --set nvidia-container-cli.no-cgroups --in-place",
                        "let the hook run without changing device cgroups",
                        "root",
                    ),
                    Command(
                        "nvidia-ctk runtime configure --runtime=docker --config=$HOME/.config/docker/daemon.json",
                        "register the runtime with the rootless daemon",
                        "changes",
                    ),
                    Command("systemctl --user restart docker", "restart the rootless daemon", "changes"),
                ),
            )
        ]
    drv = driver_version(facts)
    stale = [s for s in host.cdi_specs if s.driver_version and drv and s.driver_version != drv]
    if stale:
        s = stale[0]
        return [
            CHECK.finding(
                Status.FAIL,
                f"the CDI spec {s.path} was generated for driver {s.driver_version}, but driver {drv} is installed",
                f"A CDI spec lists the driver's library files by version; after the driver upgrade to {drv} they no "
                f"longer exist, so `--device nvidia.com/gpu=...` fails to start containers (or mounts nothing). "
                f"Regenerate it:\n\n```\nsudo nvidia-ctk cdi generate --output={s.path}\nnvidia-ctk cdi list\n```\n\n"
                f"(toolkit 1.18+ can do this at boot: `sudo systemctl enable --now nvidia-cdi-refresh.path`).",
                evidence=evidence,
                commands=regenerate(s.path),
            )
        ]
    gone = [s for s in host.cdi_specs if s.missing_device_nodes]
    if gone:
        s = gone[0]
        nodes = ", ".join(f"`{n}`" for n in s.missing_device_nodes)
        uvm_only = all(n.startswith("/dev/nvidia-uvm") for n in s.missing_device_nodes)
        uvm = (
            "`/dev/nvidia-uvm` and `/dev/nvidia-uvm-tools` appear only once the `nvidia-uvm` module is loaded, "
            "normally by the first CUDA call on the host: after a reboot they are missing. Load it now and at every "
            "boot:\n\n```\nsudo nvidia-modprobe -u -c=0\n"
            "echo nvidia-uvm | sudo tee /etc/modules-load.d/nvidia-uvm.conf\n```\n\n"
        )
        return [
            CHECK.finding(
                Status.FAIL,
                f"the CDI spec {s.path} injects {', '.join(s.missing_device_nodes)}, which no longer exist on this "
                f"host",
                f"A CDI spec lists the host device nodes it injects; {nodes} "
                + (
                    "do not exist now, so every container asking for `nvidia.com/gpu=...` fails to start: "
                    f'"failed to stat CDI host device". {uvm}The spec itself is right.'
                    if uvm_only
                    else "are gone (a GPU removed or renumbered, `/dev/dri` nodes numbered differently after a reboot "
                    "or driver change, MIG devices recreated), so every container asking for `nvidia.com/gpu=...` "
                    f'fails to start: "failed to stat CDI host device". Regenerate the spec from the devices that '
                    f"exist now:\n\n```\nsudo nvidia-ctk cdi generate --output={s.path}\nnvidia-ctk cdi list\n```"
                ),
                evidence=evidence,
                commands=(
                    Command("sudo nvidia-modprobe -u -c=0", "load nvidia-uvm and create its device nodes", "root"),
                    Command(
                        "echo nvidia-uvm | sudo tee /etc/modules-load.d/nvidia-uvm.conf",
                        "load it at every boot",
                        "root",
                    ),
                )
                if uvm_only
                else regenerate(s.path),
            )
        ]
    gpu_specs = [s for s in host.cdi_specs if s.kind.startswith("nvidia.com/")]
    if "podman" in host.engines and not gpu_specs:
        return [
            CHECK.finding(
                Status.FAIL,
                "Podman is installed but no NVIDIA CDI spec exists, so `--device nvidia.com/gpu=all` fails",
                f"Podman gets GPUs through CDI. Generate the spec once (and after each driver upgrade):\n\n"
                f"```\n{CONFIGURE['podman']}\nnvidia-ctk cdi list\n```\n\nthen "
                f"`podman run --device nvidia.com/gpu=all ...`.",
                evidence=evidence,
                commands=(configure("podman"), Command("nvidia-ctk cdi list", "the devices the spec offers")),
            )
        ]
    for cfg in host.containerd:
        if "nvidia" not in cfg.runtimes:
            return [
                CHECK.finding(
                    Status.FAIL,
                    f"containerd ({cfg.path}) has no `nvidia` runtime: pods and containers it starts get no GPU",
                    containerd_register(cfg.path),
                    evidence=evidence,
                    commands=(configure("containerd"),),
                )
            ]
    if docker and "nvidia" not in docker.runtimes:
        return [
            CHECK.finding(
                Status.WARN,
                "the NVIDIA Container Toolkit is installed but Docker has no `nvidia` runtime registered",
                f"`docker run --gpus all` can work through the toolkit's hook, but `--runtime=nvidia` and Compose files "
                f"that name it fail (`unknown or invalid runtime name: nvidia`). Docker looks for the hook only when "
                f'the daemon starts: if `--gpus` says `could not select device driver "" with capabilities: '
                f"[[gpu]]`, the daemon predates the toolkit install and the restart below fixes it. Configure "
                f"Docker:\n\n```\n{CONFIGURE['docker']}\n```",
                evidence=evidence,
                commands=(configure("docker"),),
            )
        ]
    for cfg in host.containerd:
        if cfg.default_runtime in ("", "runc"):
            return [
                CHECK.finding(
                    Status.INFO,
                    f"containerd ({cfg.path}) declares the `nvidia` runtime but runs `runc` by default",
                    "Pods get the GPU only with `runtimeClassName: nvidia` at pod level (a RuntimeClass named `nvidia` "
                    "must exist: `kubectl get runtimeclass`); a pod that requests `nvidia.com/gpu` without it starts "
                    "with no driver inside (create the RuntimeClass if it is missing:\n\n"
                    f"{RUNTIME_CLASS}\n\n`kubectl apply -f` it). To make it the default instead: "
                    + containerd_default(cfg.path),
                    evidence=evidence,
                )
            ]
    version = host.toolkit_version if isinstance(host.toolkit_version, str) else "installed"
    return [
        CHECK.finding(Status.OK, f"NVIDIA Container Toolkit {version} is configured for {engines}", evidence=evidence)
    ]


CHECK = Check(
    id="platform.toolkit",
    title="NVIDIA Container Toolkit installed and configured for the host's container engines",
    needs=("container_host", "platform", "nvidia", "gpu", "os"),
    evaluate=evaluate,
)
