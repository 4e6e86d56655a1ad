"""Secrets never reach output: URL credentials and TOKEN/SECRET/PASSWORD/KEY variables are redacted
in snapshots and in every output format, end to end through a real target interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _foundation import bare_python, env_with, fake_torch, run_gpudoctor  # noqa: F401
from gpudoctor.redact import (
    REDACTED,
    is_secret_name,
    is_secret_query_name,
    redact_env,
    redact_text,
    redact_value,
)

MIRROR = "https://alice:pa55w0rd@mirror.example.org/simple"
SECRETS = ("pa55w0rd", "hf_abcdefghijklmnop", "nvapi-0123456789", "s3cr3t-uv-pass")


#: (name, is it secret?) -- both directions of the rule, env variables and JSON field names alike
NAMES = [
    ("HF_TOKEN", True),
    ("GITHUB_TOKEN", True),
    ("token", True),
    ("HUGGING_FACE_HUB_TOKEN", True),
    ("AWS_SECRET_ACCESS_KEY", True),
    ("AWS_SESSION_TOKEN", True),
    ("PIP_PASSWORD", True),
    ("API_KEY", True),
    ("api_key", True),
    ("apiKey", True),
    ("NVIDIA_API_KEY", True),
    ("OPENAI_APIKEY", True),
    ("SSH_KEY", True),
    ("UV_INDEX_PRIVATE_PASSWORD", True),
    ("db_passwd", True),
    ("DBPASSWORD", True),
    ("client_secret", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", True),
    ("Authorization", True),
    ("--password", True),
    ("WANDB_API_KEY", True),
    ("accessToken", True),
    ("GPG_PASSPHRASE", True),
    ("MYTOKEN", True),
    # not secrets
    ("key", False),
    ("KEY", False),
    ("keys", False),
    ("key_name", False),
    ("KEY_FILE", False),
    ("TOKENIZERS_PARALLELISM", False),
    ("PATH", False),
    ("LD_LIBRARY_PATH", False),
    ("CUDA_VISIBLE_DEVICES", False),
    ("PIP_INDEX_URL", False),
    ("KEYBOARD", False),
    ("MONKEY_PATCH", False),
    ("HOME", False),
    ("value", False),
    ("index-url", False),
    ("max_tokens", True),
    ("SSH_KEY_PATH", False),
    ("author", False),
    ("hotkey", True),
    ("HF_TOKEN2", True),
    ("NVIDIA_API_KEY_2", True),
    ("MY_AUTH", True),
    ("OAUTH_CLIENT", True),
    ("X_AUTH_HEADER", True),
    ("DB_PASSWORD_3", True),
    ("NGC_CREDENTIAL_X", True),
    ("my_secret_value", True),
    ("PIP_KEYRING_PROVIDER", False),
    ("AUTHORS", False),
    ("HF_TOKEN_PATH", False),
]


@pytest.mark.parametrize("name, secret", NAMES)
def test_secret_names_both_directions(name, secret):
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    "name, secret",
    [
        ("token", True),
        ("auth", True),
        ("AUTH", True),
        ("key", True),
        ("api_key", True),
        ("api-key", True),
        ("apikey", True),
        ("ApiKey", True),
        ("password", True),
        ("passwd", True),
        ("secret", True),
        ("signature", True),
        ("sig", True),
        ("access_token", True),
        ("access-token", True),
        ("credential", True),
        ("X-Amz-Signature", True),
        ("X-Amz-Credential", True),
        ("X-Amz-Security-Token", True),
        ("X-Goog-Signature", True),
        ("private_token", True),
        ("page", False),
        ("q", False),
        ("format", False),
        ("author", False),
        ("keyword", False),
        ("sort", False),
        ("X-Amz-Date", False),
        ("x", False),
        ("tokenizer", False),
    ],
)
def test_secret_query_names(name, secret):
    assert is_secret_query_name(name) is secret


@pytest.mark.parametrize(
    "text, expected",
    [
        (MIRROR, "https://****@mirror.example.org/simple"),
        (
            "pip install -i https://tok@mirror.example.org/simple x",
            "pip install -i https://****@mirror.example.org/simple x",
        ),
        ("git+ssh://git@github.example.org/a.git", "git+ssh://****@github.example.org/a.git"),
        ("HF_TOKEN=hf_abc and PATH=/usr/bin", "HF_TOKEN=**** and PATH=/usr/bin"),
        ("https://****@mirror.example.org/simple", "https://****@mirror.example.org/simple"),
        ("no secrets here: user@example.org", "no secrets here: user@example.org"),
        ("curl -H 'Authorization: Bearer eyJhbGciOi.x-y_z' url", "curl -H 'Authorization: Bearer ****' url"),
        ("Authorization: Basic YWxpY2U6cGFzcw==", "Authorization: Basic ****"),
        ("cuBLAS: Basic Linear Algebra Subprograms", "cuBLAS: Basic Linear Algebra Subprograms"),
        ("Bearer ****", "Bearer ****"),
        ("", ""),
        # query-string credentials: the value goes, the parameter name and the other parameters stay
        (
            "index-url = https://mirror.example.org/simple?auth=QS1&api_key=QS2",
            "index-url = https://mirror.example.org/simple?auth=****&api_key=****",
        ),
        ("https://h.example.org/s?page=2&TOKEN=abc#frag", "https://h.example.org/s?page=2&TOKEN=****#frag"),
        (
            "https://s3.example.org/b?X-Amz-Credential=AK&X-Amz-Signature=ff&X-Amz-Date=1",
            "https://s3.example.org/b?X-Amz-Credential=****&X-Amz-Signature=****&X-Amz-Date=1",
        ),
        ("'https://h.example.org/s?sig=abc' done", "'https://h.example.org/s?sig=****' done"),
        ("https://h.example.org/s?q=tokens&page=2", "https://h.example.org/s?q=tokens&page=2"),
        ("/simple/?key=", "/simple/?key="),
        # a raw "@" in the password: the userinfo ends at the LAST "@" of the authority
        ("https://alice:Summer@2024@mirror.example.org/simple", "https://****@mirror.example.org/simple"),
        (
            "PIP_INDEX_URL='https://alice:Summer@2024@mirror.example.org/simple'",
            "PIP_INDEX_URL='https://****@mirror.example.org/simple'",
        ),
        ("https://a:b@c@mirror.example.org?x=y@z", "https://****@mirror.example.org?x=y@z"),
        (
            "https://mirror.example.org/simple/pkg@1.0 and bob@example.org",
            "https://mirror.example.org/simple/pkg@1.0 and bob@example.org",
        ),
        ("https://****@2024@mirror.example.org/simple", "https://****@mirror.example.org/simple"),
        # quoted assignments, options and reprs
        ('export HF_TOKEN="hf_abc def"', 'export HF_TOKEN="****"'),
        ("pip --password=hunter2 install x", "pip --password=**** install x"),
        (
            "{'AWS_SECRET_ACCESS_KEY': 'a\\'b', 'key': 'index-url'}",
            "{'AWS_SECRET_ACCESS_KEY': '****', 'key': 'index-url'}",
        ),
        ('{"HF_TOKEN": "hf_x", "PATH": "/usr/bin"}', '{"HF_TOKEN": "****", "PATH": "/usr/bin"}'),
        # INI lines (a pip.conf's text in a snapshot) and anaconda.org channel tokens
        (
            "[global]\npassword = hunter 2\nindex-url = https://h.example.org/s\n  token=abc  \n",
            "[global]\npassword = ****\nindex-url = https://h.example.org/s\n  token=****  \n",
        ),
        (
            "channel https://conda.anaconda.org/t/tk-123abc/mychan/linux-64",
            "channel https://conda.anaconda.org/t/****/mychan/linux-64",
        ),
        # ordinary text stays as it is
        ("see /t/abc/ here", "see /t/abc/ here"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        (
            "mail user@example.org about key=value and TOKENIZERS_PARALLELISM=false",
            "mail user@example.org about key=value and TOKENIZERS_PARALLELISM=false",
        ),
        (
            "set index-url = https://mirror.example.org/simple (key: index-url)",
            "set index-url = https://mirror.example.org/simple (key: index-url)",
        ),
    ],
)
def test_redact_text(text, expected):
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # idempotent


def test_redact_value_recurses_and_keeps_shape():
    doc = {
        "env": {"HF_TOKEN": "hf_x", "PIP_INDEX_URL": MIRROR, "EMPTY_TOKEN": ""},
        "list": [MIRROR, 3, None],
        "n": 1.5,
        "api_key": {"nested": "not a string so recurse"},
    }
    out = redact_value(doc)
    assert out == {
        "env": {"HF_TOKEN": REDACTED, "PIP_INDEX_URL": "https://****@mirror.example.org/simple", "EMPTY_TOKEN": ""},
        "list": ["https://****@mirror.example.org/simple", 3, None],
        "n": 1.5,
        "api_key": {"nested": "not a string so recurse"},
    }
    assert doc["env"]["HF_TOKEN"] == "hf_x"  # the input is not modified


def test_redact_value_keeps_pip_option_names_and_redacts_their_secrets():
    setting = {
        "key": "index-url",
        "value": "https://a:Summer@2024@mirror.example.org/simple?api_key=QS2",
        "keys": ["index-url"],
        "key_name": "global.index-url",
    }
    assert redact_value({"settings": [setting]}) == {
        "settings": [
            {
                "key": "index-url",
                "value": "https://****@mirror.example.org/simple?api_key=****",
                "keys": ["index-url"],
                "key_name": "global.index-url",
            }
        ]
    }


def test_redact_value_redacts_the_value_of_a_record_named_like_a_secret():
    doc = {
        "settings": [
            {"key": "password", "value": "Yy1", "source": "PIP_PASSWORD"},
            {"key": "index-url", "value": "https://h.example.org/s", "source": "/etc/pip.conf"},
            {"name": "HF_TOKEN", "value": "hf_x"},
            {"name": "/etc/secret/x", "value": "plain"},
        ]
    }
    assert redact_value(doc) == {
        "settings": [
            {"key": "password", "value": REDACTED, "source": "PIP_PASSWORD"},
            {"key": "index-url", "value": "https://h.example.org/s", "source": "/etc/pip.conf"},
            {"name": "HF_TOKEN", "value": REDACTED},
            {"name": "/etc/secret/x", "value": "plain"},
        ]
    }


def test_redaction_is_idempotent_on_documents():
    doc = {
        "env": {
            "HF_TOKEN": "hf_x",
            "PIP_INDEX_URL": "https://u:p@w@h.example.org/s?token=t&page=1",
            "TOKENIZERS_PARALLELISM": "false",
        },
        "log": "Authorization: Basic YWxpY2U6cGFzcw== HF_TOKEN='q' --password=z",
    }
    once = redact_value(doc)
    assert redact_value(once) == once
    assert once["env"]["TOKENIZERS_PARALLELISM"] == "false"


def test_redact_env():
    assert redact_env(
        {
            "HF_TOKEN": "hf_x",
            "PIP_EXTRA_INDEX_URL": MIRROR,
            "CUDA_HOME": "/usr/local/cuda",
            "TOKENIZERS_PARALLELISM": "false",
        }
    ) == {
        "HF_TOKEN": REDACTED,
        "PIP_EXTRA_INDEX_URL": "https://****@mirror.example.org/simple",
        "CUDA_HOME": "/usr/local/cuda",
        "TOKENIZERS_PARALLELISM": "false",
    }


# ------------------------------------------------------------------------- property tests

#: characters a raw password may hold in a URL's userinfo (RFC 3986 unreserved, sub-delims, ":" and,
#: illegally but in practice, "@"); "*" is left out so a secret can never look like the redaction mark
_USERINFO_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()+,;=:@%"
#: characters of a query value (no "&", "#" or quotes: they end it)
_QUERY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$()+,;=:@%/?"
#: surrounding prose never contains "Q", so a secret (which starts with "Q") cannot appear in it by chance
_PROSE = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPRSTUVWXYZ0123456789 .,:;!()\n-", max_size=40)
_HOST = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){1,3}", fullmatch=True)
_PATH = st.from_regex(r"(/[a-z0-9._-]{0,8}){0,3}", fullmatch=True)
_SECRET_PARAM = st.sampled_from(
    [
        "token",
        "auth",
        "key",
        "api_key",
        "API-KEY",
        "apikey",
        "password",
        "passwd",
        "secret",
        "signature",
        "sig",
        "access_token",
        "Access-Token",
        "credential",
        "X-Amz-Signature",
        "private_token",
    ]
)
_PLAIN_PARAM = st.sampled_from(["page", "q", "format", "sort", "author"])


@st.composite
def _url_with_secrets(draw):
    """(url, [secrets]) with userinfo and/or secret query parameters."""
    secrets = []
    url = draw(st.sampled_from(["https", "http", "git+https", "s3"])) + "://"
    if draw(st.booleans()):
        user = draw(st.text(alphabet=_USERINFO_CHARS.replace("@", "").replace(":", ""), max_size=8))
        password = "Q" + draw(st.text(alphabet=_USERINFO_CHARS, min_size=1, max_size=16))
        url += f"{user}:{password}@"
        secrets.append(password)
    url += draw(_HOST) + draw(_PATH)
    params = []
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            value = "Q" + draw(st.text(alphabet=_QUERY_CHARS, min_size=1, max_size=12))
            params.append(f"{draw(_SECRET_PARAM)}={value}")
            secrets.append(value)
        else:
            params.append(f"{draw(_PLAIN_PARAM)}=v{draw(st.integers(0, 99))}")
    if params:
        url += "?" + "&".join(params)
    if draw(st.booleans()):
        url += "#" + draw(st.from_regex(r"[a-z0-9-]{0,8}", fullmatch=True))
    return url, secrets


@settings(max_examples=300, deadline=None)
@given(
    before=_PROSE,
    glue=st.sampled_from(["", " ", "\n", "(", ",", "_", "-"]),
    found=_url_with_secrets(),
    after=_PROSE,
    quote=st.sampled_from(["", "'", '"', "`", "<"]),
)
def test_generated_secrets_never_survive(before, glue, found, after, quote):
    url, secrets = found
    closing = {"<": ">"}.get(quote, quote)
    text = f"{before}{glue}{quote}{url}{closing} {after}"
    out = redact_text(text)
    for secret in secrets:
        assert secret not in out
    assert redact_text(out) == out
    if not secrets:
        assert out == text  # nothing secret: nothing changes
    assert out.startswith(before) and out.endswith(after)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;!()@/-_\n", max_size=80)
)
def test_text_without_secrets_is_unchanged(text):
    """Prose with "@", ":" and "/" but no scheme, no "=" and no Bearer/Authorization is left alone."""
    assert redact_text(text) == text


# ----------------------------------------------------------------- end to end through a real target


@pytest.fixture(scope="module")
def leaky_target(tmp_path_factory, bare_python):
    """A bare venv whose environment holds secrets and whose (fake) torch fails with them in the message."""
    path = fake_torch(
        tmp_path_factory.mktemp("leaky"),
        f"raise ImportError('could not fetch wheel from {MIRROR} with HF_TOKEN=hf_abcdefghijklmnop')\n",
    )
    env = env_with(
        PYTHONPATH=path,
        HF_TOKEN="hf_abcdefghijklmnop",
        NVIDIA_API_KEY="nvapi-0123456789",
        PIP_INDEX_URL=MIRROR,
        UV_INDEX_PRIVATE_PASSWORD="s3cr3t-uv-pass",
        NO_COLOR="1",
    )
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


# ------------------------------------------- end to end: secrets in a user pip.conf and in the environment

#: userinfo with raw "@" and secret query parameters in the user pip.conf, more in the environment
PIP_CONF = """[global]
index-url = https://alice:Kq7vPASSA@Wz4pPASSB@mirror.example.org/simple?auth=Qa1QUERYA&api_key=Qb2QUERYB
extra-index-url = https://bob:Rr5PASSC@extra.example.org/simple?token=Qc3QUERYC&X-Amz-Signature=Qd4QUERYD&page=2
"""
ENV_SECRETS = {
    "PIP_EXTRA_INDEX_URL": "https://carol:Tt6PASSD@Uu7PASSE@envmirror.example.org/simple?sig=Qe5QUERYE",
    "HF_TOKEN": "hf_Vv8ENVSECRETA",
    "NVIDIA_API_KEY": "nvapi-Ww9ENVSECRETB",
    "UV_INDEX_PRIVATE_PASSWORD": "Xx0ENVSECRETC",
    "PIP_PASSWORD": "Yy1ENVSECRETD",
}
NEW_INDEX = "https://dave:Zz2PASSF@new@new.example.org/simple?access_token=Qf6QUERYF&page=3"
E2E_SECRETS = (
    "Kq7vPASSA",
    "Wz4pPASSB",
    "Qa1QUERYA",
    "Qb2QUERYB",
    "Rr5PASSC",
    "Qc3QUERYC",
    "Qd4QUERYD",
    "Tt6PASSD",
    "Uu7PASSE",
    "Qe5QUERYE",
    "Vv8ENVSECRETA",
    "Ww9ENVSECRETB",
    "Xx0ENVSECRETC",
    "Yy1ENVSECRETD",
    "Zz2PASSF",
    "new@new",
    "Qf6QUERYF",
)


@pytest.fixture
def secret_home(isolated_home, bare_python):
    """(python, env): the user pip.conf of a temporary HOME and the environment both hold secrets."""
    conf = isolated_home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(PIP_CONF)
    return bare_python, env_with(NO_COLOR="1", TOKENIZERS_PARALLELISM="false", **ENV_SECRETS)


def assert_no_e2e_secret(text):
    for secret in E2E_SECRETS:
        assert secret not in text, secret


REDACTED_INDEX = "https://****@mirror.example.org/simple?auth=****&api_key=****"
REDACTED_EXTRA = "https://****@extra.example.org/simple?token=****&X-Amz-Signature=****&page=2"


@pytest.mark.parametrize(
    "args",
    [("-v",), ("-v", "--format", "json"), ("-v", "--format", "markdown"), ()],
    ids=["console-v", "json", "markdown", "console"],
)
def test_check_output_never_shows_config_or_environment_secrets(secret_home, args):
    python, env = secret_home
    proc = run_gpudoctor("check", "--offline", "--python", python, *args, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert_no_e2e_secret(proc.stdout + proc.stderr)
    # the pip.config check still sees (and names) the credentials, redacted
    assert "credentials are stored in clear text" in proc.stdout
    assert "https://****@mirror.example.org/simple?auth=****&api_key=****" in proc.stdout


def test_facts_snapshot_never_shows_secrets_and_keeps_option_names(secret_home, tmp_path):
    python, env = secret_home
    proc = run_gpudoctor("facts", "--offline", "--python", python, env=env)
    assert proc.returncode == 0, proc.stderr
    assert_no_e2e_secret(proc.stdout + proc.stderr)
    doc = json.loads(proc.stdout)
    pip = doc["domains"]["pip"]
    text = json.dumps(pip)
    assert REDACTED_INDEX in text and REDACTED_EXTRA in text
    assert pip["effective"]["index-url"]["key"] == "index-url"  # option names survive
    assert pip["effective"]["password"] == {
        **pip["effective"]["password"],
        "key": "password",
        "value": REDACTED,
        "source": "PIP_PASSWORD",
    }
    assert pip["env"]["PIP_EXTRA_INDEX_URL"] == "https://****@envmirror.example.org/simple?sig=****"
    (t,) = [t for t in doc["domains"]["targets"]["targets"] if t["kind"] != "kernel"]
    assert t["probe"]["env"]["NVIDIA_API_KEY"] == REDACTED
    assert t["probe"]["env"]["UV_INDEX_PRIVATE_PASSWORD"] == REDACTED
    # the redacted snapshot replays: pip.config still warns about the credentials in the index URLs
    snap = tmp_path / "facts.json"
    snap.write_text(proc.stdout)
    replay = run_gpudoctor("check", "pip.config", "--facts", str(snap), "--format", "json", env=env)
    assert "credentials are stored in clear text" in replay.stdout, replay.stderr
    assert_no_e2e_secret(replay.stdout + replay.stderr)


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_fix_dry_run_diff_never_shows_old_or_new_secrets(secret_home, fmt, isolated_home):
    python, env = secret_home
    proc = run_gpudoctor(
        "fix",
        "pip.index-url",
        "--offline",
        "--python",
        python,
        "--index-url",
        NEW_INDEX,
        "--dry-run",
        "--format",
        fmt,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert_no_e2e_secret(proc.stdout + proc.stderr)
    out = proc.stdout if fmt == "console" else json.dumps(json.loads(proc.stdout))
    assert "-index-url = " + REDACTED_INDEX in out
    assert "+index-url = https://****@new.example.org/simple?access_token=****&page=3" in out
    assert (isolated_home / ".config" / "pip" / "pip.conf").read_text() == PIP_CONF  # dry run wrote nothing


def test_internal_error_crash_log_lands_in_the_per_test_tmpdir(private_tmpdir):
    """A CLI process that ends with exit 3 writes its crash log under TMPDIR, which the autouse
    ``private_tmpdir`` fixture points at a per-test directory (so /tmp collects no crash logs)."""
    import subprocess
    import sys
    import tempfile

    assert tempfile.gettempdir() == str(private_tmpdir)
    crash = (
        "import sys, gpudoctor.engine as e\n"
        "def boom(*a, **k): raise AttributeError('boom in engine.run')\n"
        "e.run = boom\n"
        "from gpudoctor.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    snap = Path(__file__).parent / "fixtures" / "facts" / "empty.json"
    proc = subprocess.run(
        [sys.executable, "-c", crash, "check", "--facts", str(snap)],
        capture_output=True,
        text=True,
        env=env_with(),
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    (log,) = private_tmpdir.glob("gpudoctor-crash-*.log")
    assert str(log) in proc.stderr and "boom in engine.run" in log.read_text()


PASTED = [
    ("python train.py --token hf_Abcdefghijklmnopqrstuvwxyz0123 --lr 3e-4", "hf_Abcdef", "--lr 3e-4"),
    ("python train.py --token plainsecretvalue --lr 3e-4", "plainsecretvalue", "--lr 3e-4"),
    ("curl -u me --password s3cretpass https://mirror.example.org/", "s3cretpass", "https://mirror.example.org/"),
    ("curl --api-key 'two words' https://mirror.example.org/", "two words", "curl --api-key '****'"),
    ('cmd = "deepspeed train.py --hf_token abc123secretvalue --zero 3"', "abc123secretvalue", "--zero 3"),
    ("git clone https://ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/o/r", "ghp_0123", "github.com/o/r"),
    ("echo github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz > f", "github_pat_11", "> f"),
    ("GITLAB glpat-abcdefghij0123456789 in log", "glpat-abcdef", "in log"),
    ("client = OpenAI(api_key='sk-proj-abcdefghijklmnop0123456789ABCDEFGHIJ')", "sk-proj-abc", "OpenAI("),
    ("token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123", "sk-ant-api03-abc", "token"),
    ("slack hook xoxb-123456789012-1234567890123-abcdefghijABCDEFGHIJ0123", "xoxb-1234", "slack hook"),
    ("aws_access AKIAIOSFODNN7EXAMPLE rest", "AKIAIOSFODNN7EXAMPLE", "rest"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789 done", "npm_abcdef", "done"),
    ("key AIzaSyA0123456789abcdefghijklmnopqrstuv ok", "AIzaSyA0123", "ok"),
    (
        "Authorization header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
        "eyJhbGci",
        "end",
    ),
]


@pytest.mark.parametrize(("text", "secret", "kept"), PASTED, ids=[p[1] for p in PASTED])
def test_what_people_really_paste_is_redacted(text, secret, kept):
    out = redact_text(text)
    assert secret not in out and kept in out and REDACTED in out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "torchrun --nproc-per-node 8 train.py --max-tokens 512 --tokenizer gpt2",
        "pip install --index-url https://mirror.example.org/simple --key-file /etc/ssl/k.pem torch",
        "scikit-learn sk-learn risk-assessment ask-questions-about-it",
        "the token budget is 4096 tokens",
    ],
)
def test_ordinary_command_lines_are_left_alone(text):
    assert redact_text(text) == text


def _every_rule(text: str) -> str:
    """The secret rules of :mod:`gpudoctor.redact` applied with no pre-filter, in their order:
    the oracle the fast path (rules skipped on text that cannot match them) must equal."""
    from gpudoctor import redact as r

    text = r._BARE_TOKEN.sub(REDACTED, text)
    text = r._URL_USERINFO.sub(r._userinfo, text)
    text = r._QUERY_PARAM.sub(r._query, text)
    text = r._CONDA_TOKEN.sub(lambda m: f"{m.group('pre')}{REDACTED}", text)
    text = r._AUTH_SCHEME.sub(
        lambda m: m.group(0) if m.group("cred") == REDACTED else f"{m.group('scheme')} {REDACTED}", text
    )
    text = r._QUOTED_PAIR.sub(r._pair, text)
    text = r._INI_LINE.sub(r._ini, text)
    text = r._YAML_LINE.sub(r._ini, text)
    text = r._NETRC.sub(
        lambda m: m.group(0) if m.group("value") == REDACTED else f"{m.group('lead')}{m.group('kw')} {REDACTED}", text
    )
    text = r._FLAG_VALUE.sub(r._flag, text)
    return r._ESCAPES.sub("", r._INLINE_ASSIGN.sub(r._assign, text))


#: pieces that start or end a match of some rule, and plain filler between them
_PIECES = [
    *("token", "KEY", "Api_Key", "passwd ", "password ", "secret", "sig", "pwd", "session", "auth"),
    *("=", " = ", ": ", ":", "://", "@", "?", "&", "/", "/t/", "-", "--", " ", "\t", "\n", '"', "'", "\\"),
    *("Bearer ", "Authorization: Basic ", "machine h login u ", "hf_", "x" * 40, "https", "abc", "a1b2c3d4"),
    *("\x1b[2J", "\x1b]0;t\x07", "\r", "\x00", "#", "- "),
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_pre_filters_change_no_result(text):
    """Skipping a rule on text that lacks what its matches need (``://`` and ``@``, a piece of a
    secret name...) redacts exactly what running every rule would."""
    from gpudoctor.redact import redact_file_text

    assert redact_file_text(text) == _every_rule(text)


def test_a_url_scheme_32_characters_long_and_one_too_long():
    """The ``://`` scan tries the 32 characters before it, as the scheme rule allows (a letter
    first: the 31 digits after it make no scheme of their own)."""
    scheme = "s" + "1" * 31
    assert redact_text(f"x {scheme}://u:QzPw@h.example.org/") == f"x {scheme}://****@h.example.org/"
    longer = "t" + scheme  # the rule matches its last 32 characters, as a regex scan does
    assert redact_text(f"{longer}://u:QzPw@h.example.org/") == f"{longer}://****@h.example.org/"
