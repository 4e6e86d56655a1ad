"""Kernel log across boots, replayed through the real collector on a fake root with scripted
``dmesg`` / ``journalctl`` and real syslog files: XIDs and NVIDIA messages of this boot and the
previous one, each finding naming the boot and the time; remedies by host/container and distro.

Log lines are verbatim excerpts of public reports (host names neutralised):
wilicc/gpu-burn#1 (AER fatal + XID 79), NVIDIA/open-gpu-kernel-modules#789 (RmInitAdapter),
mattshma/bigdata#133 (probe not called: nouveau), saidsay-so/acpi_ec#8 (lockdown message form).
"""

from __future__ import annotations

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.kernel_log import PREVIOUS_ARGV, collect_kernel_log, split_boots
from gpudoctor.engine import evaluate
from gpudoctor.facts import Unavailable
from gpudoctor.facts.platform import KernelModuleFacts
from gpudoctor.model import Status
from gpudoctor.registry import load_registry
from gpudoctor.testing import ScriptedRunner, exits, fake_system, make_facts, ok, os_facts, write_tree

JOURNAL_ARGV = ("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic")
BTIME = "cpu  1 2 3 4\nbtime 1706000000\n"  # 2024-01-23T08:53:20+00:00

# wilicc/gpu-burn#1
GPU_BURN = """\
[74785.660366] pcieport 0000:00:02.0: AER: Corrected error received: id=0010
[74785.660380] pcieport 0000:00:02.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=0010(Transmitter ID)
[74785.660496] pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00001000/00002000
[74785.660559] pcieport 0000:00:02.0:    [12] Replay Timer Timeout
[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010
[74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)
[74889.542125] pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00000020/00000000
[74889.542184] pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)
[74889.542234] pcieport 0000:00:02.0: broadcast error_detected message
[74889.542239] nvidia 0000:02:00.0: device has no AER-aware driver
[74889.644112] NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df
[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.
[74889.644191] NVRM: GPU at 0000:02:00.0 has fallen off the bus.
"""
HEALTHY = """\
[    0.000000] Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)
[    4.120553] nvidia: loading out-of-tree module taints kernel.
[    5.998001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024
[    6.100000] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.54.15
"""
# NVIDIA/open-gpu-kernel-modules#789
RMINIT = """\
[  903.609564] NVRM: RmInitAdapter: Cannot initialize GSP firmware RM
[  903.610907] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)
[  903.611884] NVRM: GPU 0000:98:00.0: rm_init_adapter failed, device minor number 0
"""
# mattshma/bigdata#133 (+ the nouveau line the NVRM text blames)
NOT_CALLED = """\
[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).
[188549.977053] NVRM: This can occur when a driver such as:
[188549.977100] nouveau 0000:5a:00.0: NVIDIA GV100 (140000a1)
"""
LOCKDOWN = "[  398.381052] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7\n"
PREVIOUS_ISO = """\
2024-01-22T23:10:41+0000 node01 kernel: NVRM: Xid (PCI:0000:02:00): 79, pid=2271, name=python3, GPU has fallen off the bus.
2024-01-22T23:10:41+0000 node01 kernel: NVRM: GPU at 0000:02:00.0 has fallen off the bus.
"""
NO_PERSISTENT = exits(0, stderr="Specifying boot ID or boot offset has no effect, no persistent journal was found.")


def collect(tmp_path, dmesg: str, previous=None, files=None, level: str = "full"):
    write_tree(tmp_path, {"/proc/stat": BTIME, **(files or {})})
    script = {("dmesg",): ok(dmesg), PREVIOUS_ARGV: previous or exits(1, stderr="No such boot ID in journal")}
    system = fake_system(tmp_path, runner=ScriptedRunner(script), host_commands=True)
    return collect_kernel_log(CollectContext(system, CollectOptions(probe_level=level)))


def run(facts, *ids):
    registry = load_registry()
    return {f.check: f for f in evaluate([registry.checks[c] for c in ids], facts)}


def km(loaded: bool, installed_for: tuple[str, ...] = ("6.8.0-45-generic",), secure_boot: bool = True):
    return KernelModuleFacts(
        kernel_release="6.8.0-45-generic", loaded=loaded, installed_for=installed_for, secure_boot=secure_boot
    )


def test_fallen_off_the_bus_with_aer_fatal_this_boot_says_when(tmp_path):
    log = collect(tmp_path, GPU_BURN)
    assert [(e.xid, e.boot) for e in log.events] == [(79, 0)]
    assert log.events[0].when == "2024-01-24T05:41:29+00:00"  # btime + 74889 s
    kinds = [m.kind for m in log.messages]
    assert kinds.count("aer_uncorrected") == 2 and "fallen_off_bus" in kinds and kinds.count("aer_corrected") == 2
    found = run(make_facts(kernel_log=log, os=os_facts()), "devices.xid", "devices.kernel-log")
    assert found["devices.xid"].status is Status.FAIL
    assert "at 2024-01-24T05:41:29+00:00" in found["devices.xid"].explanation
    kl = found["devices.kernel-log"]
    assert kl.status is Status.FAIL
    assert "fell off the PCIe bus" in kl.summary and "this boot at 2024-01-24T05:41:29" in kl.summary
    assert "uncorrectable PCIe errors" in kl.explanation and "sudo reboot" in kl.explanation


def test_healthy_twin_both_boots_clean(tmp_path):
    previous = ok("2024-01-22T08:00:00+0000 node01 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    log = collect(tmp_path, HEALTHY, previous=previous)
    assert log.previous_boot == "journalctl -k -b -1" and log.messages == () and log.events == ()
    found = run(make_facts(kernel_log=log, os=os_facts()), "devices.xid", "devices.kernel-log")
    assert found["devices.xid"].status is Status.OK and "previous boot" in found["devices.xid"].summary
    assert found["devices.kernel-log"].status is Status.OK


def test_xid_79_of_the_previous_boot_from_journald(tmp_path):
    log = collect(tmp_path, HEALTHY, previous=ok(PREVIOUS_ISO))
    assert [(e.xid, e.boot, e.when) for e in log.events] == [(79, -1, "2024-01-22T23:10:41+0000")]
    found = run(make_facts(kernel_log=log, os=os_facts()), "devices.xid", "devices.kernel-log")
    xid = found["devices.xid"]
    assert xid.status is Status.WARN
    assert "previous boot" in xid.summary and "2024-01-22T23:10:41" in xid.explanation
    assert "this boot started 2024-01-23T08:53:20+00:00" in xid.summary
    kl = found["devices.kernel-log"]
    assert kl.status is Status.WARN and "the previous boot at 2024-01-22T23:10:41" in kl.summary


def test_previous_boot_from_kern_log_when_journald_is_volatile(tmp_path):
    kern_log = (
        "Jan 22 20:00:01 node01 kernel: [    0.000000] Linux version 6.1.0-17-amd64\n"
        "Jan 22 23:10:41 node01 kernel: [11440.1] NVRM: Xid (PCI:0000:02:00): 79, pid=2271, name=python3, "
        "GPU has fallen off the bus.\n"
        "Jan 23 08:53:20 node01 kernel: [    0.000000] Linux version 6.1.0-18-amd64\n"
        "Jan 23 08:53:26 node01 kernel: [    5.9] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n"
    )
    log = collect(tmp_path, HEALTHY, previous=NO_PERSISTENT, files={"/var/log/kern.log": kern_log})
    assert log.previous_boot == "/var/log/kern.log"
    assert [(e.xid, e.boot, e.when) for e in log.events] == [(79, -1, "Jan 22 23:10:41")]
    # neighbour: no kern.log either -> the previous boot is unavailable, saying why
    empty = collect(tmp_path / "bare", HEALTHY, previous=NO_PERSISTENT)
    assert isinstance(empty.previous_boot, Unavailable) and "no persistent journal" in empty.previous_boot.reason
    found = run(make_facts(kernel_log=empty, os=os_facts()), "devices.kernel-log")["devices.kernel-log"]
    assert found.status is Status.OK and "Previous boot not read" in found.explanation


def test_split_boots_at_linux_version_lines():
    text = "a kernel: Linux version 6.1\nx\nb kernel: [    0.000000] Linux version 6.2\ny\n"
    assert [b.splitlines()[-1] for b in split_boots(text)] == ["x", "y"]


def test_rminitadapter_failure_is_a_failed_probe(tmp_path):
    log = collect(tmp_path, RMINIT)
    kl = run(make_facts(kernel_log=log, os=os_facts(id="ubuntu", version="22.04")), "devices.kernel-log")
    finding = kl["devices.kernel-log"]
    assert finding.status is Status.FAIL and "could not initialise" in finding.summary
    assert "0000:98:00.0" in finding.summary and "GSP" in finding.explanation


def test_probe_not_called_because_nouveau_took_the_gpu_debian_vs_fedora(tmp_path):
    log = collect(tmp_path, NOT_CALLED)
    debian = run(make_facts(kernel_log=log, os=os_facts()), "devices.kernel-log")["devices.kernel-log"]
    fedora = run(make_facts(kernel_log=log, os=os_facts(id="fedora", version="40", codename="")), "devices.kernel-log")[
        "devices.kernel-log"
    ]
    assert debian.status is fedora.status is Status.FAIL
    assert "update-initramfs -u" in debian.explanation and "apt install nvidia-driver" in debian.explanation
    assert "dracut -f" in fedora.explanation and "akmod-nvidia" in fedora.explanation
    assert "apt " not in fedora.explanation and "dnf" not in debian.explanation


def test_secure_boot_rejection_remedy_depends_on_the_module_being_built(tmp_path):
    log = collect(tmp_path, LOCKDOWN)
    ubuntu = os_facts(id="ubuntu", version="24.04", codename="noble", kernel="6.8.0-45-generic")
    built = run(make_facts(kernel_log=log, os=ubuntu, kmod=km(False)), "devices.kernel-log")["devices.kernel-log"]
    assert built.status is Status.FAIL and "Secure Boot" in built.summary
    assert "mokutil --import /var/lib/shim-signed/mok/MOK.der" in built.explanation
    assert "dkms autoinstall" not in built.explanation  # the module exists: only the key is missing
    missing = run(make_facts(kernel_log=log, os=ubuntu, kmod=km(False, installed_for=())), "devices.kernel-log")[
        "devices.kernel-log"
    ]
    assert "linux-modules-nvidia-<branch>-6.8.0-45-generic" in missing.explanation  # pre-signed, no key
    assert "sudo dkms autoinstall -k 6.8.0-45-generic" in missing.explanation
    # loaded anyway (the message was about another module): not this check's failure
    fine = run(make_facts(kernel_log=log, os=ubuntu, kmod=km(True)), "devices.kernel-log")["devices.kernel-log"]
    assert fine.status is Status.OK


def test_secure_boot_rejection_seen_from_a_container_goes_to_the_host_operator(tmp_path):
    log = collect(tmp_path, LOCKDOWN)
    inside = os_facts(id="ubuntu", version="22.04", in_container=True, kind="docker")
    found = run(make_facts(kernel_log=log, os=inside, kmod=km(False)), "devices.kernel-log")["devices.kernel-log"]
    assert found.status is Status.FAIL
    assert (
        "Ask the host operator" in found.explanation and "restarting or rebuilding this container" in found.explanation
    )


def test_unsigned_module_loaded_is_information(tmp_path):
    line = "[    4.2] nvidia: module verification failed: signature and/or required key missing - tainting kernel\n"
    log = collect(tmp_path, HEALTHY + line)
    found = run(make_facts(kernel_log=log, os=os_facts(), kmod=km(True, secure_boot=False)), "devices.kernel-log")
    assert found["devices.kernel-log"].status is Status.INFO
    assert "mokutil --import /var/lib/dkms/mok.pub" in found["devices.kernel-log"].explanation


def test_many_corrected_aer_errors_warn_and_a_few_do_not(tmp_path):
    line = "[  1.{i}] pcieport 0000:00:03.1: AER: Corrected error received: 0000:0b:00.0\n"
    many = collect(tmp_path / "many", "".join(line.format(i=i) for i in range(12)))
    few = collect(tmp_path / "few", "".join(line.format(i=i) for i in range(2)))
    assert run(make_facts(kernel_log=many, os=os_facts()), "devices.kernel-log")["devices.kernel-log"].status is (
        Status.WARN
    )
    assert (
        run(make_facts(kernel_log=few, os=os_facts()), "devices.kernel-log")["devices.kernel-log"].status is Status.OK
    )


def test_light_gate_reads_only_this_boot(tmp_path):
    write_tree(tmp_path, {"/proc/stat": BTIME, "/proc/driver/nvidia/version": "NVRM version: 550\n"})
    runner = ScriptedRunner({("dmesg",): ok(GPU_BURN)})
    system = fake_system(tmp_path, runner=runner, host_commands=True)
    log = collect_kernel_log(CollectContext(system, CollectOptions(probe_level="light")))
    assert [c[0] for c in runner.calls] == [("dmesg",)]
    assert isinstance(log.previous_boot, Unavailable)


def test_a_fake_root_without_host_commands_reads_nothing(tmp_path):
    runner = ScriptedRunner({})
    log = collect_kernel_log(CollectContext(fake_system(tmp_path, runner=runner), CollectOptions()))
    assert isinstance(log.readable, Unavailable) and runner.calls == []


def test_aer_errors_of_other_devices_are_not_the_gpus(tmp_path):
    from gpudoctor.facts.nvidia import PciDevice, PciGpuFacts
    from gpudoctor.facts.topology import Bridge, GpuPath, TopologyFacts

    nvme = "[  1.{i}] pcieport 0000:00:1d.0: AER: Multiple Corrected error received: 0000:03:00.0\n"
    log = collect(tmp_path, "".join(nvme.format(i=i) for i in range(15)))
    gpu = PciGpuFacts((PciDevice("0000:02:00.0", "0x10de", "0x20b0", "0x030200", "nvidia"),))
    topo = TopologyFacts(paths=(GpuPath("0000:02:00.0", (Bridge("0000:00:02.0", None),)),))
    other = run(make_facts(kernel_log=log, os=os_facts(), gpu=gpu, topology=topo), "devices.kernel-log")
    assert other["devices.kernel-log"].status is Status.OK
    assert other["devices.kernel-log"].evidence["aer_of_other_devices"] == 15
    # the same count on the GPU's own root port warns
    port = "[  1.{i}] pcieport 0000:00:02.0: AER: Corrected error received: 0000:02:00.0\n"
    log = collect(tmp_path / "gpu", "".join(port.format(i=i) for i in range(15)))
    mine = run(make_facts(kernel_log=log, os=os_facts(), gpu=gpu, topology=topo), "devices.kernel-log")
    assert mine["devices.kernel-log"].status is Status.WARN


def test_a_probe_failure_the_driver_recovered_from_is_a_warning(tmp_path):
    from gpudoctor.facts.nvidia import PciDevice, PciGpuFacts
    from gpudoctor.testing import nvidia_facts, nvml_device

    log = collect(tmp_path, RMINIT)
    gpu = PciGpuFacts((PciDevice("0000:98:00.0", "0x10de", "0x2204", "0x030000", "nvidia"),))
    nv = nvidia_facts(devices=[nvml_device(0, bus="00000000:98:00.0")])
    nv = nv.__class__(**{**nv.__dict__, "device_count": 1})
    now_fine = run(make_facts(kernel_log=log, os=os_facts(), gpu=gpu, nvidia=nv), "devices.kernel-log")
    assert now_fine["devices.kernel-log"].status is Status.WARN
