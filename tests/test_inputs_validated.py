"""Every input validated up front (issue 32, item 3): numeric options, GPUDOCTOR_* variables and
config values refuse NaN, infinities, negatives and wrong types with one line naming the option (and
the file and key) and exit 2, before anything is collected; every option reads GPUDOCTOR_<OPTION>
under its documented (long) name.

In-process through the console entry point (``gpudoctor.cli.common.main``): the refusals happen
before any collection, so no machine state is read."""

from __future__ import annotations

import pytest

from gpudoctor.cli.common import main


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
