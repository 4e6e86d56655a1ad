"""Fuzz every parser and editor: whatever the input, either a file that parses with exactly
the intended change, or a refusal (FixRefused) -- never a corrupt file, never a crash."""

from __future__ import annotations

import json

import pytest
import tomllib
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.fixes._kernel_json import JsonStyle, dump_kernel_json
from gpudoctor.fixes._verify import keep_style, parse_as, verified_edit
from gpudoctor.fixes.apt_mirror import sources_meaning
from gpudoctor.fixes.conda_channels import blocks_meaning, replace_blocks
from gpudoctor.fixes.pip_index_url import pip_meaning
from gpudoctor.fixes.uv_index_url import default_index, default_index_meaning, set_default_index
from gpudoctor.model import FixRefused
from gpudoctor.sources import pipconf
from gpudoctor.sources.aptsources import (
    SourcesError,
    parse_deb822,
    parse_one_line,
    replace_base,
    rewrite_deb822,
    rewrite_one_line,
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
URL = "https://mirror.example.org/simple"


def _doc(lines, eol, bom):
    text = eol.join(lines) + (eol if lines else "")
    return ("\ufeff" if bom else "") + text


def fuzz_text(pool):
    return st.builds(
        _doc,
        st.lists(st.one_of(st.sampled_from(pool), st.text(max_size=12)), max_size=10),
        st.sampled_from(["\n", "\r\n"]),
        st.booleans(),
    )


# --------------------------------------------------------------------------- pip INI

PIP_LINES = [
    "[global]",
    "[install]",
    "index-url = https://old.example.org/simple",
    "index_url=https://o.example.org/s",
    "timeout = 60",
    "  continuation",
    "# comment",
    "; comment",
    "trusted-host = a.example.org",
    "extra-index-url = https://x.example.org/s",
    "",
    "[global",
    "key",
    "=value",
    "retries: 3",
    "\t",
    "INDEX-URL = X",
    "[GLOBAL]",
]


@FUZZ
@given(text=fuzz_text(PIP_LINES))
def test_pip_editor_sets_exactly_index_url_or_refuses(text):
    try:
        new = pipconf.set_option(text, "index-url", URL)
        edit = verified_edit("/etc/pip.conf", text, new, "set index-url", meaning=pip_meaning)
    except (ValueError, FixRefused):
        return
    values, problem = pipconf.parse(edit.new_text)
    assert problem is None
    assert URL in {v for k, v in values.items() if k.endswith(".index-url")}
    old, _ = pipconf.parse(text.lstrip("\ufeff"))
    assert {k: v for k, v in old.items() if not k.endswith("index-url")} == {
        k: v for k, v in values.items() if not k.endswith("index-url")
    }
    if "\r\n" in text and text.count("\r\n") == text.count("\n"):
        assert edit.new_text.count("\r\n") == edit.new_text.count("\n")
    assert edit.new_text.startswith("\ufeff") == text.startswith("\ufeff")  # the editor keeps it where it was


@FUZZ
@given(text=st.text(max_size=200))
def test_pip_parser_never_raises(text):
    values, problem = pipconf.parse(text)
    assert isinstance(values, dict)


# --------------------------------------------------------------------------- uv TOML

UV_LINES = [
    "[[index]]",
    'url = "https://old.example.org/simple"',
    "default = true",
    'name = "x"',
    'index-url = "https://legacy.example.org/simple"',
    "[pip]",
    'index = [{url = "https://i.example.org", default = true}]',
    "# comment",
    "url = 'https://single.example.org'",
    "default = false",
    "[[index]] # c",
    "x = [1, 2",
    "[tool.uv]",
    'python = "3.11"',
    "",
]


@FUZZ
@given(text=fuzz_text(UV_LINES))
def test_uv_editor_sets_exactly_the_default_index_or_refuses(text):
    try:
        new = set_default_index(text, URL)
        edit = verified_edit(
            "/home/u/.config/uv/uv.toml",
            text,
            new,
            "set the default index",
            meaning=lambda a, b: default_index_meaning(a, b, URL, False),
        )
    except FixRefused:
        return
    doc = tomllib.loads(edit.new_text)
    assert default_index(doc) == URL


def test_uv_inline_array_of_tables_is_refused_with_the_manual_edit():
    text = 'index = [{url = "https://old.example.org/simple", default = true}]\n'
    new = set_default_index(text, URL)
    with pytest.raises(FixRefused, match="Edit it by hand: .*default = true"):
        verified_edit(
            "/u/uv.toml",
            text,
            new,
            'add [[index]] with url = "X" and default = true',
            meaning=lambda a, b: default_index_meaning(a, b, URL, False),
        )


# --------------------------------------------------------------------------- .condarc YAML

CONDA_LINES = [
    "channels:",
    "  - defaults",
    "  - conda-forge",
    "default_channels:",
    "  - https://old.example.org/main",
    "custom_channels:",
    "  pytorch: https://c.example.org",
    "ssl_verify: true",
    "# comment",
    "- a",
    "just a string",
    "key: [1, 2",
    "channel_alias: https://a.example.org",
    "\t- tab",
    "",
]
BLOCKS = {
    "default_channels": ["default_channels:", "  - https://mirror.example.org/pkgs/main"],
    "custom_channels": ["custom_channels:", "  pytorch: https://mirror.example.org/cloud"],
}


@FUZZ
@given(text=fuzz_text(CONDA_LINES))
def test_condarc_editor_sets_exactly_the_blocks_or_refuses(text):
    try:
        new = replace_blocks(text, BLOCKS)
        edit = verified_edit(
            "/home/u/.condarc",
            text,
            new,
            "set default_channels",
            meaning=lambda a, b: blocks_meaning(a, b, BLOCKS),
            kind="condarc",
        )
    except FixRefused:
        return
    doc = yaml.safe_load(edit.new_text)
    assert doc["default_channels"] == ["https://mirror.example.org/pkgs/main"]
    assert doc["custom_channels"] == {"pytorch": "https://mirror.example.org/cloud"}


def test_condarc_whose_top_level_is_not_a_mapping_is_refused():
    with pytest.raises(FixRefused, match="not a mapping.*default_channels"):
        verified_edit("/home/u/.condarc", "- defaults\n- conda-forge\n", "x", "set default_channels", kind="condarc")


# --------------------------------------------------------------------------- apt

APT_ONE = [
    "deb http://ftp.debian.org/debian bookworm main",
    "deb-src http://ftp.debian.org/debian bookworm main",
    "deb [arch=amd64 signed-by=/k.gpg] http://ftp.debian.org/debian bookworm-updates main contrib",
    "# deb http://ftp.debian.org/debian bookworm main",
    "deb http://security.debian.org/debian-security bookworm-security main",
    "deb",
    "deb [broken http://x.example.org/debian bookworm main",
    "deb https://download.example.com/linux/debian bookworm stable",
    "",
]
APT_822 = [
    "Types: deb",
    "URIs: http://ftp.debian.org/debian",
    "Suites: bookworm bookworm-updates",
    "Components: main",
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
    "Enabled: no",
    "# comment",
    "",
    " continuation",
    "URIs: http://ftp.debian.org/debian http://other.example.org/debian",
    "Types: deb deb-src",
    "X-Repolib-Name: x",
    "Suites: bookworm-security",
    "URIs: http://ftp.debian.org/debian-security",
]


def _mapper(uri, suites, components, enabled):
    if not enabled or "/debian" not in uri or "security" in uri:
        return None
    return replace_base(uri, "https://mirror.example.org/debian")


@FUZZ
@given(text=fuzz_text(APT_ONE))
def test_one_line_apt_editor_rewrites_exactly_the_uris_or_refuses(text):
    try:
        new = rewrite_one_line(text, _mapper)
        edit = verified_edit(
            "/etc/apt/sources.list",
            text,
            new,
            "replace URIs",
            kind="apt-list",
            meaning=lambda a, b: sources_meaning(a, b, _mapper),
        )
    except FixRefused:
        return
    got, _ = parse_one_line("/etc/apt/sources.list", edit.new_text)
    assert not any(
        "ftp.debian.org/debian" == u.split("//", 1)[-1].rstrip("/")
        for s in got
        for u in s.uris
        if s.enabled and "security" not in u
    )


@FUZZ
@given(text=fuzz_text(APT_822))
def test_deb822_editor_rewrites_exactly_the_uris_or_refuses(text):
    try:
        new = rewrite_deb822(text, _mapper)
        edit = verified_edit(
            "/etc/apt/sources.list.d/debian.sources",
            text,
            new,
            "replace URIs",
            kind="apt-deb822",
            meaning=lambda a, b: sources_meaning(a, b, _mapper),
        )
    except (FixRefused, SourcesError):
        return
    parse_deb822("/x.sources", edit.new_text)


# --------------------------------------------------------------------------- kernel.json


@FUZZ
@given(
    data=st.dictionaries(
        st.sampled_from(["argv", "display_name", "language", "env", "metadata"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
            max_leaves=8,
        ),
        max_size=5,
    ),
    indent=st.sampled_from([None, 1, 2, 4, "\t"]),
    nl=st.booleans(),
)
def test_kernel_json_editor_round_trips(data, indent, nl):
    old = json.dumps({"argv": ["python"]}, indent=indent) + ("\n" if nl else "")
    new = dump_kernel_json(data, JsonStyle.detect(old))
    edit = verified_edit(
        "/k/kernel.json", old, new, "write it", kind="json", meaning=lambda a, b: None if b == data else "differs"
    )
    assert json.loads(edit.new_text) == data
    assert edit.new_text.endswith("\n") == nl


# --------------------------------------------------------------------------- shapes never edited


@pytest.mark.parametrize(
    "path, old",
    [
        ("/etc/pip.conf", "[global]\nindex-url = x\n\x00\x01binary"),
        ("/home/u/.condarc", "channels:\n  - caf\ufffd\n"),
        ("/k/kernel.json", '{"argv": ["\udcff"]}'),
    ],
)
def test_binary_or_undecodable_files_are_refused(path, old):
    with pytest.raises(FixRefused, match="binary|not valid UTF-8.*Edit it by hand"):
        verified_edit(path, old, old + "x", "the manual edit")


def test_keep_style_keeps_crlf_and_leaves_the_bom_to_the_editor():
    assert keep_style("\ufeffa\r\nb\r\n", "\ufeffa\nb\nc\n") == "\ufeffa\r\nb\r\nc\r\n"
    assert keep_style("\ufeffa\r\n", "a\n") == "a\r\n"  # a repair that dropped the BOM keeps it dropped
    assert keep_style("a\nb\r\n", "a\nb\n") == "a\nb\n"  # mixed: left as the editor wrote it
    assert keep_style(None, "x\n") == "x\n"


@FUZZ
@given(text=st.text(max_size=120), kind=st.sampled_from(["pip", "apt-list", "apt-deb822", "toml", "condarc", "json"]))
def test_every_parser_either_parses_or_says_why(text, kind):
    from gpudoctor.fixes._verify import NotParsable

    try:
        parse_as(kind, text, "/x")
    except NotParsable as exc:
        assert str(exc)
