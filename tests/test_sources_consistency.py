"""Issue 13: package sources across tools, Dockerfiles read like a shell, --mirror URL as given.

Cases 18 and 30 from their own files (fake roots through the CLI), with their
neighbours: the fixed Dockerfile, other quoting and control flow, user-scope
pip.conf, uv already agreeing, uv ahead of pip, conda's named channels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor import engine
from gpudoctor.checks import index_consistency
from gpudoctor.cli import cli
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.fixes import conda_channels, pip_index_url, uv_index_url
from gpudoctor.mirrors.catalogue import CatalogueError, from_text
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import FixRefused, Status
from gpudoctor.sources.buildwrites import apply_sed, parse_sed_script, sed_invocation
from gpudoctor.sources.dockerfile import commands
from gpudoctor.testing import fake_system, write_tree

CASES = Path(__file__).resolve().parent / "fixtures" / "cases"
CASE18 = CASES / "18-ubuntu2404-sed-noop"
CASE30 = CASES / "30-uv-ignores-pip-conf"
MIRROR = "https://pypi.mirror.example.org/simple"


def run(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def ubuntu_root(tmp_path: Path) -> Path:
    root = tmp_path / "noble"
    write_tree(
        root,
        {
            "/etc/os-release": 'ID=ubuntu\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n',
            "/etc/apt/sources.list": (CASE18 / "sources.list").read_text(),
            "/etc/apt/sources.list.d/ubuntu.sources": (CASE18 / "ubuntu.sources").read_text(),
        },
    )
    return root


def check_json(root: Path, *extra: str) -> list:
    code, out = run("check", "--root", str(root), "--offline", "--format", "json", *extra)
    assert code in (0, 1), out
    return json.loads(out)["findings"]


# --------------------------------------------------------------------------- case 18


def test_case18_sed_noop_is_mirror_not_in_effect(tmp_path):
    root = ubuntu_root(tmp_path)
    code, out = run(
        "check", "apt.sources", "--root", str(root), "--offline", "--dockerfile", str(CASE18 / "Dockerfile")
    )
    assert code == 0, out  # warn: nothing failed, the build goes on with the public archive
    assert "[warn] apt.sources" in out
    assert "http://apt-cache.internal.example:3142/ubuntu is not in effect" in out
    assert "/etc/apt/sources.list, which has no active entries" in out
    assert "ubuntu.sources still points to archive.ubuntu.com, security.ubuntu.com" in out
    assert (
        'for f in /etc/apt/sources.list /etc/apt/sources.list.d/ubuntu.sources; do [ -f "$f" ] && sed -i '
        '"s|http://archive.ubuntu.com/ubuntu|http://apt-cache.internal.example:3142/ubuntu|g; '
        's|http://security.ubuntu.com/ubuntu|http://apt-cache.internal.example:3142/ubuntu|g" "$f"; done'
    ) in out
    assert "fix: gpudoctor fix apt.mirror" in out
    # the offered fix, with the URL as the Dockerfile gives it, rewrites the deb822 file to exactly that URL
    code, out = run(
        "fix",
        "apt.mirror",
        "--root",
        str(root),
        "--offline",
        "--mirror",
        "http://apt-cache.internal.example:3142/ubuntu",
        "--allow-insecure",
        "--yes",
    )
    assert code == 0, out
    text = (root / "etc/apt/sources.list.d/ubuntu.sources").read_text()
    assert text.count("URIs: http://apt-cache.internal.example:3142/ubuntu/\n") == 2
    assert "archive.ubuntu.com" not in text and "security.ubuntu.com" not in text


def test_case18_fixed_dockerfile_is_ok(tmp_path):
    """The EXPECTED fix (a for loop over both files) is judged by replaying it: apt then reads the mirror."""
    root = ubuntu_root(tmp_path)
    fixed = tmp_path / "Dockerfile"
    fixed.write_text(
        "FROM ubuntu:24.04\nARG APT_MIRROR=http://apt-cache.internal.example:3142/ubuntu\n"
        "RUN for f in /etc/apt/sources.list /etc/apt/sources.list.d/ubuntu.sources; do \\\n"
        '      [ -f "$f" ] && sed -i "s|http://archive.ubuntu.com/ubuntu|${APT_MIRROR}|g; '
        's|http://security.ubuntu.com/ubuntu|${APT_MIRROR}|g" "$f"; \\\n    done\n'
        "RUN apt-get update\n"
    )
    (finding,) = [f for f in check_json(root, "--dockerfile", str(fixed)) if f["check"] == "apt.sources"]
    assert finding["status"] == "ok", finding


def test_rewrite_covering_only_the_security_archive_still_warns(tmp_path):
    root = ubuntu_root(tmp_path)
    df = tmp_path / "Dockerfile"
    df.write_text(
        "FROM ubuntu:24.04\nRUN sed -i -e 's|security.ubuntu.com|mirror.example.org|' "
        "/etc/apt/sources.list.d/ubuntu.sources && apt-get update\n"
    )
    (finding,) = [f for f in check_json(root, "--dockerfile", str(df)) if f["check"] == "apt.sources"]
    assert finding["status"] == "warn"
    assert "mirror.example.org is not in effect" in finding["summary"]
    assert "archive.ubuntu.com" in finding["summary"] and "security.ubuntu.com" not in finding["summary"]


def test_echo_into_sources_list_while_deb822_still_official(tmp_path):
    root = ubuntu_root(tmp_path)
    df = tmp_path / "Dockerfile"
    df.write_text(
        "FROM ubuntu:24.04\nRUN echo 'deb http://mirror.example.org/ubuntu noble main' > "
        "/etc/apt/sources.list; apt-get update\n"
    )
    findings = [f for f in check_json(root, "--dockerfile", str(df)) if f["check"] == "apt.sources"]
    assert findings[0]["status"] == "warn"
    assert "http://mirror.example.org/ubuntu is not in effect" in findings[0]["summary"]


def test_case17_dockerfile_still_fails(tmp_path):
    root = tmp_path / "bookworm"
    write_tree(
        root,
        {
            "/etc/os-release": "ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n",
            "/etc/apt/sources.list.d/debian.sources": (
                CASES / "17-debian12-sources-list-absent" / "debian.sources"
            ).read_text(),
        },
    )
    findings = [
        f
        for f in check_json(root, "--dockerfile", str(CASES / "17-debian12-sources-list-absent" / "Dockerfile"))
        if f["check"] == "apt.sources"
    ]
    assert findings[0]["status"] == "fail" and "does not exist" in findings[0]["summary"]


# --------------------------------------------------------------------------- the shell reader


def test_dockerfile_commands_like_a_shell(tmp_path):
    text = (
        "# escape=\\\nFROM debian:12\nARG M=http://m.example.org\n"
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]\n'
        "RUN if [ -f /etc/apt/sources.list ]; then \\\n"
        "      sed -i -e 's|a;b|c|g' -e \"s|x|${M}|\" /etc/apt/sources.list; \\\n"
        "    else true; fi || echo failed\n"
        'RUN <<EOF\nset -e\necho "[global]" > /etc/pip.conf  # comment; here\n'
        "printf 'index-url = %s\\n' \"$M/simple\" >> /etc/pip.conf\nEOF\n"
        "RUN cat > /etc/uv/uv.toml <<'TOML' && echo done\n[[index]]\nurl = \"$M\"\nTOML\n"
        "COPY <<EOF /root/.condarc\nchannels: [defaults]\nEOF\n"
        'RUN ["/bin/sh", "-c", "sed -i \'s/a;b/c/\' /etc/pip.conf"]\n'
        'SHELL ["pwsh", "-c"]\nRUN Write-Host hi\n'
    )
    parsed = commands("Dockerfile", text)
    argvs = [c.argv for c in parsed.commands]
    assert ("sed", "-i", "-e", "s|a;b|c|g", "-e", "s|x|http://m.example.org|", "/etc/apt/sources.list") in argvs
    assert ("echo", "failed") in argvs and ("true",) in argvs
    pip = [c for c in parsed.commands if c.redirects and c.redirects[0][1] == "/etc/pip.conf"]
    assert [c.redirects[0][0] for c in pip] == [">", ">>"]
    assert pip[1].argv[2] == "http://m.example.org/simple"
    cat = next(c for c in parsed.commands if c.argv == ("cat",))
    assert cat.stdin == '[[index]]\nurl = "$M"\n'  # quoted tag: no expansion
    copy = next(c for c in parsed.commands if c.argv[0] == "COPY")
    assert copy.argv == ("COPY", "/root/.condarc") and copy.stdin == "channels: [defaults]\n"
    assert ("sed", "-i", "s/a;b/c/", "/etc/pip.conf") in argvs
    assert any("not a POSIX shell" in n for n in parsed.notes)


def test_sed_scripts_several_commands_bre_and_ere():
    subs, files = sed_invocation(
        [
            "sed",
            "-i.bak",
            "-e",
            "s|ftp.debian.org|m.example.org|g; s/\\(http\\):/\\1s:/",
            "--expression=s,zzz,y,",
            "/etc/apt/sources.list",
        ]
    )
    assert [s.old for s in subs] == ["ftp.debian.org", "\\(http\\):", "zzz"] and files == ["/etc/apt/sources.list"]
    assert (
        apply_sed(subs, "deb http://ftp.debian.org/debian bookworm main\n")
        == "deb https://m.example.org/debian bookworm main\n"
    )
    ere = parse_sed_script("s#(archive|security)\\.ubuntu\\.com#m.example.org#g", extended=True)
    assert (
        apply_sed(ere, "http://archive.ubuntu.com http://security.ubuntu.com")
        == "http://m.example.org http://m.example.org"
    )
    assert sed_invocation(["sed", "s/a/b/", "/etc/apt/sources.list"]) is None  # not in place: prints only


# --------------------------------------------------------------------------- case 30 and neighbours


def case30_root(tmp_path: Path) -> Path:
    root = tmp_path / "host"
    write_tree(
        root,
        {
            "/etc/pip.conf": (CASE30 / "pip.conf").read_text(),
            "/etc/os-release": "ID=debian\n",
            "/usr/local/bin/uv": "#!/bin/sh\nexit 0\n",
        },
    )  # uv is installed
    (root / "usr/local/bin/uv").chmod(0o755)
    return root


def test_case30_uv_ignores_pip_conf_then_fixed_at_the_same_scope(tmp_path):
    root = case30_root(tmp_path)
    code, out = run("check", "index.consistency", "--root", str(root), "--offline")
    assert code == 0, out
    assert "[warn] index.consistency" in out
    assert (
        "uv has no index configured and falls back to the public default index, while pip uses "
        "https://pypi.mirror.example.org/simple (/etc/pip.conf line 3): uv never reads pip.conf"
    ) in out
    assert "fix: gpudoctor fix uv.index-url" in out and "Do not edit pip.conf" in out
    code, out = run("fix", "uv.index-url", "--root", str(root), "--offline", "--yes")
    assert code == 0, out
    assert (root / "etc/uv/uv.toml").read_text() == f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n'
    assert (root / "etc/pip.conf").read_text() == (CASE30 / "pip.conf").read_text()
    (finding,) = check_json(root, "index.consistency")
    assert finding["status"] == "ok"
    assert (
        finding["summary"] == "the tools pointed at a mirror agree: pip -> pypi.mirror.example.org, "
        "uv -> pypi.mirror.example.org"
    )


def collect(root, env=None, home="/home/user"):
    facts, errors = engine.collect_facts(
        ["pip", "uv", "conda"], fake_system(root, env=env, home=home), CollectOptions(offline=True), all_collectors()
    )
    assert errors == []
    return facts


def test_user_scope_pip_conf_gets_user_scope_uv_toml(tmp_path):
    write_tree(tmp_path, {"/home/user/.config/pip/pip.conf": f"[global]\nindex-url = {MIRROR}\n"})
    facts = collect(tmp_path)
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.INFO and "uv is not installed" in finding.summary  # nothing goes wrong yet
    write_tree(tmp_path, {"/home/user/.local/bin/uv": "#!/bin/sh\n"})
    facts = collect(tmp_path)
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.WARN and finding.evidence["scope"] == "user"
    assert finding.evidence["uv_binary"] == "/home/user/.local/bin/uv"
    (edit,) = uv_index_url.plan(facts, finding, {}).edits
    assert edit.path == "/home/user/.config/uv/uv.toml" and f'url = "{MIRROR}"' in edit.new_text


def test_uv_agreeing_or_set_in_env_is_ok(tmp_path):
    write_tree(
        tmp_path,
        {
            "/etc/pip.conf": f"[global]\nindex-url = {MIRROR}\n",
            "/etc/xdg/uv/uv.toml": f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n',
        },
    )
    (finding,) = index_consistency.evaluate(collect(tmp_path))
    assert finding.status == Status.OK
    (tmp_path / "etc/xdg/uv/uv.toml").unlink()
    (finding,) = index_consistency.evaluate(collect(tmp_path, env={"UV_DEFAULT_INDEX": MIRROR}))
    assert finding.status == Status.OK


def test_nothing_mirrored_is_skip_and_uv_ahead_of_pip_offers_pip_fix(tmp_path):
    from gpudoctor.checks import SkipCheck

    with pytest.raises(SkipCheck):
        index_consistency.evaluate(collect(tmp_path))
    write_tree(tmp_path, {"/etc/uv/uv.toml": f'index-url = "{MIRROR}"\n'})
    facts = collect(tmp_path)
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.WARN and finding.fixes == ("pip.index-url",)
    assert "pip never reads uv.toml" in finding.summary
    plan = pip_index_url.plan(facts, finding, {})
    (edit,) = plan.edits
    assert edit.path == "/etc/pip.conf" and f"index-url = {MIRROR}" in edit.new_text


def test_conda_named_channels_bypass_a_defaults_mirror(tmp_path):
    condarc = (
        "channels:\n  - defaults\n  - conda-forge\ndefault_channels:\n"
        "  - https://mirrors.example.org/anaconda/pkgs/main\n  - https://mirrors.example.org/anaconda/pkgs/r\n"
        "custom_channels:\n  bioconda: https://other.example.org/cloud\n"
    )
    write_tree(tmp_path, {"/home/user/.condarc": condarc})
    facts = collect(tmp_path)
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.WARN and finding.fixes == ("conda.channels",)
    assert "conda-forge" in finding.summary and "https://conda.anaconda.org" in finding.summary
    (edit,) = conda_channels.plan(facts, finding, {}).edits
    assert edit.new_text.endswith(
        "custom_channels:\n  bioconda: https://other.example.org/cloud\n"
        "  conda-forge: https://mirrors.example.org/anaconda/cloud\n"
        "  pytorch: https://mirrors.example.org/anaconda/cloud\n"
    )
    assert "default_channels:\n  - https://mirrors.example.org/anaconda/pkgs/main\n" in edit.new_text
    # applied: the named channels now resolve to the mirror, and the check is quiet
    (tmp_path / "home/user/.condarc").write_text(edit.new_text)
    conda = collect(tmp_path).get("conda")
    assert [c.url for c in conda.channels if c.name == "conda-forge"] == [
        "https://mirrors.example.org/anaconda/cloud/conda-forge"
    ]
    (finding,) = index_consistency.evaluate(collect(tmp_path))
    assert finding.status == Status.OK


# --------------------------------------------------------------------------- pip timeout/retries, apt --mirror URL


def test_pip_fix_sets_timeout_and_retries_when_asked(tmp_path):
    write_tree(tmp_path, {"/etc/pip.conf": f"# site\n[global]\nindex-url = {MIRROR}\n"})
    facts = collect(tmp_path)
    from gpudoctor.model import Finding

    finding = Finding(check="pip.mirror", status=Status.WARN, summary="slow", fixes=("pip.index-url",))
    (edit,) = pip_index_url.plan(facts, finding, {"timeout": "60", "retries": "10"}).edits
    assert edit.path == "/etc/pip.conf"
    assert edit.new_text == f"# site\n[global]\nindex-url = {MIRROR}\ntimeout = 60\nretries = 10\n"
    with pytest.raises(FixRefused, match="timeout=soon"):
        pip_index_url.plan(facts, finding, {"timeout": "soon"})


def test_apt_mirror_url_is_used_as_given(tmp_path):
    root = tmp_path / "bookworm"
    write_tree(
        root,
        {
            "/etc/os-release": "ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n",
            "/etc/ssl/certs/ca-certificates.crt": "",
            "/etc/apt/sources.list.d/debian.sources": (
                CASES / "17-debian12-sources-list-absent" / "debian.sources"
            ).read_text(),
        },
    )
    proxy = "https://nexus.example.org/repository/apt-debian-proxy"
    code, out = run("fix", "apt.mirror", "--root", str(root), "--offline", "--mirror", proxy, "--yes")
    assert code == 0, out
    text = (root / "etc/apt/sources.list.d/debian.sources").read_text()
    assert f"URIs: {proxy}\n" in text  # not .../apt-debian-proxy/debian
    assert "URIs: http://ftp.debian.org/debian-security\n" in text  # not verified: stays official
    assert "security-mirror" in out


def test_debian_security_moves_only_when_the_mirror_serves_it(tmp_path):
    src = (CASES / "17-debian12-sources-list-absent" / "debian.sources").read_text()
    for prefix, moved in (("", True), ("/debian", False)):
        root = tmp_path / f"r{moved}"
        write_tree(
            root,
            {
                "/etc/os-release": "ID=debian\nVERSION_ID=12\nVERSION_CODENAME=bookworm\n",
                "/etc/apt/sources.list.d/debian.sources": src,
            },
        )
        with FakeMirror(prefix=prefix) as m:
            base = m.url if prefix else m.url + "/debian"
            code, out = run(
                "fix",
                "apt.mirror",
                "--root",
                str(root),
                "--mirror",
                base,
                "--allow-insecure",
                "--yes",
                "--mirror-budget",
                "3",
            )
        assert code == 0, out
        text = (root / "etc/apt/sources.list.d/debian.sources").read_text()
        assert f"URIs: {base}\n" in text
        assert (f"URIs: {base}-security\n" in text) is moved
        assert ("URIs: http://ftp.debian.org/debian-security\n" in text) is not moved


def test_catalogue_replace_must_be_a_boolean():
    with pytest.raises(CatalogueError, match="replace must be true or false"):
        from_text('replace = "false"\n[[mirror]]\nname = "x"\npypi = "https://x.example.org/simple"\n', "cat.toml")
    assert from_text(
        'replace = false\n[[mirror]]\nname = "x"\npypi = "https://x.example.org/simple"\n', "cat.toml"
    ).by_name("tuna")


def test_mirrors_offline_claims_no_probe_time():
    code, out = run("mirrors", "pip", "--offline")
    assert code == 0, out
    assert "not probed: --offline" in out and "probed concurrently" not in out


def test_a_uri_listed_twice_in_one_stanza_is_rewritten_once():
    from gpudoctor.sources.aptsources import replace_base, rewrite_deb822

    text = (
        "Types: deb\nURIs: http://ftp.debian.org/debian http://ftp.debian.org/debian/\nSuites: bookworm\n"
        "Components: main\n\nTypes: deb\nURIs: http://ftp.debian.org/debian\nSuites: bookworm-updates\n"
        "Components: main\n"
    )
    new = rewrite_deb822(text, lambda u, s, c, e: replace_base(u, "http://m.example.org/debian"))
    assert new == text.replace(
        "http://ftp.debian.org/debian http://ftp.debian.org/debian/", "http://m.example.org/debian"
    ).replace("URIs: http://ftp.debian.org/debian\n", "URIs: http://m.example.org/debian\n")


def test_under_root_the_image_is_the_world(tmp_path, monkeypatch, isolated_home):
    """User-scope files resolve to the image's home (/root, or the Dockerfile USER's from /etc/passwd);
    the caller's PIP_*/UV_* variables and home are not the image's; the image's ENV comes from --dockerfile."""
    monkeypatch.setenv("PIP_INDEX_URL", "https://caller.example.org/simple")
    monkeypatch.setenv("UV_DEFAULT_INDEX", "https://caller.example.org/simple")
    root = tmp_path / "img"
    write_tree(
        root,
        {
            "/etc/os-release": "ID=debian\n",
            "/root/.config/pip/pip.conf": f"[global]\nindex-url = {MIRROR}\n",
            str(isolated_home) + "/.config/uv/uv.toml": 'index-url = "https://caller-home.example.org/s"\n',
            "/etc/passwd": "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1000::/srv/app:/bin/sh\n",
            "/srv/app/.config/uv/uv.toml": f'index-url = "{MIRROR}"\n',
        },
    )
    (finding,) = [f for f in check_json(root, "index.consistency") if f["check"] == "index.consistency"]
    assert finding["evidence"]["pip_source"] == "/root/.config/pip/pip.conf"
    assert finding["evidence"]["uv_origin"] == "built-in"  # neither the caller's variable nor the caller's home
    df = tmp_path / "Dockerfile"
    df.write_text(f"FROM debian:12\nENV UV_DEFAULT_INDEX={MIRROR}\n")
    (finding,) = [
        f for f in check_json(root, "index.consistency", "--dockerfile", str(df)) if f["check"] == "index.consistency"
    ]
    assert finding["status"] == "ok" and "uv -> pypi.mirror.example.org" in finding["summary"]
    df.write_text("FROM debian:12\nUSER app\n")  # app's home is /srv/app: its pip.conf is not there, uv.toml is
    (finding,) = [
        f for f in check_json(root, "index.consistency", "--dockerfile", str(df)) if f["check"] == "index.consistency"
    ]
    assert finding["status"] == "warn" and "pip never reads uv.toml" in finding["summary"]
    assert finding["evidence"]["uv_origin"] == "/srv/app/.config/uv/uv.toml"


def test_build_writes_judged_against_the_files_each_tool_reads(tmp_path):
    root = tmp_path / "img"
    write_tree(root, {"/etc/os-release": "ID=debian\n"})
    df = tmp_path / "Dockerfile"
    df.write_text(
        "FROM python:3.12\nRUN python -m venv /opt/venv\n"
        "RUN mkdir -p /etc/pip && printf '[global]\\nindex-url = https://m.example.org/simple\\n' > /etc/pip/pip.conf\n"
        "RUN echo '[global]' > /opt/venv/pip.conf && echo 'index-url = https://m.example.org/simple' >> "
        "/opt/venv/pip.conf\n"
        "RUN echo 'index-url = \"https://m.example.org/simple\"' > /etc/uv.toml\n"
        "RUN printf 'channels:\\n  - defaults\\n' > /root/condarc && cp /root/condarc /root/.condarc\n"
        "RUN sed -i 's|pypi.org|m.example.org|' /root/.config/pip/pip.conf\n"
        'COPY <<EOF /etc/uv/uv.toml\n[[index]]\nurl = "https://m.example.org/simple"\ndefault = true\nEOF\n'
    )
    findings = list(check_json(root, "build.sources", "--dockerfile", str(df)))
    summaries = [(f["status"], f["summary"]) for f in findings]
    assert summaries == [
        ("fail", "Dockerfile:7: sed edits /root/.config/pip/pip.conf, which does not exist at that point of the build"),
        ("warn", "Dockerfile:3: /etc/pip/pip.conf is never read by pip; it reads /etc/pip.conf"),
        ("warn", "Dockerfile:5: /etc/uv.toml is never read by uv; it reads /etc/uv/uv.toml"),
        ("warn", "Dockerfile:6: /root/condarc is never read by conda; it reads /root/.condarc"),
    ]
    # the healthy twin: the same settings where the tools look
    df.write_text(
        "FROM python:3.12\nRUN python -m venv /opt/venv && echo '[global]' > /opt/venv/pip.conf\n"
        "RUN printf '[global]\\nindex-url = https://m.example.org/simple\\n' | tee /etc/pip.conf\n"
        "RUN echo 'index-url = \"https://m.example.org/simple\"' > /etc/uv/uv.toml\n"
        "RUN printf 'channels:\\n  - defaults\\n' > /opt/conda/.condarc\n"
    )
    (finding,) = check_json(root, "build.sources", "--dockerfile", str(df))
    assert finding["status"] == "ok" and "4 edits" in finding["summary"], finding


def test_uv_toml_with_a_tool_uv_table_is_refused_by_uv_and_said_so(tmp_path):
    # InSyncWithFoo/ryecharm #199 / astral-sh/uv #3819: uv rejects unknown top-level fields of uv.toml
    conf = {
        "/etc/pip.conf": f"[global]\nindex-url = {MIRROR}\n",
        "/home/user/.config/uv/uv.toml": f'[tool.uv]\nindex-url = "{MIRROR}"\n',
    }
    facts = collect(write_tree(tmp_path, conf))
    uv = facts.get("uv")
    assert uv.default_origin == "built-in" and "unknown field `tool`" in uv.problems[0]
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.FAIL and finding.summary.startswith("uv cannot use its configuration")
    assert finding.caused_by == ("uv.mirror",)
    # the same settings in a project's pyproject.toml are the right form: no problem
    conf["/home/user/.config/uv/uv.toml"] = f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n'
    facts = collect(write_tree(tmp_path / "ok", conf))
    assert facts.get("uv").problems == ()
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.OK


def test_uv_extra_index_without_default_is_info_not_no_index(tmp_path):
    conf = {
        "/etc/pip.conf": f"[global]\nindex-url = {MIRROR}\n",
        "/home/user/.config/uv/uv.toml": f'[[index]]\nurl = "{MIRROR}"\n',
        "/home/user/.local/bin/uv": "#!/bin/sh\n",
    }
    facts = collect(write_tree(tmp_path, conf))
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.INFO and "the [[index]] has no `default = true`" in finding.summary
    (edit,) = uv_index_url.plan(facts, finding, {}).edits
    assert edit.path == "/home/user/.config/uv/uv.toml"
    assert edit.new_text == f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n', edit.new_text


def test_uv_default_index_without_simple_fails_and_the_fix_writes_the_catalogue_url(tmp_path):
    conf = {"/etc/uv/uv.toml": '[[index]]\nurl = "https://pypi.tuna.tsinghua.edu.cn"\ndefault = true\n'}
    facts = collect(write_tree(tmp_path, conf))
    [fail] = [f for f in index_consistency.evaluate(facts) if f.status == Status.FAIL]
    assert fail.summary == "uv cannot use its default index https://pypi.tuna.tsinghua.edu.cn: missing `/simple`"
    (edit,) = uv_index_url.plan(facts, fail, {}).edits
    assert 'url = "https://pypi.tuna.tsinghua.edu.cn/simple"' in edit.new_text
    facts = collect(write_tree(tmp_path / "env", {}), env={"UV_DEFAULT_INDEX": "https://pypi.org"})
    [fail] = [f for f in index_consistency.evaluate(facts) if f.status == Status.FAIL]
    assert "export UV_DEFAULT_INDEX=https://pypi.org/simple" in fail.explanation and fail.fixes == ()


def test_conda_channel_alias_on_a_mirror_leaves_defaults_public(tmp_path):
    # conda docs "Mirroring channels": channel_alias and default_channels are independent bases
    condarc = (
        "channel_alias: https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud\nchannels:\n  - defaults\n  - conda-forge\n"
    )
    facts = collect(write_tree(tmp_path, {"/home/user/.condarc": condarc}))
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.WARN
    assert finding.summary == (
        "conda's named channels use the mirror mirrors.tuna.tsinghua.edu.cn, but `defaults` still goes to "
        "repo.anaconda.com: channel_alias does not cover defaults"
    )
    assert "- https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main" in finding.explanation
    assert "gpudoctor fix conda.channels --mirror tuna" in finding.explanation and finding.fixes == ("conda.channels",)
    # the twin: default_channels on the mirror too
    condarc += "default_channels:\n  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main\n"
    facts = collect(write_tree(tmp_path / "ok", {"/home/user/.condarc": condarc}))
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.OK


def test_uv_pip_index_url_is_read_by_uv_pip_only(tmp_path):
    """`[pip] index-url` in uv.toml applies to `uv pip` only (uv's settings reference: "ignored when
    running commands outside the `uv pip` namespace"), and there it wins over the top-level keys of
    every file (uv's PipSettings::combine prefers tool.uv.pip.index-url). pip.conf on the same mirror:
    `uv pip` agrees, the project commands do not (info, with the top-level fix). Twins: the same URL at
    the top level agrees for both; UV_DEFAULT_INDEX reaches both interfaces."""
    write_tree(
        tmp_path,
        {
            "/etc/pip.conf": f"[global]\nindex-url = {MIRROR}\n",
            "/home/user/.local/bin/uv": "#!/bin/sh\n",
            "/home/user/.config/uv/uv.toml": f'[pip]\nindex-url = "{MIRROR}"\n',
        },
    )
    facts = collect(tmp_path)
    uv = facts.get("uv")
    assert (uv.default_index, uv.default_origin) == ("https://pypi.org/simple", "built-in")
    assert (uv.pip_default_index, uv.pip_default_origin) == (MIRROR, "/home/user/.config/uv/uv.toml")
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.INFO and finding.fixes == ("uv.index-url",)
    assert finding.summary.startswith(f"`uv pip` uses pip's index {MIRROR} (/home/user/.config/uv/uv.toml)")
    assert "project commands (uv add, lock, sync, run) use the public default index" in finding.summary

    # a lower-precedence file's [pip] index-url still wins for `uv pip` over the project file's top level
    write_tree(tmp_path, {"/etc/uv/uv.toml": f'[pip]\nindex-url = "{MIRROR}"\n'})
    (tmp_path / "home/user/.config/uv/uv.toml").write_text('index-url = "https://other.example.org/simple"\n')
    uv = collect(tmp_path).get("uv")
    assert uv.default_index == "https://other.example.org/simple"
    assert (uv.pip_default_index, uv.pip_default_origin) == (MIRROR, "/etc/uv/uv.toml")

    # twin: the mirror at the top level is every command's default, `uv pip` included
    (tmp_path / "etc/uv/uv.toml").unlink()
    (tmp_path / "home/user/.config/uv/uv.toml").write_text(f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n')
    facts = collect(tmp_path)
    assert facts.get("uv").pip_default_index == ""
    (finding,) = index_consistency.evaluate(facts)
    assert finding.status == Status.OK

    # the variable reaches both interfaces: no separate `uv pip` default
    (tmp_path / "home/user/.config/uv/uv.toml").write_text('[pip]\nindex-url = "https://other.example.org/simple"\n')
    uv = collect(tmp_path, env={"UV_DEFAULT_INDEX": MIRROR}).get("uv")
    assert (uv.default_index, uv.pip_default_index) == (MIRROR, "")


def test_a_mirror_only_uv_pip_uses_still_leaves_pip_on_the_public_index(tmp_path):
    write_tree(tmp_path, {"/etc/uv/uv.toml": f'[pip]\nindex-url = "{MIRROR}"\n'})
    (finding,) = index_consistency.evaluate(collect(tmp_path))
    assert finding.status == Status.WARN and finding.fixes == ("pip.index-url",)
    assert "pip never reads uv.toml" in finding.summary and MIRROR in finding.summary


# --------------------------------------------------------------------------- pixi

TUNA_CONDARC = """channels:
  - defaults
show_channel_urls: true
default_channels:
  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main
custom_channels:
  conda-forge: https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud
  pytorch: https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud
"""


def collect_all(root, env=None):
    facts, errors = engine.collect_facts(
        ["pip", "uv", "conda", "pixi"],
        fake_system(root, env=env, home="/home/user"),
        CollectOptions(offline=True),
        all_collectors(),
    )
    assert errors == []
    return facts


def test_pixi_config_files_in_pixis_order_later_wins(tmp_path):
    write_tree(
        tmp_path,
        {
            "/etc/pixi/config.toml": '[mirrors]\n"https://conda.anaconda.org" = ["https://sys.example.org/conda"]\n',
            "/home/user/.config/pixi/config.toml": '[pypi-config]\nindex-url = "https://user.example.org/simple"\n',
            "/opt/pixi/config.toml": (
                '[mirrors]\n"https://conda.anaconda.org" = ["https://home.example.org/conda"]\n'
                '"https://conda.anaconda.org/nvidia" = ["https://nv.example.org/nvidia"]\n'
                '[pypi_config]\nindex_url = "https://old.example.org/simple"\n'
            ),
            "/home/user/.pixi/bin/pixi": "#!/bin/sh\n",
        },
    )
    pixi = collect_all(tmp_path, env={"PIXI_HOME": "/opt/pixi"}).get("pixi")
    assert list(pixi.files) == ["/etc/pixi/config.toml", "/home/user/.config/pixi/config.toml", "/opt/pixi/config.toml"]
    assert pixi.mirrors["https://conda.anaconda.org"] == ("https://home.example.org/conda",)
    assert pixi.mirror_origins["https://conda.anaconda.org"] == "/opt/pixi/config.toml"
    assert (pixi.pypi_index_url, pixi.pypi_origin) == ("https://old.example.org/simple", "/opt/pixi/config.toml")
    assert pixi.binary == "/home/user/.pixi/bin/pixi"
    # the longest matching key wins; a channel outside every key is fetched by pixi itself
    assert pixi.mirror_for("https://conda.anaconda.org/nvidia/") == (
        "https://nv.example.org/nvidia",
        "/opt/pixi/config.toml",
    )
    assert pixi.mirror_for("https://conda.anaconda.org/conda-forge")[0] == "https://home.example.org/conda"
    assert pixi.mirror_for("https://conda.anaconda.orgx/conda-forge") is None
    write_tree(tmp_path, {"/home/user/.pixi/config.toml": "[mirrors\n"})
    assert collect_all(tmp_path).get("pixi").problems[0].startswith("/home/user/.pixi/config.toml: not valid TOML")


def test_pixi_never_reads_condarc_custom_channels_warn_and_mirrors_twin(tmp_path):
    """prefix-dev/pixi#756: a TUNA .condarc (custom_channels) does nothing for pixi, which fetches
    conda-forge from conda.anaconda.org. Twin: a [mirrors] entry for the host covers every channel.
    Neighbour: channel_alias on a company mirror (prefix-dev/pixi#2312) sends conda-forge there."""
    write_tree(tmp_path, {"/home/user/.condarc": TUNA_CONDARC, "/home/user/.pixi/bin/pixi": "#!/bin/sh\n"})
    findings = index_consistency.evaluate(collect_all(tmp_path))
    (f,) = [x for x in findings if x.evidence.get("tool") == "pixi"]
    assert f.status == Status.WARN and "pixi never reads .condarc" in f.summary
    assert f.evidence["channels"] == ["conda-forge", "pytorch"]
    assert (
        '"https://conda.anaconda.org/conda-forge" = ["https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge"]'
        in f.explanation
    )
    assert [c.text for c in f.commands] == ["pixi config list mirrors", "pixi config edit --global"]
    write_tree(
        tmp_path,
        {
            "/home/user/.pixi/config.toml": (
                '[mirrors]\n"https://conda.anaconda.org" = ["https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud"]\n'
            )
        },
    )
    assert [x for x in index_consistency.evaluate(collect_all(tmp_path)) if x.evidence.get("tool") == "pixi"] == []
    alias = tmp_path / "alias"
    write_tree(
        alias,
        {
            "/home/user/.condarc": "channel_alias: https://mirror.example.org/repository/conda\nchannels:\n  - conda-forge\n",
            "/usr/local/bin/pixi": "#!/bin/sh\n",
        },
    )
    (f,) = [x for x in index_consistency.evaluate(collect_all(alias)) if x.evidence.get("tool") == "pixi"]
    assert f.evidence["conda_urls"] == ["https://mirror.example.org/repository/conda/conda-forge"]


def test_pixi_not_installed_or_conda_public_says_nothing_about_pixi(tmp_path):
    write_tree(tmp_path, {"/home/user/.condarc": TUNA_CONDARC})
    assert [x for x in index_consistency.evaluate(collect_all(tmp_path)) if x.evidence.get("tool") == "pixi"] == []
    public = tmp_path / "public"
    write_tree(public, {"/home/user/.condarc": "channels:\n  - conda-forge\n", "/usr/local/bin/pixi": "#!/bin/sh\n"})
    from gpudoctor.checks import SkipCheck

    with pytest.raises(SkipCheck):
        index_consistency.evaluate(collect_all(public))


def test_pip_mirror_without_pixi_pypi_config_is_info(tmp_path):
    write_tree(tmp_path, {"/etc/pip.conf": f"[global]\nindex-url = {MIRROR}\n", "/usr/local/bin/pixi": "#!/bin/sh\n"})
    (f,) = [x for x in index_consistency.evaluate(collect_all(tmp_path)) if x.evidence.get("tool") == "pixi"]
    assert f.status == Status.INFO and "pixi never reads pip.conf" in f.summary
    assert f'index-url = "{MIRROR}"' in f.explanation
    write_tree(tmp_path, {"/home/user/.pixi/config.toml": f'[pypi-config]\nindex-url = "{MIRROR}"\n'})
    assert [x for x in index_consistency.evaluate(collect_all(tmp_path)) if x.evidence.get("tool") == "pixi"] == []
