"""The error-signature knowledge base (data/errors.toml) and its matcher (gpudoctor.explain)."""

from __future__ import annotations

import re

import pytest

from conftest import FIXTURES
from gpudoctor.data import load_table
from gpudoctor.explain import (
    MAX_LINE_CHARS,
    Matcher,
    SignatureError,
    explain_text,
    load_signatures,
    match_finding,
    parse_signatures,
    resolve_checks,
)
from gpudoctor.model import CHECK_ID_RE, Status
from gpudoctor.registry import load_registry

SIGNATURES = load_signatures()
BY_ID = {s.id: s for s in SIGNATURES}
NOISY = sorted((FIXTURES / "explain").glob("*-ok.log"))

# ----------------------------------------------------------------- the table itself


def test_table_has_the_promised_breadth():
    assert len(SIGNATURES) >= 65
    ids = [s.id for s in SIGNATURES]
    assert len(ids) == len(set(ids))
    families = {i.split(".")[0] for i in ids}
    for family in (
        "cuda",
        "lib",
        "cudnn",
        "nvml",
        "nccl",
        "dataloader",
        "compile",
        "docker",
        "container",
        "pip",
        "uv",
        "conda",
        "apt",
    ):
        assert family in families, family


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_signature_is_complete(sig):
    assert CHECK_ID_RE.match(sig.id)
    assert sig.title and sig.meaning and sig.remedy and sig.source
    assert "`" in sig.remedy or "\n" in sig.remedy, "a remedy names exact commands"
    assert re.search(r"https?://|\.(?:cpp|cc|py|h|hpp|cu)\b|\(\d\)|docs|PEP|README|guide", sig.source, re.IGNORECASE), (
        sig.source
    )
    assert set(sig.groups) == set(sig.pattern.groupindex)
    assert all(len(desc) > 5 for desc in sig.groups.values())
    assert sig.status in (Status.FAIL, Status.WARN)


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_example_matches_its_own_signature_first_and_extracts_values(sig):
    result = explain_text(sig.example)
    assert result.matches, f"{sig.id}: its example matches nothing"
    top = result.matches[0]
    assert top.signature.id == sig.id, [m.signature.id for m in result.matches]
    for name, value in sig.expect.items():
        assert top.values.get(name) == value, (name, top.values)
    # every named group that took part made it into the values, and the summary uses them
    for name in re.findall(r"\{(\w+)\}", sig.title):
        if name in sig.expect:
            assert sig.expect[name] in top.summary
    finding = match_finding(top)
    assert finding.check == sig.id and finding.status is sig.status
    assert finding.evidence["line"] >= 1


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.groups], ids=lambda s: s.id)
def test_examples_document_the_values_they_yield(sig):
    # a signature with named groups states what its example must yield: at least one value
    assert sig.expect, f"{sig.id}: add expect = {{...}} for its example"


def test_no_example_is_claimed_first_by_another_signature():
    wrong = {}
    for sig in SIGNATURES:
        others = [s for s in SIGNATURES if s.id != sig.id]
        # matched alone against every other signature: a generic one may match too, but must rank lower
        rivals = explain_text(sig.example, others).matches
        mine = explain_text(sig.example).matches[0]
        better = [m.signature.id for m in rivals if m.line == mine.line and m.signature.specificity >= sig.specificity]
        if better:
            wrong[sig.id] = better
    assert not wrong


@pytest.mark.parametrize("log", NOISY, ids=lambda p: p.name)
def test_ordinary_noisy_logs_match_nothing(log):
    result = explain_text(log.read_text())
    assert result.lines_read > 10
    assert [m.signature.id for m in result.matches] == []


def test_confirming_checks_name_installed_checks():
    # the resolver tolerates a reference to a check that is not installed (a plug-in's, a later
    # release's), but the shipped table must only name checks that ship with it
    installed = load_registry().checks
    for sig in SIGNATURES:
        ids, unresolved = resolve_checks(sig.checks, installed)
        assert unresolved == [], (sig.id, unresolved)
        assert len(ids) == len(set(sig.checks)), sig.id


def test_most_signatures_are_confirmed_by_an_installed_check():
    installed = load_registry().checks
    confirmed = [s for s in SIGNATURES if resolve_checks(s.checks, installed)[0]]
    code_bugs = [s for s in SIGNATURES if not s.checks]  # device-side asserts, tensors on two devices...
    assert len(confirmed) + len(code_bugs) == len(SIGNATURES)


def test_resolve_checks_takes_ids_and_prefixes_and_drops_unknown():
    known = ["cuda.driver", "cuda.arch", "platform.container", "platform.limits", "pip.config"]
    ids, unresolved = resolve_checks(["platform", "cuda.driver", "nccl.transport", "cuda.driver"], known)
    assert ids == ["platform.container", "platform.limits", "cuda.driver"]
    assert unresolved == ["nccl.transport"]


# ----------------------------------------------------------------- validation of the table


def _doc(**override):
    row = {
        "id": "x.sample",
        "title": "bad {thing}",
        "regex": r"boom (?P<thing>\w+)",
        "groups": {"thing": "the thing that broke"},
        "meaning": "m",
        "remedy": "`r`",
        "checks": [],
        "source": "https://example.org/docs",
        "example": "boom gear",
    }
    row.update(override)
    return {"signature": [row]}


@pytest.mark.parametrize(
    "override, message",
    [
        ({"regex": r"boom (?P<thing>\w+"}, "does not compile"),
        ({"groups": {}}, "undocumented"),
        ({"groups": {"thing": "x thing", "other": "not in the regex"}}, "not in regex"),
        ({"title": "bad {nothing}"}, "{nothing}"),
        ({"id": "NoDots"}, "dotted lowercase"),
        ({"checks": ["Not An Id"]}, "checks"),
        ({"status": "broken"}, "not a status"),
        ({"lines": 0}, "lines"),
        ({"regex": r"boom\n(?P<thing>\w+)"}, "spans lines"),
        ({"expect": {"other": "1"}}, "expect"),
        ({"derive": {"v": {"kind": "nonsense", "from": "thing"}}}, "derive"),
        ({"colour": "red"}, "unknown key"),
        ({"yields_to": ["x.other"]}, "yields_to names no other signature"),
        ({"yields_to": "x.other"}, "yields_to"),
        ({"require": ["thing >= nothing"]}, "require"),
        ({"require": ["thing ~ thing"]}, "require"),
        ({"require": "thing >= thing"}, "require"),
        ({"instance": ["nothing"]}, "'instance' must list named groups"),
        ({"instance": "thing"}, "'instance' must list named groups"),
        ({"read": "no-such-reader"}, "is not a reader"),
        ({"commands": [{"text": "reboot"}]}, "commands"),
        ({"commands": [{"text": "x", "purpose": "p", "safety": "maybe"}]}, "commands"),
        ({"commands": [{"text": "x {nothing}", "purpose": "p"}]}, "commands use {nothing}"),
    ],
)
def test_malformed_signatures_are_refused_with_the_reason(override, message):
    with pytest.raises(SignatureError) as err:
        parse_signatures(_doc(**override))
    assert message in str(err.value) and override.get("id", "x.sample") in str(err.value)


def test_require_compares_sizes_and_versions_and_drops_matches_that_fail():
    doc = _doc(
        regex=r"asked (?P<want>\S+ [KMG]iB), spare (?P<spare>\S+ [KMG]iB)",
        groups={"want": "requested size", "spare": "spare size"},
        title="t",
        example="asked 1.5 GiB, spare 2.0 GiB",
        require=["spare >= want"],
    )
    (sig,) = parse_signatures(doc)
    assert sig.require == (("spare", ">=", "want"),)
    assert explain_text("asked 1.5 GiB, spare 2.0 GiB", [sig]).matches
    assert explain_text("asked 1.5 GiB, spare 1536.0 MiB", [sig]).matches  # equal after units
    assert not explain_text("asked 1.5 GiB, spare 900.0 MiB", [sig]).matches
    assert not explain_text("asked 1.5 GiB, spare lots GiB", [sig]).matches  # not a quantity


def test_missing_key_and_duplicate_id_are_refused():
    doc = _doc()
    del doc["signature"][0]["source"]
    with pytest.raises(SignatureError, match="missing required key 'source'"):
        parse_signatures(doc)
    doc = _doc()
    doc["signature"].append(dict(doc["signature"][0]))
    with pytest.raises(SignatureError, match="duplicate id"):
        parse_signatures(doc)


def test_shipped_table_parses_with_the_same_validator():
    assert len(parse_signatures(load_table("errors"))) == len(SIGNATURES)


# ----------------------------------------------------------------- matching behaviour


def test_needles_prefilter_agrees_with_the_regex_on_every_example():
    for sig in SIGNATURES:
        for line in sig.example.splitlines():
            if sig.lines == 1 and sig.pattern.search(line):
                hay = line.lower() if sig.pattern.flags & re.IGNORECASE else line
                assert all(n in hay for n in sig.needles), (sig.id, sig.needles)


def test_same_error_twice_is_one_finding_with_a_count():
    text = (
        "warn: The NVIDIA driver on your system is too old (found version 10020).\n"
        "RuntimeError: The NVIDIA driver on your system is too old (found version 10020).\n"
    )
    (m,) = explain_text(text).matches
    assert m.count == 2 and m.line == 1 and m.values["driver_cuda"] == "10.2"


def test_two_different_libraries_give_two_findings():
    text = (
        "OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n"
        "OSError: libcublas.so.11: cannot open shared object file: No such file or directory\n"
    )
    got = {(m.signature.id, m.values["library"]) for m in explain_text(text).matches}
    assert got == {("lib.cudart-missing", "libcudart.so.11.0"), ("lib.cublas-missing", "libcublas.so.11")}


@pytest.mark.parametrize(
    "library, expected",
    [
        ("libcudart.so.12", "lib.cudart-missing"),
        ("libcublasLt.so.12", "lib.cublas-missing"),
        ("libcudnn.so.9", "lib.cudnn-missing"),
        ("libcudnn_graph.so.9", "lib.cudnn-missing"),
        ("libnccl.so.2", "lib.nccl-missing"),
        ("libnvrtc.so.12", "lib.nvrtc-missing"),
        ("libcufft.so.11", "lib.cuda-math-missing"),
        ("libcurand.so.10", "lib.cuda-math-missing"),
        ("libcusolver.so.11", "lib.cuda-math-missing"),
        ("libnvJitLink.so.12", "lib.cuda-math-missing"),
        ("libcupti.so.12", "lib.cuda-tools-missing"),
        ("libnvToolsExt.so.1", "lib.cuda-tools-missing"),
        ("libnvinfer.so.8", "lib.tensorrt-missing"),
        ("libcuda.so.1", "lib.libcuda-missing"),
        ("libcuda.so", "lib.libcuda-missing"),
        ("libnvidia-ml.so.1", "lib.nvml-missing"),
        ("libnvcuvid.so.1", "lib.cuda-family-missing"),
        ("libcudss.so.0", "lib.cuda-math-missing"),
    ],
)
def test_every_cuda_family_library_is_named(library, expected):
    for form in (
        f"OSError: {library}: cannot open shared object file: No such file or directory",
        f"./app: error while loading shared libraries: {library}: cannot open shared object file: No such "
        f"file or directory",
        f"Could not load dynamic library '{library}'; dlerror: {library}: cannot open shared object file: "
        f"No such file or directory",
    ):
        top = explain_text(form).matches[0]
        assert top.signature.id == expected, (form, top.signature.id)
        if "library" in top.signature.groups:
            assert top.values["library"] == library


def test_non_cuda_library_is_not_claimed():
    assert explain_text("OSError: libGL.so.1: cannot open shared object file: No such file or directory").matches == ()


def test_cudnn_wrapper_names_the_real_missing_dependency():
    text = "Could not load library libcudnn_ops.so.9. Error: libcublasLt.so.12: cannot open shared object file"
    top = explain_text(text).matches[0]
    assert top.signature.id == "lib.cublas-missing" and top.values["library"] == "libcublasLt.so.12"


@pytest.mark.parametrize(
    "text, sig_id, values",
    [
        (
            "ImportError: /e/lib/python3.12/site-packages/nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: "
            "__nvJitLinkCreate_12_8, version libnvJitLink.so.12",
            "lib.nvjitlink-too-old",
            {"library": "libcusparse.so.12", "needed_version": "12.8"},
        ),
        (
            "ImportError: /e/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommWindowRegister",
            "nccl.undefined-symbol",
            {"symbol": "ncclCommWindowRegister"},
        ),
        (
            "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) but found runtime version "
            "(8, 5, 0).",
            "cudnn.version-incompatible",
            {"compiled_version": "8.9.2", "runtime_version": "8.5.0"},
        ),
        (
            "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12020).",
            "cuda.driver-too-old",
            {"driver_cuda": "12.2"},
        ),
        (
            "NVIDIA GeForce GTX 680 with CUDA capability sm_30 is not compatible with the current PyTorch installation.",
            "cuda.arch-not-compatible",
            {"arch": "sm_30", "gpu_name": "NVIDIA GeForce GTX 680"},
        ),
    ],
)
def test_neighbour_versions_and_libraries(text, sig_id, values):
    top = explain_text(text).matches[0]
    assert top.signature.id == sig_id
    assert {k: top.values[k] for k in values} == values


@pytest.mark.parametrize(
    "text, sig_id, values",
    [
        (
            "gpu-a:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes",
            "nccl.shm-no-space",
            {"shm_size": "9637892"},
        ),
        ("main.c:5:10: fatal error: 'Python.h' file not found", "compile.python-h-missing", {}),
        (
            "x.c:1:10: fatal error: Python.h: No such file or directory\ncompilation terminated.\n"
            "subprocess.CalledProcessError: Command '['gcc', 'x.c', '-I/opt/py/include/python3.13t', '-lcuda']'",
            "compile.python-h-missing",
            {"python_version": "3.13", "include_dir": "/opt/py/include/python3.13t"},
        ),
        (
            "cp: cannot stat '/etc/apt/sources.list': No such file or directory",
            "apt.sources-list-absent",
            {"path": "/etc/apt/sources.list"},
        ),
        (
            "ERROR: Configuration file could not be loaded.\nFile contains no section headers.\n"
            "file: '/etc/xdg/pip/pip.conf', line: 2\n'x = 1\\n'",
            "pip.conf-no-section-header",
            {"path": "/etc/xdg/pip/pip.conf", "lineno": "2"},
        ),
        (
            "  Caused by: error sending request for url (https://pypi.org/simple/numpy/)",
            "uv.default-index",
            {"package": "numpy"},
        ),
        (
            "nvidia-smi shows the process running on GPU 3 although the script uses cuda:0",
            "cuda.device-order-mismatch",
            {"smi_index": "3"},
        ),
        ("DEBUG Sending fresh GET request for https://pypi.org/simple/ruff/", "uv.default-index", {"host": "pypi.org"}),
    ],
)
def test_other_wordings_of_the_same_faults(text, sig_id, values):
    result = explain_text(text)
    assert [m.signature.id for m in result.matches] == [sig_id]
    assert {k: result.matches[0].values[k] for k in values} == values


def test_generic_signatures_yield_to_specific_ones():
    text = (
        "ERROR: Could not find a version that satisfies the requirement torch==9.0 (from versions: none)\n"
        "ERROR: No matching distribution found for torch==9.0\n"
    )
    assert [m.signature.id for m in explain_text(text).matches] == ["pip.no-versions-at-all"]
    alone = explain_text("ERROR: No matching distribution found for torch==9.0")
    assert [m.signature.id for m in alone.matches] == ["pip.no-matching-distribution"]


def test_multi_line_signature_sees_a_window_and_reports_its_first_line():
    text = "\n".join(
        ["$ pip list", "noise"] * 3
        + [
            "Configuration file could not be loaded.",
            "File contains no section headers.",
            "file: '/srv/venv/pip.conf', line: 3",
            "'url = x\\n'",
        ]
    )
    (m,) = explain_text(text).matches
    assert m.signature.id == "pip.conf-no-section-header"
    assert m.line == 8 and m.values == {"path": "/srv/venv/pip.conf", "lineno": "3"}


def test_absent_optional_values_read_naturally():
    (m,) = explain_text("x.c:1:10: fatal error: Python.h: No such file or directory").matches
    finding = match_finding(m)
    assert m.summary.endswith("Python.h (Python 3.X headers) is missing")
    assert "<" not in finding.explanation.replace("<Python.h>", "")
    assert "sudo apt-get install python3.X-dev" in finding.explanation


def test_multi_line_signature_does_not_match_lines_too_far_apart():
    text = (
        "Configuration file could not be loaded.\nFile contains no section headers.\n"
        + "x\n" * 10
        + "file: '/srv/venv/pip.conf', line: 3\n"
    )
    ids = [m.signature.id for m in explain_text(text).matches]
    assert ids == ["pip.conf-unparsable"]


def test_long_lines_are_cut_and_stay_fast():
    junk = "x" * (MAX_LINE_CHARS * 50)
    result = explain_text(junk + "\nRuntimeError: No CUDA GPUs are available\n" + junk + "No CUDA GPUs are available")
    assert [m.line for m in result.matches] == [2]  # the match at the end of the cut line is not seen


def test_matcher_memory_stays_bounded_on_a_long_log():
    m = Matcher()
    for i in range(3000):
        m.feed(f"OSError: [Errno 24] Too many open files: '/data/shard-{i}.tar'")
        m.feed(f"step {i} loss 0.1")
    (match,) = m.matches()
    assert match.count == 3000 and m.lines_read == 6000
    assert len(m._window) <= max(s.lines for s in SIGNATURES)


def test_secrets_in_matched_lines_are_redacted_in_findings():
    text = (
        "Could not fetch URL https://alice:S3cr3tPass@pypi.corp.example.org/simple/pip/: There was a problem "
        "confirming the ssl certificate: HTTPSConnectionPool(host='pypi.corp.example.org', port=443)"
    )
    (m,) = explain_text(text).matches
    finding = match_finding(m)
    blob = repr(finding.to_json())
    assert "S3cr3tPass" not in blob and "****" in blob


def test_signature_ids_are_not_check_ids():
    assert not set(BY_ID) & set(load_registry().checks)


# ----------------------------------------------------------------- the pre-filter never loses a match


def _bare():
    import dataclasses

    return [dataclasses.replace(s, needles=(), any_needles=()) for s in SIGNATURES]


def _found(text, signatures=None):
    m = Matcher(signatures)
    m.feed_text(text)
    return sorted((x.signature.id, x.line, tuple(sorted(x.values.items()))) for x in m._found.values())


def test_prefilter_agrees_with_searching_every_regex_on_examples_and_logs():
    bare = _bare()
    texts = [s.example for s in SIGNATURES] + [p.read_text() for p in NOISY]
    texts += [p.read_text() for p in (FIXTURES / "cases").glob("*/*.txt")]
    for text in texts:
        assert _found(text) == _found(text, bare)


def test_prefilter_agrees_on_mangled_examples():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    bare = _bare()
    lines = [ln for s in SIGNATURES for ln in s.example.splitlines() if ln.strip()]

    @settings(max_examples=150, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(lines),
                st.integers(0, 400),
                st.integers(0, 400),
                st.text(alphabet="ab :'\"()[]/._-0123456789é\t", max_size=12),
            ),
            min_size=1,
            max_size=6,
        )
    )
    def check(parts):
        # cut, splice and glue example lines: matches may appear or vanish, but both matchers agree
        text = "\n".join(line[a:] + junk + line[:b] for line, a, b, junk in parts)
        assert _found(text) == _found(text, bare)

    check()


def test_instance_groups_fold_occurrences_into_one_diagnosis_and_others_stay_apart():
    """Three ranks timing out on one collective are one diagnosis (counted 3 times); a different
    operation is a second one. Without `instance`, every rank would be a diagnosis of its own."""
    doc = _doc(
        id="x.timeout",
        title="{op} timed out",
        regex=r"\[Rank (?P<rank>\d+)\] (?P<op>\w+) timed out",
        groups={"rank": "the rank", "op": "the operation"},
        instance=["rank"],
        example="[Rank 0] ALLREDUCE timed out",
    )
    text = "\n".join(
        [
            "[Rank 0] ALLREDUCE timed out",
            "[Rank 3] ALLREDUCE timed out",
            "[Rank 5] ALLREDUCE timed out",
            "[Rank 1] BROADCAST timed out",
        ]
    )
    matches = explain_text(text, parse_signatures(doc)).matches
    assert [(m.values["op"], m.count, m.line) for m in matches] == [("ALLREDUCE", 3, 1), ("BROADCAST", 1, 4)]
    plain = explain_text(text, parse_signatures(_doc(**{**doc["signature"][0], "instance": []}))).matches
    assert len(plain) == 4


def test_unless_drops_a_match_the_rest_of_the_log_refutes():
    """Paddle #78917 on WSL: the warning about the unversioned libcuda.so, then the framework's own
    device note (the driver answered): nothing to diagnose. Neighbour: TensorFlow's device creation.
    Twin: the same warning with no such line is still a missing driver library."""
    from gpudoctor.explain import explain_text

    warning = (
        "W0508 21:40:15.979074  1551 dynamic_loader.cc:412] The third-party dynamic library (libcuda.so) that Paddle "
        "depends on is not configured correctly. (error code is libcuda.so: cannot open shared object file: No such "
        "file or directory)"
    )
    paddle_ok = "W0508 21:40:15.993314  1551 gpu_resources.cc:116] Please NOTE: device: 0, GPU Compute Capability: 12.0, Driver API Version: 13.2, Runtime API Version: 13.0"
    tf_ok = "I0000 00:00:1700000000.000000 1 gpu_device.cc:2022] Created device /job:localhost/replica:0/task:0/device:GPU:0 with 22000 MB memory"
    assert [m.signature.id for m in explain_text(f"{warning}\n{paddle_ok}").matches] == []
    assert [m.signature.id for m in explain_text(f"{tf_ok}\n{warning}").matches] == []
    assert [m.signature.id for m in explain_text(warning).matches] == ["lib.libcuda-missing"]


def test_an_unless_that_does_not_compile_is_refused():
    import pytest

    from gpudoctor.explain import SignatureError, parse_signatures

    raw = {
        "id": "x.y",
        "title": "t",
        "regex": "boom",
        "meaning": "m",
        "remedy": "r",
        "checks": [],
        "source": "https://example.org/x.py",
        "example": "boom",
        "unless": "(unclosed",
    }
    with pytest.raises(SignatureError, match="unless"):
        parse_signatures({"signature": [raw]})


def test_a_diagnosis_carries_its_remedy_as_commands_with_the_values_filled_in():
    doc = _doc(
        commands=[
            {"text": "sudo modprobe {thing}", "purpose": "load {thing}", "safety": "root"},
            {"text": "lsmod", "purpose": "list the modules"},
        ]
    )
    (sig,) = parse_signatures(doc)
    (finding,) = explain_text(sig.example, [sig]).findings
    values = explain_text(sig.example, [sig]).matches[0].values
    assert [(c.text, c.purpose, c.safety) for c in finding.commands] == [
        (f"sudo modprobe {values['thing']}", f"load {values['thing']}", "root"),
        ("lsmod", "list the modules", "safe"),
    ]
    (driver,) = [s for s in SIGNATURES if s.id == "cuda.driver-too-old"]
    assert driver.commands[0].text == "sudo apt-get install nvidia-driver-550"


def test_the_signature_counts_the_docs_state_come_from_the_knowledge_base():
    """README and docs/explain.md state how many errors explain knows: the number of the shipped table."""
    import re
    from pathlib import Path

    from gpudoctor.explain import load_signatures

    root = Path(__file__).resolve().parents[1]
    n = len(load_signatures())
    readme = re.search(r"recognise a traceback or log \((\d+) known", (root / "README.md").read_text())
    docs = re.search(r"table per message \((\d+) today\)", (root / "docs" / "explain.md").read_text())
    assert readme and docs and int(readme.group(1)) == n and int(docs.group(1)) == n


def test_ptx_isa_derivation_names_the_cuda_release_and_nothing_for_an_unknown_isa():
    from gpudoctor.explain import DERIVATIONS

    derive = DERIVATIONS["ptx_isa_cuda"]
    assert [derive(x) for x in ("7.4", "7.7", "8.2", "8.4", "8.6", "8.7")] == [
        "11.4",
        "11.7",
        "12.2",
        "12.4",
        "12.7",
        "12.8",
    ]
    assert derive("9.9") is None and derive("8.x") is None


def test_wheel_python_derivation_reads_the_cpython_tag_and_nothing_else():
    from gpudoctor.explain import DERIVATIONS

    derive = DERIVATIONS["wheel_python"]
    assert [derive(x) for x in ("cp35m", "cp39", "cp311", "cp313")] == ["3.5", "3.9", "3.11", "3.13"]
    assert derive("py3") is None and derive("abi3") is None and derive("cpython") is None


def test_unsupported_wheel_names_the_python_only_when_the_wheel_has_a_cpython_tag():
    from gpudoctor.explain import explain_text

    tagged = explain_text(
        "ERROR: torch-2.1.2+cu121-cp311-cp311-win_amd64.whl is not a supported wheel on this platform."
    )
    [m] = tagged.matches
    assert m.values["python"] == "3.11" and "Python 3.11" in tagged.findings[0].explanation
    pure = explain_text("ERROR: tool-1.0-py3-none-macosx_11_0_arm64.whl is not a supported wheel on this platform.")
    [m] = pure.matches
    assert "python" not in m.values and "cpXY" in pure.findings[0].explanation


_CONDA_GLIBC = """UnsatisfiableError: The following specifications were found to be incompatible with your system:

  - feature:/linux-64::__glibc=={installed}=0
  - {package} -> __glibc[version='{need}']

Your installed version is: {installed}
"""


def test_conda_glibc_line_is_a_misreport_only_when_the_installed_glibc_meets_every_requirement():
    from gpudoctor.explain import explain_text

    def top(installed: str, need: str) -> str | None:
        text = _CONDA_GLIBC.format(installed=installed, package="pytorch3d -> pytorch", need=need)
        found = explain_text(text).matches
        return found[0].signature.id if found else None

    assert top("2.31", ">=2.17,<3.0.a0") == "conda.unsatisfiable-glibc-listed"
    assert top("2.31", ">=2.28|>=2.17") == "conda.unsatisfiable-glibc-listed"
    # CentOS 7's glibc under a package built for glibc 2.28: glibc is the real cause, no misreport
    assert top("2.17", ">=2.28,<3.0.a0") is None
    assert top("2.12", ">=2.17") is None


def test_a_find_links_page_is_flagged_only_where_it_is_used_as_an_index():
    from gpudoctor.explain import explain_text

    def ids(text: str) -> list[str]:
        return [m.signature.id for m in explain_text(text).matches]

    page = "https://download.pytorch.org/whl/torch_stable.html"
    for used in (f"-i {page}", f"--index-url {page}", f"--extra-index-url={page}", f"--index {page}"):
        assert ids(f"pip install torch==1.8.0+cu111 {used}")[:1] == ["index.find-links-page-as-index"], used
    assert ids(f"Looking in indexes: https://pypi.org/simple, {page}")[:1] == ["index.find-links-page-as-index"]
    # the page where it belongs, and a real index: nothing to say
    assert ids(f"pip install torch==1.8.0+cu111 -f {page}") == []
    assert ids(f"Looking in links: {page}") == []
    assert ids("pip install torch --index-url https://download.pytorch.org/whl/cu124") == []


def test_pip_could_not_find_reads_the_requirement_past_the_requirements_file_it_came_from():
    from gpudoctor.explain import explain_text

    listed = explain_text(
        "ERROR: Could not find a version that satisfies the requirement torch==1.13.1 "
        "(from -r requirements.txt (line 3)) (from versions: 2.0.0, 2.0.1)"
    ).matches[0]
    assert listed.signature.id == "pip.no-matching-version"
    assert listed.values["requirement"] == "torch==1.13.1" and listed.values["versions"] == "2.0.0, 2.0.1"
    none = explain_text(
        "ERROR: Could not find a version that satisfies the requirement numpy>=1.26 (from -r req.txt (line 1)) "
        "(from versions: none)"
    ).matches[0]
    assert none.signature.id == "pip.no-versions-at-all" and none.values["requirement"] == "numpy>=1.26"
