"""uv and conda: collectors (discovery order), the uv.index-url and conda.channels planners (golden texts),
and the configured-index probe on a local server."""

from __future__ import annotations

import pytest

from gpudoctor import engine
from gpudoctor.checks import conda_mirror, uv_mirror
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.facts import Unavailable
from gpudoctor.fixes import conda_channels, uv_index_url
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import FixRefused, Status
from gpudoctor.testing import fake_system, write_tree

URL = "https://pypi.example.org/simple"
USER_UV = "/home/user/.config/uv/uv.toml"


def collect(root, env=None, domains=("uv", "conda"), offline=True):
    facts, errors = engine.collect_facts(
        list(domains), fake_system(root, env=env), CollectOptions(offline=offline), all_collectors()
    )
    assert errors == []
    return facts


# --------------------------------------------------------------------------- uv


def test_uv_precedence_env_over_user_over_system(tmp_path):
    write_tree(
        tmp_path,
        {
            "/etc/uv/uv.toml": '[[index]]\nurl = "https://sys.example.org/simple"\ndefault = true\n',
            USER_UV: 'index-url = "https://user.example.org/simple"\n',
        },
    )
    uv = collect(tmp_path).get("uv")
    assert (uv.default_index, uv.default_origin) == ("https://user.example.org/simple", USER_UV)
    assert [i.origin for i in uv.indexes] == [USER_UV, "/etc/uv/uv.toml"]
    uv = collect(tmp_path, env={"UV_DEFAULT_INDEX": "https://env.example.org/simple"}).get("uv")
    assert (uv.default_index, uv.default_origin) == ("https://env.example.org/simple", "UV_DEFAULT_INDEX")
    uv = collect(tmp_path, env={"UV_NO_CONFIG": "1"}).get("uv")
    assert (uv.default_index, uv.default_origin) == ("https://pypi.org/simple", "built-in")


def test_uv_fix_replaces_only_the_url_and_keeps_comments(tmp_path):
    before = (
        '# company settings\nnative-tls = true\n\n[[index]]\nname = "torch"\nurl = "https://t.example.org/cu121"\n'
        'explicit = true\n\n[[index]]  # default\nurl = "https://old.example.org/simple"   # slow\ndefault = true\n'
    )
    write_tree(tmp_path, {USER_UV: before})
    plan = uv_index_url.plan(collect(tmp_path), None, {"mirror": URL})
    (edit,) = plan.edits
    assert edit.path == USER_UV and edit.old_text == before
    assert edit.new_text == before.replace('url = "https://old.example.org/simple"', f'url = "{URL}"')


def test_uv_fix_legacy_key_and_new_file(tmp_path):
    write_tree(tmp_path, {USER_UV: 'index-url = "https://old.example.org/simple"\n'})
    (edit,) = uv_index_url.plan(collect(tmp_path), None, {"mirror": URL}).edits
    assert edit.new_text == f'index-url = "{URL}"\n'
    empty = tmp_path / "empty"
    empty.mkdir()
    (edit,) = uv_index_url.plan(collect(empty), None, {"mirror": URL}).edits
    assert edit.old_text is None and edit.path == USER_UV
    assert edit.new_text == f'[[index]]\nurl = "{URL}"\ndefault = true\n'


def test_uv_fix_refuses_env_and_http(tmp_path):
    with pytest.raises(FixRefused, match="export UV_DEFAULT_INDEX="):
        uv_index_url.plan(
            collect(tmp_path, env={"UV_DEFAULT_INDEX": "https://e.example.org/simple"}), None, {"mirror": URL}
        )
    with pytest.raises(FixRefused, match="--allow-insecure"):
        uv_index_url.plan(collect(tmp_path), None, {"mirror": "http://pypi.example.org/simple"})


def test_uv_fix_by_catalogue_name(tmp_path):
    (edit,) = uv_index_url.plan(collect(tmp_path), None, {"mirror": "tuna"}).edits
    assert 'url = "https://pypi.tuna.tsinghua.edu.cn/simple"' in edit.new_text


# --------------------------------------------------------------------------- conda

CONDARC = """# lab defaults
channels:
  - pytorch
  - conda-forge
  - defaults
channel_priority: strict
default_channels:
  - https://repo.anaconda.com/pkgs/main
  - https://repo.anaconda.com/pkgs/r
show_channel_urls: true
"""


def test_conda_resolves_channels_in_search_order(tmp_path):
    write_tree(
        tmp_path,
        {
            "/etc/conda/.condarc": "channel_alias: https://alias.example.org\n",
            "/home/user/.condarc": CONDARC + "custom_channels:\n  pytorch: https://c.example.org/cloud\n",
        },
    )
    conda = collect(tmp_path).get("conda")
    assert [(c.name, c.url, c.via) for c in conda.channels] == [
        ("pytorch", "https://c.example.org/cloud/pytorch", "custom_channels"),
        ("conda-forge", "https://alias.example.org/conda-forge", "channel_alias"),
        ("defaults", "https://repo.anaconda.com/pkgs/main", "default_channels"),
        ("defaults", "https://repo.anaconda.com/pkgs/r", "default_channels"),
    ]
    assert isinstance(collect(tmp_path / "nothing").get("conda"), Unavailable)


def test_conda_fix_golden(tmp_path):
    write_tree(tmp_path, {"/home/user/.condarc": CONDARC})
    plan = conda_channels.plan(collect(tmp_path), None, {"mirror": "https://mirror.example.org/anaconda"})
    (edit,) = plan.edits
    assert (
        edit.new_text
        == """# lab defaults
channels:
  - pytorch
  - conda-forge
  - defaults
channel_priority: strict
default_channels:
  - https://mirror.example.org/anaconda/pkgs/main
  - https://mirror.example.org/anaconda/pkgs/r
show_channel_urls: true
custom_channels:
  pytorch: https://mirror.example.org/anaconda/cloud
  conda-forge: https://mirror.example.org/anaconda/cloud
"""
    )
    assert any("conda clean -i" in n for n in plan.notes)


@pytest.mark.slow
def test_configured_conda_channel_and_uv_index_are_probed(tmp_path):
    with FakeMirror(delay_ms=10) as channel, FakeMirror(fault="500") as index:
        write_tree(
            tmp_path,
            {
                "/home/user/.condarc": f"channels:\n  - {channel.url}/conda-forge\n",
                USER_UV: f'index-url = "{index.url}/simple"\n',
            },
        )
        facts = collect(tmp_path, domains=("os", "apt", "uv", "conda", "pip", "mirrors"), offline=False)
        assert channel.requests == ["/conda-forge/noarch/repodata.json"] * 3
    (f,) = conda_mirror.evaluate(facts)
    assert f.status is Status.OK and "127.0.0.1" in f.summary
    (f,) = uv_mirror.evaluate(facts)
    assert f.status is Status.FAIL and "HTTP 500" in f.summary


def test_uv_fix_in_pyproject_tool_uv():
    before = '[project]\nname = "x"\n\n[tool.uv]\nindex-url = "https://old.example.org/simple"  # legacy\n'
    assert uv_index_url.set_default_index(before, URL, pyproject=True) == before.replace(
        "https://old.example.org/simple", URL
    )
    plain = '[project]\nname = "x"\n'
    assert uv_index_url.set_default_index(plain, URL, pyproject=True) == (
        plain + f'\n[[tool.uv.index]]\nurl = "{URL}"\ndefault = true\n'
    )


@pytest.mark.parametrize(
    "distro, machine, uri, archive",
    [
        ("ubuntu", "aarch64", "http://ports.ubuntu.com/ubuntu-ports/", "ubuntu_ports"),
        ("ubuntu", "x86_64", "http://archive.ubuntu.com/ubuntu/", "ubuntu"),
        ("ubuntu", "", "http://ports.ubuntu.com/ubuntu-ports/", "ubuntu_ports"),  # image root: from the sources
        ("debian", "", "http://ftp.debian.org/debian", "debian"),
    ],
)
def test_apt_ranking_uses_the_right_archive(distro, machine, uri, archive):
    from gpudoctor.facts.mirrors import AptFacts, AptSource
    from gpudoctor.mirrors.catalogue import builtin
    from gpudoctor.mirrors.gather import candidate_targets

    codename = "noble" if distro == "ubuntu" else "bookworm"
    apt = AptFacts(
        distro,
        codename,
        machine,
        False,
        (),
        (AptSource("/f", "deb822", 1, 0, ("deb",), (uri,), (codename,), ("main",)),),
        True,
    )
    targets, skipped = candidate_targets(builtin(), ["apt"], apt)
    assert not skipped and targets
    assert {t.archive for t in targets} == {archive} and {t.suite for t in targets} == {codename}
    assert any(t.official for t in targets)
