"""Checks ``platform.kernel-module`` and ``platform.driver-branch``.

``platform.kernel-module``: is the right NVIDIA kernel module loaded and bound
to every NVIDIA PCI function? Sources: NVIDIA driver README ("Open Linux
Kernel Modules": the proprietary flavour reports ``NVIDIA UNIX x86_64 Kernel
Module`` in ``/proc/driver/nvidia/version``, the open one ``NVIDIA UNIX Open
Kernel Module``; ``modinfo`` licence ``NVIDIA`` vs ``Dual MIT/GPL``; Grace
Hopper and Blackwell GPUs need the open modules), sysfs ``driver`` links of
PCI devices, DKMS documentation (a module is built per kernel release), and
the kernel's module-signing docs (Secure Boot refuses unsigned modules).

``platform.driver-branch``: a GPU whose architecture needs a newer driver
branch than the one installed, even where the torch build's CUDA
minor-version floor is met (``data/platform.toml`` [[arch_branch]]).
"""

from __future__ import annotations

from typing import Any

from gpudoctor import hostpkg
from gpudoctor.checks import SkipCheck, require
from gpudoctor.checks._common import driver_install_commands, driver_version, install_command, split_local
from gpudoctor.checks._gpu import gpu_devices, target_probes, v
from gpudoctor.checks._platform import platform_of
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.nvidia import PciDevice, PciGpuFacts
from gpudoctor.facts.platform import KernelModuleFacts, Modinfo
from gpudoctor.model import Check, Command, Finding, Status


def open_required(device_id: str) -> dict[str, Any] | None:
    """The [[open_module_required]] row covering a PCI device id (``0x2b85``), or None."""
    try:
        n = int(device_id, 16)
    except ValueError:
        return None
    row: dict[str, Any]
    for row in load_table("platform")["open_module_required"]:
        if int(row["first"], 16) <= n <= int(row["last"], 16):
            return row
    return None


def _family(facts: Facts) -> str:
    os_facts = facts.of(OsFacts)
    if isinstance(os_facts, Unavailable):
        return ""
    ident = os_facts.id.lower()
    if ident in ("ubuntu", "pop", "linuxmint"):
        return "ubuntu"
    if ident in ("debian", "raspbian"):
        return "debian"
    if ident == "fedora":
        return "fedora"
    if ident in ("rhel", "centos", "rocky", "almalinux", "ol", "amzn"):
        return "rhel"
    if "suse" in ident or ident == "sles":
        return "suse"
    return ""


def pre_turing(device_id: str) -> dict[str, Any] | None:
    """The [[open_module_unsupported]] row covering a PCI device id (a GPU older than Turing), or None."""
    try:
        n = int(device_id, 16)
    except ValueError:
        return None
    row: dict[str, Any]
    for row in load_table("platform")["open_module_unsupported"]:
        if int(row["first"], 16) <= n <= int(row["last"], 16):
            return row
    return None


#: the last driver branch that drives Maxwell, Pascal and Volta GPUs (NVIDIA, "Unix graphics feature
#: deprecation schedule" forum announcement and CUDA 13.0 release notes: R580 is the last branch for them)
LAST_PRE_TURING_BRANCH = 580


def proprietary_package_commands(facts: Facts, branch: int) -> str:
    """Markdown: the proprietary-flavour driver package for this distro (every family when unknown)."""
    family = _family(facts)
    rows = [r for r in load_table("platform")["proprietary_package"] if not family or r["family"] == family]
    lines = [("" if family else f"# {r['family']}\n") + r["command"].format(branch=branch) for r in rows]
    return "```\n" + "\n".join(lines) + "\nsudo reboot\n```"


def open_package_commands(facts: Facts, branch: int) -> str:
    """Markdown: the open-module driver package for this distro (every family when unknown)."""
    family = _family(facts)
    rows = [r for r in load_table("platform")["open_package"] if not family or r["family"] == family]
    lines = [("" if family else f"# {r['family']}\n") + r["command"].format(branch=branch) for r in rows]
    return "```\n" + "\n".join(lines) + "\nsudo reboot\n```"


def package_commands(facts: Facts, key: str, branch: int, purpose: str) -> tuple[Command, ...]:
    """The ``key`` (``open_package``/``proprietary_package``) install of this distro as commands (every family,
    named in the purpose, when unknown), then the reboot that loads it."""
    family = _family(facts)
    rows = [r for r in load_table("platform")[key] if not family or r["family"] == family]
    return (
        *(_root(r["command"].format(branch=branch), ("" if family else f"{r['family']}: ") + purpose) for r in rows),
        Command("sudo reboot", "load the new module", "root"),
    )


def _root(line: str, purpose: str) -> Command:
    """One shell line of a remedy as a command: a trailing ``# note`` joins the purpose."""
    text, _, note = line.partition("#")
    return Command(
        text.strip(), purpose + (f" ({note.strip()})" if note.strip() else ""), "root" if "sudo" in text else "changes"
    )


def build_commands(facts: Facts, release: str) -> tuple[Command, ...]:
    """Headers, the DKMS build for ``release`` and the module load, as commands."""
    return (
        _root(headers_command(facts, release), "the running kernel's headers"),
        Command(f"sudo dkms autoinstall -k {release}", "build the module for the running kernel", "root"),
        Command("sudo modprobe nvidia", "load it", "root"),
    )


def headers_command(facts: Facts, release: str) -> str:
    """The command that installs the kernel headers DKMS builds against (distro packaging docs:
    Debian/Ubuntu ``linux-headers-<release>``, RHEL/Fedora ``kernel-devel-<release>``, SUSE
    ``kernel-default-devel``); both common ones when the distro is unknown."""
    family = _family(facts)
    if family in ("ubuntu", "debian"):
        return f"sudo apt install linux-headers-{release}"
    if family in ("rhel", "fedora"):
        return f"sudo dnf install kernel-devel-{release}"
    if family == "suse":
        return "sudo zypper install kernel-default-devel"
    return f"sudo apt install linux-headers-{release}   # RHEL/Fedora: sudo dnf install kernel-devel-{release}"


def mok_command(facts: Facts) -> str:
    """The command that enrols the module-signing key of this distro's DKMS/akmods setup.

    Ubuntu's DKMS signs with ``/var/lib/shim-signed/mok/MOK.der`` (Ubuntu wiki "UEFI/SecureBoot/DKMS");
    Fedora's akmods with ``/etc/pki/akmods/certs/public_key.der`` (RPM Fusion "Howto/Secure Boot");
    upstream DKMS 3 elsewhere with ``/var/lib/dkms/mok.pub`` (Debian wiki "SecureBoot")."""
    family = _family(facts)
    if family == "ubuntu":
        return "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der"
    if family == "fedora":
        return "sudo kmodgenca -a   # once, if akmods has no key yet\nsudo mokutil --import /etc/pki/akmods/certs/public_key.der"
    return "sudo mokutil --import /var/lib/dkms/mok.pub"


def _where(facts: Facts) -> str:
    p = platform_of(facts)
    return " on the host (this is a container: the kernel module is the host's)" if p and p.in_container else ""


def evaluate_module(facts: Facts) -> list[Finding]:
    km = require(facts, KernelModuleFacts)
    pci = facts.of(PciGpuFacts)
    devices: tuple[PciDevice, ...] = () if isinstance(pci, Unavailable) else pci.devices
    if not devices and not km.loaded:
        raise SkipCheck("no NVIDIA GPU on the PCI bus and no NVIDIA kernel module")
    mod = km.modinfo if isinstance(km.modinfo, Modinfo) else None
    evidence: dict[str, object] = {
        "kernel": km.kernel_release,
        "loaded": km.loaded,
        "flavour": km.flavour or "unknown",
        "proc_version": km.proc_version,
        "modinfo_license": mod.license if mod else str(km.modinfo),
        "installed_for": list(km.installed_for),
        "secure_boot": km.secure_boot if isinstance(km.secure_boot, bool) else str(km.secure_boot),
        "pci": [f"{d.bus_id} {d.device_id} driver={d.driver or 'none'}" for d in devices],
    }
    where = _where(facts)
    nouveau = [d for d in devices if d.driver == "nouveau"]
    if nouveau:
        return [
            CHECK.finding(
                Status.FAIL,
                f"the nouveau driver is bound to {nouveau[0].bus_id}: CUDA needs NVIDIA's kernel module",
                f"nouveau (the open-source reverse-engineered driver) holds the GPU, so the nvidia module cannot bind "
                f"it. Install NVIDIA's driver{where} (it blacklists nouveau), rebuild the initramfs and reboot:\n\n"
                f"```\necho -e 'blacklist nouveau\\noptions nouveau modeset=0' | sudo tee "
                f"/etc/modprobe.d/blacklist-nouveau.conf\nsudo update-initramfs -u   # dracut -f on RHEL/Fedora\n"
                f"sudo reboot\n```",
                evidence=evidence,
                commands=hostpkg.blacklist_nouveau_commands(facts),
            )
        ]
    rows = [(d, open_required(d.device_id)) for d in devices]
    needs_open = [(d, row) for d, row in rows if row is not None]
    if needs_open and km.flavour == "proprietary":
        d, row = needs_open[0]
        branch = max(570, int(v(driver_version(facts) or "0").major))
        return [
            CHECK.finding(
                Status.FAIL,
                f"{row['chip'].split(' (')[0]} GPU {d.device_id} at {d.bus_id} needs the open NVIDIA kernel "
                f"modules, but the proprietary module is loaded",
                f'The proprietary module loads but does not drive this GPU: `nvidia-smi` says "No devices were '
                f'found" and CUDA sees nothing. {row["chip"]} works only with the open kernel modules '
                f'("NVIDIA UNIX Open Kernel Module" in `/proc/driver/nvidia/version`, `license: Dual MIT/GPL` in '
                f"`modinfo nvidia`). Replace the driver{where} with the open flavour (R{branch} or newer):\n\n"
                f"{open_package_commands(facts, branch)}",
                evidence=evidence,
                commands=package_commands(facts, "open_package", branch, f"the open kernel modules, R{branch}"),
            )
        ]
    unbound_all = [d for d in devices if d.driver is None]
    old_gpus = [(d, row) for d in unbound_all for row in [pre_turing(d.device_id)] if row is not None]
    drv = driver_version(facts) or (mod.version if mod else "")
    too_new = bool(drv) and v(drv).major > LAST_PRE_TURING_BRANCH
    if old_gpus and (km.flavour == "open" or too_new):
        d, row = old_gpus[0]
        branch = min(max(int(v(drv or "0").major), 535), LAST_PRE_TURING_BRANCH)
        if too_new:
            summary = (
                f"driver {drv} does not support the {row['chip'].split(' (')[0]} GPU {d.device_id} at "
                f"{d.bus_id}: R{LAST_PRE_TURING_BRANCH} is the last branch for Maxwell, Pascal and Volta GPUs"
            )
            why = (
                f"Driver branches after R{LAST_PRE_TURING_BRANCH} dropped GPUs older than Turing ({row['chip']}); "
                f"the module loads but leaves this GPU unbound, so `nvidia-smi` finds no device."
            )
        else:
            summary = (
                f"the open NVIDIA kernel module is {'loaded' if km.loaded else 'installed'}, but the GPU {d.device_id} at {d.bus_id} is older "
                f"than Turing: only the proprietary module drives it"
            )
            why = (
                f"The open kernel modules support Turing and newer GPUs only ({row['source'].split(';')[0]}); "
                f'for this {row["chip"]} GPU the module loads and leaves it unbound (`dmesg`: "NVRM: ... not '
                f'supported by open nvidia.ko"), so `nvidia-smi` finds no device.'
            )
        return [
            CHECK.finding(
                Status.FAIL,
                summary,
                f"{why} Install the proprietary flavour of the R{branch} branch{where} (it replaces the open "
                f"package):\n\n{proprietary_package_commands(facts, branch)}\n\nand use a torch build whose "
                f"CUDA still supports this architecture (`torch.cuda.get_arch_list()`).",
                evidence=evidence,
                commands=package_commands(facts, "proprietary_package", branch, f"the proprietary module, R{branch}"),
            )
        ]
    if km.loaded:
        unbound = [d for d in devices if d.driver is None]
        if unbound:
            d = unbound[0]
            return [
                CHECK.finding(
                    Status.FAIL,
                    f"the nvidia module is loaded, but no driver is bound to the NVIDIA GPU at {d.bus_id} "
                    f"({d.device_id})",
                    f"The module ({km.proc_version or 'loaded'}) did not claim this PCI function: this driver does not "
                    f"support the GPU (too old for a new GPU, or a legacy GPU dropped by this branch), or the GPU "
                    f"failed to initialise. Check `sudo dmesg | grep -i nvrm` for the reason, and install a driver "
                    f"branch that lists this device id{where}.",
                    evidence=evidence,
                    commands=(Command("sudo dmesg | grep -i nvrm", "the driver's reason for leaving it", "root"),),
                )
            ]
        flavour = f" ({km.flavour})" if km.flavour else ""
        return [
            CHECK.finding(
                Status.OK,
                f"the nvidia kernel module{flavour} is loaded"
                + (f" and bound to {len(devices)} GPU{'s' if len(devices) != 1 else ''}" if devices else ""),
                evidence=evidence,
            )
        ]
    if not devices:
        raise SkipCheck("no NVIDIA GPU on the PCI bus")
    p = platform_of(facts)
    if p is not None and p.in_container:
        raise SkipCheck("the host's NVIDIA module is not visible from this container (see platform.container)")
    other = [k for k in km.installed_for if k != km.kernel_release]
    if km.kernel_release and km.kernel_release not in km.installed_for and other:
        return [
            CHECK.finding(
                Status.FAIL,
                f"the nvidia module is built for kernel {', '.join(other)} but the running kernel is "
                f"{km.kernel_release}",
                f"DKMS did not build the module for this kernel (headers missing when the kernel was installed, or "
                f"a build failure: `/var/lib/dkms/nvidia/*/build/make.log`). Build it for the running kernel:\n\n"
                f"```\n{headers_command(facts, km.kernel_release)}\nsudo dkms autoinstall -k {km.kernel_release}\n"
                f"sudo modprobe nvidia\n```\n\nor boot the kernel it was built for (a driver from NVIDIA's `.run` "
                f"installer without DKMS must be re-run after every kernel update).",
                evidence=evidence,
                commands=build_commands(facts, km.kernel_release),
            )
        ]
    if km.kernel_release and km.kernel_release not in km.installed_for and mod is None and km.dkms_versions:
        ver = km.dkms_versions[-1]
        why = (
            f"the kernel headers for {km.kernel_release} are not installed (`/lib/modules/{km.kernel_release}/build` "
            f"is missing), so DKMS could not build it"
            if not km.kernel_headers
            else f"the DKMS build failed (read `/var/lib/dkms/nvidia/{ver}/build/make.log`: a compiler that differs "
            f"from the kernel's, or a kernel newer than this driver supports)"
        )
        evidence["dkms"] = list(km.dkms_versions)
        return [
            CHECK.finding(
                Status.FAIL,
                f"the NVIDIA driver {ver} is installed through DKMS, but no module was built for kernel "
                f"{km.kernel_release}: {'no kernel headers' if not km.kernel_headers else 'the build failed'}",
                f"The driver package is here (DKMS holds its source, `dkms status`), but {why}. Build it for the "
                f"running kernel:\n\n```\n{headers_command(facts, km.kernel_release)}\n"
                f"sudo dkms autoinstall -k {km.kernel_release}\nsudo modprobe nvidia\n```\n\nand check "
                f"`nvidia-smi`. Install the headers meta-package too (Ubuntu `linux-headers-generic`, Debian "
                f"`linux-headers-amd64`), so that the next kernel update builds the module by itself.",
                evidence=evidence,
                commands=build_commands(facts, km.kernel_release),
            )
        ]
    if km.secure_boot is True and (km.kernel_release in km.installed_for or mod is not None):
        return [
            CHECK.finding(
                Status.FAIL,
                "the nvidia module is installed but not loaded, and Secure Boot is on: the kernel refuses "
                "the unsigned module",
                "With Secure Boot the kernel loads only modules signed by a trusted key (`modprobe nvidia` fails with "
                '"Key was rejected by service"). Enrol the key the module was signed with and reboot (the MOK manager '
                f"asks for the password you set):\n\n```\n{mok_command(facts)}\nsudo reboot\n```\n\nor disable Secure "
                "Boot in the firmware setup.",
                evidence=evidence,
                commands=(
                    *(_root(line, "enrol the module-signing key") for line in mok_command(facts).splitlines()),
                    Command("sudo reboot", "the MOK manager asks for the password set by mokutil", "root"),
                ),
            )
        ]
    commands: tuple[Command, ...] = (
        Command("sudo modprobe nvidia", "load the installed module", "root"),
        Command("sudo dmesg | grep -i nvrm", "the kernel's reason when it refuses", "root"),
    )
    if not km.installed_for and mod is None:
        cause = "no nvidia module is installed for any kernel: install the NVIDIA driver and reboot"
        commands = driver_install_commands(facts)
    else:
        cause = (
            "the module is installed but not loaded: run `sudo modprobe nvidia` and read "
            "`sudo dmesg | grep -i nvrm` for the refusal"
        )
    return [
        CHECK.finding(
            Status.FAIL,
            f"{len(devices)} NVIDIA GPU{'s' if len(devices) != 1 else ''} on the PCI bus "
            f"but the nvidia kernel module is not loaded",
            cause[0].upper() + cause[1:] + ".",
            evidence=evidence,
            commands=commands,
        )
    ]


# --------------------------------------------------------------------------- driver branch


def branch_rule(cc: str) -> dict[str, Any] | None:
    """The [[arch_branch]] row of compute capability ``cc``, or None."""
    row: dict[str, Any]
    for row in load_table("platform")["arch_branch"]:
        if row["cc"] == cc:
            return row
    return None


def companions(torch_version: str) -> tuple[str, str]:
    """(torchvision, torchaudio) built against ``torch_version``: the [[companion]] table, else the
    pytorch/vision release rule (torch 2.X.Y pairs with torchvision 0.(X+15).Y and torchaudio 2.X.Y)."""
    for row in load_table("platform")["companion"]:
        if row["torch"] == torch_version:
            return row["torchvision"], row["torchaudio"]
    t = v(torch_version)
    return f"0.{t.minor + 15}.{t.micro}", f"{t.major}.{t.minor}.{t.micro}"


def pinned_install(
    python: str, torch_version: str | None, min_cuda: str = "12.8", venv_creator: str | None = None
) -> str:
    """``<python> -m pip install torch==X torchvision==Y torchaudio==Z --index-url .../cuXYZ`` with a
    CUDA >= ``min_cuda`` variant that published the target's torch (else that variant's first torch); uv's
    form in a venv made by ``uv venv`` (:func:`~gpudoctor.checks._common.install_command`)."""
    variants = [r for r in load_table("torch_wheels")["variant"] if r["cuda"] and v(r["cuda"]) >= v(min_cuda)]
    variants.sort(key=lambda r: v(r["cuda"]))
    public = split_local(torch_version)[0] if torch_version else ""
    chosen: dict[str, Any] | None = None
    version = ""
    for r in variants:
        if public and v(r["first_torch"]) <= v(public) <= v(r["newest_torch"]):
            chosen, version = r, public
            break
    if chosen is None:
        chosen = variants[0]
        version = chosen["first_torch"]
    tv, ta = companions(version)
    return install_command(
        python,
        f"--force-reinstall torch=={version} torchvision=={tv} torchaudio=={ta} --index-url {chosen['index_url']}",
        venv_creator,
    )


def _blackwell_ccs(facts: Facts) -> list[tuple[str, str]]:
    """(cc, where) for every GPU: NVML capability, else PCI device id ranges (the table's cc)."""
    out = [(g.cc, g.name) for g in gpu_devices(facts) if g.cc]
    if out:
        return out
    pci = facts.of(PciGpuFacts)
    for d in () if isinstance(pci, Unavailable) else pci.devices:
        row = open_required(d.device_id)
        if row is not None and row.get("cc"):
            out.append((row["cc"], f"{row['chip'].split(' (')[0]} {d.device_id} at {d.bus_id}"))
    return out


def evaluate_branch(facts: Facts) -> list[Finding]:
    drv = driver_version(facts)
    if drv is None:
        raise SkipCheck("no NVIDIA driver version known (see nvidia.driver)")
    gpus = _blackwell_ccs(facts)
    if not gpus:
        raise SkipCheck("no GPU architecture known (NVML devices or PCI ids)")
    need = [
        (cc, name, rule) for cc, name in gpus for rule in [branch_rule(cc)] if rule and v(drv).major < rule["branch"]
    ]
    evidence = {"driver": drv, "gpus": [f"{name}: compute capability {cc}" for cc, name in gpus]}
    if not need:
        return [CHECK_BRANCH.finding(Status.OK, f"driver {drv} supports every GPU's architecture", evidence=evidence)]
    cc, name, rule = max(need, key=lambda x: x[2]["branch"])
    branch = rule["branch"]
    probes = [(t, pr) for t, pr in target_probes(facts) if pr is not None and pr.torch.import_ok]
    lines = [
        pinned_install(pr.executable, pr.torch.version, venv_creator=pr.venv_creator) for _t, pr in probes[:3]
    ] or [pinned_install("python", None)]
    open_note = open_package_commands(facts, branch)
    return [
        CHECK_BRANCH.finding(
            Status.FAIL,
            f"{name} ({rule['name']}, compute capability {cc}) needs driver branch R{branch} or newer; "
            f"driver {drv} is installed",
            f"The CUDA minor-version floor of the torch build (525.60.13 for CUDA 12.x) may be met, but a "
            f"{rule['name']} GPU is supported only from the R{branch} branch ({rule['source']}): older drivers do not "
            f"drive it, and its cubins do not load. Upgrade the driver to R{branch}+ (open kernel modules for "
            f"Blackwell):\n\n{open_note}\n\nand use a torch build for CUDA 12.8 or newer, reinstalling torch, "
            f"torchvision and torchaudio together so their builds match:\n\n```\n" + "\n".join(lines) + "\n```",
            evidence=evidence,
            commands=(
                *package_commands(facts, "open_package", branch, f"driver R{branch}, open kernel modules"),
                *(Command(line, "torch for CUDA 12.8 or newer, with matching companions", "changes") for line in lines),
            ),
        )
    ]


CHECK = Check(
    id="platform.kernel-module",
    title="NVIDIA kernel module: loaded, right flavour (open for Blackwell), bound to every GPU",
    needs=("kmod", "gpu", "nvidia", "os", "platform"),
    evaluate=evaluate_module,
)

CHECK_BRANCH = Check(
    id="platform.driver-branch",
    title="driver branch new enough for each GPU architecture (Blackwell: R570+)",
    needs=("nvidia", "gpu", "os", "targets"),
    evaluate=evaluate_branch,
)
