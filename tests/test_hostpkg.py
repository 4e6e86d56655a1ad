"""Remedies that fit the machine: the same cause gives a different, correct remedy on the host vs in
a container, and on Debian/Ubuntu vs Fedora vs RHEL vs SUSE vs Arch (data/hostpkg.toml)."""

from __future__ import annotations

import pytest

from gpudoctor import hostpkg
from gpudoctor.data import load_table
from gpudoctor.testing import make_facts, os_facts


def facts(id: str, container: bool = False, kernel: str = "6.8.0-45-generic"):
    return make_facts(os=os_facts(id=id, in_container=container, kind="docker" if container else None, kernel=kernel))


def test_every_family_row_is_complete_and_sourced():
    rows = load_table("hostpkg")["family"]
    keys = {"install_driver", "install_branch", "headers", "rebuild", "secure_boot_key", "kernel_param", "source"}
    for row in rows:
        assert keys <= set(row), row["family"]
        assert row["source"] and row["manager"] in ("apt", "dnf", "zypper", "pacman")
    assert hostpkg.family_of("rocky") == "rhel" and hostpkg.family_of("opensuse-tumbleweed") == "suse"
    assert hostpkg.family_of("plan9") == ""


@pytest.mark.parametrize(
    "os_id, present, absent",
    [
        ("ubuntu", ["sudo ubuntu-drivers install"], ["dnf", "zypper", "pacman"]),
        ("debian", ["sudo apt install nvidia-driver firmware-misc-nonfree"], ["dnf", "ubuntu-drivers"]),
        ("fedora", ["akmod-nvidia", "dnf install"], ["apt ", "zypper"]),
        ("rocky", ["dnf module install nvidia-driver:latest-dkms"], ["apt ", "akmod"]),
        ("sles", ["zypper install nvidia-open-driver-G06-signed-kmp-default"], ["apt ", "dnf"]),
        ("arch", ["pacman -S nvidia-open-dkms"], ["apt ", "dnf"]),
    ],
)
def test_install_driver_uses_the_family_package_manager(os_id, present, absent):
    text = hostpkg.install_driver(facts(os_id))
    for p in present:
        assert p in text
    for a in absent:
        assert a not in text
    assert "sudo reboot" in text and "host operator" not in text


def test_unknown_distribution_lists_every_family():
    text = hostpkg.install_driver(facts("plan9"))
    for fam in ("# ubuntu (apt)", "# fedora (dnf)", "# suse (zypper)", "# arch (pacman)"):
        assert fam in text


def test_rebuild_for_the_running_kernel_debian_vs_fedora():
    deb = hostpkg.rebuild_module(facts("debian", kernel="6.1.0-18-amd64"))
    fed = hostpkg.rebuild_module(facts("fedora", kernel="6.8.9-300.fc40.x86_64"))
    assert "sudo apt install linux-headers-6.1.0-18-amd64" in deb and "sudo dkms autoinstall -k 6.1.0-18-amd64" in deb
    assert "sudo dnf install kernel-devel-6.8.9-300.fc40.x86_64" in fed
    assert "sudo akmods --force --kernels 6.8.9-300.fc40.x86_64" in fed and "dkms" not in fed


def test_secure_boot_with_and_without_a_module_for_the_kernel():
    built = hostpkg.secure_boot(facts("fedora"), module_for_kernel=True)
    assert "mokutil --import /etc/pki/akmods/certs/public_key.der" in built and "akmods --force" not in built
    missing = hostpkg.secure_boot(facts("fedora"), module_for_kernel=False)
    assert "akmods --force" in missing and "public_key.der" in missing
    ubuntu = hostpkg.secure_boot(facts("ubuntu"), module_for_kernel=False, branch="550")
    assert "linux-modules-nvidia-550-6.8.0-45-generic" in ubuntu and "no key to enrol" in ubuntu


def test_same_cause_host_vs_container():
    host = hostpkg.reset_gpu(facts("ubuntu"), ["1"])
    inside = hostpkg.reset_gpu(facts("ubuntu", container=True), ["1"])
    assert "sudo nvidia-smi -r -i 1" in host and "host operator" not in host
    assert "sudo nvidia-smi -r -i 1" in inside and "Ask the host operator" in inside
    assert "restarting or rebuilding this container" in inside
    # never "reboot" addressed to the container user as something to do in here
    assert "To reset the GPU, run on this machine" in host and "run on this machine" not in inside


def test_blacklist_nouveau_regenerates_the_initramfs_of_the_family():
    assert "sudo update-initramfs -u" in hostpkg.blacklist_nouveau(facts("ubuntu"))
    assert "sudo dracut -f" in hostpkg.blacklist_nouveau(facts("rhel"))
    assert "sudo mkinitcpio -P" in hostpkg.blacklist_nouveau(facts("arch"))
