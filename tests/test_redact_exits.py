"""One redaction function at every exit: generated secret names (any prefix/suffix),
values, URLs and config lines never survive any renderer, snapshot, diff or stream."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from gpudoctor.apply import PreparedWrite, unified_diff
from gpudoctor.engine import Report
from gpudoctor.facts import Facts
from gpudoctor.model import Finding, Status
from gpudoctor.redact import MAX_LINE_CHARS, REDACTED, RedactingStream, is_secret_name, redact_text, redact_value
from gpudoctor.render.console import render_console
from gpudoctor.render.json import render_json
from gpudoctor.render.markdown import render_markdown

_WORD = st.sampled_from(
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "KEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "token",
        "secret",
        "password",
        "apiKey",
        "Auth",
        "Key",
    ]
)
_AFFIX = st.from_regex(r"[A-Z]{0,6}(_[A-Z0-9]{1,5}){0,2}", fullmatch=True)
_SUFFIX = st.from_regex(r"(_?[0-9]{0,2})(_[A-Z]{1,4}[0-9]?)?", fullmatch=True)
#: secret values start with "Qz" and never contain it elsewhere by chance in the surrounding text
_VALUE = st.from_regex(r"Qz[A-Za-z0-9_./+-]{6,24}", fullmatch=True)
#: a password in a URL's userinfo ("/" would end the authority)
_URL_VALUE = st.from_regex(r"Qz[A-Za-z0-9_.+~-]{6,24}", fullmatch=True)


@st.composite
def secret_name(draw):
    prefix = draw(_AFFIX)
    name = f"{prefix}{'_' if prefix else ''}{draw(_WORD)}{draw(_SUFFIX)}"
    # names ending in a pointer word (KEY_FILE, TOKEN_PATH) hold a path, not the secret
    if not is_secret_name(name):
        name = name + "_X"
    return name


@settings(max_examples=200, deadline=None)
@given(prefix=_AFFIX, word=_WORD, suffix=st.from_regex(r"[0-9]{0,2}", fullmatch=True))
def test_names_with_any_affix_are_secret(prefix, word, suffix):
    for name in (f"{prefix}_{word}{suffix}", f"{prefix}_{word}_{suffix}" if suffix else f"{word}_2", f"{word}{suffix}"):
        if name.lower() not in ("key", "keys"):  # a bare key is a field name
            assert is_secret_name(name), name


def _report(name: str, value: str, url_secret: str) -> Report:
    env = {name: value, "PATH": "/usr/bin", "NVIDIA_VISIBLE_DEVICES": "all"}
    text = (
        f"the probe said {name}={value} while fetching https://user:{url_secret}@mirror.example.org/simple"
        f"?token={url_secret}x\n# {name.lower()} = {value}\n  {name}: {value}\n"
        f"machine h.example.org login u password {value}"
    )
    findings = (
        Finding(
            "x.leak",
            Status.FAIL,
            f"leak {name}={value}",
            text,
            evidence={"env": env, "log": text, name: value, "kernel": {"env": env}},
        ),
    )
    facts = Facts(domains={"x": {"env": env, "text": text}})
    return Report(findings, facts)


@settings(max_examples=40, deadline=None)
@given(name=secret_name(), value=_VALUE, url_secret=_URL_VALUE)
def test_no_secret_survives_any_renderer(name, value, url_secret):
    report = _report(name, value, url_secret)
    outputs = {}
    console = Console(file=io.StringIO(), width=200, no_color=True, force_terminal=False)
    render_console(report, console, verbose=True)
    outputs["console"] = console.file.getvalue()
    outputs["json"] = render_json(report, include_facts=True)
    outputs["markdown"] = render_markdown(report, verbose=True)
    outputs["facts"] = json.dumps(report.facts.to_json())
    old = f"[global]\n{name.lower()} = {value}\n"
    write = PreparedWrite(
        "/etc/pip.conf",
        "/etc/pip.conf",
        Path("/nonexistent/pip.conf"),
        old,
        old + f"index-url = https://u:{url_secret}@h.example.org/s\n",
        0o644,
        ("f",),
    )
    outputs["diff"] = unified_diff(write)
    sink = io.StringIO()
    stream = RedactingStream(sink)
    stream.write(f"Traceback: {name}={value}\nhalf a line {name}=")
    stream.write(f"{value} done\n")
    stream.flush()
    outputs["stream"] = sink.getvalue()
    for where, out in outputs.items():
        assert value not in out, (where, out)
        assert url_secret not in out, (where, out)
        assert REDACTED in out, where


def test_terminal_escapes_from_probed_strings_never_reach_output():
    evil = "ok\x1b[2J\x1b]0;pwned\x07\x1b[31mred\r\x08\x9b"
    report = Report((Finding("x.esc", Status.WARN, evil, evil, evidence={"out": evil}),), Facts())
    console = Console(file=io.StringIO(), width=200, no_color=True, force_terminal=False)
    render_console(report, console, verbose=True)
    for out in (console.file.getvalue(), render_markdown(report, verbose=True), redact_text(evil)):
        assert "\x1b" not in out and "\x07" not in out and "\x08" not in out and "\x9b" not in out
        assert "okred" in out
    assert "\\u001b" not in render_json(report) and "okred" in render_json(report)  # cleaned in JSON too
    sink = io.StringIO()
    RedactingStream(sink).write(evil + "\n")
    assert "\x1b" not in sink.getvalue()


def test_huge_lines_are_cut_with_a_note_and_json_stays_valid():
    huge = "x" * (MAX_LINE_CHARS * 5)
    out = redact_text(f"head\n{huge}\ntail")
    lines = out.splitlines()
    assert lines[0] == "head" and lines[2] == "tail"
    assert len(lines[1]) < MAX_LINE_CHARS + 60 and lines[1].endswith(f"[... {MAX_LINE_CHARS * 4} more characters cut]")
    assert redact_text(out) == out
    report = Report((Finding("x.big", Status.WARN, "big", evidence={"blob": huge}),), Facts())
    doc = json.loads(render_json(report))
    assert "more characters cut" in doc["findings"][0]["evidence"]["blob"]


def test_redact_value_covers_kernel_env_and_nvidia_variables():
    doc = {
        "kernels": [
            {
                "env": {
                    "NVIDIA_API_KEY_2": "nv-1",
                    "NVIDIA_DRIVER_CAPABILITIES": "all",
                    "HF_TOKEN2": "hf-2",
                    "MY_AUTH": "a-3",
                }
            }
        ]
    }
    env = redact_value(doc)["kernels"][0]["env"]
    assert env == {
        "NVIDIA_API_KEY_2": REDACTED,
        "NVIDIA_DRIVER_CAPABILITIES": "all",
        "HF_TOKEN2": REDACTED,
        "MY_AUTH": REDACTED,
    }


def test_secret_assignments_in_config_files_comments_included():
    conf = (
        "[global]\n# password = hunter2\n; token=abc123\nindex-url = https://h.example.org/s\n"
        "channels:\n  - defaults\n# api_key: cafe42\nauth: bead99\n"
        "machine h.example.org login bob password dead77\nexport HF_TOKEN=face11\n"
    )
    out = redact_text(conf)
    for secret in ("hunter2", "abc123", "cafe42", "bead99", "dead77", "face11"):
        assert secret not in out
    assert "index-url = https://h.example.org/s" in out and "  - defaults" in out


def test_bytes_written_to_the_guard_are_text_and_redacted():
    """click.echo(bytes) (shell completion) writes bytes; the guard takes them as UTF-8, redacted."""
    sink = io.StringIO()
    stream = RedactingStream(sink)
    stream.write(b"complete -F _gpudoctor gpudoctor\nHF_TOKEN=hf_abcdef123456\n")
    stream.flush()
    assert sink.getvalue().startswith("complete -F _gpudoctor gpudoctor\n")
    assert "hf_abcdef123456" not in sink.getvalue()
    with pytest.raises(TypeError):
        stream.write(42)  # type: ignore[arg-type]
