"""Remedies that fit the machine: host or container, and the distribution's package manager.

The same cause (a GPU that needs a reset, a driver module missing for the
running kernel, Secure Boot refusing the module) has a different remedy where
the user is:

- **in a container** the kernel, its modules and the GPUs belong to the host:
  the user is told what the *host operator* must run on the host, and never to
  reboot or reinstall a driver inside the container (restarting the container
  resets nothing: it shares the host's kernel and GPU);
- **on the host** the commands are those of its distribution family
  (``data/hostpkg.toml``: apt with Ubuntu's ``ubuntu-drivers`` and signed
  ``linux-modules-nvidia-*``, Debian's ``nvidia-driver``, Fedora's RPM Fusion
  akmods, RHEL's precompiled or ``-dkms`` module streams, SUSE's signed KMPs,
  Arch's pacman), and every family when the distribution is unknown.

Each remedy exists twice from one source: as Markdown for the explanation
(``reset_gpu``) and as :class:`~gpudoctor.model.Command` values for
``Finding.commands`` (``reset_gpu_commands``).

The container engine, orchestrator and scheduler remedies (how a container is
given its GPU) live in :mod:`gpudoctor.checks._platform`; this module is only the
host side. Pure functions of the facts; no I/O.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.model import Command
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class Place:
    """Where the user is.

    Attributes:
        container: True inside a container (Docker, Podman, Kubernetes pod, LXC/LXD, ...).
        family: the distribution family (``ubuntu``, ``debian``, ``fedora``, ``rhel``,
            ``suse``, ``arch``) or "" when unknown. In a container it is the image's,
            which says nothing about the host's.
        kernel: the running kernel release (``uname -r``; the host's in a container), or "".
    """

    container: bool
    family: str
    kernel: str


def families() -> list[dict[str, Any]]:
    """The rows of ``data/hostpkg.toml``."""
    rows: list[dict[str, Any]] = load_table("hostpkg")["family"]
    return rows


def family_of(os_id: str) -> str:
    """The family of an os-release ``ID`` (``rocky`` -> ``rhel``), or ""."""
    ident = os_id.lower()
    for row in families():
        if ident in row["ids"]:
            return str(row["family"])
    return ""


def place(facts: Facts) -> Place:
    """Where the user is, from the ``os`` facts (unknown family when they were not collected)."""
    os_facts = facts.of(OsFacts)
    if isinstance(os_facts, Unavailable):
        return Place(False, "", "")
    return Place(os_facts.container.in_container, family_of(os_facts.id), os_facts.kernel)


def _row(family: str) -> dict[str, Any] | None:
    return next((r for r in families() if r["family"] == family), None)


def _rows(p: Place) -> list[dict[str, Any]]:
    row = _row(p.family)
    return [row] if row else families()


def _fill(template: str, branch: str, release: str) -> str:
    return template.replace("{branch}", branch or "<branch>").replace("{release}", release or "$(uname -r)")


def _block(p: Place, key: str, branch: str = "", extra: tuple[str, ...] = ()) -> str:
    """A code block of the ``key`` command of this family, or of every family (each under a comment)."""
    rows = _rows(p)
    lines: list[str] = []
    for row in rows:
        if not row[key]:
            continue
        if len(rows) > 1:
            lines.append(f"# {row['family']} ({row['manager']})")
        lines.append(_fill(row[key], branch, p.kernel))
    lines.extend(extra)
    return "```\n" + "\n".join(lines) + "\n```"


def on_host(p: Place, commands: str, what: str) -> str:
    """Markdown: ``commands`` (a code block) to run; inside a container, addressed to the host operator.

    ``what`` says in a few words what the commands do (``reset the GPU``)."""
    if not p.container:
        return f"To {what}, run on this machine:\n\n{commands}"
    return (
        f"This is a container: the kernel, its NVIDIA module and the GPU belong to the host, so nothing done in "
        f"here (restarting or rebuilding this container included) can {what}. Ask the host operator to run on "
        f"the host:\n\n{commands}\n\nthen start this container again."
    )


def install_driver(facts: Facts, branch: str = "") -> str:
    """Markdown: install the NVIDIA driver with this distribution's package manager, then reboot."""
    p = place(facts)
    key = "install_branch" if branch else "install_driver"
    return on_host(p, _block(p, key, branch, ("sudo reboot",)), "install the NVIDIA driver")


def rebuild_module(facts: Facts, branch: str = "") -> str:
    """Markdown: build the nvidia module for the running kernel (headers, then DKMS / akmods / KMP)."""
    p = place(facts)
    rows = _rows(p)
    lines: list[str] = []
    for row in rows:
        if len(rows) > 1:
            lines.append(f"# {row['family']} ({row['manager']})")
        lines.append(_fill(row["headers"], branch, p.kernel))
        lines.append(_fill(row["rebuild"], branch, p.kernel))
    lines.append("sudo modprobe nvidia && nvidia-smi")
    return on_host(p, "```\n" + "\n".join(lines) + "\n```", "build the NVIDIA module for the running kernel")


def secure_boot(facts: Facts, module_for_kernel: bool, branch: str = "") -> str:
    """Markdown: Secure Boot refuses the nvidia module.

    ``module_for_kernel``: a module exists for the running kernel (it is only unsigned, or
    signed by a key the firmware does not trust): enrol the key and reboot. When none was built,
    build it first (DKMS/akmods sign what they build with the key that is then enrolled), or on
    Ubuntu/RHEL/SUSE install the distribution's pre-signed modules, which need no enrolment."""
    p = place(facts)
    rows = _rows(p)
    lines: list[str] = []
    notes: list[str] = []
    for row in rows:
        if len(rows) > 1:
            lines.append(f"# {row['family']} ({row['manager']})")
        if not module_for_kernel:
            if row["signed_modules"]:
                lines.append(_fill(row["signed_modules"], branch, p.kernel) + "   # pre-signed: no key to enrol")
                lines.append("# or build it yourself and enrol the signing key:")
            lines.append(_fill(row["headers"], branch, p.kernel))
            lines.append(_fill(row["rebuild"], branch, p.kernel))
        lines.append(row["secure_boot_key"])
        notes.append(row["secure_boot_note"])
    lines.append("sudo reboot   # the MOK manager asks for the password set by mokutil --import")
    first = (
        "a module signed by a key the firmware trusts"
        if module_for_kernel
        else "a module built (and signed) for the running kernel"
    )
    body = on_host(p, "```\n" + "\n".join(lines) + "\n```", "give the kernel " + first)
    note = notes[0] if len(notes) == 1 else ""
    return body + (f"\n\n{note}" if note else "") + "\n\nOr turn Secure Boot off in the firmware setup."


def reset_gpu(facts: Facts, targets: list[str], reboot: bool = False) -> str:
    """Markdown: reset the GPU(s) named by NVML index or PCI address (``sudo nvidia-smi -r -i X``),
    or reboot the node when ``reboot`` (the driver asks for it, or the GPU is off the bus)."""
    p = place(facts)
    if reboot:
        lines = ["sudo systemctl stop nvidia-persistenced 2>/dev/null; sudo reboot"]
        what = "bring the GPU back (a reboot of the host)"
    else:
        lines = ["nvidia-smi --query-compute-apps=pid,process_name --format=csv   # must list nothing"]
        lines += [f"sudo nvidia-smi -r -i {t}" for t in targets] or ["sudo nvidia-smi -r -i <index>"]
        lines.append("# if the reset is refused or the GPU does not come back: sudo reboot")
        what = "reset the GPU"
    return on_host(p, "```\n" + "\n".join(lines) + "\n```", what)


def blacklist_nouveau(facts: Facts) -> str:
    """Markdown: keep nouveau off the GPU (modprobe.d + initramfs of this family), then install the driver."""
    p = place(facts)
    initramfs = {
        "ubuntu": "sudo update-initramfs -u",
        "debian": "sudo update-initramfs -u",
        "fedora": "sudo dracut -f",
        "rhel": "sudo dracut -f",
        "suse": "sudo dracut -f",
        "arch": "sudo mkinitcpio -P",
    }
    regen = initramfs.get(
        p.family, "sudo update-initramfs -u   # RHEL/Fedora/SUSE: sudo dracut -f; Arch: mkinitcpio -P"
    )
    cmds = (
        "```\nprintf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee "
        f"/etc/modprobe.d/blacklist-nouveau.conf\n{regen}\n```"
    )
    return (
        on_host(p, cmds, "keep nouveau off the GPU")
        + "\n\nThen install NVIDIA's driver:\n\n"
        + _block(p, "install_driver", extra=("sudo reboot",))
    )


def kernel_param(facts: Facts, param: str) -> str:
    """Markdown: add ``param`` to the kernel command line with this family's boot-loader tooling, reboot."""
    p = place(facts)
    rows = _rows(p)
    lines: list[str] = []
    for row in rows:
        if len(rows) > 1:
            lines.append(f"# {row['family']} ({row['manager']})")
        lines.append(row["kernel_param"].replace("{param}", param))
    lines.append("sudo reboot")
    return on_host(p, "```\n" + "\n".join(lines) + "\n```", f"add `{param}` to the kernel command line")


def _command(p: Place, text: str, purpose: str, family: str = "") -> Command:
    """One remedy command: a trailing ``# comment`` of the table moves into the purpose, the family
    (when every family is shown) leads it, and in a container it is addressed to the host operator."""
    text, _, comment = text.partition("   #")
    why = f"{family}: {purpose}" if family else purpose
    why += f" ({comment.strip()})" if comment.strip() else ""
    return Command(
        text.strip(), ("on the host: " if p.container else "") + why, "root" if "sudo" in text else "changes"
    )


def _family_commands(p: Place, key: str, purpose: str, branch: str = "") -> list[Command]:
    rows = _rows(p)
    return [
        _command(p, _fill(row[key], branch, p.kernel), purpose, row["family"] if len(rows) > 1 else "")
        for row in rows
        if row[key]
    ]


def reset_gpu_commands(facts: Facts, targets: list[str], reboot: bool = False) -> tuple[Command, ...]:
    """:func:`reset_gpu` as commands: reset each GPU (after checking nothing runs on it), or reboot."""
    p = place(facts)
    if reboot:
        return (_command(p, "sudo reboot", "bring the GPU back (a reboot of the host)"),)
    return (
        *(
            _command(p, f"sudo nvidia-smi -r -i {t}", "reset the GPU (refused while a process uses it)")
            for t in targets
        ),
        _command(p, "nvidia-smi --query-compute-apps=pid,process_name --format=csv", "what still runs on the GPUs"),
    )


def install_driver_commands(facts: Facts, branch: str = "") -> tuple[Command, ...]:
    """:func:`install_driver` as commands."""
    p = place(facts)
    key = "install_branch" if branch else "install_driver"
    return (
        *_family_commands(p, key, "install the NVIDIA driver", branch),
        _command(p, "sudo reboot", "load the new driver"),
    )


def rebuild_module_commands(facts: Facts, branch: str = "") -> tuple[Command, ...]:
    """:func:`rebuild_module` as commands."""
    p = place(facts)
    return (
        *_family_commands(p, "headers", "the running kernel's headers", branch),
        *_family_commands(p, "rebuild", "build the NVIDIA module for the running kernel", branch),
        _command(p, "sudo modprobe nvidia && nvidia-smi", "load it and check"),
    )


def secure_boot_commands(facts: Facts, module_for_kernel: bool, branch: str = "") -> tuple[Command, ...]:
    """:func:`secure_boot` as commands: the family's pre-signed module (when none was built and there is
    one), else the build; the key to enrol; the reboot that enrols it."""
    p = place(facts)
    rows: list[Command] = []
    if not module_for_kernel:
        rows += _family_commands(p, "signed_modules", "a pre-signed module: no key to enrol", branch)
        rows += _family_commands(p, "rebuild", "or build (and sign) the module for the running kernel", branch)
    rows += _family_commands(p, "secure_boot_key", "enrol the key the module is signed with", branch)
    rows.append(_command(p, "sudo reboot", "the MOK manager asks for the password set by mokutil --import"))
    return tuple(rows)


def blacklist_nouveau_commands(facts: Facts) -> tuple[Command, ...]:
    """:func:`blacklist_nouveau` as commands (the initramfs step of this family only when it is known)."""
    p = place(facts)
    return (
        _command(
            p,
            "printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf",
            "keep nouveau off the GPU (then rebuild the initramfs and install NVIDIA's driver)",
        ),
        *install_driver_commands(facts),
    )


def kernel_param_commands(facts: Facts, param: str) -> tuple[Command, ...]:
    """:func:`kernel_param` as commands."""
    p = place(facts)
    rows = _rows(p)
    return (
        *(
            _command(
                p,
                row["kernel_param"].replace("{param}", param),
                f"add {param} to the kernel command line",
                row["family"] if len(rows) > 1 else "",
            )
            for row in rows
        ),
        _command(p, "sudo reboot", "boot with it"),
    )
