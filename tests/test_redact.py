"""Secrets never reach output: URL credentials and TOKEN/SECRET/PASSWORD/KEY variables are redacted
in snapshots and in every output format, end to end through a real target interpreter."""

from __future__ import annotations

import json

import pytest

from gpudoctor.redact import REDACTED, is_secret_name, redact_env, redact_text, redact_value

from _foundation import bare_python, env_with, fake_torch, run_gpudoctor  # noqa: F401

MIRROR = "https://alice:pa55w0rd@mirror.example.org/simple"
SECRETS = ("pa55w0rd", "hf_abcdefghijklmnop", "nvapi-0123456789", "s3cr3t-uv-pass")


@pytest.mark.parametrize("name", ["HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PIP_PASSWORD", "API_KEY",
                                  "NVIDIA_API_KEY", "OPENAI_APIKEY", "UV_INDEX_PRIVATE_PASSWORD", "db_passwd",
                                  "GOOGLE_APPLICATION_CREDENTIALS", "KEY", "Authorization"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "PIP_INDEX_URL", "KEYBOARD",
                                  "MONKEY_PATCH", "HOME"])
def test_not_secret_names(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("text, expected", [
    (MIRROR, "https://****@mirror.example.org/simple"),
    ("pip install -i https://tok@mirror.example.org/simple x", "pip install -i https://****@mirror.example.org/simple x"),
    ("git+ssh://git@github.example.org/a.git", "git+ssh://****@github.example.org/a.git"),
    ("HF_TOKEN=hf_abc and PATH=/usr/bin", "HF_TOKEN=**** and PATH=/usr/bin"),
    ("https://****@mirror.example.org/simple", "https://****@mirror.example.org/simple"),
    ("no secrets here: user@example.org", "no secrets here: user@example.org"),
    ("curl -H 'Authorization: Bearer eyJhbGciOi.x-y_z' url", "curl -H 'Authorization: Bearer ****' url"),
    ("Authorization: Basic YWxpY2U6cGFzcw==", "Authorization: Basic ****"),
    ("cuBLAS: Basic Linear Algebra Subprograms", "cuBLAS: Basic Linear Algebra Subprograms"),
    ("Bearer ****", "Bearer ****"),
    ("", ""),
])
def test_redact_text(text, expected):
    assert redact_text(text) == expected


def test_redact_value_recurses_and_keeps_shape():
    doc = {"env": {"HF_TOKEN": "hf_x", "PIP_INDEX_URL": MIRROR, "EMPTY_TOKEN": ""}, "list": [MIRROR, 3, None],
           "n": 1.5, "api_key": {"nested": "not a string so recurse"}}
    out = redact_value(doc)
    assert out == {"env": {"HF_TOKEN": REDACTED, "PIP_INDEX_URL": "https://****@mirror.example.org/simple",
                           "EMPTY_TOKEN": ""},
                   "list": ["https://****@mirror.example.org/simple", 3, None], "n": 1.5,
                   "api_key": {"nested": "not a string so recurse"}}
    assert doc["env"]["HF_TOKEN"] == "hf_x"  # the input is not modified


def test_redact_env():
    assert redact_env({"HF_TOKEN": "hf_x", "PIP_EXTRA_INDEX_URL": MIRROR, "CUDA_HOME": "/usr/local/cuda"}) == {
        "HF_TOKEN": REDACTED, "PIP_EXTRA_INDEX_URL": "https://****@mirror.example.org/simple",
        "CUDA_HOME": "/usr/local/cuda"}


# ----------------------------------------------------------------- end to end through a real target


@pytest.fixture(scope="module")
def leaky_target(tmp_path_factory, bare_python):
    """A bare venv whose environment holds secrets and whose (fake) torch fails with them in the message."""
    path = fake_torch(tmp_path_factory.mktemp("leaky"),
                      f"raise ImportError('could not fetch wheel from {MIRROR} with HF_TOKEN=hf_abcdefghijklmnop')\n")
    env = env_with(PYTHONPATH=path, HF_TOKEN="hf_abcdefghijklmnop", NVIDIA_API_KEY="nvapi-0123456789",
                   PIP_INDEX_URL=MIRROR, UV_INDEX_PRIVATE_PASSWORD="s3cr3t-uv-pass", NO_COLOR="1")
    return bare_python, env


def assert_clean(text):
    for secret in SECRETS:
        assert secret not in text, secret


def test_snapshot_redacts_target_environment(leaky_target, tmp_path):
    python, env = leaky_target
    out = tmp_path / "f.json"
    proc = run_gpudoctor("facts", "torch.install", "--python", python, "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert_clean(text)
    doc = json.loads(text)
    (t,) = [t for t in doc["domains"]["targets"]["targets"] if t["kind"] != "kernel"]  # Jupyter kernels too
    assert t["probe"]["env"]["NVIDIA_API_KEY"] == REDACTED
    assert t["probe"]["env"]["UV_INDEX_PRIVATE_PASSWORD"] == REDACTED
    assert t["probe"]["env"]["PIP_INDEX_URL"] == "https://****@mirror.example.org/simple"
    assert "https://****@mirror.example.org/simple" in t["probe"]["torch"]["import_error"]
    # replaying the redacted snapshot still diagnoses the broken import
    replay = run_gpudoctor("check", "torch.install", "--facts", str(out), "--format", "json", env=env)
    assert json.loads(replay.stdout)["findings"][0]["status"] == "fail"


@pytest.mark.parametrize("fmt", ["console", "json", "markdown"])
def test_every_format_redacts(leaky_target, fmt):
    python, env = leaky_target
    proc = run_gpudoctor("check", "torch.install", "--python", python, "--format", fmt, "-v", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "ImportError: could not fetch wheel from https://****@mirror.example.org/simple" in proc.stdout
    assert "HF_TOKEN=****" in proc.stdout
    assert_clean(proc.stdout + proc.stderr)
