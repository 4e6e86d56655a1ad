"""Every fix clears its own finding: check -> fix (through gpudoctor.apply) -> check, on real files.

One or more scenarios per registered fix id (``gpudoctor.fixes`` entry
points): the first run must offer the fix, the plan is written through the
apply layer into a fake root, and the second run of the same checks on the
same root must no longer carry the finding the fix was planned for. Where a
fix cannot leave the tool working it must refuse (and write nothing); the
scenario asserts the refusal names what remains. Online scenarios use fake
mirrors on 127.0.0.1 only.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from tests._fixcycle import cycle

from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import Status
from gpudoctor.testing import write_tree

HERE = Path(__file__).resolve().parent
CASE20 = HERE / "fixtures" / "cases" / "20-pip-conf-no-section-header"
DEBIAN = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
COVERED: set[str] = set()


def covers(fix_id: str):
    COVERED.add(fix_id)
    return lambda test: test


def assert_cleared(c, fix_id: str) -> None:
    offered = c.offering(fix_id)
    assert offered, f"the first run offers no {fix_id}: " + "; ".join(f.summary for f in c.before)
    assert c.plans, f"{fix_id} planned nothing: refused {c.refused}"
    for f in offered:
        assert c.gone(f), f"{fix_id} left its finding: {f.summary}\nafter:\n{c.text(fix_id)}"
    assert not c.offering(fix_id, c.after), c.text(fix_id)
    assert c.verdicts == [None] * len(c.plans), c.verdicts  # the tool, re-read, resolves what was set


# --------------------------------------------------------------------------- pip.index-url


@covers("pip.index-url")
def test_pip_conf_without_section_header_is_repaired_and_read(tmp_path):
    root = write_tree(tmp_path / "r", {"/etc/pip.conf": (CASE20 / "pip.conf").read_text()})
    c = cycle(root, ["pip.config"], "pip.index-url")
    assert_cleared(c, "pip.index-url")
    assert [f.status for f in c.after] == [Status.OK] or all(f.status < Status.WARN for f in c.after)


@covers("pip.index-url")
def test_pip_http_index_gets_trusted_host(tmp_path):
    conf = "[global]\nindex-url = http://pypi.mirror.example.org/simple\n"
    root = write_tree(tmp_path / "r", {"/home/user/.config/pip/pip.conf": conf})
    c = cycle(root, ["pip.config"], "pip.index-url", {"allow-insecure": "true"})
    assert_cleared(c, "pip.index-url")
    assert "trusted-host = pypi.mirror.example.org" in (root / "home/user/.config/pip/pip.conf").read_text()


@covers("pip.index-url")
def test_pip_follows_uv_onto_the_mirror(tmp_path):
    uv = '[[index]]\nurl = "https://pypi.mirror.example.org/simple"\ndefault = true\n'
    root = write_tree(tmp_path / "r", {"/home/user/.config/uv/uv.toml": uv})
    c = cycle(root, ["index.consistency"], "pip.index-url", {"index-url": "https://pypi.mirror.example.org/simple"})
    assert_cleared(c, "pip.index-url")
    assert c.after[0].status is Status.OK


# --------------------------------------------------------------------------- uv.index-url


@covers("uv.index-url")
def test_uv_follows_pip_onto_the_mirror(tmp_path):
    root = write_tree(
        tmp_path / "r",
        {
            "/etc/pip.conf": "[global]\nindex-url = https://pypi.mirror.example.org/simple\n",
            "/home/user/.config/uv/uv.toml": "native-tls = true\n",
        },
    )
    c = cycle(root, ["index.consistency"], "uv.index-url")
    assert_cleared(c, "uv.index-url")
    assert c.after[0].status is Status.OK


@covers("uv.index-url")
def test_uv_index_without_simple_is_corrected(tmp_path):
    root = write_tree(
        tmp_path / "r", {"/home/user/.config/uv/uv.toml": 'index-url = "pypi.mirror.example.org/simple"\n'}
    )
    c = cycle(root, ["index.consistency"], "uv.index-url")
    assert_cleared(c, "uv.index-url")


# --------------------------------------------------------------------------- conda.channels


@covers("conda.channels")
def test_conda_named_channels_follow_a_defaults_mirror(tmp_path):
    condarc = (
        "channels:\n  - defaults\n  - conda-forge\n"
        "default_channels:\n  - https://mirrors.example.org/anaconda/pkgs/main\n"
    )
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": condarc})
    c = cycle(root, ["index.consistency"], "conda.channels")
    assert_cleared(c, "conda.channels")


@covers("conda.channels")
def test_conda_defaults_follow_a_channel_alias_mirror(tmp_path):
    condarc = (
        "channel_alias: https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud\nchannels:\n  - defaults\n  - conda-forge\n"
    )
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": condarc})
    c = cycle(root, ["index.consistency"], "conda.channels", {"mirror": "tuna"})
    assert_cleared(c, "conda.channels")


@covers("conda.channels")
@pytest.mark.slow
def test_conda_channel_urls_on_a_failing_mirror_are_moved(tmp_path):
    with FakeMirror(fault="500") as bad, FakeMirror() as good:
        condarc = (
            f"channels:\n  - {bad.url}/anaconda/cloud/conda-forge\n  - defaults\n"
            f"default_channels:\n  - {bad.url}/anaconda/pkgs/main\n"
        )
        root = write_tree(tmp_path / "r", {"/home/user/.condarc": condarc})
        opts = {"mirror": f"{good.url}/anaconda", "allow-insecure": "true"}
        c = cycle(root, ["conda.mirror"], "conda.channels", opts, offline=False)
        assert_cleared(c, "conda.channels")
        assert c.after[0].status is Status.OK, c.text("conda.channels")
        assert bad.url not in (root / "home/user/.condarc").read_text()


# --------------------------------------------------------------------------- apt.mirror


def _debian(uri: str, security: str) -> str:
    return (
        f"Types: deb\nURIs: {uri}\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: {KEYRING}\n\n"
        f"Types: deb\nURIs: {security}\nSuites: bookworm-security\nComponents: main\nSigned-By: {KEYRING}\n"
    )


@covers("apt.mirror")
def test_apt_https_without_ca_certificates_ends_with_apt_able_to_verify(tmp_path):
    sources = _debian("https://ftp.debian.org/debian", "https://ftp.debian.org/debian-security")
    root = write_tree(tmp_path / "r", {"/etc/os-release": DEBIAN, "/etc/apt/sources.list.d/debian.sources": sources})
    opts = {"mirror": "http://mirror.example.org/debian", "allow-insecure": "true"}
    c = cycle(root, ["apt.sources"], "apt.mirror", opts)
    assert_cleared(c, "apt.mirror")
    text = (root / "etc/apt/sources.list.d/debian.sources").read_text()
    # the security archive stays on its official host (no probe verified the mirror for it), over http
    assert (
        "URIs: http://mirror.example.org/debian\n" in text and "URIs: http://ftp.debian.org/debian-security\n" in text
    )
    assert any("http:// URL" in n for p in c.plans for n in p.notes)


@covers("apt.mirror")
def test_apt_fix_that_cannot_leave_apt_verifying_refuses(tmp_path):
    # a third-party https repository stays https: without CA certificates apt still fails, so nothing is written
    sources = _debian("https://ftp.debian.org/debian", "https://ftp.debian.org/debian-security")
    cuda = "deb [signed-by=/usr/share/keyrings/cuda.gpg] https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n"
    root = write_tree(
        tmp_path / "r",
        {
            "/etc/os-release": DEBIAN,
            "/etc/apt/sources.list.d/debian.sources": sources,
            "/etc/apt/sources.list.d/cuda.list": cuda,
        },
    )
    opts = {"mirror": "http://mirror.example.org/debian", "allow-insecure": "true"}
    c = cycle(root, ["apt.sources"], "apt.mirror", opts)
    assert not c.plans and c.refused
    assert "developer.download.nvidia.com" in c.refused[0] and "Nothing was written" in c.refused[0]
    assert (root / "etc/apt/sources.list.d/debian.sources").read_text() == sources


@covers("apt.mirror")
@pytest.mark.slow
def test_apt_failing_mirror_is_replaced(tmp_path):
    with FakeMirror(fault="500", prefix="/debian") as bad, FakeMirror(prefix="/debian") as good:
        sources = _debian(bad.url, bad.url.replace("/debian", "/debian-security"))
        root = write_tree(
            tmp_path / "r",
            {
                "/etc/os-release": DEBIAN,
                "/etc/apt/sources.list.d/debian.sources": sources,
                "/etc/ssl/certs/ca-certificates.crt": "",
            },
        )
        opts = {"mirror": good.url, "allow-insecure": "true"}
        c = cycle(root, ["apt.mirror"], "apt.mirror", opts, offline=False)
        primary = [f for f in c.offering("apt.mirror") if "debian-security" not in f.summary]
        assert primary and c.plans
        after = (root / "etc/apt/sources.list.d/debian.sources").read_text()
        assert f"URIs: {good.url}\n" in after
        # the security archive is not on the mirror named: it stays where it was and says so (not "official")
        notes = " ".join(n for p in c.plans for n in p.notes)
        assert "Kept on the official host" not in notes and "not an official host" in notes
        for f in primary:
            assert c.gone(f), c.text("apt.mirror")


# --------------------------------------------------------------------------- completeness


def test_every_registered_fix_has_a_cycle_scenario():
    from tests.test_fix_cycle_jupyter import FIXES as JUPYTER

    registered = {ep.name for ep in metadata.entry_points(group="gpudoctor.fixes")}
    assert registered <= COVERED | set(JUPYTER), registered - COVERED - set(JUPYTER)
