"""Timeouts and slow indexes say what pip does: pip's own `timeout` (15 s by default, or pip.conf /
PIP_TIMEOUT) against the measured answer time of the configured index, on real servers on 127.0.0.1.

- no answer at all: fail, with the time waited and pip's timeout;
- an answer slower than pip's timeout: fail (every request ends in "Read timed out");
- slower than the slow threshold but within pip's timeout: warn (the twin);
- the remedy names a measured faster mirror when a ranking has one, and the fix clears the finding.
"""

from __future__ import annotations

import pytest
from tests._fixcycle import cycle

from gpudoctor.mirrors.catalogue import from_text
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import Status
from gpudoctor.testing import write_tree

pytestmark = pytest.mark.slow


def root_for(tmp_path, index: str, extra_conf: str = ""):
    return write_tree(tmp_path, {"/etc/pip.conf": f"[global]\nindex-url = {index}\n{extra_conf}"})


def test_stalled_index_past_pips_timeout_fails_with_both_times(tmp_path):
    with FakeMirror(fault="stall") as stall:
        root = root_for(tmp_path, f"{stall.url}/simple", "timeout = 2\n")
        c = cycle(
            root, ["pip.mirror"], "pip.index-url", offline=False, extra={"mirror_timeout_s": 2.5, "mirror_budget_s": 3}
        )
    (f,) = c.before
    assert f.status is Status.FAIL
    assert "stalls: no answer within 2.5 s, past pip's timeout of 2 s: every install fails" in f.summary
    assert f.evidence["pip_timeout_from"] == "timeout in /etc/pip.conf"


def test_stalled_index_within_pips_default_timeout_says_what_pip_waits(tmp_path):
    with FakeMirror(fault="stall") as stall:
        root = root_for(tmp_path, f"{stall.url}/simple")
        c = cycle(
            root, ["pip.mirror"], "pip.index-url", offline=False, extra={"mirror_timeout_s": 1, "mirror_budget_s": 2}
        )
    (f,) = c.before
    assert f.status is Status.FAIL and "no answer within 1 s" in f.summary
    assert "pip waits 15 s per request (5 retries)" in f.summary and "pip's default" in f.explanation


def test_answer_slower_than_pips_timeout_fails_and_names_the_faster_mirror_then_fixed(tmp_path):
    with FakeMirror(delay_ms=1300) as slow, FakeMirror() as fast:
        cat = from_text(
            f'replace = true\n[[mirror]]\nname = "quick"\npypi = "{fast.url}/simple"\nsource = "test"\n', "test"
        )
        root = root_for(tmp_path, f"{slow.url}/simple", "timeout = 1\n")
        extra = {"rank_mirrors": True, "catalogue": cat, "rank_ecosystems": ("pip",), "mirror_budget_s": 8}
        c = cycle(root, ["pip.mirror"], "pip.index-url", {"mirror": f"{fast.url}/simple"}, offline=False, extra=extra)
    (f,) = c.before
    assert f.status is Status.FAIL, f.summary
    assert "past pip's timeout of 1 s (timeout in /etc/pip.conf): every install fails; quick answers in" in f.summary
    assert "gpudoctor fix pip.index-url --mirror quick" in f.explanation and f.fixes == ("pip.index-url",)
    assert c.after[0].status is Status.OK, c.after[0].summary


def test_twin_slow_answer_within_pips_timeout_is_a_warning(tmp_path):
    with FakeMirror(delay_ms=1300) as slow:
        root = root_for(tmp_path, f"{slow.url}/simple")
        c = cycle(root, ["pip.mirror"], "pip.index-url", offline=False, extra={"mirror_budget_s": 8})
    (f,) = c.before
    assert f.status is Status.WARN and "usable but slow" in f.summary


def test_uv_neighbour_stall_against_uv_http_timeout(tmp_path):
    with FakeMirror(fault="stall") as stall:
        root = write_tree(tmp_path, {"/home/user/.config/uv/uv.toml": f'index-url = "{stall.url}/simple"\n'})
        c = cycle(
            root,
            ["uv.mirror"],
            "uv.index-url",
            env={"UV_HTTP_TIMEOUT": "2"},
            offline=False,
            extra={"mirror_timeout_s": 2.5, "mirror_budget_s": 3},
        )
    (f,) = c.before
    assert f.status is Status.FAIL
    assert "uv index" in f.summary and "past uv's timeout of 2 s: every install fails" in f.summary
    assert "UV_HTTP_TIMEOUT" in f.explanation
