"""pip configuration: the collector on real files under fake roots, and the pip.config check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import CASES
from gpudoctor.checks import pip_config
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.pip import collect
from gpudoctor.engine import Report
from gpudoctor.facts import Facts
from gpudoctor.facts.pip import PipFacts
from gpudoctor.model import Status
from gpudoctor.render import render
from gpudoctor.testing import fake_system, make_facts, write_tree

HOME = "/home/user"
CASE20 = CASES / "20-pip-conf-no-section-header"


def collect_pip(root: Path, env=None, pythons=()) -> PipFacts:
    system = fake_system(root, env=env or {}, home=HOME)
    return collect(CollectContext(system, CollectOptions(pythons=tuple(pythons))))


def check(pip: PipFacts):
    return pip_config.evaluate(make_facts(pip=pip))


def test_files_in_pips_order_with_variants(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "/etc/xdg/pip/pip.conf": "[global]\ntimeout = 10\n",
            "/opt/xdg2/pip/pip.conf": "[global]\ntimeout = 11\n",
            "/etc/pip.conf": "[global]\nindex-url = https://global.example.org/simple\n",
            f"{HOME}/.pip/pip.conf": "[global]\nindex-url = https://legacy.example.org/simple\nretries = 3\n",
            f"{HOME}/.config/pip/pip.conf": "[global]\nindex-url = https://user.example.org/simple\n",
            "/venvs/app/pip.conf": "[install]\nno-cache-dir = true\n",
        },
    )
    pip = collect_pip(root, env={"XDG_CONFIG_DIRS": "/etc/xdg:/opt/xdg2", "VIRTUAL_ENV": "/venvs/app"})
    assert [(f.variant, f.path) for f in pip.files] == [
        ("global", "/etc/xdg/pip/pip.conf"),
        ("global", "/opt/xdg2/pip/pip.conf"),
        ("global", "/etc/pip.conf"),
        ("user", f"{HOME}/.pip/pip.conf"),
        ("user", f"{HOME}/.config/pip/pip.conf"),
        ("site", "/venvs/app/pip.conf"),
    ]
    assert all(f.loaded for f in pip.files)
    eff = pip.effective
    assert (eff["index-url"].value, eff["index-url"].source, eff["index-url"].line) == (
        "https://user.example.org/simple",
        f"{HOME}/.config/pip/pip.conf",
        2,
    )
    assert (eff["timeout"].value, eff["timeout"].source) == ("11", "/opt/xdg2/pip/pip.conf")
    assert eff["retries"].source == f"{HOME}/.pip/pip.conf"
    assert (eff["no-cache-dir"].section, eff["no-cache-dir"].variant) == ("install", "site")
    assert pip.site_prefix_from == "VIRTUAL_ENV"


def test_install_section_beats_global_and_env_beats_files(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "/etc/pip.conf": "[install]\nindex-url = https://install.example.org/simple\n",
            f"{HOME}/.config/pip/pip.conf": "[global]\nindex_url = https://user.example.org/simple\ntrusted-host =\n",
        },
    )
    pip = collect_pip(root)
    assert pip.effective["index-url"].value == "https://install.example.org/simple"
    assert "trusted-host" not in pip.effective  # empty values are ignored, as pip does
    pip = collect_pip(root, env={"PIP_INDEX_URL": "https://env.example.org/simple", "PIP_TRUSTED_HOST": ""})
    s = pip.effective["index-url"]
    assert (s.value, s.source, s.variant) == ("https://env.example.org/simple", "PIP_INDEX_URL", "env_var")
    assert pip.env == {"PIP_INDEX_URL": "https://env.example.org/simple", "PIP_TRUSTED_HOST": ""}


def test_pip_config_file_skips_user_files_and_devnull_skips_all(tmp_path):
    root = write_tree(
        tmp_path,
        {
            f"{HOME}/.config/pip/pip.conf": "[global]\nindex-url = https://user.example.org/simple\n",
            "/srv/pip.conf": "[global]\nindex-url = https://env-file.example.org/simple\n",
            "/etc/pip.conf": "[global]\ntimeout = 30\n",
        },
    )
    pip = collect_pip(root, env={"PIP_CONFIG_FILE": "/srv/pip.conf"})
    user = pip.file(f"{HOME}/.config/pip/pip.conf")
    assert user.exists and not user.loaded and "PIP_CONFIG_FILE=/srv/pip.conf exists" in user.note
    assert pip.files[-1].variant == "env" and pip.files[-1].loaded
    assert pip.effective["index-url"].value == "https://env-file.example.org/simple"
    pip = collect_pip(root, env={"PIP_CONFIG_FILE": "/dev/null"})
    assert not any(f.loaded for f in pip.files) and pip.effective == {}
    # a PIP_CONFIG_FILE that does not exist: user files still count, and the check warns
    pip = collect_pip(root, env={"PIP_CONFIG_FILE": "/srv/missing.conf"})
    assert pip.effective["index-url"].value == "https://user.example.org/simple"
    [warn] = [f for f in check(pip) if f.status == Status.WARN]
    assert "PIP_CONFIG_FILE names /srv/missing.conf, which does not exist" in warn.summary


def test_site_prefix_from_python_option(tmp_path):
    root = write_tree(tmp_path, {"/opt/venv/pip.conf": "[global]\ntimeout = 5\n"})
    pip = collect_pip(root, pythons=["/opt/venv/bin/python"])
    assert (pip.site_prefix, pip.site_prefix_from) == ("/opt/venv", "--python")
    assert pip.effective["timeout"].source == "/opt/venv/pip.conf"


def test_case_20_diagnosed(tmp_path):
    root = write_tree(tmp_path, {f"{HOME}/.config/pip/pip.conf": (CASE20 / "pip.conf").read_text()})
    pip = collect_pip(root)
    f = pip.file(f"{HOME}/.config/pip/pip.conf")
    assert f.loaded and f.error.line == 1 and f.error.kind == "no-section-header" and f.error.text == "tall]"
    assert f.values == {} and pip.effective == {}
    [finding] = check(pip)
    assert finding.status == Status.FAIL
    assert finding.summary == "pip configuration cannot be parsed (~/.config/pip/pip.conf, line 1: no section header)"
    assert "every pip command aborts" in finding.explanation and "pip itself is installed fine" in finding.explanation
    assert "`tall]`" in finding.explanation
    assert finding.fixes == ("pip.index-url",)
    assert finding.evidence["file"] == f"{HOME}/.config/pip/pip.conf" and finding.evidence["line"] == 1


def test_unrepairable_parse_error_names_the_line_and_offers_no_fix(tmp_path):
    root = write_tree(tmp_path, {"/etc/pip.conf": "[global]\nindex-url = https://a.example.org/simple\nbroken\n"})
    [finding] = check(collect_pip(root))
    assert finding.status == Status.FAIL and finding.fixes == ()
    assert "(/etc/pip.conf, line 3: not a `key = value` line)" in finding.summary
    assert "/etc/pip.conf line 3 ('broken') is neither a [section] header" in finding.explanation


def test_symlinked_and_undecodable_files(tmp_path):
    root = write_tree(tmp_path, {"/dotfiles/pip.conf": "[global]\ntimeout = 7\n"})
    (root / "home/user/.config/pip").mkdir(parents=True)
    (root / "home/user/.config/pip/pip.conf").symlink_to("/dotfiles/pip.conf")
    (root / "etc").mkdir()
    (root / "etc/pip.conf").write_bytes(b"[global]\ntimeout = \xff\n")
    pip = collect_pip(root)
    user = pip.file(f"{HOME}/.config/pip/pip.conf")
    assert user.target == "/dotfiles/pip.conf" and user.values == {"global.timeout": "7"}
    glob = pip.file("/etc/pip.conf")
    assert glob.error.kind == "encoding"
    [finding] = check(pip)
    assert finding.status == Status.FAIL and "not valid UTF-8" in finding.summary and finding.fixes == ()


@pytest.mark.parametrize(
    "conf,status,summary",
    [
        (
            "[global]\nindex-url = http://mirror.example.org/simple\n",
            Status.FAIL,
            "pip ignores the index http://mirror.example.org/simple: plain http without a matching trusted-host",
        ),
        (
            "[global]\nindex-url = http://mirror.example.org:8080/simple\ntrusted-host = mirror.example.org:8080\n",
            Status.WARN,
            "pip uses the plain-http index http://mirror.example.org:8080/simple (trusted-host)",
        ),
        (
            "[global]\nindex-url = http://mirror.example.org:8080/simple\ntrusted-host = mirror.example.org:9090\n",
            Status.FAIL,
            "pip ignores the index",
        ),
        (
            "[global]\nextra-index-url = https://a.example.org/simple\n  http://b.example.org/simple\n",
            Status.FAIL,
            "pip ignores the index http://b.example.org/simple",
        ),
        ("[global]\nindex-url = http://127.0.0.1:3141/root/pypi/+simple/\n", Status.OK, "pip reads its configuration"),
        (
            "[global]\nindex-url = https://mirror.example.org/simple\n",
            Status.OK,
            "pip reads its configuration; index-url https://mirror.example.org/simple from /etc/pip.conf line 2 ([global])",
        ),
        ("", Status.OK, "pip reads its configuration; it uses the default index https://pypi.org/simple"),
    ],
)
def test_index_security(tmp_path, conf, status, summary):
    root = write_tree(tmp_path, {"/etc/pip.conf": conf})
    findings = check(collect_pip(root))
    worst = max(findings, key=lambda f: f.status.severity)
    assert worst.status == status and summary in worst.summary
    if status == Status.FAIL:
        assert worst.fixes == ("pip.index-url",) and "--allow-insecure" in worst.explanation


def test_credentials_warned_and_redacted_everywhere(tmp_path):
    root = write_tree(
        tmp_path,
        {f"{HOME}/.config/pip/pip.conf": "[global]\nindex-url = https://alice:hunter2@mirror.example.org/simple\n"},
    )
    pip = collect_pip(root)
    findings = check(pip)
    [warn] = [f for f in findings if f.status == Status.WARN]
    assert "credentials are stored in clear text" in warn.summary and "hunter2" not in warn.summary
    facts = make_facts(pip=pip)
    report = Report(tuple(findings), facts)
    for fmt in ("json", "markdown"):
        assert "hunter2" not in render(report, fmt, True)
    assert "hunter2" not in json.dumps(report.to_json(include_facts=True))
    assert "hunter2" not in json.dumps(facts.to_json())
    # the snapshot round-trips (redacted) and replays to the same verdicts
    replayed = Facts.from_json(facts.to_json())
    assert [f.status for f in pip_config.evaluate(replayed)] == [f.status for f in findings]


def test_environment_override_is_info(tmp_path):
    root = write_tree(tmp_path, {f"{HOME}/.config/pip/pip.conf": "[global]\nindex-url = https://a.example.org/s\n"})
    findings = check(collect_pip(root, env={"PIP_INDEX_URL": "https://b.example.org/simple"}))
    [info] = [f for f in findings if f.status == Status.INFO]
    assert info.summary == "PIP_INDEX_URL is set and overrides index-url from ~/.config/pip/pip.conf"
    assert "unset PIP_INDEX_URL" in info.explanation
    ok = [f for f in findings if f.status == Status.OK][0]
    assert "the environment variable PIP_INDEX_URL" in ok.summary
    findings = check(
        collect_pip(write_tree(tmp_path / "r2", {}), env={"PIP_EXTRA_INDEX_URL": "https://c.example.org/s"})
    )
    assert any(
        f.status == Status.INFO
        and f.summary == "extra-index-url is set by the environment variable PIP_EXTRA_INDEX_URL"
        for f in findings
    )


@pytest.mark.parametrize(
    "value,suggested",
    [
        # pypa/pip #3995, pypa/packaging-problems #135 (index-url = https://pypi.python.org/pypi): a base URL
        # without the simple-index path -> 404 for every project
        ("https://pypi.tuna.tsinghua.edu.cn", "https://pypi.tuna.tsinghua.edu.cn/simple"),
        ("https://mirrors.aliyun.com/pypi/", "https://mirrors.aliyun.com/pypi/simple"),
        ("https://mirrors.bfsu.edu.cn/pypi/web", "https://mirrors.bfsu.edu.cn/pypi/web/simple"),
        ("https://pypi.org", "https://pypi.org/simple"),
        ("https://pypi.python.org/pypi", "https://pypi.org/simple"),
        # TOML habits in an INI file; a host without a scheme
        ('"https://pypi.tuna.tsinghua.edu.cn/simple"', "https://pypi.tuna.tsinghua.edu.cn/simple"),
        ("'https://mirror.example.org/simple/'", "https://mirror.example.org/simple/"),
        ("mirrors.aliyun.com/pypi/simple", "https://mirrors.aliyun.com/pypi/simple"),
    ],
)
def test_index_url_pip_cannot_use_fails_with_the_url_meant(tmp_path, value, suggested):
    root = write_tree(tmp_path, {"/etc/pip.conf": f"[global]\nindex-url = {value}\n"})
    pip = collect_pip(root)
    [fail] = [f for f in check(pip) if f.status == Status.FAIL]
    assert fail.summary.startswith(f"pip cannot use the index-url {value}: ")
    assert fail.evidence["suggested_index_url"] == suggested and fail.fixes == ("pip.index-url",)
    from gpudoctor.fixes.pip_index_url import plan

    edit = plan(make_facts(pip=pip), fail, {}).edits[0]
    assert edit.new_text == f"[global]\nindex-url = {suggested}\n"


@pytest.mark.parametrize(
    "value",
    [
        "https://pypi.tuna.tsinghua.edu.cn/simple/",
        "https://mirrors.ustc.edu.cn/pypi/web/simple",  # an older form of a catalogue mirror: not guessed at
        "https://download.pytorch.org/whl/cu121",  # a PEP 503 index without "simple" in its path
        "https://devpi.example.org/root/pypi/+simple/",
        "https://pypi.org/simple",
        "file:///srv/wheelhouse",
        "/srv/wheelhouse/simple",
    ],
)
def test_usable_index_urls_are_not_flagged(tmp_path, value):
    root = write_tree(tmp_path, {"/etc/pip.conf": f"[global]\nindex-url = {value}\n"})
    assert max(f.status.severity for f in check(collect_pip(root))) == Status.OK.severity


def test_extra_index_url_without_simple_warns_and_env_var_names_the_export(tmp_path):
    root = write_tree(tmp_path, {"/etc/pip.conf": "[global]\nextra-index-url = https://mirrors.aliyun.com/pypi\n"})
    [warn] = [f for f in check(collect_pip(root)) if f.status == Status.WARN]
    assert "pip cannot use the extra-index-url https://mirrors.aliyun.com/pypi" in warn.summary and warn.fixes == ()
    findings = check(collect_pip(write_tree(tmp_path / "e", {}), env={"PIP_INDEX_URL": "https://pypi.org"}))
    [fail] = [f for f in findings if f.status == Status.FAIL]
    assert "export PIP_INDEX_URL=https://pypi.org/simple" in fail.explanation and fail.fixes == ()


def test_trusted_host_written_as_url_trusts_nothing(tmp_path):
    # pip's add_trusted_host parses "http://host" as the host "http": the plain-http index is still ignored
    conf = "[global]\nindex-url = http://mirror.example.org/simple\ntrusted-host = http://mirror.example.org\n"
    findings = check(collect_pip(write_tree(tmp_path, {"/etc/pip.conf": conf})))
    [fail] = [f for f in findings if f.status == Status.FAIL]
    assert "trusted-host http://mirror.example.org is a URL, pip wants the host name mirror.example.org" in fail.summary
    assert "`trusted-host = mirror.example.org`" in fail.explanation
    # the healthy twin: the host name alone -> the ordinary plain-http warning
    conf = "[global]\nindex-url = http://mirror.example.org/simple\ntrusted-host = mirror.example.org\n"
    findings = check(collect_pip(write_tree(tmp_path / "ok", {"/etc/pip.conf": conf})))
    assert max(f.status for f in findings) == Status.WARN
    # an https index with a URL in trusted-host is harmless
    conf = "[global]\nindex-url = https://mirror.example.org/simple\ntrusted-host = https://mirror.example.org\n"
    findings = check(collect_pip(write_tree(tmp_path / "https", {"/etc/pip.conf": conf})))
    assert max(f.status for f in findings) == Status.OK


@pytest.mark.parametrize(
    "conf,summary,command",
    [
        # pip matches section names exactly and skips unknown keys silently (pypa/pip #9067)
        (
            "[pip]\nindex-url = https://mirror.example.org/simple\n",
            "pip never reads `index-url` in [pip] of /etc/pip.conf: no such section for pip (use [global])",
            "pip config --global set global.index-url 'https://mirror.example.org/simple'",
        ),
        (
            "[Global]\nindex-url = https://mirror.example.org/simple\n",
            "pip never reads `index-url` in [Global] of /etc/pip.conf",
            "set global.index-url",
        ),
        (
            "[global]\nindex = https://mirror.example.org/simple\n",
            "pip never reads `index` in [global] of /etc/pip.conf: the option is `index-url`",
            "pip config --global set global.index-url 'https://mirror.example.org/simple'",
        ),
        (
            "[install]\ntrusted-hosts = mirror.example.org\n",
            "pip never reads `trusted-hosts` in [install] of /etc/pip.conf: the option is `trusted-host`",
            "set global.trusted-host 'mirror.example.org'",
        ),
    ],
)
def test_settings_pip_never_reads_warn(tmp_path, conf, summary, command):
    findings = check(collect_pip(write_tree(tmp_path, {"/etc/pip.conf": conf})))
    [warn] = [f for f in findings if f.status >= Status.WARN]
    # issue 29: an ignored index the user meant is a failure (pip uses another index); other settings warn
    assert warn.status is (Status.FAIL if "index" in conf else Status.WARN)
    assert warn.fixes == ("pip.index-url",)
    assert warn.summary == summary or warn.summary.startswith(summary)
    assert command in warn.explanation
    assert not any(f.status == Status.OK for f in findings)


def test_settings_in_command_sections_and_other_keys_are_fine(tmp_path):
    conf = (
        "[global]\nindex_url = https://mirror.example.org/simple\ntimeout = 60\nno-cache-dir = true\n"
        "[install]\ntrusted-host = mirror.example.org\n[download]\nindex-url = https://pypi.org/simple\n"
        "[list]\nformat = columns\n"
    )
    findings = check(collect_pip(write_tree(tmp_path, {"/etc/pip.conf": conf})))
    assert [f.status for f in findings] == [Status.OK]


def test_pip_ini_on_linux_is_never_read(tmp_path):
    root = write_tree(tmp_path, {f"{HOME}/.config/pip/pip.ini": "[global]\nindex-url = https://m.example.org/simple\n"})
    pip = collect_pip(root)
    assert pip.windows_named == (f"{HOME}/.config/pip/pip.ini",)
    [warn] = [f for f in check(pip) if f.status == Status.WARN]
    assert warn.summary == (
        "pip never reads ~/.config/pip/pip.ini: on Linux its file is pip.conf (pip.ini is the Windows name)"
    )
    assert f"`mv {HOME}/.config/pip/pip.ini {HOME}/.config/pip/pip.conf`" in warn.explanation
    # the twin: the same settings in pip.conf
    root = write_tree(tmp_path / "ok", {"/etc/pip.conf": "[global]\nindex-url = https://m.example.org/simple\n"})
    pip = collect_pip(root)
    assert pip.windows_named == () and [f.status for f in check(pip)] == [Status.OK]


def test_private_extra_index_next_to_pypi_is_a_dependency_confusion_note(tmp_path):
    conf = "[global]\nextra-index-url = https://pypi.corp.example.org/simple\n"
    findings = check(collect_pip(write_tree(tmp_path, {"/etc/pip.conf": conf})))
    [info] = [f for f in findings if f.status == Status.INFO]
    assert info.summary == (
        "pip merges the public PyPI with the private index https://pypi.corp.example.org/simple: a public package "
        "with an internal name would win"
    )
    assert "--require-hashes" in info.explanation
    # the twins: PyTorch's public wheel index as the extra one; the private index as the only index
    for conf in (
        "[global]\nextra-index-url = https://download.pytorch.org/whl/cu121\n",
        "[global]\nindex-url = https://pypi.corp.example.org/simple\n",
    ):
        findings = check(collect_pip(write_tree(tmp_path / str(len(conf)), {"/etc/pip.conf": conf})))
        assert [f.status for f in findings] == [Status.OK]


def test_allow_insecure_replaces_a_trusted_host_written_as_url(tmp_path):
    from gpudoctor.fixes.pip_index_url import plan

    conf = "[global]\nindex-url = http://mirror.example.org/simple\ntrusted-host = http://mirror.example.org other.example.org\n"
    pip = collect_pip(write_tree(tmp_path, {"/etc/pip.conf": conf}))
    [fail] = [f for f in check(pip) if f.status == Status.FAIL]
    edit = plan(make_facts(pip=pip), fail, {"allow-insecure": "1"}).edits[0]
    assert "trusted-host = other.example.org mirror.example.org\n" in edit.new_text
