// The language client: started with the Python `bootstrap` finds, restarted after a crash (five times in three
// minutes at most), and, when the server cannot start, one message saying why — the last line the server printed —
// with what to do next. The LSP trace goes to its own output channel whenever `streamed.trace.server` is on.
import * as vscode from 'vscode';
import * as readline from 'node:readline';
import type { Readable } from 'node:stream';
import {
  CloseAction,
  CodeLensRequest,
  DidChangeConfigurationNotification,
  vsdiag,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';
import { Found, basePython, findServer, installServer, privateServer } from './bootstrap';
import { Ctx, LANG, errorText, normalizeUri } from './ctx';
import { Analysis, mapLensCommand } from './kinds';
import { SOURCE_NAMES, lastLine } from './environment';

/**
 * The client with its notifications turned into log lines: a server that fails to start would otherwise show three
 * or four generic connection errors (-32097 and the like); the extension shows one message of its own instead.
 */
class StreamedClient extends LanguageClient {
  override error(message: string, data?: any): void {
    super.error(message, data, false);
  }
}

/**
 * A log channel for `traceOutputChannel` whose level follows `streamed.trace.server`: the client traces only when
 * its trace channel's level is Trace, so without this the setting shows nothing unless the log level is also set.
 * Lines go to the plain "Streamed Trace" output channel, each with its time.
 */
function traceChannel(ctx: Ctx): vscode.LogOutputChannel {
  const channel = vscode.window.createOutputChannel('Streamed Trace');
  const levelChanged = new vscode.EventEmitter<vscode.LogLevel>();
  const level = () => (ctx.config().get<string>('trace.server', 'off') === 'off' ? vscode.LogLevel.Info : vscode.LogLevel.Trace);
  const line = (text: string) => channel.appendLine(`[${new Date().toISOString().slice(11, 23)}] ${text}`);
  ctx.extension.subscriptions.push(
    channel,
    levelChanged,
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('streamed.trace.server')) levelChanged.fire(level());
    }),
  );
  return {
    name: channel.name,
    get logLevel() {
      return level();
    },
    onDidChangeLogLevel: levelChanged.event,
    trace: line,
    debug: line,
    info: line,
    warn: line,
    error: (e: string | Error) => line(errorText(e)),
    append: (v: string) => channel.append(v),
    appendLine: (v: string) => channel.appendLine(v),
    replace: (v: string) => channel.replace(v),
    clear: () => channel.clear(),
    show: (a?: any, b?: boolean) => channel.show(a, b),
    hide: () => channel.hide(),
    dispose: () => channel.dispose(),
  } as vscode.LogOutputChannel;
}

/** Why the server is stopped when no Python has it: the status bar then offers Set Up Server, not a restart. */
export const NOT_INSTALLED = 'the language server is not installed';

export class Server {
  private crashes: number[] = [];
  private restarting: Promise<void> | undefined;
  private deactivating = false;
  /** Clients stopped on purpose (restart, deactivate): their connection closing is not a crash. */
  private readonly retired = new WeakSet<LanguageClient>();
  private readonly trace: vscode.LogOutputChannel;
  private noticeShown = false;
  /** Pythons whose server stopped at start-up in this session: passed over until Restart Server tries them again. */
  private readonly crashed = new Set<string>();
  /** Why the server is not running, for the status items; undefined while it runs or starts. */
  stopped: string | undefined = 'starting';

  constructor(private readonly ctx: Ctx) {
    this.trace = traceChannel(ctx);
  }

  async start(): Promise<void> {
    const ctx = this.ctx;
    this.stopped = 'starting';
    ctx.changed.fire();
    const found = await findServer(ctx, () => {
      if (ctx.server?.source === 'python-extension') {
        ctx.output.info('[client] the Python extension changed interpreter; restarting the server');
        void this.restart();
      }
    }, this.crashed);
    if (!found.ready) {
      this.stopped = NOT_INSTALLED;
      ctx.changed.fire();
      void this.offerSetUp(found);
      return;
    }
    ctx.server = found.server;
    ctx.output.info(`[client] server Python: ${found.server.python} (${SOURCE_NAMES[found.server.source]})`);
    await this.launch(found.server.python);
  }

  private async launch(python: string): Promise<void> {
    const ctx = this.ctx;
    let stderr = '';
    let stderrClosed: Promise<void> = Promise.resolve();
    const serverOptions: ServerOptions = {
      command: python,
      args: ['-m', 'streamed_lsp'],
      transport: TransportKind.stdio,
      options: { cwd: ctx.workspaceDir(), env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    // The server's stderr, line by line, to the output channel; its tail kept for the message when it fails.
    const stdioOptions = {
      stdout: (input: Readable, out: vscode.LogOutputChannel) => {
        readline.createInterface({ input, crlfDelay: Infinity }).on('line', (l) => out.info(l));
      },
      stderr: (input: Readable, out: vscode.LogOutputChannel) => {
        stderrClosed = new Promise((resolve) => input.once('close', resolve).once('end', resolve));
        readline.createInterface({ input, crlfDelay: Infinity }).on('line', (l) => {
          out.error(l);
          stderr = (stderr + l + '\n').slice(-8000);
        });
      },
    };
    let starting = true;
    const clientOptions: LanguageClientOptions = {
      // Files and unsaved documents: not the compare view's virtual texts.
      documentSelector: [{ language: LANG, scheme: 'file' }, { language: LANG, scheme: 'untitled' }],
      stdioOptions,
      outputChannel: ctx.output,
      traceOutputChannel: this.trace,
      initializationOptions: ctx.initOptions(),
      initializationFailedHandler: () => false,
      // The contract's diagnostics are pushed (textDocument/publishDiagnostics). The server also answers pulls, and
      // the client pulls every document open when it starts whatever its options say — a document opened before
      // the server was set up would show each problem twice — so every pull is answered empty, here.
      diagnosticPullOptions: { onChange: false, onSave: false, onTabs: false, filter: () => true },
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue, handled: true }),
        closed: () => {
          if (starting || this.deactivating || this.retired.has(self)) return { action: CloseAction.DoNotRestart, handled: true };
          const now = Date.now();
          this.crashes = this.crashes.filter((t) => now - t < 3 * 60 * 1000);
          this.crashes.push(now);
          if (this.crashes.length <= 5) {
            ctx.output.warn(`[client] the server stopped; restarting (${this.crashes.length} in the last 3 minutes)`);
            return { action: CloseAction.Restart, handled: true };
          }
          const why = lastLine(stderr);
          void vscode.window
            .showErrorMessage(`Streamed: the language server stopped 5 times in 3 minutes and was not restarted${why ? `: ${why}` : '.'}`, 'Restart Server', 'Show Output')
            .then((c) => (c === 'Restart Server' ? this.restart() : c === 'Show Output' ? ctx.output.show() : undefined));
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      middleware: {
        provideDiagnostics: async () => ({ kind: vsdiag.DocumentDiagnosticReportKind.full, items: [] }),
        provideCodeLenses: async (document, token, next) => {
          const lenses = await next(document, token);
          for (const l of lenses ?? []) if (l.command) l.command = mapLensCommand(l.command);
          return lenses;
        },
        resolveCodeLens: async (lens, token, next) => {
          const r = await next(lens, token);
          if (r?.command) r.command = mapLensCommand(r.command);
          return r;
        },
        provideCodeActions: async (document, range, context, token, next) => {
          const actions = await next(document, range, context, token);
          for (const a of actions ?? []) {
            if (a instanceof vscode.CodeAction) {
              if (a.command) a.command = mapLensCommand(a.command);
            }
          }
          return actions;
        },
      },
    };
    const self: LanguageClient = new StreamedClient(LANG, 'Streamed Language Server', serverOptions, clientOptions);
    ctx.client = self;
    self.onDidChangeState((e) => {
      if (e.newState === State.Running) this.stopped = undefined;
      if (e.newState === State.Stopped && ctx.client === self) this.stopped = 'the language server is not running';
      ctx.changed.fire();
    });
    self.onNotification('streamed/analysisDone', (a: Analysis) => {
      const key = normalizeUri(a.uri);
      ctx.analyses.set(key, { ...a, uri: key });
      ctx.changed.fire();
      this.refreshCodeLenses(key);
    });
    // A server that exits during start-up can leave start() resolved with the client not running (the connection's
    // close handler clears the promise start() returns): the client's state decides, not the promise.
    let failure: unknown;
    await self.start().catch((e) => (failure = e));
    if (failure !== undefined || !self.isRunning()) {
      starting = false;
      ctx.client = undefined;
      this.retired.add(self);
      // What the server printed arrives with its exit: wait for it (briefly).
      await Promise.race([stderrClosed, new Promise((r) => setTimeout(r, 3000))]);
      const why = lastLine(stderr) || (failure !== undefined ? errorText(failure) : 'it exited');
      ctx.output.error(`[client] the server did not start: ${why}`);
      this.stopped = `the language server stopped at start-up: ${why}`;
      this.crashed.add(python);
      ctx.changed.fire();
      void vscode.window
        .showErrorMessage(`Streamed: the language server (${python} -m streamed_lsp) stopped at start-up: ${why}`, 'Show Output', 'Open Settings', 'Set Up Server')
        .then((c) => this.answer(c));
      return;
    }
    starting = false;
    ctx.output.info('[client] server started');
    ctx.changed.fire();
  }

  private answer(choice: string | undefined): void {
    if (choice === 'Show Output') this.ctx.output.show();
    else if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'streamed.server.python');
    else if (choice === 'Set Up Server') void this.setUp();
  }

  /** No Python has the server: one message offering to set it up (once per start, not per document). */
  private async offerSetUp(found: Found & { ready: false }): Promise<void> {
    if (this.noticeShown) return;
    this.noticeShown = true;
    const first = found.tried[0];
    if (!found.base) {
      const tried = found.tried.map((t) => `${t.candidate.python} (${t.probe.detail})`).join('; ');
      const c = await vscode.window.showErrorMessage(
        `Streamed: no Python 3.11 or later to run the language server — tried ${tried}. Set streamed.server.python to one.`,
        'Open Settings',
        'Show Output',
      );
      this.answer(c);
      return;
    }
    // An error with actions: the notification stays until it is answered (a warning would leave for the notification
    // centre within seconds, and with it the one way on).
    const c = await vscode.window.showErrorMessage(
      `Streamed: the language server is not installed in ${first.candidate.python} (${SOURCE_NAMES[first.candidate.source]}). ` +
        `Set it up in a private environment, with ${found.base.python} and the package this extension carries?`,
      'Set Up Server',
      'Open Settings',
      'Show Output',
    );
    this.answer(c);
  }

  /**
   * `Streamed: Set Up Server`: the server started from the private environment when it is there and works (after a
   * crash at start-up, say); else the environment made (again) with the first Python 3.11+ found.
   */
  async setUp(): Promise<void> {
    if (await privateServer(this.ctx, this.crashed)) return this.restart();
    const base = await basePython(this.ctx, this.crashed);
    if (!('python' in base)) {
      this.noticeShown = false;
      if (base.ready) {
        void vscode.window.showInformationMessage(`Streamed: ${base.server.python} already runs the language server.`);
        return this.restart();
      }
      return this.offerSetUp(base);
    }
    if (await installServer(this.ctx, base.python, 'create')) await this.restart();
  }

  /** Code lenses name kinds, which change with every analysis: ask VS Code for them again when one is done. */
  private refreshCodeLenses(uri: string): void {
    const doc = vscode.workspace.textDocuments.find((d) => normalizeUri(d.uri.toString()) === uri);
    const client = this.ctx.client;
    if (!doc || !client) return;
    try {
      client.getFeature(CodeLensRequest.method)?.getProvider(doc)?.onDidChangeCodeLensEmitter.fire();
    } catch (e) {
      this.ctx.output.warn(`[client] code lens refresh: ${errorText(e)}`);
    }
  }

  async stop(): Promise<void> {
    const c = this.ctx.client;
    this.ctx.client = undefined;
    if (!c) return;
    this.retired.add(c);
    // A client still starting cannot be stopped cleanly: let it finish first (or give up after 15 s).
    for (let i = 0; i < 60 && c.state === State.Starting; i++) await new Promise((r) => setTimeout(r, 250));
    await c.stop(2000).catch(() => undefined);
    await c.dispose(2000).catch(() => undefined);
  }

  /**
   * Stops the running client (if any) and starts a new one; concurrent calls share one restart. `retry`: Pythons
   * whose server crashed at start-up are tried again (Restart Server, a changed setting).
   */
  restart(retry = false): Promise<void> {
    if (retry) this.crashed.clear();
    if (this.restarting) return this.restarting;
    this.restarting = (async () => {
      try {
        await this.stop();
        this.crashes = [];
        this.noticeShown = false;
        this.ctx.analyses.clear();
        await this.start();
      } finally {
        this.restarting = undefined;
      }
    })();
    return this.restarting;
  }

  async deactivate(): Promise<void> {
    this.deactivating = true;
    await this.stop();
  }

  /** Settings the server reads changed: send them (a change of interpreter restarts instead). */
  async settingsChanged(e: vscode.ConfigurationChangeEvent): Promise<void> {
    if (e.affectsConfiguration('streamed.server.python')) return this.restart(true);
    const client = this.ctx.running();
    if (client) await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { streamed: this.ctx.initOptions() } });
  }
}
