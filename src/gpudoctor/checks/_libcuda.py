"""How to make the driver's ``libcuda.so.1`` loadable, for every check whose finding ends at a
missing libcuda (``cuda.libcuda``, ``cudnn.load``, ``cuda.frameworks``): one remedy, in words and
as commands, for WSL, containers and hosts. A private domain helper, not a check."""

from __future__ import annotations

from gpudoctor.checks._common import driver_version, in_container
from gpudoctor.checks._platform import injection_commands, injection_remedy
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.model import Command

__all__ = ["WSL_LIB", "caps_without_compute", "libcuda_commands", "libcuda_remedy"]

#: where WSL 2 mounts the Windows driver's libraries (the light gate does not import the collector's copy)
WSL_LIB = "/usr/lib/wsl/lib"


def caps_without_compute(probe: ProbeFacts) -> str | None:
    """``NVIDIA_DRIVER_CAPABILITIES`` when it is set without ``compute`` or ``all`` (the runtime then
    injects no libcuda), else None."""
    caps = probe.env.get("NVIDIA_DRIVER_CAPABILITIES")
    if caps is not None and not ({"compute", "all"} & {c.strip() for c in caps.split(",")}):
        return caps
    return None


def libcuda_remedy(facts: Facts, probe: ProbeFacts) -> str:
    """Markdown: how to make ``libcuda.so.1`` loadable here (WSL, a container, a host)."""
    os_facts = facts.of(OsFacts)
    wsl = not isinstance(os_facts, Unavailable) and os_facts.wsl
    caps = caps_without_compute(probe)
    if wsl:
        return (
            f"Under WSL 2 the driver libraries come from Windows and live in `{WSL_LIB}`. Put that directory on "
            f"the loader path:\n\n```\nexport LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH\n```\n\n(or add it to "
            f"`/etc/ld.so.conf.d/ld.wsl.conf` and run `sudo ldconfig`). If `{WSL_LIB}/libcuda.so.1` does not "
            f"exist, install or update the NVIDIA driver **on Windows**; do not install a Linux driver in WSL."
        )
    if in_container(facts):
        if caps is not None:
            return (
                f"This container runs with `NVIDIA_DRIVER_CAPABILITIES={caps}`: the NVIDIA runtime then injects "
                f"no compute libraries (libcuda). Start it with `-e NVIDIA_DRIVER_CAPABILITIES=compute,utility` "
                f"(or `all`)."
            )
        return (
            "This container was started without the NVIDIA runtime, so the host's driver libraries are not "
            "mounted in. " + injection_remedy(facts) + " Do not install a driver inside the image."
        )
    branch = (driver_version(facts) or "").split(".")[0]
    pkg_ubuntu = f"libnvidia-compute-{branch}" if branch else "libnvidia-compute-<driver branch>"
    return (
        "The kernel driver is present but its user-space compute library is not on the loader path. Install "
        f"the package matching the driver (Ubuntu: `sudo apt-get install {pkg_ubuntu}`; Debian: "
        "`sudo apt-get install libcuda1`; RHEL/Fedora: `sudo dnf install nvidia-driver-cuda-libs`), then "
        "`sudo ldconfig`. If it is installed in a non-standard directory, add that directory to "
        "`/etc/ld.so.conf.d/` and run `sudo ldconfig`."
    )


def libcuda_commands(facts: Facts, probe: ProbeFacts) -> tuple[Command, ...]:
    """The commands of :func:`libcuda_remedy` as data, preferred first."""
    os_facts = facts.of(OsFacts)
    if not isinstance(os_facts, Unavailable) and os_facts.wsl:
        return (
            Command(f"export LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH", "put the WSL driver libraries on the path"),
            Command(f"ls -l {WSL_LIB}/libcuda.so.1", "the Windows driver provides this file (else update it)"),
        )
    if in_container(facts):
        if caps_without_compute(probe) is not None:
            return (
                Command(
                    "docker run -e NVIDIA_DRIVER_CAPABILITIES=compute,utility --gpus all <image>",
                    "start the container with the compute libraries injected",
                ),
            )
        return injection_commands(facts)
    branch = (driver_version(facts) or "").split(".")[0]
    pkg = f"libnvidia-compute-{branch}" if branch else "libnvidia-compute-<driver branch>"
    return (
        Command(f"sudo apt-get install {pkg} && sudo ldconfig", "Ubuntu: the driver's compute library", "root"),
        Command("sudo dnf install nvidia-driver-cuda-libs && sudo ldconfig", "RHEL/Fedora: the same", "root"),
    )
