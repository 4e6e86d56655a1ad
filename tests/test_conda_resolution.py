"""conda's channel resolution as conda does it (gpudoctor.sources.conda), and the fix clearing each case.

Fake roots with real condarc/.mambarc/environment.yml files through the real
collector; the mirror-missing-a-channel cases run fake mirrors on 127.0.0.1.
Each instance has a healthy twin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._fixcycle import cycle

from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.engine import collect_facts
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import Status
from gpudoctor.sources import conda as model
from gpudoctor.testing import fake_system, write_tree

MIRROR = "https://mirrors.example.org/anaconda"
CLOUD = f"{MIRROR}/cloud"
ON_MIRROR = (
    "channels:\n  - defaults\n  - conda-forge\n"
    f"default_channels:\n  - {MIRROR}/pkgs/main\n  - {MIRROR}/pkgs/r\n"
    f"custom_channels:\n  conda-forge: {CLOUD}\n  pytorch: {CLOUD}\n"
)


def conda_facts(root: Path, env=None, extra=None):
    facts, errors = collect_facts(
        ["conda"], fake_system(root, env=env or {}), CollectOptions(offline=True, extra=extra or {}), all_collectors()
    )
    assert not errors
    return facts.get("conda")


# --------------------------------------------------------------------------- the model


def test_sequences_concatenate_highest_precedence_first(tmp_path):
    write_tree(
        tmp_path,
        {
            "/etc/conda/.condarc": "channels:\n  - defaults\n  - conda-forge\n"
            "default_channels:\n  - https://repo.anaconda.com/pkgs/main\n",
            "/home/user/.condarc": f"channels:\n  - nvidia\ndefault_channels:\n  - {MIRROR}/pkgs/main\n",
        },
    )
    conda = conda_facts(tmp_path)
    # conda: ~/.condarc's list goes in front of /etc's, it does not replace it
    assert [c.name for c in conda.channels] == ["nvidia", "defaults", "defaults", "conda-forge"]
    assert conda.default_channels == (f"{MIRROR}/pkgs/main", "https://repo.anaconda.com/pkgs/main")
    assert {c.origin for c in conda.channels if c.name == "conda-forge"} == {"/etc/conda/.condarc"}
    assert [c.setting for c in conda.channels if c.name == "defaults"] == ["/home/user/.condarc", "/etc/conda/.condarc"]


def test_final_marker_maps_and_scalars(tmp_path):
    write_tree(
        tmp_path,
        {
            "/etc/conda/.condarc": "channel_alias: https://alias.example.org  #!final\n"
            "custom_channels:\n  bioconda: https://a.example.org\n  pytorch: https://a.example.org\n",
            "/home/user/.condarc": "channel_alias: https://other.example.org\nchannels: [nvidia, pytorch/label/nightly]\n"
            "custom_channels:\n  pytorch: https://b.example.org\n",
        },
    )
    conda = conda_facts(tmp_path)
    assert conda.channel_alias == "https://alias.example.org" and conda.channel_alias_origin == "/etc/conda/.condarc"
    assert conda.custom_channels == {"bioconda": "https://a.example.org", "pytorch": "https://b.example.org"}
    urls = {c.name: c.url for c in conda.channels}
    assert urls["nvidia"] == "https://alias.example.org/nvidia"
    assert urls["pytorch/label/nightly"] == "https://b.example.org/pytorch/label/nightly"  # longest prefix


def test_root_prefix_condarc_d_condarc_and_environment_variables(tmp_path):
    write_tree(
        tmp_path,
        {
            "/opt/conda/conda-meta/history": "",
            "/opt/conda/.condarc": "channels: [conda-forge]\n",
            "/etc/conda/condarc.d/10-site.yml": "channel_alias: https://site.example.org\n",
            "/etc/conda/condarc.d/README": "not read\n",
            "/srv/team.condarc": "channels: [pytorch]\n",
        },
    )
    conda = conda_facts(tmp_path, env={"CONDARC": "/srv/team.condarc", "CONDA_CHANNELS": "nvidia"})
    assert conda.root_prefix == "/opt/conda"
    assert [(c.name, c.origin) for c in conda.channels] == [
        ("nvidia", "CONDA_CHANNELS"),
        ("pytorch", "/srv/team.condarc"),
        ("conda-forge", "/opt/conda/.condarc"),
    ]
    assert all(c.url.startswith("https://site.example.org/") for c in conda.channels)
    assert "/etc/conda/condarc.d/README" not in conda.files


def test_multichannels_and_command_channels(tmp_path):
    write_tree(
        tmp_path,
        {
            "/home/user/.condarc": "channels: [team]\ncustom_multichannels:\n  team: [conda-forge, https://x.example.org/y]\n"
        },
    )
    conda = conda_facts(tmp_path)
    assert [(c.name, c.url, c.via) for c in conda.channels] == [
        ("conda-forge", "https://conda.anaconda.org/conda-forge", "channel_alias"),
        ("team", "https://x.example.org/y", "custom_multichannels"),
    ]
    assert model.command_channels(
        ["micromamba", "install", "-y", "-c", "nvidia", "--channel=pytorch", "-cconda-forge"]
    ) == (
        "micromamba",
        ["nvidia", "pytorch", "conda-forge"],
        False,
    )
    assert model.command_channels(["pip", "install", "-c", "constraints.txt"]) is None


# --------------------------------------------------------------------------- named channels, with the fix


def _warned(c, word):
    return [f for f in c.before if f.check == "index.consistency" and f.status is Status.WARN and word in f.summary]


def test_environment_yml_channel_leaves_the_mirror_then_fixed(tmp_path):
    env_yml = ("environment.yml", "name: train\nchannels:\n  - nvidia\n  - conda-forge\n  - nodefaults\n")
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": ON_MIRROR})
    c = cycle(root, ["index.consistency"], "conda.channels", extra={"conda_env_files": [env_yml]})
    (f,) = _warned(c, "nvidia")
    assert "environment.yml" in f.summary and "conda.anaconda.org" in f.summary
    assert f.fixes == ("conda.channels",)
    assert c.after[0].status is Status.OK, c.after[0].summary
    assert f"  nvidia: {CLOUD}\n" in (root / "home/user/.condarc").read_text()


def test_environment_yml_twin_on_the_mirror(tmp_path):
    env_yml = ("environment.yml", "channels:\n  - conda-forge\n  - defaults\n")
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": ON_MIRROR})
    c = cycle(root, ["index.consistency"], "conda.channels", extra={"conda_env_files": [env_yml]})
    assert [f.status for f in c.before] == [Status.OK] and not c.plans


def test_mambarc_channel_seen_only_by_micromamba_then_fixed(tmp_path):
    root = write_tree(
        tmp_path / "r", {"/home/user/.condarc": ON_MIRROR, "/home/user/.mambarc": "channels:\n  - nvidia\n"}
    )
    c = cycle(root, ["index.consistency"], "conda.channels")
    (f,) = _warned(c, "nvidia")
    assert "micromamba" in f.summary and "/home/user/.mambarc" in f.summary
    assert c.after[0].status is Status.OK, c.after[0].summary


def test_mambarc_twin(tmp_path):
    root = write_tree(
        tmp_path / "r", {"/home/user/.condarc": ON_MIRROR, "/home/user/.mambarc": "channels:\n  - conda-forge\n"}
    )
    c = cycle(root, ["index.consistency"], "conda.channels")
    assert [f.status for f in c.before] == [Status.OK]


def test_build_file_dash_c_channel_then_fixed(tmp_path):
    dockerfile = ("Dockerfile", "FROM condaforge/miniforge3\nRUN conda install -y -c nvidia cuda-toolkit\n")
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": ON_MIRROR})
    c = cycle(root, ["index.consistency"], "conda.channels", extra={"dockerfile": dockerfile})
    (f,) = _warned(c, "nvidia")
    assert "Dockerfile:2" in f.summary
    assert c.after[0].status is Status.OK, c.after[0].summary
    twin = ("Dockerfile", "FROM condaforge/miniforge3\nRUN conda install -y -c conda-forge numpy\n")
    root2 = write_tree(tmp_path / "twin", {"/home/user/.condarc": ON_MIRROR})
    assert [
        f.status for f in cycle(root2, ["index.consistency"], "conda.channels", extra={"dockerfile": twin}).before
    ] == [Status.OK]


def test_public_channel_url_in_a_system_condarc_is_renamed_there(tmp_path):
    root = write_tree(
        tmp_path / "r",
        {
            "/etc/conda/.condarc": "channels:\n  - https://conda.anaconda.org/conda-forge  # team default\n",
            "/home/user/.condarc": ON_MIRROR.replace("  - conda-forge\n", ""),
        },
    )
    c = cycle(root, ["index.consistency"], "conda.channels")
    assert _warned(c, "conda-forge") and c.after[0].status is Status.OK, c.text("conda.channels")
    assert (root / "etc/conda/.condarc").read_text() == "channels:\n  - conda-forge  # team default\n"


def test_default_channels_in_two_files_are_both_moved(tmp_path):
    # conda concatenates default_channels across files: the system file's public URLs stay unless edited there
    root = write_tree(
        tmp_path / "r",
        {
            "/etc/conda/.condarc": "default_channels:\n  - https://repo.anaconda.com/pkgs/main\n",
            "/home/user/.condarc": "channel_alias: https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud\n"
            "channels:\n  - defaults\n  - conda-forge\n",
        },
    )
    c = cycle(root, ["index.consistency"], "conda.channels", {"mirror": "tuna"})
    assert _warned(c, "defaults") and c.after[0].status is Status.OK, c.text("conda.channels")
    assert "repo.anaconda.com" not in (root / "etc/conda/.condarc").read_text()
    twin = write_tree(
        tmp_path / "twin",
        {"/home/user/.condarc": ON_MIRROR},
    )
    assert [f.status for f in cycle(twin, ["index.consistency"], "conda.channels").before] == [Status.OK]


# --------------------------------------------------------------------------- a mirror that does not carry a channel


@pytest.mark.slow
def test_mirror_missing_a_channel_is_named_then_fixed_with_another_mirror(tmp_path):
    with FakeMirror(prefix="/anaconda/cloud/conda-forge") as partial, FakeMirror() as full:
        root_url = partial.url[: -len("/cloud/conda-forge")]
        condarc = f"channel_alias: {root_url}/cloud\nchannels:\n  - conda-forge\n  - nvidia\n"
        root = write_tree(tmp_path / "r", {"/home/user/.condarc": condarc})
        opts = {"mirror": f"{full.url}/anaconda", "allow-insecure": "true"}
        c = cycle(root, ["conda.mirror"], "conda.channels", opts, offline=False)
        (f,) = c.before
        assert f.status is Status.FAIL and "does not carry `nvidia`" in f.summary
        assert (
            "conda-forge" not in f.summary
            and "custom_channels:\n      nvidia: https://conda.anaconda.org" in f.explanation
        )
        assert c.after[0].status is Status.OK, c.text("conda.channels")
        text = (root / "home/user/.condarc").read_text()
        assert f"  nvidia: {full.url}/anaconda/cloud\n" in text


@pytest.mark.slow
def test_mirror_carrying_every_named_channel_twin(tmp_path):
    with FakeMirror(prefix="/anaconda/cloud/conda-forge") as partial:
        root_url = partial.url[: -len("/cloud/conda-forge")]
        root = write_tree(
            tmp_path / "r", {"/home/user/.condarc": f"channel_alias: {root_url}/cloud\nchannels:\n  - conda-forge\n"}
        )
        c = cycle(root, ["conda.mirror"], "conda.channels", offline=False)
        assert [f.status for f in c.before] == [Status.OK], c.before[0].summary


# --------------------------------------------------------------------------- known without probing: the catalogue

TUNA = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"


def test_channel_alias_outside_the_mirrors_cloud_tree_fails_offline_then_fixed(tmp_path):
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": f"channels:\n  - defaults\nchannel_alias: {TUNA}\n"})
    cmd = {"conda_commands": [["conda", "install", "-c", "conda-forge", "numpy"]]}
    c = cycle(root, ["conda.mirror"], "conda.channels", extra=cmd)
    (f,) = c.before
    assert f.status is Status.FAIL and f"{TUNA}/conda-forge" in f.summary and "404" in f.summary
    assert "command line" in f.summary and f"channel_alias: {TUNA}/cloud" in f.explanation
    assert [x.status for x in c.after] == [Status.SKIP], c.text("conda.channels")  # nothing known wrong; not probed
    assert f"channel_alias: {TUNA}/cloud\n" in (root / "home/user/.condarc").read_text()


def test_channel_the_mirror_does_not_carry_goes_to_its_own_host(tmp_path):
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": f"channel_alias: {TUNA}/cloud\n"})
    cmd = {"conda_commands": [["conda", "install", "pytorch-cuda=12.1", "-c", "pytorch", "-c", "nvidia"]]}
    c = cycle(root, ["conda.mirror"], "conda.channels", extra=cmd)
    (f,) = c.before
    assert f.status is Status.FAIL and "does not carry `nvidia`" in f.summary and "tuna/issues" in f.explanation
    assert "pytorch" not in f.summary
    assert [x.status for x in c.after] == [Status.SKIP], c.text("conda.channels")
    assert "  nvidia: https://conda.anaconda.org\n" in (root / "home/user/.condarc").read_text()
    assert any("not on the mirror" in n for p in c.plans for n in p.notes)


def test_catalogue_twin_channels_the_mirror_carries(tmp_path):
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": f"channel_alias: {TUNA}/cloud\n"})
    cmd = {"conda_commands": [["conda", "install", "-c", "pytorch", "-c", "conda-forge", "numpy"]]}
    c = cycle(root, ["conda.mirror"], "conda.channels", extra=cmd)
    assert [x.status for x in c.before] == [Status.SKIP]


def test_custom_channels_written_as_a_list_is_reported_not_guessed(tmp_path):
    # tuna/issues #1084 pasted `custom_channels:` with `- name: url` items: conda wants a mapping
    condarc = f"channels:\n  - defaults\ncustom_channels:\n- conda-forge: {TUNA}/cloud\n- pytorch: {TUNA}/cloud\n"
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": condarc})
    c = cycle(root, ["conda.mirror"], "conda.channels")
    (f,) = c.before
    assert f.status is Status.WARN and "custom_channels is a list, not a mapping" in f.summary
    assert "without `- `" in f.summary + f.explanation and not c.plans
    twin = write_tree(tmp_path / "t", {"/home/user/.condarc": condarc.replace("\n- ", "\n  ")})
    assert [x.status for x in cycle(twin, ["conda.mirror"], "conda.channels").before] == [Status.SKIP]
