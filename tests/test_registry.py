"""The plug-in registry: fake entry points (broken, duplicate, wrong type) and a real
throw-away distribution on PYTHONPATH seen by ``gpudoctor list`` / ``gpudoctor check``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from _foundation import GPUDOCTOR, env_with
from gpudoctor.model import Check, Fix, Status
from gpudoctor.registry import PLUGIN_CHECK_ID, load_registry


class FakeDist:
    def __init__(self, name, version):
        self.metadata = {"Name": name}
        self.version = version


class FakeEP:
    """Just what load_registry uses of an importlib.metadata.EntryPoint."""

    def __init__(self, name, obj=None, dist=("thirdparty", "1.0"), error=None, value=None):
        self.name, self._obj, self._error = name, obj, error
        self.value = value or f"{dist[0] if dist else 'anon'}.mod:OBJ"
        self.dist = FakeDist(*dist) if dist else None

    def load(self):
        if self._error:
            raise self._error
        return self._obj


def stub_check(id_):
    return Check(id=id_, title=f"{id_} title", needs=(), evaluate=lambda facts: [])


def stub_fix(id_, addresses=("a.b",)):
    return Fix(id=id_, title=f"{id_} title", addresses=addresses, plan=lambda facts, finding, options: None)


def test_good_plugins_load_in_stable_order_with_providers():
    reg = load_registry(
        check_eps=[
            FakeEP("zeta.one", stub_check("zeta.one")),
            FakeEP("dataloader.shm", stub_check("dataloader.shm"), ("gpudoctor", "0.1.0")),
            FakeEP("nvidia.driver", stub_check("nvidia.driver"), ("gpudoctor", "0.1.0")),
        ],
        fix_eps=[FakeEP("pip.index-url", stub_fix("pip.index-url", ("pip.index",)))],
    )
    assert reg.problems == []
    assert list(reg.checks) == ["nvidia.driver", "dataloader.shm", "zeta.one"]
    assert reg.provider("zeta.one") == "thirdparty 1.0"
    assert reg.provider("nvidia.driver") == "gpudoctor 0.1.0"
    assert reg.provider("pip.index-url", "fix") == "thirdparty 1.0"
    assert [f.id for f in reg.fixes_for("pip.index")] == ["pip.index-url"]
    assert reg.fixes_for("nothing.here") == []


def test_broken_plugin_is_an_error_finding_naming_the_distribution_and_the_rest_load():
    reg = load_registry(
        check_eps=[
            FakeEP("broken.check", error=ImportError("No module named 'brokenplug_impl'"), dist=("brokenplug", "0.3")),
            FakeEP("good.check", stub_check("good.check")),
        ],
        fix_eps=[],
    )
    assert list(reg.checks) == ["good.check"]
    (p,) = reg.problems
    assert (p.check, p.status) == (PLUGIN_CHECK_ID, Status.ERROR)
    assert p.summary == (
        "plug-in check 'broken.check' from brokenplug 0.3 failed to load: "
        "ImportError: No module named 'brokenplug_impl'"
    )
    assert "brokenplug" in p.explanation
    assert "Traceback" in p.evidence["traceback"]


def test_duplicate_id_is_refused_naming_both_providers_builtin_kept():
    reg = load_registry(
        check_eps=[
            FakeEP("nvidia.driver", stub_check("nvidia.driver"), ("dupplug", "2.0")),
            FakeEP("nvidia.driver", stub_check("nvidia.driver"), ("gpudoctor", "0.1.0")),
        ],
        fix_eps=[],
    )
    assert reg.provider("nvidia.driver") == "gpudoctor 0.1.0"
    (p,) = reg.problems
    assert p.status is Status.ERROR
    assert "claimed twice: by gpudoctor 0.1.0 and by dupplug 2.0" in p.summary
    assert (p.evidence["kept"], p.evidence["refused"]) == ("gpudoctor 0.1.0", "dupplug 2.0")


def test_duplicate_fix_between_two_third_parties():
    reg = load_registry(
        check_eps=[],
        fix_eps=[
            FakeEP("pip.x-y", stub_fix("pip.x-y"), ("first", "1")),
            FakeEP("pip.x-y", stub_fix("pip.x-y"), ("second", "1")),
        ],
    )
    assert reg.provider("pip.x-y", "fix") == "first 1"
    assert "by first 1 and by second 1" in reg.problems[0].summary


@pytest.mark.parametrize(
    "ep, problem",
    [
        (FakeEP("a.check", obj="not a check"), "points at a str, not a Check"),
        (FakeEP("a.check", obj=stub_check("b.check")), "is registered as 'a.check' but its id is 'b.check'"),
        (FakeEP("Bad_ID", obj=stub_check("Bad_ID")), "has an invalid id 'Bad_ID'"),
        (FakeEP("a.fixish", obj=stub_fix("a.fixish")), "points at a Fix, not a Check"),
    ],
)
def test_wrong_plugin_objects_are_refused(ep, problem):
    reg = load_registry(check_eps=[ep], fix_eps=[])
    assert reg.checks == {}
    (p,) = reg.problems
    assert problem in p.summary and "thirdparty 1.0" in p.summary


def test_entry_point_without_distribution():
    reg = load_registry(check_eps=[FakeEP("x.y", error=RuntimeError("boom"), dist=None)], fix_eps=[])
    assert "unknown distribution" in reg.problems[0].summary


def test_installed_builtins():
    reg = load_registry()
    assert reg.problems == []
    assert {"nvidia.driver", "torch.install", "dataloader.shm", "dataloader.cpu"} <= set(reg.checks)
    assert all(
        reg.provider(cid).startswith("gpudoctor ")
        for cid in ("nvidia.driver", "torch.install", "dataloader.shm", "dataloader.cpu")
    )


# ----------------------------------------------------------------- a real throw-away distribution


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """A directory with three distributions: a good plug-in, a broken one, and one duplicating a built-in id."""
    site = tmp_path_factory.mktemp("site")

    def dist(name, version, entry_points, modules):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(entry_points)
        for mod, text in modules.items():
            (site / f"{mod}.py").write_text(text)

    dist(
        "goodplug",
        "1.2",
        "[gpudoctor.checks]\ngoodplug.hello = goodplug_checks:CHECK\n",
        {
            "goodplug_checks": "from gpudoctor.model import Check, Status\n"
            "def evaluate(facts):\n"
            "    return [CHECK.finding(Status.WARN, 'hello from a plug-in')]\n"
            "CHECK = Check(id='goodplug.hello', title='Says hello', needs=(), evaluate=evaluate)\n"
        },
    )
    dist(
        "brokenplug",
        "0.3",
        "[gpudoctor.checks]\nbrokenplug.check = brokenplug_checks:CHECK\n",
        {"brokenplug_checks": "import brokenplug_missing_dependency\n"},
    )
    dist(
        "dupplug",
        "2.0",
        "[gpudoctor.checks]\nnvidia.driver = dupplug_checks:CHECK\n",
        {
            "dupplug_checks": "from gpudoctor.model import Check\n"
            "CHECK = Check(id='nvidia.driver', title='impostor', needs=(), evaluate=lambda f: [])\n"
        },
    )
    return site


def run_cli(args, site, **kw):
    env = env_with(PYTHONPATH=str(site), NO_COLOR="1")
    return subprocess.run([*GPUDOCTOR, *args], capture_output=True, text=True, env=env, timeout=120, **kw)


def test_list_shows_plugins_providers_and_problems(plugin_site):
    out = run_cli(["list", "--format", "json"], plugin_site)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    items = {(i["kind"], i["id"]): i for i in doc["items"]}
    assert items[("check", "goodplug.hello")]["provider"] == "goodplug 1.2"
    assert items[("check", "goodplug.hello")]["title"] == "Says hello"
    assert items[("check", "nvidia.driver")]["provider"].startswith("gpudoctor ")
    summaries = [p["summary"] for p in doc["problems"]]
    assert any("brokenplug.check" in s and "brokenplug 0.3" in s and "ModuleNotFoundError" in s for s in summaries)
    assert any("nvidia.driver" in s and "dupplug 2.0" in s and "gpudoctor " in s for s in summaries)

    plain = run_cli(["list"], plugin_site)
    assert plain.returncode == 0
    assert "goodplug.hello" in plain.stdout and "goodplug 1.2" in plain.stdout
    assert "[ERROR]" in plain.stdout and "brokenplug 0.3" in plain.stdout


def test_check_reports_plugin_errors_and_still_runs_the_rest(plugin_site):
    out = run_cli(["check", "goodplug", "nvidia.driver", "--format", "json"], plugin_site)
    assert out.returncode == 3, out.stderr  # a broken plug-in leaves the verdict incomplete
    doc = json.loads(out.stdout)
    rows = [(f["check"], f["status"]) for f in doc["findings"]]
    assert rows[:2] == [(PLUGIN_CHECK_ID, "error"), (PLUGIN_CHECK_ID, "error")]
    assert ("goodplug.hello", "warn") in rows
    nv = [f for f in doc["findings"] if f["check"] == "nvidia.driver"]
    assert len(nv) == 1 and nv[0]["summary"] != ""  # the built-in ran, not the impostor
    assert "Traceback" not in out.stderr
    strict = run_cli(["check", "goodplug", "--strict", "--format", "json"], plugin_site)
    assert strict.returncode == 1  # the plug-in's warning under --strict


@pytest.mark.parametrize(
    "args", [["check", "brokenplug.check"], ["facts", "brokenplug"], ["gate", "--checks", "brokenplug"]]
)
def test_naming_a_plugin_that_failed_to_load_says_why(plugin_site, args):
    """The id is registered but its import failed: a usage error that gives the plug-in's problem,
    not "no check matches" with the list of loaded ids. Twin: an id nobody registered."""
    out = run_cli(args, plugin_site)
    assert out.returncode == 2, out.stderr
    assert "did not load: plug-in check 'brokenplug.check' from brokenplug 0.3 failed to load" in out.stderr
    assert "ModuleNotFoundError" in out.stderr and "known checks" not in out.stderr
    assert "Traceback" not in out.stderr
    unknown = run_cli([args[0], *args[1:-1], "nosuch.check"], plugin_site)
    assert unknown.returncode == 2 and "no check matches 'nosuch.check'; known checks:" in unknown.stderr


def test_plugin_distribution_without_name_header_is_listed_not_a_crash(tmp_path):
    """A ``METADATA`` without ``Name`` (hand-made or truncated): the provider is the directory's name."""
    info = tmp_path / "noname-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nVersion: 1.0\n\n")
    (info / "entry_points.txt").write_text("[gpudoctor.checks]\nnoname.x = noname_missing_module:CHECK\n")
    out = run_cli(["list", "--format", "json"], tmp_path)
    assert out.returncode == 0, out.stderr
    summaries = [p["summary"] for p in json.loads(out.stdout)["problems"]]
    assert any("'noname.x' from noname 1.0 failed to load" in s for s in summaries), summaries


@pytest.mark.parametrize("skip", ["brokenplug.check", "brokenplug"])
def test_skipping_a_plugin_that_failed_to_load_runs_the_rest(plugin_site, skip):
    """``--skip`` of a broken plug-in is how a user gets past it: no usage error, and its load
    failure is not reported (dupplug's refused duplicate still is). Twin: without --skip."""
    out = run_cli(["check", "goodplug", "--skip", skip, "--format", "json"], plugin_site)
    assert out.returncode == 3, out.stderr
    findings = json.loads(out.stdout)["findings"]
    assert ("goodplug.hello", "warn") in [(f["check"], f["status"]) for f in findings]
    plugin_errors = [f["summary"] for f in findings if f["check"] == PLUGIN_CHECK_ID]
    assert len(plugin_errors) == 1 and "dupplug" in plugin_errors[0]
    unskipped = run_cli(["check", "goodplug", "--format", "json"], plugin_site)
    summaries = [f["summary"] for f in json.loads(unskipped.stdout)["findings"] if f["check"] == PLUGIN_CHECK_ID]
    assert len(summaries) == 2 and any("brokenplug" in s for s in summaries)


def test_gate_with_checks_skipping_a_plugin_that_failed_to_load(plugin_site):
    """`gate --checks X --skip BROKEN` runs X (before: a usage error naming the broken plug-in).
    Twin: naming the broken plug-in in --checks is still that usage error."""
    out = run_cli(["gate", "--checks", "goodplug", "--skip", "brokenplug.check", "--require-gpus", "0"], plugin_site)
    assert out.returncode != 2 and "did not load" not in out.stderr, out.stderr
    named = run_cli(["gate", "--checks", "goodplug,brokenplug.check", "--require-gpus", "0"], plugin_site)
    assert named.returncode == 2 and "'brokenplug.check' did not load" in named.stderr
