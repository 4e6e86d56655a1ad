"""Check ``cuda.wsl``: under WSL 2, can the loader find the driver libraries Windows provides?

On WSL 2 the NVIDIA driver lives on Windows; its Linux user-space libraries
(``libcuda.so``, ``libcuda.so.1``, ``libnvidia-ml.so.1``) are mounted at
``/usr/lib/wsl/lib`` and made visible by ``/etc/ld.so.conf.d/ld.wsl.conf`` +
``ldconfig`` (Microsoft/NVIDIA "CUDA on WSL User Guide"). There is no
``/proc/driver/nvidia`` and no NVIDIA PCI function.

- WSL with no ``libcuda.so.1`` in ``/usr/lib/wsl/lib`` -> ``fail``: install or
  update the Windows driver;
- ``libcuda.so.1`` or ``libcuda.so`` (cuDNN 8 and the runtime ``dlopen`` the
  unversioned name) not resolvable by a bare ``dlopen`` -> ``fail`` with the
  WSL remedy (``ld.wsl.conf`` + ``sudo ldconfig``, or ``LD_LIBRARY_PATH``);
- ``libcuda`` or ``libnvidia-ml.so.1`` resolved to a copy outside
  ``/usr/lib/wsl/lib`` (a Linux driver, or just ``nvidia-utils``, installed
  inside WSL) -> ``fail``;
- otherwise ``ok``. Not WSL -> ``skip``.
"""

from __future__ import annotations

import os

from gpudoctor.checks._gpu import per_target
from gpudoctor.collect.libraries import WSL_LIB
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.libraries import CudaLibrariesFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status


def is_wsl(facts: Facts) -> bool:
    """WSL 2: the kernel release / ``/proc/version`` says ``microsoft``, or ``/dev/dxg`` exists."""
    os_facts = facts.of(OsFacts)
    return not isinstance(os_facts, Unavailable) and bool(os_facts.wsl)


def wsl_remedy(probe: ProbeFacts) -> str:
    """The WSL loader-path remedy (Markdown)."""
    conda = probe.env.get("CONDA_PREFIX")
    where = f"`{conda}/etc/conda/activate.d/wsl.sh`" if conda else "your shell rc (`~/.bashrc`)"
    return (
        f"Make `{WSL_LIB}` visible to the loader. With root, once:\n\n```\n"
        f"echo {WSL_LIB} | sudo tee /etc/ld.so.conf.d/ld.wsl.conf\nsudo ldconfig\n```\n\n"
        f"Without root, prepend it in {where}:\n\n```\nexport LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH\n```\n\n"
        f"If `ldconfig` then warns `libcuda.so.1 is not a symbolic link`, recreate the links in a writable "
        f"directory (`ln -s {WSL_LIB}/libcuda.so.1.1 libcuda.so.1`, `ln -s libcuda.so.1 libcuda.so`). Do not "
        f"install a Linux NVIDIA driver inside WSL: the driver comes from Windows."
    )


def wsl_commands(probe: ProbeFacts) -> tuple[Command, ...]:
    """The commands of :func:`wsl_remedy`, preferred first."""
    return (
        Command(
            f"echo {WSL_LIB} | sudo tee /etc/ld.so.conf.d/ld.wsl.conf && sudo ldconfig",
            "put the Windows driver's libraries in the loader cache, once",
            "root",
        ),
        Command(f"export LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH", "without root: for this shell"),
    )


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.wsl`` finding for one target (pure)."""
    cl = facts.of(CudaLibrariesFacts)
    if not is_wsl(facts):
        return CHECK.finding(Status.SKIP, "not running under WSL", target=t.label)
    os_facts = facts.of(OsFacts)
    if not isinstance(os_facts, Unavailable) and os_facts.wsl_version == 1:
        distro = probe.env.get("WSL_DISTRO_NAME") or "<distro>"
        return CHECK.finding(
            Status.FAIL,
            f"WSL 1 (kernel {os_facts.kernel or 'named Microsoft'}): WSL 1 has no GPU access at all",
            f"This distribution runs under **WSL 1**, which translates Linux system calls and has no GPU "
            f"device (`/dev/dxg`) and no driver libraries in `{WSL_LIB}`. GPU compute (CUDA, DirectML) works "
            f'only under WSL 2 (Microsoft, "GPU accelerated ML training in WSL"; NVIDIA CUDA on WSL User '
            f"Guide). Convert the distribution in PowerShell on Windows (`wsl --set-version {distro} 2`), keep "
            f"the NVIDIA driver on Windows current, and do not install a Linux NVIDIA driver inside WSL.",
            evidence={"kernel": os_facts.kernel, "wsl_version": 1, "python": probe.executable},
            target=t.label,
            commands=(
                Command("wsl -l -v", "in PowerShell on Windows: the VERSION column shows 1 or 2"),
                Command(f"wsl --set-version {distro} 2", "in PowerShell on Windows: convert it to WSL 2", "changes"),
            ),
        )
    if isinstance(cl, Unavailable):
        return CHECK.finding(Status.SKIP, f"the loader was not modelled: {cl.reason}", target=t.label)
    model = next((m for m in cl.targets if m.label == t.label), None)
    files: list[str] = [] if isinstance(cl.wsl_lib, Unavailable) else list(cl.wsl_lib)
    evidence = {"python": probe.executable, "wsl_lib": files, "LD_LIBRARY_PATH": probe.env.get("LD_LIBRARY_PATH", "")}
    if "libcuda.so.1" not in files:
        return CHECK.finding(
            Status.FAIL,
            f"WSL 2 without the Windows driver's libcuda.so.1 in {WSL_LIB}",
            f"`{WSL_LIB}` {'holds ' + ', '.join(files) if files else 'is missing or empty'}. Under WSL 2 the GPU "
            f"driver is installed on **Windows**; install or update the NVIDIA driver there (it must support WSL), "
            f"then restart WSL (`wsl --shutdown` in PowerShell). Do not install a Linux NVIDIA driver inside WSL.",
            evidence=evidence,
            target=t.label,
        )
    if model is None:
        return CHECK.finding(Status.SKIP, "no loader model for this target", target=t.label)
    evidence["lookups"] = [f"{r.needed} => {r.path or 'not found'} ({r.via})" for r in model.lookups]
    lost = [r for r in model.lookups if r.family == "libcuda" and r.path is None]
    if lost:
        names = " and ".join(r.needed for r in lost)
        present = ", ".join(n for n in files if n.startswith("libcuda"))
        return CHECK.finding(
            Status.FAIL,
            f"{names} (the CUDA driver library) is not resolvable by the dynamic loader inside WSL 2: "
            f"{WSL_LIB} is neither in the ld.so cache nor on LD_LIBRARY_PATH",
            f"The driver's libraries are in `{WSL_LIB}` ({present}), but the loader does not search there: the "
            f"ld.so cache ({model.cache_source}) has no `libcuda` entry, no file in `/etc/ld.so.conf.d/` names "
            f"`{WSL_LIB}`, and `LD_LIBRARY_PATH` (`{':'.join(model.ld_library_path)}`) does not include it. "
            f"Anything that opens the driver fails — cuDNN reports it as `Could not load library "
            f"libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file`, which is a driver/loader "
            f"problem, not a broken cuDNN: reinstalling cuDNN does not help.\n\n{wsl_remedy(probe)}",
            evidence=evidence,
            commands=wsl_commands(probe),
            target=t.label,
        )
    foreign = [
        r
        for r in model.lookups
        if r.family in ("libcuda", "nvml") and r.path and os.path.normpath(os.path.dirname(r.path)) != WSL_LIB
    ]
    if foreign:
        r = foreign[0]
        what = (
            "`nvidia-smi` and NVML fail (\"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
            "driver\"): the Linux `nvidia-utils` package's `libnvidia-ml.so.1` (and its `/usr/bin/nvidia-smi`) "
            "replaced WSL's"
            if r.family == "nvml"
            else "CUDA cannot reach the GPU"
        )
        return CHECK.finding(
            Status.FAIL,
            f"{r.needed} resolves to {r.path}, not the Windows driver's copy in {WSL_LIB}",
            f"A Linux NVIDIA driver's libraries inside WSL shadow the ones Windows provides ({r.via}); they cannot "
            f"talk to the GPU through `/dev/dxg`, so {what}. Remove them (Ubuntu: `sudo apt-get remove --purge "
            f"'nvidia-utils-*' 'libnvidia-compute-*' 'nvidia-driver-*'`, then `sudo ldconfig`) and keep only "
            f"`{WSL_LIB}` on the loader path (WSL's own `nvidia-smi` is `{WSL_LIB}/nvidia-smi`). Never install a "
            f"Linux driver inside WSL.",
            evidence=evidence,
            target=t.label,
            commands=(
                Command(
                    "sudo apt-get remove --purge 'nvidia-utils-*' 'libnvidia-compute-*' 'nvidia-driver-*' "
                    "&& sudo ldconfig",
                    "remove the Linux driver's libraries that shadow WSL's",
                    "root",
                ),
            ),
        )
    return CHECK.finding(Status.OK, f"WSL 2: libcuda resolves from {WSL_LIB}", evidence=evidence, target=t.label)


CHECK = Check(
    id="cuda.wsl",
    title="WSL 2: the Windows driver's libcuda in /usr/lib/wsl/lib is visible to the loader",
    needs=("targets", "os", "cuda_libraries"),
    evaluate=per_target("cuda.wsl", assess),
)
