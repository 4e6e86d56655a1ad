"""The field corpus: every public bug report under tests/field/cases, replayed and judged.

One parametrised test over the case directories (black's data-case layout): adding a case is
adding a directory. A case marked ``xfail`` in its case.toml is a known gap; the mark is
strict, so a case the tool gets right must lose it.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from field_replay import CASE_AREAS, CASES, case_dirs, judge, judge_case, load_case, replay

DIRS = case_dirs()


def _param(path):
    case = load_case(path)
    marks = [pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else []
    return pytest.param(path, id=case.id, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in DIRS])
def test_field_case(path):
    case = load_case(path)
    result = judge(case, replay(case))
    assert result.right, result.why


def test_every_case_directory_has_a_case_toml():
    stray = [p for p in CASES.glob("*/*") if p.is_dir() and not (p / "case.toml").exists()]
    assert stray == []


def test_every_twin_names_a_case_of_the_corpus():
    names = {p.name for p in DIRS}
    twins = {load_case(p).name: load_case(p).spec.get("twin_of") for p in DIRS}
    assert {name: of for name, of in twins.items() if of and of not in names} == {}


def test_sources_are_public_urls_without_machine_paths():
    for path in DIRS:
        source = load_case(path).spec["source"]
        assert re.match(r"https?://[a-z0-9.-]+\.[a-z]{2,}/", source), (path.name, source)


def test_a_broken_case_is_a_wrong_result_not_a_crash(tmp_path):
    bad = tmp_path / "gpu" / "broken"
    bad.mkdir(parents=True)
    (bad / "case.toml").write_text('source = "https://example.org/1"\ntitle = "x"\nkind = "k"\n')
    result = judge_case(bad)
    assert not result.right
    assert "[replay] mode" in result.why and "[expect] is required" in result.why


def test_the_judge_catches_a_wrong_status_a_missing_keyword_and_a_forbidden_remedy(tmp_path):
    """The judge itself: a copy of a real case with expectations it does not meet."""
    src = CASES / "gpu" / "fooocus-1313-driver-470-torch-cu121"
    dst = tmp_path / "gpu" / "altered"
    dst.mkdir(parents=True)
    (dst / "facts.json").write_bytes((src / "facts.json").read_bytes())
    (dst / "case.toml").write_text(
        'source = "https://example.org/1"\ntitle = "x"\nkind = "k"\n[replay]\nmode = "facts"\n'
        '[expect]\nstatus = "warn"\ncarrier = "cuda.driver"\nkeywords = ["no such word"]\n'
        'forbidden = ["525"]\nfine = ["cuda.available"]\n'
    )
    why = judge_case(dst).why
    assert "cuda.driver is fail, expected warn" in why
    assert "does not say ['no such word']" in why
    assert "forbidden remedy '525'" in why
    assert "cuda.available should stay fine" in why


def test_case_areas_are_the_report_areas():
    assert {p.parent.name for p in DIRS} <= set(CASE_AREAS)
    assert Counter(load_case(p).healthy for p in DIRS)[True] >= 1
