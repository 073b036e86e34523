// The Streamed extension: starts the language server with the chosen Python, maps its code-lens commands to the
// client's commands, and offers the palette commands, the Layer Kinds view, the manifest view and the status bar.
import * as vscode from 'vscode';
import * as cp from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as crypto from 'node:crypto';
import {
  CloseAction,
  CodeLensRequest,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  DidChangeConfigurationNotification,
} from 'vscode-languageclient/node';
import {
  MODES,
  Mode,
  chooseInterpreter,
  deploymentInputs,
  initOptions,
  installCommand,
  lowerArgs,
  validatePositiveInt,
  Interpreter,
} from './settings';
import { ProgressMapper, WorkDoneValue } from './progress';
import { Analysis, Kind, TreeNode, findLayerLine, kindsToTree, mapLensCommand, statusText } from './kinds';
import { Manifest, renderManifestHtml } from './manifest';
import { authoredName } from './settings';

const LANG = 'streamed';
let client: LanguageClient | undefined;
let interpreter: Interpreter | undefined;
let output: vscode.LogOutputChannel;
let kindsProvider: KindsProvider;
let statusItem: vscode.StatusBarItem;
const analyses = new Map<string, Analysis>();
let installNoticeShown = false;
let crashes: number[] = [];
/** Clients stopped on purpose (restart, deactivate): their connection closing is not a crash. */
const retired = new WeakSet<LanguageClient>();
let restarting: Promise<void> | undefined;
let deactivating = false;

function cfg(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration('streamed');
}

function workspaceDir(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

function currentInitOptions() {
  const c = cfg();
  return initOptions((k) => c.get(k), workspaceDir());
}

let pythonEnvListener: vscode.Disposable | undefined;

async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) return undefined;
  try {
    const api: any = ext.isActive ? ext.exports : await ext.activate();
    const env = api?.environments;
    // When the user picks another interpreter there, a server started with the old one is restarted.
    if (!pythonEnvListener && typeof env?.onDidChangeActiveEnvironmentPath === 'function') {
      pythonEnvListener = env.onDidChangeActiveEnvironmentPath(() => {
        if (interpreter?.source === 'python-extension') {
          output.appendLine('[client] the Python extension changed interpreter; restarting the server');
          void restartServer();
        }
      });
      extensionContext.subscriptions.push(pythonEnvListener!);
    }
    if (env?.getActiveEnvironmentPath) {
      const p = env.getActiveEnvironmentPath(resource);
      if (p?.path) return p.path;
    }
    const details = api?.settings?.getExecutionDetails?.(resource);
    if (Array.isArray(details?.execCommand) && details.execCommand.length) return details.execCommand.join(' ');
  } catch (e) {
    output.appendLine(`Python extension: no interpreter (${e})`);
  }
  return undefined;
}

async function resolveInterpreter(): Promise<Interpreter> {
  const setting = cfg().get<string>('server.python');
  const fromExt = setting && setting.trim() ? undefined : await pythonExtensionInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri);
  return chooseInterpreter(setting, fromExt, workspaceDir());
}

/** 'ok', 'no-python' (the interpreter cannot run) or 'no-server' (streamed_lsp, the language server, is not importable). */
function probeServer(python: string): Promise<{ status: 'ok' | 'no-python' | 'no-server'; detail: string }> {
  return new Promise((resolve) => {
    cp.execFile(python, ['-c', 'import streamed_lsp'], { timeout: 30000, cwd: workspaceDir() }, (err, _out, stderr) => {
      if (!err) return resolve({ status: 'ok', detail: '' });
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EACCES') return resolve({ status: 'no-python', detail: String(err.message) });
      resolve({ status: 'no-server', detail: String(stderr || err.message).trim() });
    });
  });
}

function projectDirForInstall(): string | undefined {
  for (const f of vscode.workspace.workspaceFolders ?? []) {
    const p = path.join(f.uri.fsPath, 'pyproject.toml');
    try {
      if (/^\s*name\s*=\s*"streamed"/m.test(fs.readFileSync(p, 'utf8'))) return f.uri.fsPath;
    } catch {
      /* not the project */
    }
  }
  return undefined;
}

async function notifyNotInstalled(python: string, status: 'no-python' | 'no-server', detail: string): Promise<void> {
  if (installNoticeShown) return;
  installNoticeShown = true;
  output.appendLine(`[client] server probe with ${python}: ${status}: ${detail}`);
  if (status === 'no-python') {
    const choice = await vscode.window.showErrorMessage(
      `Streamed: the Python interpreter "${python}" cannot be run. Set "streamed.server.python" to a Python 3.11+ with streamed installed.`,
      'Open Settings',
    );
    if (choice === 'Open Settings') await vscode.commands.executeCommand('workbench.action.openSettings', 'streamed.server.python');
    return;
  }
  const cmd = installCommand(python, projectDirForInstall(), process.platform === 'win32');
  const choice = await vscode.window.showErrorMessage(
    `Streamed: the language server is not installed in ${python}. Install it with: ${cmd}`,
    'Install in Terminal',
    'Copy Command',
  );
  if (choice === 'Install in Terminal') {
    const term = vscode.window.createTerminal({ name: 'Install streamed', cwd: workspaceDir() });
    term.show();
    term.sendText(cmd, true);
    const sub = vscode.window.onDidCloseTerminal(async (t) => {
      if (t !== term) return;
      sub.dispose();
    });
    const again = await vscode.window.showInformationMessage('Streamed: when the install has finished, restart the server.', 'Restart Server');
    if (again === 'Restart Server') await restartServer();
  } else if (choice === 'Copy Command') {
    await vscode.env.clipboard.writeText(cmd);
  }
}

async function startServer(context: vscode.ExtensionContext): Promise<void> {
  interpreter = await resolveInterpreter();
  output.appendLine(`[client] server Python: ${interpreter.command} (from ${interpreter.source})`);
  const probe = await probeServer(interpreter.command);
  if (probe.status !== 'ok') {
    setStatusNotRunning(`the language server (streamed_lsp) is not available in ${interpreter.command}`);
    void notifyNotInstalled(interpreter.command, probe.status, probe.detail);
    return;
  }
  const serverOptions: ServerOptions = {
    command: interpreter.command,
    args: ['-m', 'streamed_lsp'],
    transport: TransportKind.stdio,
    options: { cwd: workspaceDir(), env: { ...process.env, PYTHONUNBUFFERED: '1' } },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ language: LANG }],
    outputChannel: output,
    initializationOptions: currentInitOptions(),
    // The contract's diagnostics are pushed (textDocument/publishDiagnostics). A server that also answers pulls
    // would show every problem twice, so the client never pulls.
    diagnosticPullOptions: { onChange: false, onSave: false, onTabs: false, filter: () => true },
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      closed: () => {
        if (deactivating || !self || retired.has(self)) return { action: CloseAction.DoNotRestart, handled: true };
        const now = Date.now();
        crashes = crashes.filter((t) => now - t < 3 * 60 * 1000);
        crashes.push(now);
        if (crashes.length <= 5) {
          output.appendLine(`[client] the server stopped; restarting (${crashes.length} in the last 3 minutes)`);
          return { action: CloseAction.Restart, handled: true };
        }
        void vscode.window
          .showErrorMessage('Streamed: the language server stopped 5 times in 3 minutes and was not restarted.', 'Restart Server', 'Show Output')
          .then((c) => (c === 'Restart Server' ? restartServer() : c === 'Show Output' ? output.show() : undefined));
        return { action: CloseAction.DoNotRestart, handled: true };
      },
    },
    middleware: {
      provideCodeLenses: async (document, token, next) => {
        const lenses = await next(document, token);
        if (!lenses) return lenses;
        for (const l of lenses) if (l.command) l.command = mapLensCommand(l.command);
        return lenses;
      },
      resolveCodeLens: async (lens, token, next) => {
        const r = await next(lens, token);
        if (r?.command) r.command = mapLensCommand(r.command);
        return r;
      },
    },
  };
  const self: LanguageClient = new LanguageClient(LANG, 'Streamed Language Server', serverOptions, clientOptions);
  client = self;
  client.onDidChangeState((e) => {
    if (e.newState === State.Running) updateStatus();
    if (e.newState === State.Stopped) setStatusNotRunning('the language server is not running');
  });
  client.onNotification('streamed/analysisDone', (a: Analysis) => {
    const key = normalizeUri(a.uri);
    analyses.set(key, { ...a, uri: key });
    updateStatus();
    const active = activeModelDocument();
    if (active && normalizeUri(active.uri.toString()) === key) void kindsProvider.refresh(active.uri);
    refreshCodeLenses(key);
  });
  await client.start();
  output.appendLine('[client] server started');
  context.subscriptions.push({ dispose: () => void client?.stop() });
  const active = activeModelDocument();
  if (active) void kindsProvider.refresh(active.uri);
}

/** Code lenses name kinds, which change with every analysis: ask VS Code for them again when one is done. */
function refreshCodeLenses(uri: string): void {
  const doc = vscode.workspace.textDocuments.find((d) => normalizeUri(d.uri.toString()) === uri);
  if (!doc || !client) return;
  try {
    client.getFeature(CodeLensRequest.method)?.getProvider(doc)?.onDidChangeCodeLensEmitter.fire();
  } catch (e) {
    output.appendLine(`[client] code lens refresh: ${errorText(e)}`);
  }
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  if (!c) return;
  retired.add(c);
  // A client still starting cannot be stopped cleanly: let it finish first (or give up after 15 s).
  for (let i = 0; i < 60 && c.state === State.Starting; i++) await new Promise((r) => setTimeout(r, 250));
  await c.stop(2000).catch(() => undefined);
  await c.dispose(2000).catch(() => undefined);
}

/** Stops the running client (if any) and starts a new one; concurrent calls share one restart. */
function restartServer(): Promise<void> {
  if (restarting) return restarting;
  restarting = (async () => {
    try {
      await stopClient();
      crashes = [];
      installNoticeShown = false;
      analyses.clear();
      await startServer(extensionContext);
    } finally {
      restarting = undefined;
    }
  })();
  return restarting;
}

function normalizeUri(u: string): string {
  try {
    return vscode.Uri.parse(u).toString();
  } catch {
    return u;
  }
}

/** The model program in the active editor; when a webview or panel has the focus, the visible one. */
function activeModelDocument(): vscode.TextDocument | undefined {
  const active = vscode.window.activeTextEditor;
  if (active) return active.document.languageId === LANG ? active.document : undefined;
  return vscode.window.visibleTextEditors.find((e) => e.document.languageId === LANG)?.document;
}

async function executeServerCommand<T>(
  command: string,
  args: unknown[],
  token?: vscode.CancellationToken,
  workDoneToken?: string,
): Promise<T> {
  if (!client || !client.isRunning()) throw new Error('the Streamed language server is not running');
  const params: any = { command, arguments: args };
  if (workDoneToken) params.workDoneToken = workDoneToken;
  return client.sendRequest(ExecuteCommandRequest.type, params, token) as Promise<T>;
}

function errorText(e: unknown): string {
  if (e && typeof e === 'object' && 'message' in e) return String((e as Error).message);
  return String(e);
}

// ---------------------------------------------------------------------------------------------------- status bar

function setStatusNotRunning(why: string): void {
  if (!statusItem) return;
  if (!activeModelDocument()) return statusItem.hide();
  statusItem.text = '$(warning) Streamed';
  statusItem.tooltip = `Streamed: ${why} — click to restart`;
  statusItem.command = 'streamed.client.restartServer';
  statusItem.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
  statusItem.show();
}

function updateStatus(): void {
  const doc = activeModelDocument();
  if (!doc) return statusItem.hide();
  const s = statusText(analyses.get(normalizeUri(doc.uri.toString())));
  if (!s) {
    statusItem.text = '$(sync~spin) Streamed';
    statusItem.tooltip = 'Streamed: analysing…';
    statusItem.backgroundColor = undefined;
    statusItem.command = 'streamed.layerKinds.focus';
    statusItem.show();
    return;
  }
  statusItem.text = s.text;
  statusItem.tooltip = s.tooltip;
  statusItem.command = s.error ? 'workbench.actions.view.problems' : 'streamed.layerKinds.focus';
  statusItem.backgroundColor = s.error ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  statusItem.show();
}

// ---------------------------------------------------------------------------------------------------- layer kinds

class KindsProvider implements vscode.TreeDataProvider<TreeNode> {
  private emitter = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private nodes: TreeNode[] = [];
  uri: vscode.Uri | undefined;

  async refresh(uri: vscode.Uri | undefined): Promise<void> {
    this.uri = uri;
    if (!uri || !client?.isRunning()) {
      this.nodes = [];
      this.emitter.fire(undefined);
      return;
    }
    try {
      const kinds = await executeServerCommand<Kind[] | null>('streamed.showKinds', [{ uri: uri.toString() }]);
      if (this.uri?.toString() !== uri.toString()) return; // a newer refresh is under way
      this.nodes = kindsToTree(Array.isArray(kinds) ? kinds : []);
    } catch (e) {
      output.appendLine(`[client] showKinds failed: ${errorText(e)}`);
      this.nodes = [];
    }
    void vscode.commands.executeCommand('setContext', 'streamed.hasKinds', this.nodes.length > 0);
    this.emitter.fire(undefined);
  }

  getTreeItem(n: TreeNode): vscode.TreeItem {
    const item = new vscode.TreeItem(
      n.label,
      n.children ? (n.collapsed ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.Expanded) : vscode.TreeItemCollapsibleState.None,
    );
    item.id = n.id;
    item.description = n.description;
    item.tooltip = n.tooltip;
    item.iconPath =
      n.icon === 'kind-refused'
        ? new vscode.ThemeIcon('error', new vscode.ThemeColor('errorForeground'))
        : n.icon === 'kind'
          ? new vscode.ThemeIcon('symbol-class')
          : n.icon === 'representative'
            ? new vscode.ThemeIcon('star-full')
            : new vscode.ThemeIcon('symbol-field');
    item.contextValue = n.icon === 'kind-refused' ? 'kindRefused' : n.children ? 'kind' : 'layer';
    if (n.layer !== undefined && this.uri) {
      item.command = { command: 'streamed.client.revealLayer', title: 'Reveal Layer', arguments: [this.uri.toString(), n.layer] };
    }
    return item;
  }

  getChildren(n?: TreeNode): TreeNode[] {
    return n ? n.children ?? [] : this.nodes;
  }
}

async function revealLayer(uri: string | vscode.Uri, layer: number): Promise<void> {
  const u = typeof uri === 'string' ? (uri.includes('://') ? vscode.Uri.parse(uri) : vscode.Uri.file(uri)) : uri;
  const doc = await vscode.workspace.openTextDocument(u);
  const line = findLayerLine(doc.getText(), layer);
  if (line < 0) {
    void vscode.window.showWarningMessage(`Streamed: no "## Layer ${layer}" in ${path.basename(u.fsPath)}`);
    return;
  }
  const editor = await vscode.window.showTextDocument(doc, { viewColumn: findColumn(doc) ?? vscode.ViewColumn.One, preserveFocus: false });
  const pos = new vscode.Position(line, 0);
  editor.selection = new vscode.Selection(pos, pos);
  editor.revealRange(new vscode.Range(pos, pos), vscode.TextEditorRevealType.AtTop);
}

function findColumn(doc: vscode.TextDocument): vscode.ViewColumn | undefined {
  return vscode.window.visibleTextEditors.find((e) => e.document === doc)?.viewColumn;
}

// ---------------------------------------------------------------------------------------------------- manifest view

let manifestPanel: vscode.WebviewPanel | undefined;

/** The document a bundle was lowered from: `source` may be absolute, or relative to the bundle or the workspace. */
function resolveManifestSource(source: string | undefined, manifestPath: string): string | undefined {
  if (!source) return undefined;
  const bundleDir = path.dirname(manifestPath);
  const candidates = path.isAbsolute(source)
    ? [source]
    : [path.resolve(bundleDir, '..', source), path.resolve(bundleDir, source), ...(workspaceDir() ? [path.resolve(workspaceDir()!, source)] : [])];
  return candidates.find((c) => fs.existsSync(c)) ?? candidates[0];
}
let manifestSource: string | undefined;

function showManifest(manifestPath: string, fallbackSource?: string): void {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  } catch (e) {
    void vscode.window.showErrorMessage(`Streamed: cannot read ${manifestPath}: ${errorText(e)}`);
    return;
  }
  manifestSource = fallbackSource ?? resolveManifestSource(manifest.source, manifestPath);
  if (!manifestPanel) {
    manifestPanel = vscode.window.createWebviewPanel('streamed.manifest', 'Manifest', { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false }, {
      enableScripts: true,
      localResourceRoots: [],
      retainContextWhenHidden: false,
    });
    manifestPanel.iconPath = vscode.Uri.file(path.join(extensionContext.extensionPath, 'media', 'icon.png'));
    manifestPanel.onDidDispose(() => (manifestPanel = undefined));
    manifestPanel.webview.onDidReceiveMessage(async (msg) => {
      if (msg?.type === 'reveal' && typeof msg.layer === 'number' && manifestSource) await revealLayer(manifestSource, msg.layer);
    });
  }
  const name = manifest.source ? path.basename(manifest.source) : path.basename(path.dirname(manifestPath));
  manifestPanel.title = `Manifest — ${name}`;
  manifestPanel.webview.html = renderManifestHtml(manifest, {
    cspSource: manifestPanel.webview.cspSource,
    nonce: crypto.randomBytes(16).toString('base64'),
    manifestPath,
  });
  manifestPanel.reveal(vscode.ViewColumn.Beside, false);
}

// ---------------------------------------------------------------------------------------------------- commands

function targetDocumentUri(arg: unknown): vscode.Uri | undefined {
  const a: any = Array.isArray(arg) ? arg[0] : arg;
  if (a instanceof vscode.Uri) return a;
  if (a && typeof a === 'object' && typeof a.uri === 'string') return vscode.Uri.parse(a.uri);
  if (typeof a === 'string' && a) return a.includes('://') ? vscode.Uri.parse(a) : vscode.Uri.file(a);
  return activeModelDocument()?.uri;
}

async function lowerBundle(arg?: unknown): Promise<void> {
  const uri = targetDocumentUri(arg);
  if (!uri) {
    void vscode.window.showWarningMessage('Streamed: open a model program (.lgm) to lower it.');
    return;
  }
  const opts = currentInitOptions();
  const modeDescriptions: Record<Mode, string> = {
    forward: 'the whole sequence at once',
    decode: 'one token per step',
    prefill: 'a chunk of the prompt per step',
    batched: 'one token per sequence, a batch per step',
    tp: 'decode split over tensor-parallel chips',
    'batched-tp': 'batched decode split over tensor-parallel chips',
  };
  const items = MODES.map((m) => ({ label: m, description: modeDescriptions[m] + (m === opts.deployment.mode ? ' (default)' : ''), mode: m }));
  const qp = vscode.window.createQuickPick<(typeof items)[number]>();
  qp.title = 'Lower SN50 Bundle: deployment';
  qp.placeholder = 'Choose the deployment to lower for';
  qp.items = items;
  qp.activeItems = items.filter((i) => i.mode === opts.deployment.mode);
  const picked = await new Promise<Mode | undefined>((resolve) => {
    qp.onDidAccept(() => {
      resolve(qp.selectedItems[0]?.mode ?? qp.activeItems[0]?.mode);
      qp.hide();
    });
    qp.onDidHide(() => resolve(undefined));
    qp.show();
  });
  qp.dispose();
  if (!picked) return;
  const numbers: Partial<Record<'ctx' | 'chunk' | 'batch' | 'tp', number>> = {};
  const prompts = { ctx: 'KV cache length (ctx)', chunk: 'prompt rows per step (chunk)', batch: 'sequences per step (batch)', tp: 'tensor-parallel chips (tp)' };
  for (const k of deploymentInputs(picked)) {
    const v = await vscode.window.showInputBox({
      title: `Lower SN50 Bundle: ${k}`,
      prompt: prompts[k],
      value: String(opts.deployment[k]),
      validateInput: validatePositiveInt,
      ignoreFocusOut: true,
    });
    if (v === undefined) return;
    numbers[k] = Number(v.trim());
  }
  type CkItem = vscode.QuickPickItem & { value: 'setting' | 'none' | 'pick' };
  const ckItems: CkItem[] = [];
  if (opts.checkpoint) ckItems.push({ label: path.basename(opts.checkpoint), description: 'from settings', detail: opts.checkpoint, value: 'setting' });
  ckItems.push({ label: 'No checkpoint', description: 'the document’s checkpoint section, or seeded weights', value: 'none' });
  ckItems.push({ label: 'Choose a checkpoint file…', description: '.gguf', value: 'pick' });
  const ck = await vscode.window.showQuickPick(ckItems, { title: 'Lower SN50 Bundle: checkpoint (optional)', ignoreFocusOut: true });
  if (!ck) return;
  let checkpoint: string | null = null;
  if (ck.value === 'setting') checkpoint = opts.checkpoint;
  if (ck.value === 'pick') {
    const files = await vscode.window.showOpenDialog({
      canSelectMany: false,
      openLabel: 'Use checkpoint',
      filters: { 'GGUF checkpoints': ['gguf'], 'All files': ['*'] },
      defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
    });
    if (!files?.length) return;
    checkpoint = files[0].fsPath;
  }
  const doc = await vscode.workspace.openTextDocument(uri);
  if (doc.isDirty) await doc.save();
  const args = lowerArgs(uri.toString(), picked, numbers, checkpoint, opts.target);
  output.appendLine(`[client] lowerBundle ${JSON.stringify(args)}`);
  await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Lowering ${path.basename(uri.fsPath)} (${picked})`, cancellable: true },
    async (progress, token) => {
      const mapper = new ProgressMapper();
      const workDoneToken = `streamed-lower-${crypto.randomUUID()}`;
      // Cancelling sends $/cancelRequest (through the request's token) and cancels the work-done progress.
      const onCancel = token.onCancellationRequested(() => {
        void client?.sendNotification(WorkDoneProgressCancelNotification.type, { token: workDoneToken }).catch(() => undefined);
      });
      const sub = client?.onProgress(WorkDoneProgress.type, workDoneToken, (v) => {
        const step = mapper.map(v as WorkDoneValue);
        if (step) progress.report(step);
      });
      try {
        const result = await executeServerCommand<{ manifest: string; kinds?: number; layers?: number }>(
          'streamed.lowerBundle', [args], token, workDoneToken);
        if (token.isCancellationRequested) return;
        if (!result?.manifest) throw new Error('the server returned no manifest');
        showManifest(result.manifest, uri.fsPath);
        void vscode.window
          .showInformationMessage(
            `Streamed: bundle written — ${result.kinds ?? '?'} kinds, ${result.layers ?? '?'} layers: ${path.dirname(result.manifest)}`,
            'Reveal in Explorer',
          )
          .then((c) => c && vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(result.manifest)));
      } catch (e) {
        if (token.isCancellationRequested) {
          void vscode.window.showInformationMessage('Streamed: lowering cancelled; no bundle was written.');
        } else {
          void vscode.window.showErrorMessage(`Streamed: lowering refused — ${errorText(e)}`);
        }
      } finally {
        sub?.dispose();
        onCancel.dispose();
      }
    },
  );
}

async function openManifest(arg?: unknown): Promise<void> {
  const editorDoc = vscode.window.activeTextEditor?.document;
  if (!arg && editorDoc && path.basename(editorDoc.uri.fsPath) === 'manifest.json') {
    showManifest(editorDoc.uri.fsPath);
    return;
  }
  const uri = targetDocumentUri(arg);
  let request: unknown;
  if (uri) {
    request = { uri: uri.toString() };
  } else {
    const picked = await vscode.window.showOpenDialog({
      canSelectFiles: true,
      canSelectFolders: true,
      canSelectMany: false,
      openLabel: 'Open Manifest',
      filters: { 'Bundle manifest': ['json'] },
    });
    if (!picked?.length) return;
    const p = picked[0].fsPath;
    if (p.endsWith('.json')) return showManifest(p);
    request = { bundle: p };
  }
  try {
    const r = await executeServerCommand<{ manifest: string } | null>('streamed.openManifest', [request]);
    if (!r?.manifest) throw new Error('no bundle has been lowered for this document yet');
    showManifest(r.manifest, uri?.fsPath);
  } catch (e) {
    const c = await vscode.window.showWarningMessage(`Streamed: ${errorText(e)}`, ...(uri ? ['Lower SN50 Bundle…'] : []));
    if (c) await lowerBundle(uri);
  }
}

async function goToRepresentative(arg?: unknown): Promise<void> {
  const a: any = Array.isArray(arg) ? arg[0] : arg;
  let uri: vscode.Uri | undefined;
  let position: { line: number; character: number } | undefined;
  if (a && typeof a === 'object' && typeof a.uri === 'string' && a.position) {
    uri = vscode.Uri.parse(a.uri);
    position = a.position;
  } else {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== LANG) {
      void vscode.window.showWarningMessage('Streamed: place the cursor in a layer of a model program.');
      return;
    }
    uri = editor.document.uri;
    position = { line: editor.selection.active.line, character: editor.selection.active.character };
  }
  let r: { uri: string; range: { start: { line: number; character: number }; end: { line: number; character: number } } } | null;
  try {
    r = await executeServerCommand('streamed.goToRepresentative', [{ uri: uri.toString(), position }]);
  } catch (e) {
    void vscode.window.showErrorMessage(`Streamed: ${errorText(e)}`);
    return;
  }
  if (!r) {
    vscode.window.setStatusBarMessage('Streamed: no representative for this position (already in it, or not in a layer)', 4000);
    return;
  }
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(r.uri));
  const editor = await vscode.window.showTextDocument(doc, { viewColumn: findColumn(doc) ?? vscode.ViewColumn.Active });
  const range = new vscode.Range(r.range.start.line, r.range.start.character, r.range.end.line, r.range.end.character);
  editor.selection = new vscode.Selection(range.start, range.end);
  editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
}

async function authorModel(): Promise<void> {
  const picked = await vscode.window.showOpenDialog({
    canSelectMany: false,
    openLabel: 'Author Model',
    title: 'Author Model from Config: a Hugging Face config.json or a .gguf checkpoint',
    filters: { 'Model config or checkpoint': ['json', 'gguf'] },
    defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
  });
  if (!picked?.length) return;
  const src = picked[0].fsPath;
  const base = authoredName(src);
  const defaultOut = vscode.Uri.file(path.join(workspaceDir() ?? path.dirname(src), `${base}.lgm`));
  const out = await vscode.window.showSaveDialog({ defaultUri: defaultOut, filters: { 'Model program': ['lgm'] }, saveLabel: 'Author' });
  if (!out) return;
  const python = (interpreter ?? (await resolveInterpreter())).command;
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Authoring ${path.basename(out.fsPath)} from ${path.basename(src)}`, cancellable: true },
    (_p, token) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = cp.execFile(python, ['-m', 'streamed', 'author', src, '-o', out.fsPath], { cwd: workspaceDir(), timeout: 10 * 60 * 1000 }, (err, _o, stderr) => {
          const code = err ? ((err as any).code === 'ENOENT' ? -1 : typeof (err as any).code === 'number' ? (err as any).code : 1) : 0;
          resolve({ code, stderr: String(stderr) });
        });
        token.onCancellationRequested(() => child.kill());
      }),
  );
  if (result.code === 0) {
    const doc = await vscode.workspace.openTextDocument(out);
    await vscode.window.showTextDocument(doc);
    return;
  }
  const msg = result.code === -1 ? `cannot run ${python}` : result.stderr.trim().split('\n').slice(-3).join(' ') || `exit ${result.code}`;
  void vscode.window.showErrorMessage(`Streamed: authoring failed — ${msg}`);
}

// ---------------------------------------------------------------------------------------------------- activation

let extensionContext: vscode.ExtensionContext;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionContext = context;
  output = vscode.window.createOutputChannel('Streamed', { log: true });
  kindsProvider = new KindsProvider();
  statusItem = vscode.window.createStatusBarItem('streamed.status', vscode.StatusBarAlignment.Left, 50);
  statusItem.name = 'Streamed';
  context.subscriptions.push(
    output,
    statusItem,
    vscode.window.registerTreeDataProvider('streamed.layerKinds', kindsProvider),
    vscode.commands.registerCommand('streamed.client.lowerBundle', lowerBundle),
    vscode.commands.registerCommand('streamed.client.openManifest', openManifest),
    vscode.commands.registerCommand('streamed.client.goToRepresentative', goToRepresentative),
    vscode.commands.registerCommand('streamed.client.authorModel', authorModel),
    vscode.commands.registerCommand('streamed.client.restartServer', restartServer),
    vscode.commands.registerCommand('streamed.client.refreshKinds', () => kindsProvider.refresh(activeModelDocument()?.uri)),
    vscode.commands.registerCommand('streamed.client.revealLayer', revealLayer),
    vscode.commands.registerCommand('streamed.client.showKinds', () => vscode.commands.executeCommand('streamed.layerKinds.focus')),
    vscode.window.onDidChangeActiveTextEditor((e) => {
      updateStatus();
      if (e?.document.languageId === LANG) void kindsProvider.refresh(e.document.uri);
    }),
    vscode.workspace.onDidCloseTextDocument((d) => analyses.delete(normalizeUri(d.uri.toString()))),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration('streamed')) return;
      if (e.affectsConfiguration('streamed.server.python')) return restartServer();
      if (client?.isRunning()) {
        await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { streamed: currentInitOptions() } });
      }
    }),
  );
  updateStatus();
  await startServer(context);
}

export async function deactivate(): Promise<void> {
  deactivating = true;
  await stopClient();
}
