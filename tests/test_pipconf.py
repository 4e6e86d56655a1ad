"""The pip.conf reader and line editor (gpudoctor.sources.pipconf): examples and hypothesis properties.

Properties are checked against configparser itself (pip's own parser), on
generated files with comments, blank lines, several sections, continuation
lines, both delimiters, CRLF endings and a missing final newline.
"""

from __future__ import annotations

import configparser
import difflib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.sources import pipconf

TEXT = st.text(alphabet=st.sampled_from("abcxyz019 ./:=#;%-_[]"), min_size=0, max_size=12)
WORD = st.text(alphabet=st.sampled_from("abcdefgh"), min_size=1, max_size=6)
KEYS = st.one_of(
    st.sampled_from(["index-url", "index_url", "timeout", "trusted-host", "extra-index-url", "Index-Url", "retries"]),
    WORD,
)
URL = st.builds(lambda h, p: f"https://{h}.example.org/{p}", WORD, WORD)


@st.composite
def conf_files(draw, first_section_strict=False):
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    out = []
    if not first_section_strict:
        for _ in range(draw(st.integers(0, 2))):
            out.append(draw(st.sampled_from(["", "   ", "# top comment", "; semi"])) + eol)
    names = draw(
        st.lists(
            st.one_of(st.sampled_from(["global", "install", "download"]), WORD), min_size=1, max_size=4, unique=True
        )
    )
    if first_section_strict and "global" not in names:
        names = ["global"] + names[:3]
    if first_section_strict:
        names = ["global"] + [n for n in names if n != "global"]
    for si, name in enumerate(names):
        out.append(f"[{name}]{eol}")
        keys = draw(
            st.lists(
                KEYS, min_size=1 if first_section_strict and si == 0 else 0, max_size=5, unique_by=lambda k: k.lower()
            )
        )
        for ki, key in enumerate(keys):
            if not (first_section_strict and si == 0 and ki == 0):
                for _ in range(draw(st.integers(0, 2))):
                    kind = draw(st.sampled_from(["blank", "comment", "indented-comment"]))
                    out.append(
                        {"blank": "", "comment": "# " + draw(TEXT), "indented-comment": "   ; " + draw(TEXT)}[kind]
                        + eol
                    )
            delim = draw(st.sampled_from(["=", " = ", ":", " : ", "= ", "  =  "]))
            value = draw(TEXT).strip()
            out.append(f"{key}{delim}{value}{eol}")
            for _ in range(draw(st.integers(0, 2))):
                indent = draw(st.sampled_from(["  ", "\t", "    "]))
                cont = draw(WORD)
                if draw(st.booleans()):
                    out.append("# comment inside a value" + eol)
                out.append(f"{indent}{cont}{eol}")
    text = "".join(out)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    return text


def configparser_values(text: str) -> dict:
    parser = configparser.RawConfigParser()
    parser.read_string("".join(ln.rstrip("\r\n") + "\n" for ln in pipconf.split_lines(text)))
    out = {}
    for section in parser.sections():
        for key, value in parser.items(section):
            out[f"{section}.{pipconf.normalize_name(key)}"] = value
    return out


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(conf_files())
def test_scan_agrees_with_configparser_and_round_trips(text):
    doc = pipconf.scan(text)
    assert "".join(doc.lines) == text
    ours = {f"{e.section}.{e.key}": e.value for e in doc.entries}
    assert ours == configparser_values(text)
    values, problem = pipconf.parse(text)
    assert problem is None and values == ours


@SETTINGS
@given(conf_files(), URL)
def test_set_option_changes_only_that_key(text, url):
    new = pipconf.set_option(text, "index-url", url)
    before, after = configparser_values(text), configparser_values(new)
    # every other key keeps its value, no key appears or disappears except index-url
    assert {k: v for k, v in before.items() if not k.endswith(".index-url")} == {
        k: v for k, v in after.items() if not k.endswith(".index-url")
    }
    old_sections = {k for k in before if k.endswith(".index-url")}
    if old_sections:
        assert {k for k in after if k.endswith(".index-url")} == old_sections
        assert all(after[k] == url for k in old_sections)
    else:
        assert after["global.index-url"] == url
    # byte for byte outside the edited key: every removed line belongs to an index-url entry
    old_lines, new_lines = pipconf.split_lines(text), pipconf.split_lines(new)
    touched = set()
    for e in pipconf.scan(text).entries:
        if e.key == "index-url":
            touched.update(range(e.start, e.end))
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for i in range(i1, i2):
            line = old_lines[i]
            gained_eol = any(nl.rstrip("\r\n") == line and line == old_lines[-1] for nl in new_lines[j1:j2])
            assert i in touched or gained_eol, (line, text, new)
        for nl in new_lines[j1:j2]:
            body = nl.strip()
            assert (
                body in ("", "[global]")
                or body.startswith("index")
                or nl.rstrip("\r\n") in old_lines
                or any(old.startswith(body.split("=")[0].split(":")[0]) for old in old_lines)
            ), (nl, new)
    # idempotent: setting the same value again changes nothing
    assert pipconf.set_option(new, "index-url", url) == new


@SETTINGS
@given(conf_files(first_section_strict=True), st.sampled_from(["tall]", "bal]", "[glob", "global]", "delete"]))
def test_repair_header_restores_a_lost_global_header(text, damage):
    lines = pipconf.split_lines(text)
    assert lines[0].rstrip("\r\n") == "[global]"
    ending = lines[0][len("[global]") :]
    broken = "".join(lines[1:]) if damage == "delete" else damage + ending + "".join(lines[1:])
    values, problem = pipconf.parse(broken)
    assert problem is not None and problem.kind == "no-section-header" and problem.line == 1
    repaired, description = pipconf.repair_header(broken, "pip.conf")
    assert repaired == text
    assert "[global]" in description and "pip.conf line 1" in description


def test_set_option_examples():
    text = "# mirror for the lab\n[global]\ntimeout=5\n\n[install]\nno-cache-dir = true\n"
    assert pipconf.set_option(text, "index-url", "https://m.example.org/simple") == (
        "# mirror for the lab\n[global]\ntimeout=5\nindex-url = https://m.example.org/simple\n\n"
        "[install]\nno-cache-dir = true\n"
    )
    # existing key keeps its spelling and delimiter; continuation lines go, comments among them stay
    text = "[global]\nindex_url=https://a.example.org/simple\n  https://b\n# keep\n  https://c\nx=1"
    assert (
        pipconf.set_option(text, "index-url", "https://m.example.org/simple")
        == "[global]\nindex_url=https://m.example.org/simple\n# keep\nx=1"
    )
    # no [global]: appended as a new section, CRLF kept
    assert (
        pipconf.set_option("[install]\r\nx = 1", "index-url", "https://m")
        == "[install]\r\nx = 1\r\n\r\n[global]\r\nindex-url = https://m\r\n"
    )
    assert pipconf.set_option(None, "index-url", "https://m") == "[global]\nindex-url = https://m\n"
    with pytest.raises(ValueError):
        pipconf.set_option("[global]\n", "index-url", "a\nb")
    with pytest.raises(ValueError):
        pipconf.set_option("index-url = x\n", "index-url", "y")


@pytest.mark.parametrize(
    "text,kind,line,hint",
    [
        ("tall]\nindex-url = x\n", "no-section-header", 1, None),
        ("[global]\nindex-url = x\njunk line\n", "syntax", 3, "neither a [section] header"),
        ("[global]\nx = 1\n[global]\ny = 2\n", "duplicate-section", 3, "merge the two sections"),
        ("[global]\ntimeout = 1\ntimeout = 2\n", "duplicate-option", 3, "delete one of the two lines"),
        ("# c\nhello world\n[global]\n", "no-section-header", 2, "put a [global] line above"),
    ],
)
def test_parse_problems_and_manual_instructions(text, kind, line, hint):
    values, problem = pipconf.parse(text)
    assert values == {} and problem.kind == kind and problem.line == line
    if hint:
        with pytest.raises(pipconf.Unrepairable, match=f"pip.conf line {line}") as info:
            pipconf.repair_header(text, "pip.conf")
        assert hint in str(info.value)


def test_repair_refuses_when_other_errors_remain():
    with pytest.raises(pipconf.Unrepairable, match="after restoring the header, pip.conf line 3"):
        pipconf.repair_header("index-url = x\ntimeout = 1\nbogus\n", "pip.conf")


def test_split_lines_like_open():
    assert pipconf.split_lines("a\rb\r\nc\nd") == ["a\r", "b\r\n", "c\n", "d"]
    assert pipconf.split_lines("") == []
