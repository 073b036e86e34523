"""The streamed language server: a list of small handlers, each converting LSP types, calling one capability
module and converting back. Started by ``streamed serve`` and ``python -m streamed_lsp`` (stdio)."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import sys
import uuid
from pathlib import Path

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pygls.protocol.json_rpc import ResponseErrorMessage
from streamed.lang.limits import MAX_DOCUMENT_BYTES, MAX_MESSAGE_BYTES

from . import code_actions, code_lens, commands, compare, completion, definition, diagnostics, folding, formatting, hover
from . import inlay_hints, pictures, rename, semantic_tokens, symbols, wire
from .scheduler import Scheduler, Snapshot, failure
from .settings import Settings

log = logging.getLogger("streamed_lsp")


class _Refused:
    """What a message whose params could not be read becomes: already answered, handled as nothing."""


REFUSED = _Refused()


class Protocol(LanguageServerProtocol):
    """pygls's protocol with these differences: document text lives in the scheduler alone (pygls's copy is not
    kept, so an edit it could not apply cannot stop the server's own handler from running); positions are always
    UTF-16; commands are dispatched with their raw arguments and the client's work-done token; and every request is
    answered — params that do not fit the method's type (a negative position, ``null``, a list) get -32602 naming
    what is wrong (pygls logged a traceback and answered nothing, so a client waited for ever), a refusal is its error
    response alone, and a crash is one error response and one log line, never a traceback."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._methods: dict = {}  # the method of each request being handled, for the log line of one that fails
        self.lifecycle = wire.Lifecycle()

    def take(self, frame: wire.Frame) -> None:
        """One message off the wire (``wire.Frames``): handled, or — when it is no JSON-RPC message pygls may be
        handed, or one the session's lifecycle does not allow now (``wire.Lifecycle``) — refused as JSON-RPC and
        LSP say (``wire.problem_of``) with one log line, never a traceback."""
        if frame.body is None:
            log.warning("skipped %s", frame.problem)
            if frame.skipped:
                self._oversized(frame)
            return
        try:
            value = json.loads(frame.body)
        except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than the decoder goes
            why = f"not JSON ({e})" if isinstance(e, ValueError) else "nested too deep to read"
            self._refuse(None, wire.PARSE_ERROR, f"a message of {len(frame.body):,} bytes that is {why}"[:300])
            return
        problem = wire.problem_of(value)
        if problem is not None:
            code, why = problem
            msg_id = value.get("id") if isinstance(value, dict) and wire.is_id(value.get("id")) else None
            self._refuse(msg_id, code, why)
            return
        out_of_turn = self.lifecycle.refusal(value)
        if out_of_turn is not None:
            code, why = out_of_turn
            if "id" in value:
                self._refuse(value["id"], code, why)
            else:
                log.warning("dropped a notification: %s", why)
            return
        try:
            message = self.structure_message(value)
            if message is not REFUSED:
                self.lifecycle.took(value)
            self.handle_message(message)
        except Exception as e:  # noqa: BLE001 — pygls's own failure on a message: one line, and an answer if due
            log.error("a message could not be handled: %s", failure(e))
            if "method" in value and "id" in value:
                self._send_response(value["id"], error=JsonRpcInternalError(message=failure(e)).to_response_error())

    def _refuse(self, msg_id, code: int, why: str) -> None:
        """An error response (``id`` null when the message has none a response can carry) and one log line."""
        log.warning("refused a message: %s", why)
        # Sent as JSON values: pygls's typed response leaves out an id that is null, and JSON-RPC requires it.
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": why}})

    def _oversized(self, frame: wire.Frame) -> None:
        """A message skipped for its size: its request answered; a document it opened or changed is dropped (its text
        is no longer the editor's), with one diagnostic saying why."""
        msg_id, method, uri = wire.skipped_head(frame.head)
        if msg_id is not None:
            self._refuse(msg_id, JsonRpcInvalidRequest.CODE, f"{method or 'a request'}: {frame.problem}")
        if method in (lsp.TEXT_DOCUMENT_DID_OPEN, lsp.TEXT_DOCUMENT_DID_CHANGE) and uri:
            self._server.drop_document(uri, f"the editor sent this document in a message of {_mb(frame.skipped)}, "
                                            f"past the {_mb(MAX_MESSAGE_BYTES)} a message may have; streamed reads "
                                            f"model programs up to {_mb(MAX_DOCUMENT_BYTES)}, so nothing was checked")

    def structure_message(self, data: dict):
        method = data.get("method")
        if method is None:  # a response to one of the server's own requests
            try:
                kind = ResponseErrorMessage if "error" in data else \
                    self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
                return self._converter.structure(data, kind)
            except Exception as e:  # noqa: BLE001 — pygls logged a traceback; a response is only dropped
                log.warning("dropped a response to request %s: %s", str(data.get("id"))[:40], _unstructurable(e))
                return REFUSED
        try:
            default = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
            kind = self.get_message_type(method) if isinstance(method, str) else None
            return self._converter.structure(data, kind or default)
        except Exception as e:  # noqa: BLE001 — whatever the converter says, the answer is "invalid params"
            why = _unstructurable(e)
            if "id" in data:  # a valid id: ``take`` refused any other
                self._send_response(data["id"], error=JsonRpcInvalidParams(message=f"{str(method)[:60]}: {why}").to_response_error())
            log.warning("refused %s: %s", str(method)[:60], why)
            return REFUSED

    def send_text(self, body: str) -> None:
        """A message already written as JSON (ASCII), framed and written as ``_send_data`` frames one."""
        if self.writer is None:
            log.error("Unable to send data, no available transport!")
            return
        header = f"Content-Length: {len(body)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        try:
            res = self.writer.write((header + body).encode(self.CHARSET))
            if inspect.isawaitable(res):
                asyncio.ensure_future(res)
        except BrokenPipeError:
            log.error("sending a message: the client closed the connection")
            raise

    def handle_message(self, message):
        if message is REFUSED:
            return None
        return super().handle_message(message)

    def _handle_request(self, msg_id, method_name: str, params):
        self._methods[msg_id] = method_name
        return super()._handle_request(msg_id, method_name, params)

    def _send_handler_result(self, future, *, msg_id):
        method = self._methods.pop(msg_id, "a request")
        if future.cancelled() or future.exception() is None:
            return super()._send_handler_result(future, msg_id=msg_id)
        self._request_futures.pop(msg_id, None)
        e = future.exception()
        if isinstance(e, JsonRpcException):  # refused, with the reason in the answer: nothing to log
            self._send_response(msg_id, error=e.to_response_error())
            return None
        why = failure(e)
        log.error("%s failed: %s", method, why)
        self._send_response(msg_id, error=JsonRpcInternalError(message=f"{method} failed: {why}").to_response_error())
        return None

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        """Positions are UTF-16 columns, as the core counts them: a client that offers other encodings first (Neovim
        offers UTF-8) is answered UTF-16, which every client must support."""
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [lsp.PositionEncodingKind.Utf16]
        return (yield from super().lsp_initialize(params))

    # The text notifications call the handler directly, not as generators: pygls 2.1 keeps a generator handler's
    # future in ``_request_futures`` until a response removes it, and a notification has none — one future leaked
    # per keystroke (1.9 MB per 1,000 edits).
    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params):
        if (h := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            h(params)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params):
        if (h := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            h(params)

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams):
        handler = COMMANDS.get(params.command)
        if handler is None:
            known = ", ".join(sorted(COMMANDS))
            raise JsonRpcInvalidParams(message=f"unknown command `{params.command}`; the commands are {known}")
        result = yield handler, (self._server, list(params.arguments or []), params.work_done_token), None
        return result

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params):
        if (h := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            h(params)


class StreamedServer(LanguageServer):
    def __init__(self):
        super().__init__("streamed", "0.1.0", protocol_cls=Protocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.scheduler: Scheduler | None = None
        self.tokens = semantic_tokens.TokenHistory()
        self.published: dict[str, diagnostics.Published] = {}  # by document: what its last notifications sent
        self.folders: list[Path] = []

    def sched(self) -> Scheduler:
        if self.scheduler is None:
            self.scheduler = Scheduler(self.on_snapshot, debounce_ms=self.settings.debounce_ms, prepare=self.prepare)
        return self.scheduler

    def prepare(self, snap: Snapshot) -> str:
        """On the analysis thread: the publishDiagnostics notification, already written as JSON (each diagnostic
        once, ``diagnostics.Published``)."""
        return self.published.setdefault(snap.uri, diagnostics.Published()).message(snap)

    def on_snapshot(self, snap: Snapshot, published: str) -> None:
        # Sent as the text ``prepare`` wrote (pygls's typed ``notify`` would convert it again on this loop).
        self.protocol.send_text(published)
        a = snap.analysis
        self.protocol.notify("streamed/analysisDone", {
            "uri": snap.uri, "version": snap.version, "kinds": len(a.kinds), "layers": len(a.programs.layers),
            "rejects": len(snap.rejects),
        })

    def drop_document(self, uri: str, why: str) -> None:
        """Forget ``uri``'s text (the editor's is no longer known) and show ``why`` as its one diagnostic."""
        self.sched().close(uri)
        self.tokens.forget(uri)
        self.published.pop(uri, None)
        origin = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, [
            lsp.Diagnostic(origin, why, severity=lsp.DiagnosticSeverity.Error, source="streamed")]))

    def apply_settings(self, raw) -> None:
        """Merge a client's settings; each bad value is named in a message and the previous one kept."""
        new, problems = self.settings.merged(raw)
        for p in problems:
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"streamed: {p}"))
        old, self.settings = self.settings, new
        s = self.sched()
        s.debounce_ms = new.debounce_ms
        from streamed.spatial.target import TargetError, load_target

        try:
            load_target(new.target)
            s.target = new.target
        except TargetError as e:
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"streamed: target: {e}"))
            self.settings = new = Settings(old.target, new.deployment, new.checkpoint, new.debounce_ms)
            s.target = old.target
        s.deployment = commands.deployment_of(new.deployment)
        if new.checkpoint != old.checkpoint:
            from streamed.model.checkpoint import CheckpointError
            from streamed.model.storage import storage_of

            try:
                s.set_storage(storage_of(new.checkpoint))
            except CheckpointError as e:
                self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"streamed: {e}"))
                self.settings = Settings(new.target, new.deployment, old.checkpoint, new.debounce_ms)
            except Exception as e:  # a checkpoint reader that failed unexpectedly: say so, keep serving
                message = f"streamed: cannot read checkpoint {new.checkpoint}: {e}"
                self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, message))
                self.settings = Settings(new.target, new.deployment, old.checkpoint, new.debounce_ms)


server = StreamedServer()


async def _snap(ls: StreamedServer, uri: str) -> Snapshot | None:
    """The snapshot of the text the request was sent against, or — if analysing it takes longer than a request may
    wait — the latest one: every request is answered promptly."""
    return await ls.sched().fresh(uri)


def _unstructurable(e: Exception) -> str:
    """Why a message's params could not be read, as one line: cattrs' own account of each field (``invalid value
    for type, expected int @ $.params.position.line``), the first few."""
    try:
        from cattrs import transform_error
        from cattrs.v import format_exception

        # A validator's own words ("Position.line should be in range [0:2147483647], but was -1") over "invalid value".
        said = lambda x, t: str(x) if type(x) is ValueError and str(x) else format_exception(x, t)  # noqa: E731
        lines = transform_error(e, format_exception=said)
    except Exception:  # noqa: BLE001 — not a cattrs error: its own message
        lines = [str(e) or type(e).__name__]
    text = "; ".join(" ".join(str(l).split()) for l in lines[:3])
    return text if len(text) <= 300 else text[:299] + "…"


def _mb(n: int) -> str:
    return f"{n / 1048576:,.1f} MB"


def _invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message=message)


# ---- lifecycle and settings ----------------------------------------------------------------------------------------


@server.feature(lsp.INITIALIZE)
def initialize(ls: StreamedServer, params: lsp.InitializeParams):
    ls.folders = [p for p in (commands.path_of(f.uri) for f in (params.workspace_folders or [])) if p is not None]
    if not ls.folders and params.root_uri and commands.path_of(params.root_uri):
        ls.folders = [commands.path_of(params.root_uri)]
    ls.apply_settings(params.initialization_options)


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: StreamedServer, params: lsp.DidChangeConfigurationParams):
    ls.apply_settings(params.settings)
    ls.sched().reanalyze_all()


@server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: StreamedServer, params: lsp.DidChangeWorkspaceFoldersParams):
    removed = {commands.path_of(f.uri) for f in params.event.removed}
    ls.folders = [f for f in ls.folders if f not in removed] + [p for p in (commands.path_of(f.uri) for f in params.event.added) if p]


# ---- text -----------------------------------------------------------------------------------------------------------


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: StreamedServer, params: lsp.DidOpenTextDocumentParams):
    d = params.text_document
    ls.sched().open(d.uri, d.text, d.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: StreamedServer, params: lsp.DidChangeTextDocumentParams):
    ls.sched().change(params.text_document.uri, params.text_document.version, params.content_changes)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: StreamedServer, params: lsp.DidCloseTextDocumentParams):
    ls.sched().close(params.text_document.uri)
    ls.tokens.forget(params.text_document.uri)
    ls.published.pop(params.text_document.uri, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(params.text_document.uri, []))


# ---- features -------------------------------------------------------------------------------------------------------


@server.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC, lsp.DiagnosticOptions(identifier="streamed", inter_file_dependencies=False, workspace_diagnostics=False))
async def pull_diagnostics(ls: StreamedServer, params: lsp.DocumentDiagnosticParams):
    return diagnostics.pull_report(await _snap(ls, params.text_document.uri), params.previous_result_id)


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
async def lens(ls: StreamedServer, params: lsp.CodeLensParams):
    snap = await _snap(ls, params.text_document.uri)
    return code_lens.code_lenses(snap, ls.settings.target) if snap else []


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
async def goto_definition(ls: StreamedServer, params: lsp.DefinitionParams):
    snap = await _snap(ls, params.text_document.uri)
    return definition.definition(snap, params.position.line, params.position.character) if snap else None


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
async def on_hover(ls: StreamedServer, params: lsp.HoverParams):
    snap = await _snap(ls, params.text_document.uri)
    return hover.hover(snap, params.position.line, params.position.character) if snap else None


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
async def hints(ls: StreamedServer, params: lsp.InlayHintParams):
    snap = await _snap(ls, params.text_document.uri)
    return inlay_hints.inlay_hints(snap, params.range) if snap else []


@server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, semantic_tokens.LEGEND)
async def tokens_full(ls: StreamedServer, params: lsp.SemanticTokensParams):
    snap = await _snap(ls, params.text_document.uri)
    return ls.tokens.full(snap) if snap else lsp.SemanticTokens(data=[])


@server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA, semantic_tokens.LEGEND)
async def tokens_delta(ls: StreamedServer, params: lsp.SemanticTokensDeltaParams):
    snap = await _snap(ls, params.text_document.uri)
    return ls.tokens.delta(snap, params.previous_result_id) if snap else lsp.SemanticTokens(data=[])


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
async def doc_symbols(ls: StreamedServer, params: lsp.DocumentSymbolParams):
    snap = await _snap(ls, params.text_document.uri)
    return symbols.document_symbols(snap) if snap else []


@server.feature(lsp.TEXT_DOCUMENT_FOLDING_RANGE)
async def folds(ls: StreamedServer, params: lsp.FoldingRangeParams):
    snap = await _snap(ls, params.text_document.uri)
    return folding.folding_ranges(snap) if snap else []


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[","]))
async def complete(ls: StreamedServer, params: lsp.CompletionParams):
    snap = await _snap(ls, params.text_document.uri)
    return completion.completions(snap, params.position.line, params.position.character) if snap else None


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Refactor]))
async def actions(ls: StreamedServer, params: lsp.CodeActionParams):
    snap = await _snap(ls, params.text_document.uri)
    return code_actions.code_actions(snap, params.range) if snap else []


@server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
async def prepare_rename(ls: StreamedServer, params: lsp.PrepareRenameParams):
    snap = await _snap(ls, params.text_document.uri)
    if snap is None:
        return None
    try:
        return rename.prepare_rename(snap, params.position.line, params.position.character)
    except rename.RenameError as e:
        raise JsonRpcInvalidRequest(message=str(e)) from None


@server.feature(lsp.TEXT_DOCUMENT_RENAME, lsp.RenameOptions(prepare_provider=True))
async def do_rename(ls: StreamedServer, params: lsp.RenameParams):
    snap = await _snap(ls, params.text_document.uri)
    if snap is None:
        return None
    try:
        return rename.rename(snap, params.position.line, params.position.character, params.new_name)
    except rename.RenameError as e:
        raise JsonRpcInvalidRequest(message=str(e)) from None


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
async def format_document(ls: StreamedServer, params: lsp.DocumentFormattingParams):
    snap = await _snap(ls, params.text_document.uri)
    return formatting.formatting(snap) if snap else []


# ---- commands ------------------------------------------------------------------------------------------------------


async def _document(ls: StreamedServer, command: str, obj: dict, example: str) -> Snapshot:
    uri = commands.uri_arg(command, obj, example)
    snap = await _snap(ls, uri)
    if snap is None:
        raise commands.CommandError(f"`{command}`: {uri} is not open in the editor")
    return snap


COMMANDS: dict = {}


class Work:
    """One command's ``$/progress``: begun on the client's work-done token or on one the server asks the client to
    create (when it supports that) — without waiting for the answer: the work starts at once, and the progress
    begins when (if ever) the client answers, with the latest report. So a client that never answers
    ``window/workDoneProgress/create`` costs nothing. Reported from any thread, ended however the command ends;
    ``cancelled()`` is true once the client cancels the progress or the request."""

    def __init__(self, ls: StreamedServer, title: str, token):
        self.ls, self.title, self.token = ls, title, token
        self.loop = asyncio.get_running_loop()
        self.stopped = False
        self.begun = False
        self.finished = False
        self.last: lsp.WorkDoneProgressReport | None = None

    async def __aenter__(self):
        if self.token is not None:
            self._begin()
            await asyncio.sleep(0)  # let a cancel already on its way arrive before the work starts
        elif _supports_progress(self.ls):
            token = str(uuid.uuid4())
            asked = self.ls.protocol.send_request(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE,
                                                  lsp.WorkDoneProgressCreateParams(token=token))
            asked.add_done_callback(lambda answer: self._created(token, answer))
        return self

    def _created(self, token, answer) -> None:
        """The client answered the request to create ``token`` (on the event loop's thread)."""
        if answer.cancelled() or answer.exception() is not None or self.finished:
            return
        self.token = token
        self._begin()
        if self.last is not None:
            self.ls.work_done_progress.report(token, self.last)

    def _begin(self) -> None:
        self.ls.work_done_progress.begin(self.token, lsp.WorkDoneProgressBegin(title=self.title, cancellable=True, percentage=0))
        self.begun = True

    def report(self, message: str, pct: int) -> None:
        value = lsp.WorkDoneProgressReport(message=message, percentage=max(0, min(100, pct)))
        self.loop.call_soon_threadsafe(self._report, value)

    def _report(self, value: lsp.WorkDoneProgressReport) -> None:
        self.last = value
        if self.begun and not self.finished:
            self.ls.work_done_progress.report(self.token, value)

    def cancelled(self) -> bool:
        fut = self.ls.work_done_progress.tokens.get(self.token) if self.token is not None else None
        return self.stopped or (fut is not None and fut.cancelled())

    async def __aexit__(self, kind, error, tb):
        if isinstance(error, asyncio.CancelledError):
            self.stopped = True
        self.finished = True
        if self.begun:
            outcome = "done" if error is None else "cancelled" if self.cancelled() else "failed"
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=outcome))
            self.ls.work_done_progress.tokens.pop(self.token, None)
        return False


def _command(name: str, title: str):
    """A command handler ``fn(ls, args, work)``. Registered with pygls so the capability lists it, but dispatched by
    ``Protocol`` so the handler sees the raw arguments and the client's work-done token; every command reports
    ``$/progress``; a ``CommandError`` becomes a JSON-RPC "invalid params" error carrying its sentence."""

    def wrap(fn):
        async def handler(ls: StreamedServer, args, token=None):
            try:
                async with Work(ls, title, token) as work:
                    if work.cancelled():
                        raise commands.CommandError(f"`{name}` was cancelled")
                    return await fn(ls, args, work)
            except commands.CommandError as e:
                raise _invalid(str(e)) from None

        COMMANDS[name] = handler
        server.command(name)(handler)
        return fn

    return wrap


@_command("streamed.showKinds", "Layer kinds")
async def cmd_show_kinds(ls: StreamedServer, args, work: Work):
    obj = commands.one_object("streamed.showKinds", args, '{"uri": …}')
    return commands.show_kinds(await _document(ls, "streamed.showKinds", obj, '{"uri": …}'))


@_command("streamed.goToRepresentative", "Representative layer")
async def cmd_go_to_representative(ls: StreamedServer, args, work: Work):
    example = '{"uri": …, "position": {"line": 0, "character": 0}}'
    obj = commands.one_object("streamed.goToRepresentative", args, example)
    snap = await _document(ls, "streamed.goToRepresentative", obj, example)
    line, character = commands.position_arg("streamed.goToRepresentative", obj)
    show = _shows_documents(ls, "streamed.goToRepresentative", obj)
    found = definition.go_to_representative(snap, line, character)
    if found is not None and show:
        _show_document(ls, found["uri"], ls.protocol._converter.structure(found["range"], lsp.Range))
    return found


@_command(compare.COMMAND, "Comparing with the representative")
async def cmd_compare_with_representative(ls: StreamedServer, args, work: Work):
    obj = commands.one_object(compare.COMMAND, args, compare.EXAMPLE)
    show = _shows_documents(ls, compare.COMMAND, obj)
    snap = await _document(ls, compare.COMMAND, obj, compare.EXAMPLE)
    found = compare.comparison(snap, obj)
    if show:
        found["document"] = await asyncio.get_running_loop().run_in_executor(None, compare.write_diff, snap.uri, found)
        _show_document(ls, found["document"])
    return found


@_command("streamed.openManifest", "Opening the manifest")
async def cmd_open_manifest(ls: StreamedServer, args, work: Work):
    obj = commands.one_object("streamed.openManifest", args, '{"uri": …} or {"bundle": …}')
    show = _shows_documents(ls, "streamed.openManifest", obj)
    found = await asyncio.get_running_loop().run_in_executor(None, commands.open_manifest, obj, ls.folders)
    if show:
        _show_document(ls, Path(found["manifest"]).as_uri())
    return found


@_command(pictures.COMMAND, "Drawing the pictures")
async def cmd_pictures(ls: StreamedServer, args, work: Work):
    obj = commands.one_object(pictures.COMMAND, args, pictures.EXAMPLE)
    return await asyncio.get_running_loop().run_in_executor(None, pictures.pictures, obj, ls.folders)


@_command("streamed.lowerBundle", "Lowering SN50 bundle")
async def cmd_lower_bundle(ls: StreamedServer, args, work: Work):
    obj = commands.one_object("streamed.lowerBundle", args, commands.LOWER_EXAMPLE)
    says, show = commands.show_arg("streamed.lowerBundle", obj), _shows_documents(ls, "streamed.lowerBundle", obj)
    snap = await _document(ls, "streamed.lowerBundle", obj, commands.LOWER_EXAMPLE)
    done = await asyncio.get_running_loop().run_in_executor(
        None, commands.lower_bundle, snap, obj, ls.settings, ls.folders, work.report, work.cancelled, ls.sched().lowered)
    if says:
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, commands.lowered_message(done)))
    if show:  # taking focus: a client that opened it without would leave the manifest in a hidden buffer (Neovim)
        _show_document(ls, Path(done["manifest"]).as_uri())
    return done


def _shows_documents(ls: StreamedServer, command: str, obj: dict) -> bool:
    """Whether a command shows its answer as a document (``window/showDocument``): the client supports it and the
    call did not say ``"show": false`` (what a client with views of its own, the VS Code extension, says)."""
    w = ls.client_capabilities.window
    return commands.show_arg(command, obj) and bool(w and w.show_document and w.show_document.support)


def _show_document(ls: StreamedServer, uri: str, selection: lsp.Range | None = None) -> None:
    """Ask the client to show ``uri``, taking focus so the person sees it — without waiting for its answer (the
    command's own answer is not held)."""
    ls.window_show_document(lsp.ShowDocumentParams(uri=uri, external=False, take_focus=True, selection=selection))


def _supports_progress(ls: StreamedServer) -> bool:
    w = ls.client_capabilities.window
    return bool(w and w.work_done_progress)


def main() -> int:
    """Serve on stdio (``wire.serve``: pygls's reader is replaced by one that survives any byte stream); the exit
    status: 0 after ``shutdown`` and ``exit`` or the end of the stream, 1 for ``exit`` without ``shutdown``, 128 + N
    when signal N stopped it."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="streamed-server: %(levelname)s %(message)s")
    # The analysis thread is pure Python: switch often, so the event loop answers requests while it runs.
    sys.setswitchinterval(0.001)
    # A machine whose kernels are not compiled yet compiles them now, in the background, for the runs to come.
    from streamed.numerics.ahead import start

    start()
    return wire.serve(server)


if __name__ == "__main__":
    sys.exit(main())
