"""Renderers (console, json, markdown) on reports built from findings: layout, status glyphs, redaction."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from _foundation import validator
from gpudoctor.cli import cli
from gpudoctor.engine import Report
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import Finding, Status
from gpudoctor.probe import _dataloader_report as report
from gpudoctor.render import FORMATS, render
from gpudoctor.render.console import (
    SpinnerProgress,
    is_plain,
    make_console,
    render_console,
)
from gpudoctor.render.text import evidence_lines, finding_title
from gpudoctor.testing import make_facts

MIRROR = "https://alice:pa55w0rd@mirror.example.org/simple"


def report():
    return Report(
        (
            Finding("nvidia.driver", Status.OK, "NVIDIA driver 550.54.15", evidence={"driver_version": "550.54.15"}),
            Finding(
                "torch.install",
                Status.FAIL,
                "torch | pipes in summary",
                "Run:\n\n```\npip install torch\n```",
                evidence={"python": "/venv/bin/python"},
                fixes=("pip.index-url",),
                target="/venv/bin/python",
            ),
            Finding(
                "pip.index",
                Status.WARN,
                f"index {MIRROR} is slow",
                f"The index {MIRROR} took 9 s; HF_TOKEN=hf_zzz",
                evidence={
                    "index_url": MIRROR,
                    "HF_TOKEN": "hf_zzz",
                    "headers": {"Authorization": "Bearer abc"},
                    "urls": [MIRROR],
                    "tb": "line1\nline2 API_KEY=k-123",
                },
            ),
            Finding("dataloader.cpu", Status.SKIP, "not applicable", "skip explanation"),
            Finding(
                "collect.gpu",
                Status.ERROR,
                "the gpu collector crashed: KeyError",
                "a bug",
                evidence={"traceback": "Traceback (most recent call last):\nKeyError: 'x'"},
            ),
            Finding("torch.install", Status.INFO, "cpu build", target="current"),
        ),
        make_facts(),
        duration_ms=1234.5,
    )


SECRETS = ("pa55w0rd", "hf_zzz", "k-123", "Bearer abc")


def console_text(verbose=False, plain=True):
    buf = io.StringIO()
    console = Console(
        file=buf,
        no_color=plain,
        force_terminal=not plain,
        width=120,
        highlight=False,
        soft_wrap=plain,
        color_system="truecolor" if not plain else None,
    )
    render_console(report(), console, verbose)
    return buf.getvalue()


def test_console_plain_layout():
    out = console_text()
    lines = out.splitlines()
    # the headline first: overall verdict and the worst problem (no cuda.available finding here)
    assert lines[0] == "[ERROR] gpudoctor: ERROR — torch.install: [/venv/bin/python] torch | pipes in summary"
    # one header per area, gpudoctor's own errors first, then the causal order
    headers = [ln for ln in lines if ln.startswith("[")][1:]
    assert headers == [
        "[ERROR] gpudoctor itself (collectors, plug-ins) (1 check): 1 error",
        "[FAIL] GPU stack (2 checks, 3 findings): 1 failed, 1 info, 1 ok",
        "[n/a] Data pipeline (1 check): 1 not applicable",
        "[warn] Package sources (1 check): 1 warning",
    ]
    assert "  [FAIL] torch.install  [/venv/bin/python] torch | pipes in summary" in lines
    assert "      pip install torch" in lines  # the explanation, indented
    assert "      fix: gpudoctor fix pip.index-url" in lines
    assert "  1 not applicable: not applicable (dataloader.cpu)" in lines  # folded into the area
    assert not any(ln.startswith("  [skip]") for ln in lines)  # skips are folded into their area
    assert not any(ln.startswith("  [ok]") for ln in lines)  # ok findings too
    assert "skip explanation" not in out  # skip explanations only with -v
    assert "  [ERROR] collect.gpu  the gpu collector crashed: KeyError" in lines
    assert "  [info] torch.install  cpu build" in lines  # the "current" target is not shown
    assert "Traceback" not in out
    assert "6 findings in 4 areas: 1 failed, 1 error, 1 warning, 1 info, 1 ok, 1 not applicable (1.2 s)" in lines
    # the next steps come last, numbered, failures first
    i = lines.index("Next steps:")
    assert lines[i + 1] == "  1. gpudoctor fix pip.index-url   # torch.install"
    assert lines[-1].startswith("  3. ") or lines[-1].startswith("  2. ")
    assert "\x1b[" not in out
    for s in SECRETS:
        assert s not in out


def test_console_verbose_shows_evidence_and_tracebacks_redacted():
    out = console_text(verbose=True)
    assert "skip explanation" in out
    assert "    traceback:" in out and "        Traceback (most recent call last):" in out
    assert "    index_url: https://****@mirror.example.org/simple" in out
    assert "    HF_TOKEN: ****" in out
    assert "    driver_version: 550.54.15" in out
    for s in SECRETS:
        assert s not in out


def test_console_rich_uses_glyphs_and_colour():
    out = console_text(plain=False)
    assert "\x1b[" in out
    for glyph in ("✗", "!", "‼"):
        assert glyph in out
    assert "✓" in console_text(verbose=True, plain=False)  # ok findings are shown with -v
    for s in SECRETS:
        assert s not in out


def test_make_console_is_plain_for_pipes_and_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert is_plain(make_console(io.StringIO()))

    class TTY(io.StringIO):
        def isatty(self):
            return True

    assert not is_plain(make_console(TTY()))
    monkeypatch.setenv("NO_COLOR", "1")
    assert is_plain(make_console(TTY()))


def test_spinner_is_silent_when_not_a_terminal():
    buf = io.StringIO()
    with SpinnerProgress(make_console(buf)) as progress:
        progress.started("nvidia")
        progress.finished("nvidia")
    assert buf.getvalue() == ""


def test_json_render_validates_and_redacts():
    text = render(report(), "json")
    for s in SECRETS:
        assert s not in text
    doc = json.loads(text)
    validator("report.schema.json").validate(doc)
    assert doc["status"] == "error"
    assert doc["counts"] == {"ok": 1, "info": 1, "skip": 1, "warn": 1, "fail": 1, "error": 1}
    assert doc["duration_ms"] == 1234.5
    f = doc["findings"][1]
    assert (f["check"], f["status"], f["fixes"], f["target"]) == (
        "torch.install",
        "fail",
        ["pip.index-url"],
        "/venv/bin/python",
    )
    assert doc["findings"][2]["evidence"]["HF_TOKEN"] == "****"
    assert doc["findings"][2]["evidence"]["headers"] == {"Authorization": "****"}


def test_json_with_facts_validates_against_both_schemas():
    from gpudoctor.render.json import render_json

    doc = json.loads(render_json(report(), include_facts=True))
    validator("report.schema.json").validate(doc)
    assert doc["facts"]["schema_version"] == 2
    assert [f["area"] for f in doc["findings"]] == ["gpu", "gpu", "sources", "data", "gpudoctor", "gpu"]


def test_markdown_render():
    md = render(report(), "markdown", verbose=True)
    assert "‼ **error** — torch.install: [/venv/bin/python] torch | pipes in summary" in md
    assert "<details open><summary>✗ <b>GPU stack</b> (2 checks, 3 findings): 1 failed, 1 info, 1 ok</summary>" in md
    assert "- ✗ **fail** `torch.install` — [/venv/bin/python] torch | pipes in summary" in md
    assert "  Fix: `gpudoctor fix pip.index-url`" in md
    assert "<details><summary>evidence</summary>" in md
    assert "### Next steps" in md and "1. `gpudoctor fix pip.index-url` (torch.install)" in md
    for s in SECRETS:
        assert s not in md
    assert set(FORMATS) == {"json", "markdown", "prometheus"}


def test_markdown_folds_ok_and_skip_without_verbose():
    md = render(report(), "markdown")
    assert "- 1 check ok: `nvidia.driver`" in md
    assert "- not applicable: not applicable (`dataloader.cpu`)" in md
    assert "skip explanation" not in md
    assert md.count("<details") == md.count("</details>") == 4  # one block per area


def test_text_helpers():
    f = Finding(
        "a.b",
        Status.WARN,
        "s",
        evidence={"empty": [], "nums": [1, 2], "d": {"k": 1}, "multi": "x\ny"},
        target="kernel:py311",
    )
    assert finding_title(f) == "[kernel:py311] s"
    assert evidence_lines(f) == ["empty:", "    (none)", "nums: [1, 2]", 'd: {"k": 1}', "multi:", "    x", "    y"]


# --------------------------------------------------------------------------- (issue 19) 1. which hosts a run contacted


def _pip_root(tmp_path: Path, index: str) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/pip.conf").write_text(f"[global]\nindex-url = {index}/simple\n")
    return root


@pytest.fixture
def no_pip_env(monkeypatch):
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.slow
def test_report_names_the_hosts_contacted_and_offline_says_none(tmp_path, no_pip_env):
    with FakeMirror() as index:
        root = _pip_root(tmp_path, index.url)
        online = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root)])
        assert index.requests, "the configured pip index was not probed"
        lines = online.output.splitlines()
        assert "network: contacted 1 host: 127.0.0.1" in lines, online.output
        # after the closing count line, before the next steps
        count = next(i for i, ln in enumerate(lines) if re.match(r"\d+ findings? in \d+ areas?:", ln))
        assert lines[count + 1] == "network: contacted 1 host: 127.0.0.1"
        md = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--format", "markdown"])
        assert "Network: contacted 1 host: 127.0.0.1" in md.output
        sent = len(index.requests)
        offline = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--offline"])
        assert len(index.requests) == sent  # nothing was sent
        assert "network: none (--offline)" in offline.output.splitlines(), offline.output


def test_no_network_line_when_no_index_was_looked_at():
    result = CliRunner().invoke(cli, ["check", "dataloader.cpu", "--offline"])
    assert "1 finding in 1 area" in result.output
    assert "network:" not in result.output


def test_network_line_from_facts_counts_distinct_hosts_and_skips_local():
    from gpudoctor.facts.mirrors import MirrorProbe, MirrorsFacts
    from gpudoctor.render.layout import network_line
    from gpudoctor.testing import make_facts

    def p(url, status="ok", role="candidate"):
        return MirrorProbe("m", "pip", "pypi", url, url + "/six/", role, False, status)

    facts = make_facts(
        mirrors=MirrorsFacts(
            offline=False,
            ranked=True,
            budget_s=5.0,
            catalogue_origin="test",
            catalogue=(),
            configured=(p("https://a.example.org/simple", role="configured"), p("file:///srv/wheels", "local")),
            rankings={"pip": (p("https://b.example.org/pypi/simple", "timeout"), p("https://a.example.org/x"))},
        )
    )
    assert network_line(facts) == "contacted 2 hosts: a.example.org, b.example.org"
    assert network_line(facts, replayed=True).endswith("(when the snapshot was collected)")
    assert network_line(make_facts()) is None
