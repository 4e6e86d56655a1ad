"""apt sources: parser/editor, collector, the apt.sources check, and the apt.mirror fix planner.

Golden before/after trees live in tests/fixtures/mirrors/<scenario>/; the
planner's edits applied in memory must turn ``before`` into ``after`` exactly
(every file under etc/apt, changed or not). Case 17 (Debian 12 with only
debian.sources and a Dockerfile that seds the absent sources.list) is
diagnosed as in its EXPECTED.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpudoctor import engine
from gpudoctor.checks import apt_sources
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.facts import Unavailable
from gpudoctor.facts.mirrors import AptFacts
from gpudoctor.fixes import apt_mirror
from gpudoctor.mirrors.catalogue import from_text
from gpudoctor.model import FixRefused, Status
from gpudoctor.sources.aptsources import (
    classify_uri,
    find_rewrites,
    parse_deb822,
    parse_one_line,
    rewrite_deb822,
    rewrite_one_line,
)
from gpudoctor.testing import fake_system, write_tree

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "fixtures" / "mirrors"
CASE17 = HERE / "fixtures" / "cases" / "17-debian12-sources-list-absent"


def collect(root: Path, **extra):
    system = fake_system(root)
    facts, errors = engine.collect_facts(
        ["os", "apt"], system, CollectOptions(offline=True, extra=extra), all_collectors()
    )
    assert errors == []
    return facts


def security_kept(after: dict, before: dict) -> dict:
    """The golden ``after`` tree with the security archive's lines as ``before`` had them: without a
    probe that verified the mirror serves the security suite, apt.mirror leaves that archive alone."""
    out = {}
    for path, text in after.items():
        old = before.get(path)
        if old is None or len(old.splitlines()) != len(text.splitlines()):
            out[path] = text
            continue
        lines = [o if "security" in o and o != n else n for o, n in zip(old.splitlines(True), text.splitlines(True))]
        out[path] = "".join(lines)
    return out


def tree(root: Path) -> dict:
    return {
        "/" + str(p.relative_to(root)): p.read_text() for p in sorted((root / "etc" / "apt").rglob("*")) if p.is_file()
    }


def applied(before: Path, plan) -> dict:
    files = tree(before)
    for edit in plan.edits:
        assert files.get(edit.path) == edit.old_text, f"{edit.path}: plan made from other text"
        files[edit.path] = edit.new_text
    return files


def copy_before(name: str, tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / name / "before", root)
    return root


# --------------------------------------------------------------------------- parser and editor


def test_deb822_parse_keeps_disabled_and_inline_keys():
    text = (GOLDEN / "stanzas" / "before" / "etc/apt/sources.list.d/debian.sources").read_text()
    entries, problems = parse_deb822("/etc/apt/sources.list.d/debian.sources", text)
    assert problems == []
    assert [e.enabled for e in entries] == [True, False, True]
    assert entries[0].types == ("deb", "deb-src")
    assert entries[0].options["architectures"] == "amd64 arm64"
    assert entries[2].options["signed-by"] == "(inline key block)"
    assert [e.line for e in entries] == [2, 10, 17]


def test_deb822_bad_line_is_reported_and_editor_refuses():
    text = "Types: deb\nURIs http://ftp.debian.org/debian\nSuites: bookworm\n"
    entries, problems = parse_deb822("/x.sources", text)
    assert entries == [] and "not a 'Field: value' line" in problems[0]
    with pytest.raises(ValueError):
        rewrite_deb822(text, lambda u, s, c, e: "http://m.example.org/debian")


def test_one_line_editor_changes_only_the_uri():
    text = (
        "deb [ arch=amd64 signed-by=/k.gpg ] http://ftp.debian.org/debian bookworm main # keep\r\n"
        "# deb http://ftp.debian.org/debian bookworm main\r\n"
    )
    entries, _ = parse_one_line("/s", text)
    assert entries[0].options == {"arch": "amd64", "signed-by": "/k.gpg"}
    new = rewrite_one_line(text, lambda u, s, c, e: "https://m.example.org/debian")
    assert new == text.replace(
        "http://ftp.debian.org/debian bookworm main # keep", "https://m.example.org/debian bookworm main # keep", 1
    )


@pytest.mark.parametrize(
    "uri, archive",
    [
        ("http://ftp.debian.org/debian", "debian"),
        ("http://ftp.debian.org/debian-security/", "debian_security"),
        ("http://security.debian.org/", "debian_security"),
        ("http://archive.ubuntu.com/ubuntu/", "ubuntu"),
        ("http://ports.ubuntu.com/ubuntu-ports", "ubuntu_ports"),
        ("https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/", None),
    ],
)
def test_classify_uri(uri, archive):
    assert classify_uri(uri) == archive


def test_third_party_repo_with_debian_path_is_not_a_distro_archive():
    from gpudoctor.sources.aptsources import distro_archive

    assert distro_archive("https://download.docker.com/linux/debian", ("stable",)) is None
    assert distro_archive("http://ftp.debian.org/debian", ("main", "contrib")) == "debian"


def test_find_rewrites_in_a_dockerfile():
    text = (CASE17 / "Dockerfile").read_text()
    found = find_rewrites("Dockerfile", text, lambda p: None, lambda p: [])
    assert [(r.target, r.pattern, r.replacement, r.target_exists) for r in found] == [
        ("/etc/apt/sources.list", "ftp.debian.org", "mirror.example.edu.cn", False),
        (
            "/etc/apt/sources.list",
            "security.debian.org/debian-security",
            "mirror.example.edu.cn/debian-security",
            False,
        ),
    ]
    assert found[0].origin == "Dockerfile:2"


# --------------------------------------------------------------------------- collector


def test_collector_reads_both_formats_in_apt_order_and_marks_ignored(tmp_path):
    root = copy_before("mixed", tmp_path)
    write_tree(root, {"/etc/apt/sources.list.d/old.list.save": "deb http://ftp.debian.org/debian bullseye main\n"})
    apt = collect(root).get("apt")
    assert isinstance(apt, AptFacts)
    assert (apt.distro_id, apt.codename, apt.sources_list_present) == ("debian", "bookworm", True)
    assert [f.path for f in apt.files] == [
        "/etc/apt/sources.list",
        "/etc/apt/sources.list.d/cuda-debian12-x86_64.list",
        "/etc/apt/sources.list.d/debian.sources",
        "/etc/apt/sources.list.d/old.list.save",
    ]
    assert apt.files[-1].ignored and not any(s.file.endswith(".save") for s in apt.sources)
    assert apt.ca_certificates


def test_collector_without_etc_apt_is_unavailable(tmp_path):
    write_tree(tmp_path, {"/etc/os-release": "ID=fedora\nVERSION_ID=40\n"})
    assert isinstance(collect(tmp_path).get("apt"), Unavailable)


# --------------------------------------------------------------------------- apt.sources check


def test_case17_rewrite_of_absent_sources_list_fails(tmp_path):
    root = copy_before("case17", tmp_path)
    facts = collect(root, dockerfile=("Dockerfile", (CASE17 / "Dockerfile").read_text()))
    findings = apt_sources.evaluate(facts)
    top = findings[0]
    assert top.status is Status.FAIL
    assert "/etc/apt/sources.list, which does not exist" in top.summary
    assert "debian.sources" in top.summary and "http://ftp.debian.org" in top.summary
    assert "sed -i 's|ftp.debian.org|mirror.example.edu.cn|g' /etc/apt/sources.list.d/debian.sources" in top.explanation
    assert top.fixes == ("apt.mirror",)


def test_case17_fix_edits_the_deb822_file(tmp_path):
    root = copy_before("case17", tmp_path)
    facts = collect(root, dockerfile=("Dockerfile", (CASE17 / "Dockerfile").read_text()))
    finding = apt_sources.evaluate(facts)[0]
    plan = apt_mirror.plan(
        facts,
        finding,
        {
            "mirror": "http://mirror.example.edu.cn/debian",
            "allow_insecure": "true",
            "security-mirror": "http://mirror.example.edu.cn/debian-security",
        },
    )
    assert [e.path for e in plan.edits] == ["/etc/apt/sources.list.d/debian.sources"]
    assert applied(root, plan) == tree(GOLDEN / "case17" / "after")
    assert any("apt-get update" in n for n in plan.notes)
    assert any("/var/lib/apt/lists" in n for n in plan.notes)


def test_case17_security_archive_stays_unless_verified(tmp_path):
    root = copy_before("case17", tmp_path)
    facts = collect(root, dockerfile=("Dockerfile", (CASE17 / "Dockerfile").read_text()))
    before = (root / "etc/apt/sources.list.d/debian.sources").read_text()
    finding = apt_sources.evaluate(facts)[0]
    plan = apt_mirror.plan(facts, finding, {"mirror": "http://mirror.example.edu.cn/debian", "allow_insecure": "true"})
    after = applied(root, plan)["/etc/apt/sources.list.d/debian.sources"]
    golden = tree(GOLDEN / "case17" / "after")["/etc/apt/sources.list.d/debian.sources"]
    sec_before = [ln for ln in before.splitlines() if ln.startswith("URIs:") and "security" in ln]
    assert sec_before and all(ln in after.splitlines() for ln in sec_before)  # security left as it was
    assert after.replace(sec_before[0], "URIs: http://mirror.example.edu.cn/debian-security") == golden
    assert any("security" in n and "debian-security" in n for n in plan.notes)  # the plan says it stayed


def test_case17_without_allow_insecure_refuses_http(tmp_path):
    facts = collect(copy_before("case17", tmp_path))
    with pytest.raises(FixRefused, match="--allow-insecure"):
        apt_mirror.plan(facts, None, {"mirror": "http://mirror.example.edu.cn/debian"})


def test_rewrite_pattern_matching_nothing_warns(tmp_path):
    root = copy_before("case17", tmp_path)
    docker = (
        "FROM debian:12\nRUN sed -i 's|security.debian.org|m.example.org|g' /etc/apt/sources.list.d/debian.sources\n"
    )
    findings = apt_sources.evaluate(collect(root, dockerfile=("Dockerfile", docker)))
    assert [f.status for f in findings] == [Status.WARN]
    assert "matches nothing" in findings[0].summary


def test_sources_list_switched_but_deb822_untouched_fails(tmp_path):
    root = copy_before("mixed", tmp_path)
    (root / "etc/apt/sources.list").write_text("deb http://mirror.example.org/debian bookworm main\n")
    findings = apt_sources.evaluate(collect(root))
    assert findings[0].status is Status.FAIL
    assert "switched to mirror.example.org" in findings[0].summary and "ftp.debian.org" in findings[0].summary


def test_https_without_ca_certificates_fails_and_fix_refuses(tmp_path):
    root = copy_before("ubuntu2404", tmp_path)
    (root / "etc/ssl/certs/ca-certificates.crt").unlink()
    src = root / "etc/apt/sources.list.d/ubuntu.sources"
    src.write_text(src.read_text().replace("http://archive", "https://archive"))
    facts = collect(root)
    assert any(f.status is Status.FAIL and "ca-certificates" in f.summary for f in apt_sources.evaluate(facts))
    with pytest.raises(FixRefused, match="ca-certificates"):
        apt_mirror.plan(facts, None, {"mirror": "https://mirror.example.org/ubuntu"})


def test_wrong_suite_and_duplicates(tmp_path):
    root = copy_before("mixed", tmp_path)
    (root / "etc/apt/sources.list.d/old.list").write_text("deb http://ftp.debian.org/debian bullseye main\n")
    findings = apt_sources.evaluate(collect(root))
    summaries = {f.status: f.summary for f in findings}
    assert "'bullseye'" in summaries[Status.FAIL] and "bookworm" in summaries[Status.FAIL]
    assert "listed twice" in summaries[Status.WARN]


def test_consistent_sources_are_ok(tmp_path):
    findings = apt_sources.evaluate(collect(copy_before("ubuntu2404", tmp_path)))
    assert [f.status for f in findings] == [Status.OK]


# --------------------------------------------------------------------------- apt.mirror planner, golden files


def test_ubuntu_2404_sources_golden(tmp_path):
    root = copy_before("ubuntu2404", tmp_path)
    facts = collect(root)
    plan = apt_mirror.plan(facts, None, {"mirror": "https://mirror.example.org/ubuntu"})
    assert applied(root, plan) == tree(GOLDEN / "ubuntu2404" / "after")
    assert plan.addresses == ("apt.mirror", "apt.sources")


def test_mixed_formats_golden_security_stays_official_when_mirror_lacks_it(tmp_path):
    root = copy_before("mixed", tmp_path)
    cat = from_text(
        'replace = true\n[[mirror]]\nname = "example"\ndebian = "https://mirror.example.org/debian"\nsource = "test"\n',
        "test.toml",
    )
    from gpudoctor.facts.mirrors import MirrorsFacts

    facts = collect(root)
    facts = facts.with_domains(mirrors=MirrorsFacts(False, False, 5.0, cat.origin, cat.mirrors, (), {}))
    plan = apt_mirror.plan(facts, None, {"mirror": "example"})
    assert applied(root, plan) == tree(GOLDEN / "mixed" / "after")
    assert any("official host" in n and "debian-security" in n for n in plan.notes)


def test_several_stanzas_enabled_no_golden(tmp_path):
    root = copy_before("stanzas", tmp_path)
    before = tree(root)
    plan = apt_mirror.plan(collect(root), None, {"mirror": "http://mirror.example.org/", "allow_insecure": "yes"})
    assert applied(root, plan) == security_kept(tree(GOLDEN / "stanzas" / "after"), before) != before


def test_plan_is_a_no_op_when_already_on_that_mirror(tmp_path):
    work = tmp_path / "root"
    shutil.copytree(GOLDEN / "ubuntu2404" / "before", work)
    shutil.copytree(GOLDEN / "ubuntu2404" / "after" / "etc", work / "etc", dirs_exist_ok=True)
    plan = apt_mirror.plan(collect(work), None, {"mirror": "https://mirror.example.org/ubuntu"})
    assert not plan.changes_anything


def test_unknown_mirror_name_is_refused_with_the_known_names(tmp_path):
    with pytest.raises(FixRefused, match="tuna"):
        apt_mirror.plan(collect(copy_before("case17", tmp_path)), None, {"mirror": "nosuchmirror"})


def test_fastest_without_ranking_is_refused(tmp_path):
    with pytest.raises(FixRefused, match="no apt mirror ranking"):
        apt_mirror.plan(collect(copy_before("case17", tmp_path)), None, {"mirror": "fastest"})


def test_any_host_of_the_projects_own_domains_counts_as_official():
    from gpudoctor.checks.apt_sources import is_official, official_domains

    domains = official_domains()
    assert {"debian.org", "ubuntu.com"} <= domains
    # the Debian image's default CDN host, the security archive, and Ubuntu's regional archives
    for host in ("cdn.debian.org", "security.debian.org", "de.archive.ubuntu.com", "ports.ubuntu.com"):
        assert is_official(host, domains), host
    for host in ("mirror.example.org", "debian.org.example.com", "notdebian.org"):
        assert not is_official(host, domains), host


# --------------------------------------------------------------------------- Debian security layout, archived releases


def _apt_root(tmp_path: Path, codename: str, files: dict[str, str], distro: str = "debian") -> Path:
    tree = {"/etc/os-release": f"ID={distro}\nVERSION_CODENAME={codename}\n", "/usr/.keep": ""}
    return write_tree(tmp_path, {**tree, **files})


def _worst(root: Path):
    return max(apt_sources.evaluate(collect(root)), key=lambda f: f.status.severity)


@pytest.mark.parametrize(
    "codename,line,summary,remedy",
    [
        # lxc/lxc-templates #39, canonical/cloud-init #1076: Debian 11 renamed the security suite
        (
            "bullseye",
            "deb http://security.debian.org/debian-security bullseye/updates main",
            "the Debian security suite in a form it does not serve: bullseye/updates",
            "sed -i '2s|bullseye/updates|bullseye-security|' /etc/apt/sources.list",
        ),
        (
            "bookworm",
            "deb http://mirror.example.org/debian-security bookworm/updates main",
            "bookworm/updates on http://mirror.example.org/debian-security",
            "sed -i '2s|bookworm/updates|bookworm-security|' /etc/apt/sources.list",
        ),
        # a mirror switch that wrote one URI for every line: the security suite under /debian
        (
            "bookworm",
            "deb http://mirror.example.org/debian bookworm-security main",
            "bookworm-security on http://mirror.example.org/debian",
            "line 2: deb http://mirror.example.org/debian-security bookworm-security main",
        ),
        # getumbrel/umbrel #1581: the -updates suite asked of the security archive
        (
            "bullseye",
            "deb http://ftp.debian.org/debian-security bullseye-updates main",
            "bullseye-updates on http://ftp.debian.org/debian-security",
            "line 2: deb http://ftp.debian.org/debian bullseye-updates main",
        ),
    ],
)
def test_debian_security_suite_in_the_wrong_form_fails(tmp_path, codename, line, summary, remedy):
    main = f"deb http://ftp.debian.org/debian {codename} main\n"
    worst = _worst(_apt_root(tmp_path, codename, {"/etc/apt/sources.list": main + line + "\n"}))
    assert worst.status == Status.FAIL and summary in worst.summary
    assert remedy in worst.explanation


def test_debian_security_layout_in_deb822_and_the_healthy_twins(tmp_path):
    bad = (
        "Types: deb\nURIs: http://mirror.example.org/debian\nSuites: bookworm bookworm-updates bookworm-security\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    worst = _worst(_apt_root(tmp_path / "bad", "bookworm", {"/etc/apt/sources.list.d/debian.sources": bad}))
    assert worst.status == Status.FAIL and "bookworm-security on http://mirror.example.org/debian" in worst.summary
    assert "URIs: http://mirror.example.org/debian-security" in worst.explanation
    # the official layout of Debian 12/13 containers, and buster's old form while it was current
    for codename in ("bookworm", "trixie"):
        good = (
            f"Types: deb\nURIs: http://ftp.debian.org/debian\nSuites: {codename} {codename}-updates\n"
            f"Components: main\n\nTypes: deb\nURIs: http://ftp.debian.org/debian-security\n"
            f"Suites: {codename}-security\nComponents: main\n"
        )
        root = _apt_root(tmp_path / codename, codename, {"/etc/apt/sources.list.d/debian.sources": good})
        assert _worst(root).status == Status.OK
    ubuntu = (
        "deb http://mirror.example.org/ubuntu/ noble main\ndeb http://mirror.example.org/ubuntu/ noble-security main\n"
    )
    root = _apt_root(tmp_path / "ubuntu", "noble", {"/etc/apt/sources.list": ubuntu}, "ubuntu")
    assert _worst(root).status == Status.OK  # Ubuntu's security pocket lives inside /ubuntu


def test_archived_release_on_the_regular_archive_fails_with_the_archive_host(tmp_path):
    # oakestra/oakestra #437, KhiopsML/khiops #756: buster removed from ftp.debian.org in July 2025
    sources = (
        "deb http://ftp.debian.org/debian buster main\n"
        "deb http://security.debian.org/debian-security buster/updates main\n"
    )
    worst = _worst(_apt_root(tmp_path / "buster", "buster", {"/etc/apt/sources.list": sources}))
    assert worst.status == Status.FAIL
    assert worst.summary == (
        "apt fetches buster from ftp.debian.org, which no longer carries it: the release moved to archive.debian.org"
    )
    assert "deb http://archive.debian.org/debian-security buster/updates main" in worst.explanation
    # an Ubuntu interim release past its end of life on a mirror -> old-releases
    root = _apt_root(
        tmp_path / "lunar",
        "lunar",
        {"/etc/apt/sources.list": "deb http://mirror.example.org/ubuntu/ lunar main\n"},
        "ubuntu",
    )
    worst = _worst(root)
    assert worst.status == Status.FAIL and "moved to old-releases.ubuntu.com" in worst.summary
    # the healthy twin: already on the archive host
    fixed = (
        "deb http://archive.debian.org/debian buster main\n"
        "deb http://archive.debian.org/debian-security buster/updates main\n"
    )
    assert _worst(_apt_root(tmp_path / "ok", "buster", {"/etc/apt/sources.list": fixed})).status == Status.OK


def _with_machine(root: Path, machine: str):
    """apt.sources on the facts of ``root`` as if collected live on a ``machine`` (``uname -m``) host."""
    import dataclasses

    from gpudoctor.testing import make_facts

    return apt_sources.evaluate(make_facts(apt=dataclasses.replace(collect(root).get("apt"), machine=machine)))


def _worst_status(findings):
    return max(findings, key=lambda f: f.status.severity).status


def test_ubuntu_main_tree_on_arm64_fails_with_the_ports_tree(tmp_path):
    # tuna/issues #595 and #540 (Jetson Nano): /ubuntu has no binary-arm64 -> 404 for every index
    lines = (
        "deb http://mirror.example.org/ubuntu/ jammy main restricted\n"
        "deb http://archive.ubuntu.com/ubuntu/ jammy-updates main\n"
    )
    root = _apt_root(tmp_path, "jammy", {"/etc/apt/sources.list": lines}, "ubuntu")
    worst = max(_with_machine(root, "aarch64"), key=lambda f: f.status.severity)
    assert worst.status == Status.FAIL
    assert worst.summary == (
        "apt source http://mirror.example.org/ubuntu/ has no arm64 packages: this arm64 machine needs the "
        "/ubuntu-ports tree"
    )
    assert "sed -i 's|http://mirror.example.org/ubuntu/|http://mirror.example.org/ubuntu-ports/|g'" in worst.explanation
    assert "http://ports.ubuntu.com/ubuntu-ports/" in worst.explanation
    # the twins: the same sources on amd64; ports on arm64; a foreign-arch entry limited to amd64
    assert _worst_status(_with_machine(root, "x86_64")) == Status.OK
    ports = "deb http://ports.ubuntu.com/ubuntu-ports/ jammy main\ndeb [arch=amd64] http://archive.ubuntu.com/ubuntu/ jammy main\n"
    root = _apt_root(tmp_path / "ports", "jammy", {"/etc/apt/sources.list": ports}, "ubuntu")
    assert _worst_status(_with_machine(root, "aarch64")) == Status.OK
    # and the reverse: the ports tree on an amd64 machine
    worst = max(_with_machine(root, "x86_64"), key=lambda f: f.status.severity)
    assert worst.status == Status.FAIL and "needs the /ubuntu tree" in worst.summary


def test_signed_by_keyring_missing_fails_only_where_the_keyring_directory_exists(tmp_path):
    stanza = (
        "Types: deb\nURIs: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/\nSuites: /\n"
        "Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg\n"
    )
    files = {
        "/etc/apt/sources.list.d/cuda.sources": stanza,
        "/usr/share/keyrings/debian-archive-keyring.gpg": "k",
        "/etc/ssl/certs/ca-certificates.crt": "c",
    }
    worst = _worst(_apt_root(tmp_path / "bad", "bookworm", files))
    assert worst.status == Status.FAIL
    assert worst.summary == (
        "apt source /etc/apt/sources.list.d/cuda.sources:1 is signed by /usr/share/keyrings/cuda-archive-keyring.gpg, "
        "which does not exist: apt refuses the repository"
    )
    assert "`cuda-keyring`" in worst.explanation
    # the twins: the keyring present; a partial root without /usr/share/keyrings says nothing
    good = {**files, "/usr/share/keyrings/cuda-archive-keyring.gpg": "k"}
    assert _worst(_apt_root(tmp_path / "good", "bookworm", good)).status == Status.OK
    partial = {k: v for k, v in files.items() if "keyrings" not in k}
    assert _worst(_apt_root(tmp_path / "partial", "bookworm", partial)).status == Status.OK


def test_image_root_architecture_comes_from_its_dpkg(tmp_path):
    # an L4T (Jetson) image built from an amd64 mirror guide, inspected with --root on an x86 host
    status = (
        "Package: base-files\nStatus: install ok installed\nArchitecture: arm64\n\n"
        "Package: dpkg\nStatus: install ok installed\nArchitecture: arm64\nVersion: 1.21.1ubuntu2\n\n"
        "Package: tzdata\nArchitecture: all\n"
    )
    files = {
        "/etc/apt/sources.list": "deb http://mirror.example.org/ubuntu/ jammy main\n",
        "/var/lib/dpkg/status": status,
    }
    root = _apt_root(tmp_path, "jammy", files, "ubuntu")
    facts = collect(root)
    assert facts.get("apt").machine == "arm64"
    worst = _worst(root)
    assert worst.status == Status.FAIL and "this arm64 machine needs the /ubuntu-ports tree" in worst.summary
    # without dpkg's status nothing is known about the architecture: no verdict on the tree
    del files["/var/lib/dpkg/status"]
    assert _worst(_apt_root(tmp_path / "bare", "jammy", files, "ubuntu")).status == Status.OK
