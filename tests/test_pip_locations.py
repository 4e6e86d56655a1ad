"""pip's configuration, all of it: every file pip reads, in pip's order, for the target's prefix.

pip ``_internal/configuration.py``: ``OVERRIDE_ORDER`` = global, user, base
(``sys.base_prefix``), site (``sys.prefix``), env (``PIP_CONFIG_FILE``),
env-var (``PIP_*``); only ``[global]`` and command sections are read. Each
location gets a fixture on a fake root; the target is a venv (``--python``,
``VIRTUAL_ENV``) or a conda environment (``CONDA_PREFIX``). Sections pip
ignores that hold the intended index fail, and ``pip.index-url`` moves them
in the same file (check -> fix -> check).
"""

from __future__ import annotations

import pytest
from tests._fixcycle import cycle

from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.engine import collect_facts
from gpudoctor.model import Status
from gpudoctor.testing import fake_system, write_tree

VENV = "/opt/venv"
CFG = "home = /usr/local/bin\ninclude-system-site-packages = false\nversion = 3.11.9\n"


def conf(url: str, section: str = "global") -> str:
    return f"[{section}]\nindex-url = {url}\n"


def pip_facts(root, env=None, pythons=()):
    facts, errors = collect_facts(
        ["pip"],
        fake_system(root, env=env or {}),
        CollectOptions(offline=True, pythons=tuple(pythons)),
        all_collectors(),
    )
    assert not errors
    return facts.get("pip")


LOCATIONS = [  # (variant, path) in pip's override order, lowest first
    ("global", "/etc/xdg/pip/pip.conf"),
    ("global", "/etc/pip.conf"),
    ("user", "/home/user/.pip/pip.conf"),
    ("user", "/home/user/.config/pip/pip.conf"),
    ("base", "/usr/local/pip.conf"),
    ("site", f"{VENV}/pip.conf"),
    ("env", "/srv/pip-team.conf"),
]


@pytest.mark.parametrize("upto", range(len(LOCATIONS)))
def test_each_location_overrides_the_ones_before_it(tmp_path, upto):
    files = {path: conf(f"https://m{i}.example.org/simple") for i, (_, path) in enumerate(LOCATIONS[: upto + 1])}
    files[f"{VENV}/pyvenv.cfg"] = CFG
    write_tree(tmp_path, files)
    pip = pip_facts(
        tmp_path, env={"PIP_CONFIG_FILE": "/srv/pip-team.conf"} if upto == 6 else {}, pythons=[f"{VENV}/bin/python"]
    )
    variant, path = LOCATIONS[upto]
    eff = pip.effective["index-url"]
    assert (eff.source, eff.variant, eff.value) == (path, variant, f"https://m{upto}.example.org/simple")
    assert [f.variant for f in pip.files][:7] == ["global", "global", "user", "user", "base", "site", "env"][
        : len(pip.files)
    ]
    assert pip.base_prefix == "/usr/local" and pip.site_prefix == VENV


def test_environment_variable_beats_every_file_and_no_base_outside_a_venv(tmp_path):
    write_tree(tmp_path, {"/etc/pip.conf": conf("https://a.example.org/simple")})
    pip = pip_facts(tmp_path, env={"PIP_INDEX_URL": "https://b.example.org/simple"})
    assert pip.effective["index-url"].variant == "env_var"
    assert "base" not in {f.variant for f in pip.files} and pip.base_prefix == ""


def test_conda_environment_site_file(tmp_path):
    write_tree(tmp_path, {"/opt/conda/envs/train/pip.conf": conf("https://c.example.org/simple")})
    pip = pip_facts(tmp_path, env={"CONDA_PREFIX": "/opt/conda/envs/train"})
    assert pip.effective["index-url"].source == "/opt/conda/envs/train/pip.conf"
    assert pip.site_prefix_from == "CONDA_PREFIX"


# --------------------------------------------------------------------------- ignored sections, fixed in place


MIRROR = "https://pypi.mirror.example.org/simple"


@pytest.mark.parametrize(
    "where, env, pythons",
    [
        (f"{VENV}/pip.conf", {}, [f"{VENV}/bin/python"]),  # a venv target (--python)
        ("/opt/conda/envs/train/pip.conf", {"CONDA_PREFIX": "/opt/conda/envs/train"}, []),  # a conda target
        ("/usr/local/pip.conf", {"VIRTUAL_ENV": VENV}, []),  # the base interpreter's file
        ("/home/user/.config/pip/pip.conf", {}, []),
    ],
)
@pytest.mark.parametrize("section", ["site", "pip", "Global"])
def test_index_in_a_section_pip_ignores_fails_and_is_moved_in_that_file(tmp_path, where, env, pythons, section):
    text = f"# team mirror\n[{section}]\nindex-url = {MIRROR}\ntimeout = 60\n"
    root = write_tree(tmp_path / "r", {where: text, f"{VENV}/pyvenv.cfg": CFG})
    c = cycle(root, ["pip.config"], "pip.index-url", env=env, pythons=pythons)
    (f,) = [x for x in c.before if x.status >= Status.WARN]
    assert f.status is Status.FAIL and f"[{section}]" in f.summary and "pypi.org" in f.summary
    assert f.fixes == ("pip.index-url",)
    assert [p.edits[0].path for p in c.plans] == [where]
    after = (root / where.lstrip("/")).read_text()
    assert after.startswith("# team mirror\n") and f"index-url = {MIRROR}" in after
    assert all(x.status < Status.WARN for x in c.after), c.text("pip.index-url")
    pip = pip_facts(root, env=env, pythons=pythons)
    assert pip.effective["index-url"].value == MIRROR and pip.effective["index-url"].source == where
    assert pip.effective["timeout"].value == "60"


def test_misspelt_key_in_global_is_renamed(tmp_path):
    root = write_tree(tmp_path / "r", {"/etc/pip.conf": f"[global]\nindex = {MIRROR}\n"})
    c = cycle(root, ["pip.config"], "pip.index-url")
    (f,) = [x for x in c.before if x.status >= Status.WARN]
    assert f.status is Status.FAIL
    assert (root / "etc/pip.conf").read_text() == f"[global]\nindex-url = {MIRROR}\n"
    assert all(x.status < Status.WARN for x in c.after)


def test_twin_index_in_global_is_fine(tmp_path):
    root = write_tree(tmp_path / "r", {f"{VENV}/pip.conf": conf(MIRROR), f"{VENV}/pyvenv.cfg": CFG})
    c = cycle(root, ["pip.config"], "pip.index-url", pythons=[f"{VENV}/bin/python"])
    assert all(x.status < Status.WARN for x in c.before) and not c.plans


def test_ignored_timeout_alone_is_a_warning(tmp_path):
    # nothing about the index is lost: a warning, and the fix still moves it
    root = write_tree(tmp_path / "r", {"/etc/pip.conf": f"[global]\nindex-url = {MIRROR}\n[pip]\ntimeout = 60\n"})
    c = cycle(root, ["pip.config"], "pip.index-url")
    (f,) = [x for x in c.before if x.status >= Status.WARN]
    assert f.status is Status.WARN
    assert all(x.status < Status.WARN for x in c.after), c.text("pip.index-url")


# --------------------------------------------------------------------------- several target interpreters


def test_each_target_interpreter_reads_its_own_base_and_site_files(tmp_path):
    conda_env = "/opt/conda/envs/train"
    write_tree(
        tmp_path,
        {
            "/etc/pip.conf": conf(MIRROR),
            f"{VENV}/pyvenv.cfg": CFG,
            f"{conda_env}/pip.conf": "[install]\nindex-url = https://old-mirror.example.org/simple\n",
        },
    )
    pip = pip_facts(tmp_path, pythons=[f"{VENV}/bin/python", f"{conda_env}/bin/python"])
    assert pip.effective["index-url"].value == MIRROR
    (view,) = pip.targets
    assert view.site_prefix == conda_env and view.base_prefix == ""
    assert view.effective["index-url"].value == "https://old-mirror.example.org/simple"
    assert view.effective["index-url"].source == f"{conda_env}/pip.conf"
    from gpudoctor.checks import pip_config
    from gpudoctor.testing import make_facts

    findings = pip_config.evaluate(make_facts(pip=pip))
    (info,) = [f for f in findings if "each interpreter reads its own site file" in f.summary]
    assert info.status is Status.INFO and f"{conda_env}/bin/python" in info.summary


def test_ignored_section_in_a_second_targets_site_file_is_fixed_there(tmp_path):
    conda_env = "/opt/conda/envs/train"
    root = write_tree(
        tmp_path / "r",
        {f"{VENV}/pyvenv.cfg": CFG, f"{conda_env}/pip.conf": f"[site]\nindex-url = {MIRROR}\n"},
    )
    pythons = [f"{VENV}/bin/python", f"{conda_env}/bin/python"]
    c = cycle(root, ["pip.config"], "pip.index-url", pythons=pythons)
    (f,) = [x for x in c.before if x.status >= Status.WARN]
    assert f.status is Status.FAIL and conda_env in f.summary
    assert (root / conda_env.lstrip("/") / "pip.conf").read_text() == f"[global]\nindex-url = {MIRROR}\n"
    assert all(x.status < Status.WARN for x in c.after), c.text("pip.index-url")


def test_remove_option_keeps_comments_and_drops_a_header_left_empty():
    from gpudoctor.sources.pipconf import remove_option

    text = "[site]\nindex-url = https://a\n  continued\n\n[global]\ntimeout = 60\n"
    assert remove_option(text, "site", "index_url") == "[global]\ntimeout = 60\n"
    kept = "[site]\n# why this is here\nindex-url = https://a\n[global]\ntimeout = 60\n"
    assert remove_option(kept, "site", "index-url") == "[site]\n# why this is here\n[global]\ntimeout = 60\n"
    assert remove_option(kept, "global", "index-url") == kept
