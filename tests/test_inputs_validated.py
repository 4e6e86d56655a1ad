"""Every input validated up front (issue 32, item 3): numeric options, GPUDOCTOR_* variables and
config values refuse NaN, infinities, negatives and wrong types with one line naming the option (and
the file and key) and exit 2, before anything is collected; every option reads GPUDOCTOR_<OPTION>
under its documented (long) name.

In-process through the console entry point (``gpudoctor.cli.common.main``): the refusals happen
before any collection, so no machine state is read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from _foundation import env_with, run_gpudoctor
from gpudoctor.cli.common import main
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.engine import collect_facts, evaluate
from gpudoctor.model import Status
from gpudoctor.testing import fake_system, write_tree


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for k in [k for k in __import__("os").environ if k.startswith("GPUDOCTOR_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("GPUDOCTOR_CONFIG", "")
    monkeypatch.setenv("GPUDOCTOR_LOOPBACK_ONLY", "1")

    def go(*argv, env=None, config=None):
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        if config is not None:
            (tmp_path / "c.toml").write_text(config)
            monkeypatch.setenv("GPUDOCTOR_CONFIG", str(tmp_path / "c.toml"))
        with pytest.raises(SystemExit) as exc:
            main(list(argv))
        out, err = capsys.readouterr()
        return exc.value.code, out, err

    return go


BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "1e400", "abc", ""]
GATE_FLOAT_OPTIONS = ["--timeout", "--wait", "--interval", "--min-gpu-memory-gib"]


@pytest.mark.parametrize("option", GATE_FLOAT_OPTIONS)
@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_gate_numeric_options_refuse_non_finite_negative_and_garbage(run, option, value):
    code, out, err = run("gate", option, value, "--", "/bin/false")
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("gpudoctor: error: ") and option in err, err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--probe-timeout", "nan"],
        ["check", "--probe-timeout", "inf"],
        ["facts", "--probe-timeout", "-inf"],
        ["mirrors", "--timeout", "nan"],
        ["mirrors", "--budget", "nan"],
        ["check", "--mirror-budget", "nan"],
        ["explain", "--probe-timeout", "nan", "-", "--no-check"],
    ],
)
def test_other_commands_refuse_non_finite_numbers(run, argv):
    code, _out, err = run(*argv)
    assert code == 2 and ("finite" in err or "range" in err) and argv[1] in err, err


@pytest.mark.parametrize(
    ("var", "value", "named"),
    [
        ("GPUDOCTOR_WAIT", "nan", "--wait"),
        ("GPUDOCTOR_TIMEOUT", "inf", "--timeout"),
        ("GPUDOCTOR_REQUIRE_GPUS", "-2", "--require-gpus"),
        ("GPUDOCTOR_REQUIRE_GPUS", "two", "--require-gpus"),
        ("GPUDOCTOR_MIN_GPU_MEMORY_GIB", "nan", "--min-gpu-memory-gib"),
        ("GPUDOCTOR_CHECK_TIMEOUT_S", "nan", "GPUDOCTOR_CHECK_TIMEOUT_S"),
        ("GPUDOCTOR_CHECK_TIMEOUT_S", "-1", "GPUDOCTOR_CHECK_TIMEOUT_S"),
        ("GPUDOCTOR_CHECK_TIMEOUT_S", "soon", "GPUDOCTOR_CHECK_TIMEOUT_S"),
        ("GPUDOCTOR_COLLECT_TIMEOUT_SCALE", "nan", "GPUDOCTOR_COLLECT_TIMEOUT_SCALE"),
        ("GPUDOCTOR_COLLECT_TIMEOUT_SCALE", "0.5", "GPUDOCTOR_COLLECT_TIMEOUT_SCALE"),
        ("GPUDOCTOR_COLLECT_TIMEOUT_SCALE", "slow", "GPUDOCTOR_COLLECT_TIMEOUT_SCALE"),
        ("GPUDOCTOR_LOOPBACK_ONLY", "yes please", "GPUDOCTOR_LOOPBACK_ONLY"),
    ],
)
def test_bad_environment_values_are_one_line_and_exit_2(run, var, value, named):
    code, _out, err = run("gate", "--", "/bin/false", env={var: value})
    assert code == 2 and named in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("[gate]\nrequire-gpus = true\n", "require-gpus = true: expected an integer"),
        ("[gate]\nrequire-gpus = 2.5\n", "require-gpus = 2.5: expected an integer"),
        ("[gate]\nrequire-gpus = -1\n", "require-gpus = -1"),
        ("[gate]\ntimeout = nan\n", "timeout = nan: expected a finite number"),
        ("[gate]\nwait = inf\n", "wait = inf: expected a finite number"),
        ("[gate]\ninterval = -inf\n", "interval = -inf: expected a finite number"),
        ("[gate]\nwait = -3\n", "wait = -3"),
        ("[gate]\nwait = '10'\n", "wait = '10': expected a number"),
        ("[gate]\nstrict = 'false'\n", "strict = 'false': expected true or false"),
        ("[gate]\nskip = [1, 2]\n", "skip = [1, 2]: expected a list of strings"),
        ("[gate]\nformat = 'yaml'\n", "format = 'yaml'"),
        ("[gate]\nstatus-file = 5\n", "status-file = 5: expected a string"),
        ("probe-timeout = nan\n", "probe-timeout = nan: expected a finite number"),
        ("[check]\nprobe-timeout = 0\n", "probe-timeout = 0"),
    ],
)
def test_bad_config_values_name_the_file_and_key(run, tmp_path, config, named):
    cmd = "check" if "[check]" in config or "probe-timeout" in config else "gate"
    code, _out, err = run(
        cmd, "--facts" if cmd == "check" else "--", "/nonexistent" if cmd == "check" else "/bin/false", config=config
    )
    assert code == 2, err
    assert f"config file {tmp_path / 'c.toml'}: {named}" in err and err.count("\n") == 1, err


def test_options_read_their_documented_variable_and_config_key(run, tmp_path):
    """--format was settable only as GPUDOCTOR_FMT and config key `fmt` (its parameter's name)."""
    code, out, _err = run("gate", "--require-gpus", "0", env={"GPUDOCTOR_FORMAT": "json"})
    assert code == 0 and out.lstrip().startswith("{") and '"healthy": true' in out
    code, out, _err = run("gate", config="[gate]\nformat = 'json'\nrequire-gpus = 0\n")
    assert code == 0 and '"healthy": true' in out
    code, _out, err = run("gate", "--require-gpus", "0", "--format", "json", env={"GPUDOCTOR_CHECKS": "no.such"})
    assert code == 2 and "no check matches 'no.such'" in err  # --checks: GPUDOCTOR_CHECKS


def test_every_option_of_check_and_gate_has_a_variable_under_its_long_name():
    import click

    from gpudoctor.cli import cli

    for name in ("check", "gate"):
        cmd = cli.get_command(click.Context(cli), name)
        for p in cmd.params:
            if isinstance(p, click.Option) and any(o.startswith("--") for o in p.opts):
                long = next(o for o in p.opts if o.startswith("--"))[2:]
                wanted = "GPUDOCTOR_" + long.upper().replace("-", "_")
                envvars = [p.envvar] if isinstance(p.envvar, str) else list(p.envvar or ())
                assert wanted in envvars, (name, long, p.envvar)


# =========================================================================== bad input files
# Bad input is one line and exit 2; a config file that cannot be read or parsed is a finding that
# says so; output survives an ASCII-only encoding.

SNAP = sorted((Path(__file__).parent / "fixtures" / "facts").glob("*.json"))[0]


def _one_line_exit_2(proc, *words):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(err.splitlines()) == 1 and err.startswith("gpudoctor: error:"), err
    for w in words:
        assert w in err, err


def test_deeply_nested_facts_json(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(f)), "nested deeper than")


def test_oversized_facts_file(tmp_path):
    f = tmp_path / "huge.json"
    with open(f, "wb") as fh:
        fh.truncate(65 * 1024 * 1024)  # sparse: costs no disk
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(f)), "too large")


@pytest.mark.parametrize(
    "make, word",
    [
        (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary"), "binary"),
        (lambda p: p.write_bytes(b"\xff\xfe[[mirror]]"), "not UTF-8"),
        (lambda p: (os.symlink(p.name + ".b", p), os.symlink(p.name, str(p) + ".b")), "symlink loop"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: p.mkdir(), "is a directory"),
    ],
)
@pytest.mark.parametrize("option", ["--facts", "--catalogue"])
def test_unusable_input_files(tmp_path, make, word, option):
    p = tmp_path / "input"
    make(p)
    args = ["check", option, str(p)] + (["--offline", "pip"] if option == "--catalogue" else [])
    _one_line_exit_2(run_gpudoctor(*args, timeout=60), word)


def test_facts_document_of_the_wrong_shape(tmp_path):
    f = tmp_path / "odd.json"
    f.write_text(json.dumps({"schema_version": 1, "domains": [1, 2, 3]}))
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(f)), "not a gpudoctor facts snapshot")


def _facts(root, domains, env=None):
    system = fake_system(root, env=env or {"PATH": "/usr/bin"}, home="/home/user")
    return collect_facts(domains, system, CollectOptions(offline=True), all_collectors())[0]


def test_pip_conf_that_cannot_be_read_is_not_read_silently(tmp_path):
    write_tree(tmp_path, {"/etc/os-release": "ID=debian\n"})
    (tmp_path / "etc" / "pip.conf").symlink_to("/etc/pip.conf")  # loops on itself
    from gpudoctor.checks.pip_config import CHECK

    findings = evaluate([CHECK], _facts(tmp_path, ["pip"]))
    warn = [f for f in findings if f.status is Status.WARN]
    assert warn and "pip cannot read /etc/pip.conf" in warn[0].summary and "symlink loop" in warn[0].summary
    assert not any(f.summary.startswith("pip reads its configuration") for f in findings)


@pytest.mark.parametrize(
    "path, text, check_id, word, status",
    [
        ("/home/user/.condarc", "channels: [defaults\n", "conda.mirror", "not valid YAML", Status.WARN),
        ("/home/user/.condarc", "- defaults\n- conda-forge\n", "conda.mirror", "not a mapping", Status.WARN),
        # uv refuses to run on a uv.toml it cannot parse: a fail
        ("/home/user/.config/uv/uv.toml", "[[index]\nurl = 'x'\n", "uv.mirror", "not valid TOML", Status.FAIL),
    ],
)
def test_invalid_condarc_or_uv_toml_is_not_not_configured(tmp_path, path, text, check_id, word, status):
    write_tree(tmp_path, {path: text, "/etc/os-release": "ID=debian\n"})
    from gpudoctor.registry import load_registry

    check = load_registry().checks[check_id]
    findings = evaluate([check], _facts(tmp_path, ["os", "apt", "uv", "conda", "pip", "mirrors"]))
    assert findings[0].status is status, findings[0]
    assert "cannot be read" in findings[0].summary and word in findings[0].summary
    # the explanation adds to the summary instead of repeating it, and names the syntax to fix
    assert word not in findings[0].explanation
    assert ("Fix its TOML syntax" if check_id == "uv.mirror" else "Fix its YAML syntax") in findings[0].explanation
    assert "not configured" not in findings[0].summary


def test_ascii_only_output_encoding_works():
    for fmt in ("console", "markdown", "json"):
        proc = run_gpudoctor(
            "check", "--facts", str(SNAP), "-v", "--format", fmt, env=env_with(PYTHONIOENCODING="ascii")
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        proc.stdout.encode("ascii")
    proc = run_gpudoctor("list", env=env_with(PYTHONIOENCODING="ascii"))
    assert proc.returncode == 0 and "pip.config" in proc.stdout


def test_a_report_or_status_document_given_as_facts_says_what_it_is(tmp_path):
    """A report (schema_version 1, like old snapshots) once replayed as an empty snapshot: exit 0."""
    report = tmp_path / "report.json"
    proc = run_gpudoctor("check", "--facts", str(SNAP), "--format", "json", "-o", str(report))
    assert proc.returncode in (0, 1) and json.loads(report.read_text())["findings"]
    _one_line_exit_2(
        run_gpudoctor("check", "--facts", str(report)),
        "`gpudoctor check --format json` report",
        "gpudoctor facts -o FILE",
    )
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"healthy": True, "time": "", "hostname": "n1", "checks": {}, "failures": []}))
    _one_line_exit_2(run_gpudoctor("check", "--facts", str(status)), "`gpudoctor gate` status document")
    _one_line_exit_2(
        run_gpudoctor("check", "--facts", "-", input=json.dumps({"foo": 1})),
        "the file has none",
        "not a gpudoctor facts",
    )
    # the real snapshot still replays
    assert run_gpudoctor("check", "--facts", str(SNAP)).returncode in (0, 1)


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--offline", "pip"],
        ["check", "--offline", "pip", "--format", "prometheus"],
        ["facts", "--offline", "pip"],
        ["mirrors", "--offline", "pip"],
        ["gate", "--status-file"],
        ["explain", "--no-check", "--", "sh", "-c", "echo RAN; touch ran; exit 1"],
    ],
)
@pytest.mark.parametrize("bad", ["missing-dir/out", "a-file/out", "."])
def test_an_output_path_that_cannot_be_written_is_refused_before_anything_runs(tmp_path, args, bad):
    (tmp_path / "a-file").write_text("x")
    args = list(args)  # the parametrized list is shared between the runs
    flag = args.pop() if args[-1] == "--status-file" else "-o"
    out = str(tmp_path / bad)
    if "--" in args:
        i = args.index("--")
        argv = [*args[:i], flag, out, *args[i:]]
    else:
        argv = [*args, flag, out]
    proc = run_gpudoctor(*argv, cwd=tmp_path, timeout=60)
    word = {"missing-dir/out": "does not exist", "a-file/out": "is not a directory", ".": "is a directory"}[bad]
    _one_line_exit_2(proc, f"{flag} {out}", word)
    assert "RAN" not in proc.stdout and not (tmp_path / "ran").exists()  # the command never started
