"""--root is a jail for reads: symlinks resolve inside the root (chroot semantics),
loops and escapes are errors that the report names, never a read of a host file."""

from __future__ import annotations

import os

import pytest

from gpudoctor.collect import CollectOptions
from gpudoctor.engine import collect_facts, jail_finding
from gpudoctor.model import Status
from gpudoctor.system import Files, RootEscape, SymlinkLoop, System
from gpudoctor.testing import ScriptedRunner, not_found, write_tree


@pytest.fixture
def hostile(tmp_path):
    """A root next to a 'host' secret, with every kind of link that tries to reach it."""
    host_secret = tmp_path / "host" / "secret.conf"
    write_tree(
        tmp_path,
        {
            "/host/secret.conf": "[global]\nindex-url = https://host-only.example.org/simple\n",
            "/root/etc/real.conf": "inside\n",
            "/root/host/secret.conf": "re-rooted copy\n",
        },
    )
    root = tmp_path / "root"
    os.symlink(str(host_secret), root / "etc" / "abs-host.conf")  # absolute host path
    os.symlink("/etc/real.conf", root / "etc" / "abs-inside.conf")  # absolute, inside
    os.symlink("../../host/secret.conf", root / "etc" / "rel-up.conf")  # climbs out with ..
    os.symlink("../../../../../../../../host/secret.conf", root / "etc" / "deep.conf")
    os.symlink(str(tmp_path / "host"), root / "hostdir")  # a directory link
    os.symlink("/etc/loop-b", root / "etc" / "loop-a")
    os.symlink("loop-a", root / "etc" / "loop-b")
    os.symlink("self", root / "etc" / "self")
    return root, host_secret


def test_absolute_link_is_rerooted(hostile):
    root, _ = hostile
    files = Files(root)
    assert files.read_text("/etc/abs-inside.conf") == "inside\n"
    # /tmp/.../host/secret.conf inside the root does not exist: nothing of the host is read
    assert files.read_text_or_none("/etc/abs-host.conf") is None
    assert files.host_path("/etc/abs-host.conf").is_relative_to(root)


def test_dotdot_in_a_link_stops_at_the_root(hostile):
    root, _ = hostile
    files = Files(root)
    assert files.read_text("/etc/rel-up.conf") == "re-rooted copy\n"
    assert files.read_text("/etc/deep.conf") == "re-rooted copy\n"
    assert files.realpath("/etc/deep.conf") == "/host/secret.conf"
    kinds = {(i.link, i.kind) for i in files.incidents}
    assert ("/etc/deep.conf", "climbs-above-root") in kinds


def test_directory_link_to_the_host_is_rerooted(hostile):
    root, host_secret = hostile
    files = Files(root)
    assert (
        not files.exists("/hostdir/secret.conf") or files.read_text("/hostdir/secret.conf") != host_secret.read_text()
    )
    assert files.host_path("/hostdir/secret.conf").is_relative_to(root)
    assert list(files.glob("/hostdir", "*")) == []


def test_loops_are_a_clear_error(hostile):
    root, _ = hostile
    files = Files(root)
    with pytest.raises(SymlinkLoop, match="symlink loop through /etc/loop"):
        files.read_text("/etc/loop-a")
    with pytest.raises(SymlinkLoop):
        files.realpath("/etc/self/x")
    assert files.read_text_or_none("/etc/self") is None
    assert not files.exists("/etc/loop-b") and not files.is_file("/etc/loop-b") and not files.is_dir("/etc/self")
    assert any(i.kind == "loop" for i in files.incidents)


def test_an_escape_that_resolution_cannot_prevent_is_refused(tmp_path):
    # the root itself contains a bind-mount-like escape: simulate with a root whose
    # directory is swapped for a link after resolution (O_NOFOLLOW on the last part)
    write_tree(tmp_path, {"/host/secret": "host", "/root/etc/x": "inside"})
    root = tmp_path / "root"
    files = Files(root)
    real = files.host_path("/etc/x")
    os.unlink(real)
    os.symlink(str(tmp_path / "host" / "secret"), real)
    orig = files._resolve
    files_ns = Files(root)
    object.__setattr__(files_ns, "_resolve", lambda path, follow_last=True: ["etc", "x"])
    with pytest.raises(RootEscape, match="outside --root"):
        files_ns.read_text("/etc/x")
    assert files_ns.incidents and files_ns.incidents[0].kind == "escape"
    # the honest resolver re-roots the absolute target instead
    assert orig("/etc/x")[-2:] == ["host", "secret"] and files.read_text_or_none("/etc/x") is None


def test_live_root_is_unchanged():
    files = Files()
    assert files.is_live
    assert files.host_path("/etc/../etc/hostname") == files.host_path("/etc/hostname")


def test_readlink_of_a_link_below_a_linked_directory(tmp_path):
    write_tree(tmp_path, {"/opt/lib/real.so": ""})
    os.symlink("real.so", tmp_path / "opt" / "lib" / "libx.so")
    os.symlink("/opt/lib", tmp_path / "lib64")
    files = Files(tmp_path)
    assert files.readlink("/lib64/libx.so") == "real.so"
    assert files.realpath("/lib64/libx.so") == "/opt/lib/real.so"


def test_collectors_get_the_jail_and_the_report_names_the_links(hostile):
    root, host_secret = hostile
    # pip.conf is a link to the host's secret config; apt sources loop
    os.symlink(str(host_secret), root / "etc" / "pip.conf")
    (root / "etc" / "apt").mkdir()
    os.symlink("/etc/apt/sources.list", root / "etc" / "apt" / "sources.list")
    system = System(
        runner=ScriptedRunner(default=not_found()), files=Files(root), env={"PATH": "/usr/bin"}, home="/root"
    )
    facts, findings = collect_facts(["os", "pip", "apt"], system, CollectOptions())
    text = repr(facts.to_json(redact=False))
    assert "host-only.example.org" not in text
    jail = [f for f in findings if f.check == "root.symlinks"]
    assert len(jail) == 1 and jail[0].status is Status.WARN
    assert "/etc/apt/sources.list" in jail[0].explanation and "loop" in jail[0].explanation


def test_jail_finding_info_for_clamped_links_only():
    from gpudoctor.system import JailIncident

    f = jail_finding([JailIncident("/a", "/a", "../../b", "climbs-above-root")], "/img")
    assert f.status is Status.INFO and "climbs above it" in f.summary
    assert jail_finding([], "/img") is None
