// The palette's commands (and those the code lenses, the views and the walkthrough run): each asks what it needs,
// calls the server, and shows the answer.
import * as vscode from 'vscode';
import * as cp from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WorkDoneProgress, WorkDoneProgressCancelNotification } from 'vscode-languageclient/node';
import { Ctx, LANG, activeModelDocument, errorText, findColumn, openModelDocuments } from './ctx';
import {
  MODES,
  MODE_DESCRIPTIONS,
  Mode,
  NUMBER_PROMPTS,
  authoredName,
  briefly,
  bundleFolder,
  defaultBundleFolder,
  deploymentInputs,
  deploymentSummary,
  lowerArgs,
  lowerTitle,
  validatePositiveInt,
} from './config';
import { plural, refusalReason } from './kinds';
import { ProgressMapper, WorkDoneValue } from './progress';
import { ManifestView } from './manifestView';

type Numbers = Partial<Record<'ctx' | 'chunk' | 'batch' | 'tp', number>>;

function argumentUri(arg: unknown): vscode.Uri | undefined {
  const a: any = Array.isArray(arg) ? arg[0] : arg;
  if (a instanceof vscode.Uri) return a;
  if (a && typeof a === 'object' && typeof a.uri === 'string') return vscode.Uri.parse(a.uri);
  if (typeof a === 'string' && a) return a.includes('://') ? vscode.Uri.parse(a) : vscode.Uri.file(a);
  return undefined;
}

/**
 * The model program a command acts on: its argument's, else the one being worked on (`activeModelDocument`: the
 * walkthrough or the manifest view may have the focus), else — several open and none of them last active — the one
 * the user picks.
 */
async function targetDocumentUri(arg: unknown, title: string): Promise<vscode.Uri | undefined> {
  const given = argumentUri(arg);
  if (given) return given;
  const doc = activeModelDocument();
  if (doc) return doc.uri;
  const open = openModelDocuments();
  if (open.length < 2) return undefined;
  const picked = await vscode.window.showQuickPick(
    open.map((d) => ({ label: path.basename(d.uri.fsPath), description: vscode.workspace.asRelativePath(d.uri), uri: d.uri })),
    { title: `${title}: which model program?` },
  );
  return picked?.uri;
}

/** A deployment, asked for: the mode from a quick pick (the setting's preselected), then the numbers it reads. */
async function pickDeployment(ctx: Ctx, title: string): Promise<{ mode: Mode; numbers: Numbers } | undefined> {
  const current = ctx.initOptions().deployment;
  const items = MODES.map((m) => ({ label: m, description: MODE_DESCRIPTIONS[m] + (m === current.mode ? ' (current)' : ''), mode: m }));
  const qp = vscode.window.createQuickPick<(typeof items)[number]>();
  qp.title = `${title}: deployment`;
  qp.placeholder = 'Choose the deployment';
  qp.items = items;
  qp.activeItems = items.filter((i) => i.mode === current.mode);
  const mode = await new Promise<Mode | undefined>((resolve) => {
    qp.onDidAccept(() => {
      resolve(qp.selectedItems[0]?.mode ?? qp.activeItems[0]?.mode);
      qp.hide();
    });
    qp.onDidHide(() => resolve(undefined));
    qp.show();
  });
  qp.dispose();
  if (!mode) return undefined;
  const numbers: Numbers = {};
  for (const k of deploymentInputs(mode)) {
    const v = await vscode.window.showInputBox({
      title: `${title}: ${k}`,
      prompt: NUMBER_PROMPTS[k],
      value: String(current[k]),
      validateInput: validatePositiveInt,
      ignoreFocusOut: true,
    });
    if (v === undefined) return undefined;
    numbers[k] = Number(v.trim());
  }
  return { mode, numbers };
}

export class Commands {
  constructor(private readonly ctx: Ctx, private readonly manifests: ManifestView) {}

  /** `Streamed: Change Deployment…` (the language status item's action): the `streamed.deployment.*` settings. */
  async chooseDeployment(): Promise<{ mode: Mode; numbers: Numbers } | undefined> {
    const picked = await pickDeployment(this.ctx, 'Change Deployment');
    if (!picked) return undefined;
    const where = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    const c = this.ctx.config();
    await c.update('deployment.mode', picked.mode, where);
    for (const [k, v] of Object.entries(picked.numbers)) await c.update(`deployment.${k}`, v, where);
    return picked;
  }

  /** Where the bundle goes: the `streamed.bundle.folder` setting, else a save dialog (replacing a bundle is asked). */
  private async bundleFolderFor(doc: vscode.Uri, mode: Mode, title: string): Promise<string | undefined> {
    const fromSetting = bundleFolder(this.ctx.config().get('bundle.folder'), doc.fsPath, mode, this.ctx.workspaceDir());
    if (fromSetting) return fromSetting;
    const stem = path.basename(doc.fsPath, path.extname(doc.fsPath));
    const free = [defaultBundleFolder(doc.fsPath), ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => path.join(path.dirname(doc.fsPath), `${stem}.${mode}${n > 1 ? `-${n}` : ''}.bundle`))]
      .find((f) => !fs.existsSync(f));
    const picked = await vscode.window.showSaveDialog({
      title: `${title}: the bundle folder`,
      defaultUri: vscode.Uri.file(free ?? defaultBundleFolder(doc.fsPath)),
      saveLabel: 'Write Bundle',
    });
    if (!picked) return undefined;
    const folder = picked.fsPath;
    if (fs.existsSync(path.join(folder, 'manifest.json'))) {
      const c = await vscode.window.showWarningMessage(`${path.basename(folder)} already holds a bundle. Replace it?`, { modal: true }, 'Replace');
      if (c !== 'Replace') return undefined;
    }
    return folder;
  }

  /**
   * `Lower SN50 Bundle` (the code lens on `## Model`, the context menu, the walkthrough): one step, with the current
   * deployment, the settings' checkpoint and bundle folder (else `<stem>.bundle` beside the document). A document the
   * analysis already refuses — errors, or kinds that do not lower for this deployment — is not lowered: one message
   * says so and offers Show Problems and Change Deployment.
   */
  async lowerBundle(arg?: unknown): Promise<void> {
    const opts = this.ctx.initOptions();
    const title = lowerTitle(opts.target);
    const uri = await targetDocumentUri(arg, title);
    if (!uri) {
      void vscode.window.showWarningMessage('Streamed: open a model program (.lgm) to lower it.');
      return;
    }
    if (this.refusedAlready(uri, opts)) return;
    const d = opts.deployment;
    const numbers: Numbers = {};
    for (const k of deploymentInputs(d.mode)) numbers[k] = d[k];
    await this.lowerFor(uri, { mode: d.mode, numbers });
  }

  /** Lowers `uri` for a deployment with the settings' checkpoint and bundle folder (else `<stem>.bundle`). */
  private async lowerFor(uri: vscode.Uri, d: { mode: Mode; numbers: Numbers }): Promise<void> {
    const opts = this.ctx.initOptions();
    const out = bundleFolder(this.ctx.config().get('bundle.folder'), uri.fsPath, d.mode, this.ctx.workspaceDir()) ?? defaultBundleFolder(uri.fsPath);
    await this.lower(uri, d.mode, d.numbers, opts.checkpoint, out);
  }

  /** `Lower SN50 Bundle With…`: asks the deployment, the checkpoint and the bundle folder, then lowers. */
  async lowerBundleWith(arg?: unknown): Promise<void> {
    const opts = this.ctx.initOptions();
    const title = lowerTitle(opts.target, true).replace('…', '');
    const uri = await targetDocumentUri(arg, title);
    if (!uri) {
      void vscode.window.showWarningMessage('Streamed: open a model program (.lgm) to lower it.');
      return;
    }
    const picked = await pickDeployment(this.ctx, title);
    if (!picked) return;
    type CkItem = vscode.QuickPickItem & { value: 'setting' | 'none' | 'pick' };
    const ckItems: CkItem[] = [];
    if (opts.checkpoint) ckItems.push({ label: path.basename(opts.checkpoint), description: 'from settings', detail: opts.checkpoint, value: 'setting' });
    ckItems.push({ label: 'No checkpoint', description: 'the document’s checkpoint section, or seeded weights', value: 'none' });
    ckItems.push({ label: 'Choose a checkpoint file…', description: '.gguf', value: 'pick' });
    const ck = await vscode.window.showQuickPick(ckItems, { title: `${title}: checkpoint (optional)`, ignoreFocusOut: true });
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
    const out = await this.bundleFolderFor(uri, picked.mode, title);
    if (!out) return;
    await this.lower(uri, picked.mode, picked.numbers, checkpoint, out);
  }

  /**
   * Whether the analysis already says the document cannot be lowered under the current deployment (its errors, or
   * its kinds' refusals, in the Problems panel): if so one short message says which, with what to do next.
   */
  private refusedAlready(uri: vscode.Uri, opts: ReturnType<Ctx['initOptions']>): boolean {
    const problems = vscode.languages.getDiagnostics(uri).filter((d) => d.severity === vscode.DiagnosticSeverity.Error && d.source === 'streamed');
    const refusals = problems.filter((d) => String(typeof d.code === 'object' ? d.code.value : d.code) === 'reject');
    const errors = problems.length - refusals.length;
    const name = path.basename(uri.fsPath);
    let message: string;
    if (errors > 0) message = `Streamed: ${name} has ${errors} error${errors === 1 ? '' : 's'} to fix before it can be lowered.`;
    else if (refusals.length > 0 || (this.ctx.analysisOf(uri)?.rejects ?? 0) > 0) {
      // The first refusal's reason, and the values that lower when a size of the deployment decides it.
      const r = refusals.length > 0 ? refusalReason(refusals[0].message) : { why: 'the Problems panel says why' };
      message = `Streamed: ${name} does not lower for ${deploymentSummary(opts)}: ${briefly(r.why).text}${r.lowers ? ` — ${r.lowers}` : ''}`;
    } else return false;
    this.ctx.output.info(`[client] not lowered: ${message}`);
    const actions = errors > 0 ? ['Show Problems'] : ['Show Problems', 'Change Deployment'];
    void vscode.window.showErrorMessage(message, ...actions).then((c) => this.answer(c, uri));
    return true;
  }

  /** A refusal's choice: Change Deployment asks the deployment, then lowers the document with it. */
  private answer(choice: string | undefined, uri?: vscode.Uri): void {
    if (choice === 'Show Problems') void vscode.commands.executeCommand('workbench.actions.view.problems');
    else if (choice === 'Change Deployment') void this.chooseDeployment().then((picked) => picked && uri && this.lowerFor(uri, picked));
    else if (choice === 'Show Output') this.ctx.output.show();
    else if (choice === 'Lower With…') void this.lowerBundleWith(uri);
  }

  /** Lowers `uri` for `mode` into `out` (the document saved first): the manifest view on success, else why not. */
  private async lower(uri: vscode.Uri, mode: Mode, numbers: Numbers, checkpoint: string | null, out: string): Promise<void> {
    const ctx = this.ctx;
    const opts = ctx.initOptions();
    const doc = await vscode.workspace.openTextDocument(uri);
    if (doc.isDirty) await doc.save();
    const args = lowerArgs(uri.toString(), mode, numbers, checkpoint, opts.target, out);
    ctx.output.info(`[client] lowerBundle ${JSON.stringify(args)}`);
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Lowering ${path.basename(uri.fsPath)} (${mode})`, cancellable: true },
      async (progress, token) => {
        const mapper = new ProgressMapper();
        const workDoneToken = `streamed-lower-${crypto.randomUUID()}`;
        const client = ctx.running();
        // Cancelling sends $/cancelRequest (through the request's token) and cancels the work-done progress.
        const onCancel = token.onCancellationRequested(() => {
          void client?.sendNotification(WorkDoneProgressCancelNotification.type, { token: workDoneToken }).catch(() => undefined);
        });
        const sub = client?.onProgress(WorkDoneProgress.type, workDoneToken, (v) => {
          const step = mapper.map(v as WorkDoneValue);
          if (step) progress.report(step);
        });
        try {
          const result = await ctx.executeServerCommand<{ manifest: string; kinds: number; layers: number }>(
            'streamed.lowerBundle', [args], token, workDoneToken);
          if (token.isCancellationRequested) return;
          if (!result?.manifest) throw new Error('the server returned no manifest');
          await this.manifests.remember(uri, path.dirname(result.manifest));
          this.manifests.show(result.manifest, uri.fsPath);
          void vscode.window
            .showInformationMessage(
              `Streamed: bundle written — ${plural(result.kinds, 'kind')}, ${plural(result.layers, 'layer')}: ${path.dirname(result.manifest)}`,
              'Reveal in Explorer',
            )
            .then((c) => c && vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(result.manifest)));
        } catch (e) {
          if (token.isCancellationRequested) {
            void vscode.window.showInformationMessage('Streamed: lowering cancelled; no bundle was written.');
            return;
          }
          const why = errorText(e);
          ctx.output.error(`[client] lowering refused: ${why}`);
          const b = briefly(why);
          const actions = ['Show Problems', 'Change Deployment', ...(b.cut ? ['Show Output'] : [])];
          void vscode.window.showErrorMessage(`Streamed: lowering refused — ${b.text}`, ...actions).then((c) => this.answer(c, uri));
        } finally {
          sub?.dispose();
          onCancel.dispose();
        }
      },
    );
  }

  /** The manifest of the bundle last lowered for the document (else its `<stem>.bundle`), or of a chosen bundle. */
  async openManifest(arg?: unknown): Promise<void> {
    const editorDoc = vscode.window.activeTextEditor?.document;
    if (!arg && editorDoc && path.basename(editorDoc.uri.fsPath) === 'manifest.json') return this.manifests.show(editorDoc.uri.fsPath);
    const uri = argumentUri(arg) ?? activeModelDocument()?.uri;
    if (uri) {
      const folder = this.manifests.bundleOf(uri) ?? defaultBundleFolder(uri.fsPath);
      const manifest = path.join(folder, 'manifest.json');
      if (fs.existsSync(manifest)) return this.manifests.show(manifest, uri.fsPath);
      const lower = lowerTitle(this.ctx.initOptions().target);
      const c = await vscode.window.showWarningMessage(`Streamed: no bundle has been lowered for ${path.basename(uri.fsPath)} yet.`, lower);
      if (c) await this.lowerBundle(uri);
      return;
    }
    const picked = await vscode.window.showOpenDialog({
      canSelectFiles: true,
      canSelectFolders: true,
      canSelectMany: false,
      openLabel: 'Open Manifest',
      filters: { 'Bundle manifest': ['json'] },
    });
    if (!picked?.length) return;
    const p = picked[0].fsPath;
    const manifest = p.endsWith('.json') ? p : path.join(p, 'manifest.json');
    if (!fs.existsSync(manifest)) {
      void vscode.window.showWarningMessage(`Streamed: ${p} is not a bundle (it has no manifest.json).`);
      return;
    }
    this.manifests.show(manifest);
  }

  async goToRepresentative(arg?: unknown): Promise<void> {
    const a: any = Array.isArray(arg) ? arg[0] : arg;
    let uri: vscode.Uri;
    let position: { line: number; character: number };
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
      r = await this.ctx.executeServerCommand('streamed.goToRepresentative', [{ uri: uri.toString(), position, show: false }]);
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

  /** The language reference (`docs/language.md`, which the extension carries), as a Markdown preview. */
  async openLanguageReference(): Promise<void> {
    const doc = vscode.Uri.joinPath(this.ctx.extension.extensionUri, 'docs', 'language.md');
    try {
      await vscode.commands.executeCommand('markdown.showPreview', doc);
    } catch {
      await vscode.window.showTextDocument(doc, { preview: true });
    }
  }

  async authorModel(): Promise<void> {
    const ctx = this.ctx;
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
    const defaultOut = vscode.Uri.file(path.join(ctx.workspaceDir() ?? path.dirname(src), `${base}.lgm`));
    const out = await vscode.window.showSaveDialog({ defaultUri: defaultOut, filters: { 'Model program': ['lgm'] }, saveLabel: 'Author' });
    if (!out) return;
    const python = ctx.server?.python;
    if (!python) {
      void vscode.window.showErrorMessage('Streamed: authoring needs the language server’s Python, and it is not set up yet.', 'Set Up Server')
        .then((c) => c && vscode.commands.executeCommand('streamed.client.setUpServer'));
      return;
    }
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Authoring ${path.basename(out.fsPath)} from ${path.basename(src)}`, cancellable: true },
      (_p, token) =>
        new Promise<{ code: number | null; stderr: string }>((resolve) => {
          const child = cp.execFile(python, ['-m', 'streamed', 'author', src, '-o', out.fsPath], { cwd: ctx.workspaceDir(), timeout: 10 * 60 * 1000 }, (err, _o, stderr) => {
            const code = err ? ((err as any).code === 'ENOENT' ? -1 : typeof (err as any).code === 'number' ? (err as any).code : 1) : 0;
            resolve({ code, stderr: String(stderr) });
          });
          token.onCancellationRequested(() => child.kill());
        }),
    );
    if (result.code === 0) {
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(out));
      return;
    }
    const msg = result.code === -1 ? `cannot run ${python}` : result.stderr.trim().split('\n').slice(-3).join(' ') || `exit ${result.code}`;
    void vscode.window.showErrorMessage(`Streamed: authoring failed — ${msg}`);
  }
}
