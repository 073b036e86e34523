"""Every request the real server receives is answered — a result, or a JSON-RPC error that says what was wrong — and
every open document gets diagnostics, even if only "this document could not be analysed". Messages are written raw
to the server's stdin, as a buggy or hostile client would send them (``rawclient``), which a typed client cannot."""

import sys
import time

import pytest

from lsphelp import TINY, deep
from rawclient import RawClient, serving

POSITION_REQUESTS = ["textDocument/hover", "textDocument/definition", "textDocument/completion",
                     "textDocument/prepareRename"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("raw")) as client:
        yield client


@pytest.fixture(scope="module")
def uri(server):
    uri = server.open("tiny.lgm", TINY)
    server.published(uri)
    return uri


def bad_params(uri: str) -> dict:
    return {
        "negative line": {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}},
        "negative character": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": -5}},
        "line 2**31": {"textDocument": {"uri": uri}, "position": {"line": 2**31, "character": 0}},
        "character 2**40": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2**40}},
        "string position": {"textDocument": {"uri": uri}, "position": {"line": "three", "character": 0}},
        "position null": {"textDocument": {"uri": uri}, "position": None},
        "textDocument null": {"textDocument": None, "position": {"line": 0, "character": 0}},
        "params null": None,
        "params a list": [uri, 0, 0],
        "params a string": "hover",
    }


@pytest.mark.parametrize("method", POSITION_REQUESTS)
def test_a_request_whose_params_do_not_fit_its_method_is_answered_invalid_params_naming_the_field(server, uri, method):
    """Issue 11: these got no reply at all, and a client waiting on one hung."""
    for case, params in bad_params(uri).items():
        started = time.monotonic()
        got = server.request(method, params, timeout=5)
        assert time.monotonic() - started < 5
        assert "error" in got and got["error"]["code"] == -32602, (case, got)
        assert got["error"]["message"].startswith(method), (case, got)
    line = server.request(method, {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}})
    assert "Position.line should be in range [0:2147483647], but was -1. @ $.params.position" in line["error"]["message"]
    # …and the server goes on answering well-formed requests.
    ok = server.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}})
    assert "result" in ok


def test_a_refused_request_is_its_error_answer_and_never_a_traceback_on_stderr(server, uri):
    refusals = lambda: [l for l in server.stderr().splitlines() if "refused textDocument/hover" in l]  # noqa: E731
    time.sleep(0.3)
    before = len(refusals())
    for params in bad_params(uri).values():
        server.request("textDocument/hover", params)
    refused_command = server.request("workspace/executeCommand", {"command": "streamed.lowerBundle", "arguments": [3]})
    assert refused_command["error"]["code"] == -32602 and "takes an object like" in refused_command["error"]["message"]
    refused_rename = server.request("textDocument/prepareRename",
                                    {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    assert "error" in refused_rename or refused_rename.get("result") is None
    time.sleep(0.3)
    err = server.stderr()
    assert "Traceback" not in err, err[-2000:]
    assert len(refusals()) - before == len(bad_params(uri))  # one line each


def test_an_open_document_nested_10000_deep_gets_diagnostics(server):
    """It published nothing at all: the analysis failed on it and the server kept silent."""
    uri = server.open("deep.lgm", "# Deep\n\n## Layer 0\nLet x be " + "(" * 10_000 + "y" + ")" * 10_000 + ".\n")
    published = server.published(uri)
    assert published["diagnostics"], published
    assert all(d["severity"] == 1 for d in published["diagnostics"][:1])


def test_a_document_over_the_size_limit_is_refused_with_one_diagnostic_in_bounded_memory(server):
    """A 50 MB document took 5.2 GB and was still climbing after 240 s; the command line refuses anything over 4 MB,
    and now so does the server, with the same limit and the same words."""
    from streamed.lang.limits import MAX_DOCUMENT_BYTES

    text = deep(TINY, 20_000)  # twenty thousand real layers
    assert len(text) > 4 * MAX_DOCUMENT_BYTES
    started = time.monotonic()
    uri = server.open("big.lgm", text)
    published = server.published(uri, timeout=60)
    (only,) = published["diagnostics"]
    assert only["message"].startswith(f"the document is {len(text.encode()):,} bytes; streamed reads model programs "
                                      f"up to 4,194,304 bytes")
    assert time.monotonic() - started < 30
    hover = server.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 3}})
    assert hover.get("result") is None and "error" not in hover
    with open(f"/proc/{server.process.pid}/status") as f:
        peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) // 1024
    assert peak < 600, f"the server's peak memory was {peak} MB"


def _crashing_server(root, patch: str) -> RawClient:
    """The real server with one function replaced by ``patch`` (fault injection: a crash no input of ours still
    causes)."""
    code = f"{patch}\nfrom streamed_lsp.handlers import main\nmain()\n"
    return RawClient(root, command=[sys.executable, "-c", code])


def test_a_crash_inside_a_handler_is_one_error_answer_and_one_log_line(tmp_path):
    client = _crashing_server(tmp_path, "import streamed_lsp.hover as h\n"
                                        "def boom(*a):\n    raise ZeroDivisionError('a bug in hover')\n"
                                        "h.hover = boom")
    try:
        client.initialize()
        uri = client.open("m.lgm", TINY)
        client.published(uri)
        got = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}})
        assert got["error"]["code"] == -32603
        assert got["error"]["message"].startswith("textDocument/hover failed: ZeroDivisionError: a bug in hover")
        assert "result" in client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        time.sleep(0.3)
        err = client.stderr()
        assert "Traceback" not in err
        assert [l for l in err.splitlines() if "hover" in l] == \
            [l for l in err.splitlines() if l.startswith("streamed-server: ERROR textDocument/hover failed: "
                                                         "ZeroDivisionError: a bug in hover (at ")]
        assert len([l for l in err.splitlines() if "hover" in l]) == 1
    finally:
        client.close()


def test_a_document_the_analysis_fails_on_still_gets_a_diagnostic_saying_so(tmp_path):
    client = _crashing_server(tmp_path, "import streamed.analysis.incremental as inc\n"
                                        "real = inc.IncrementalAnalyzer.analyze\n"
                                        "def analyze(self, text, cut=None):\n"
                                        "    if 'BOOM' in text: raise RuntimeError('the analysis broke')\n"
                                        "    return real(self, text, cut)\n"
                                        "inc.IncrementalAnalyzer.analyze = analyze")
    try:
        client.initialize()
        uri = client.open("m.lgm", TINY.replace("# Tiny Llama", "# Tiny Llama BOOM"))
        (only,) = client.published(uri)["diagnostics"]
        assert only["message"].startswith("this document could not be analysed: RuntimeError: the analysis broke (at ")
        assert only["severity"] == 1
        assert "Traceback" not in client.stderr()
    finally:
        client.close()


def test_a_target_a_pmu_cannot_hold_a_byte_of_is_refused_and_diagnostics_go_on(tmp_path):
    """Issue 11: the server accepted a target whose SRAM was tiny, then published no diagnostics for any document
    (every analysis died dividing by its PMUs' zero bytes)."""
    from importlib import resources

    sn50 = resources.files("streamed.spatial").joinpath("targets", "sn50.toml").read_text("utf-8")
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(sn50.replace("sram_mb = 432", "sram_mb = 0.000001"))
    client = RawClient(tmp_path)
    try:
        client.initialize({"target": str(tiny)})
        uri = client.open("m.lgm", TINY)
        assert client.published(uri)["diagnostics"] == []  # analysed under the previous target, sn50
        said = [m["params"]["message"] for m in client.received if m.get("method") == "window/showMessage"]
        assert any(f"{tiny}: `sram_mb` 1e-06 over 2,080 PMUs leaves each less than a byte" in s for s in said), said
    finally:
        client.close()


def test_a_client_that_never_answers_the_progress_request_gets_every_command_answered_and_no_progress(tmp_path):
    raw = RawClient(tmp_path, unanswered=frozenset({"window/workDoneProgress/create"}))
    try:
        raw.initialize(capabilities={"window": {"workDoneProgress": True}})
        uri = raw.open("m.lgm", TINY)
        raw.published(uri)
        for _ in range(3):
            got = raw.request("workspace/executeCommand", {"command": "streamed.showKinds", "arguments": [{"uri": uri}]})
            assert got["result"][0]["layers"] == [0, 1, 2, 3]
        asked = [m for m in raw.received if m.get("method") == "window/workDoneProgress/create"]
        assert len(asked) == 3
        assert not [m for m in raw.received if m.get("method") == "$/progress"]
    finally:
        raw.close()
