// The manifest view: a bundle's manifest.json as a page (`manifest.ts` renders it) with its pictures — the chip, the
// memory and the roofline, drawn by the server from the bundle (`streamed.pictures`) and placed by the page's script
// (`webview/manifestPage.ts`). Its layer links and chip regions reveal the layer or the statement in the document it
// was lowered from. The view keeps the manifest's path as its state, so VS Code restores it after a reload (the
// pictures follow once the server runs); the bundle last lowered for each document is remembered for Open Manifest.
import * as vscode from 'vscode';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Ctx, errorText } from './ctx';
import { Manifest, renderManifestHtml } from './manifest';
import { Pictures, PicturesMessage, pictureWidth, picturesMessage, redrawFor } from './pictures';
import { revealLayer } from './kindsView';

export const VIEW_TYPE = 'streamed.manifest';
const BUNDLES_KEY = 'streamed.bundles';

interface ViewState {
  manifestPath: string;
  source?: string;
}

export class ManifestView implements vscode.WebviewPanelSerializer {
  private panel: vscode.WebviewPanel | undefined;
  private source: string | undefined;
  private sha256: string | undefined;
  private manifestPath: string | undefined;
  /** The page's pictures message (or what it waits for), sent again whenever the page says it is ready. */
  private pictures: PicturesMessage | { type: 'picturesWaiting' | 'picturesError'; message: string } | undefined;
  /** Which render the pictures being drawn belong to: a newer render makes an older answer moot. */
  private generation = 0;
  private waitingForServer: vscode.Disposable | undefined;
  /** The width of the page's picture sections as the page last said it, and the width the pictures were (or are
   *  being) drawn for. */
  private width: number | undefined;
  private drawnFor: number | undefined;

  constructor(private readonly ctx: Ctx) {}

  /** The bundle folder last lowered for a document, if it is still there. */
  bundleOf(document: vscode.Uri): string | undefined {
    const m = this.ctx.extension.workspaceState.get<Record<string, string>>(BUNDLES_KEY, {})[document.toString()];
    return m && fs.existsSync(path.join(m, 'manifest.json')) ? m : undefined;
  }

  async remember(document: vscode.Uri, bundle: string): Promise<void> {
    const all = { ...this.ctx.extension.workspaceState.get<Record<string, string>>(BUNDLES_KEY, {}), [document.toString()]: bundle };
    await this.ctx.extension.workspaceState.update(BUNDLES_KEY, all);
  }

  /** The document a bundle was lowered from: `source` may be absolute, or relative to the bundle or the workspace. */
  private resolveSource(source: string | undefined, manifestPath: string): string | undefined {
    if (!source) return undefined;
    const bundleDir = path.dirname(manifestPath);
    const ws = this.ctx.workspaceDir();
    const candidates = path.isAbsolute(source)
      ? [source]
      : [path.resolve(bundleDir, '..', source), path.resolve(bundleDir, source), ...(ws ? [path.resolve(ws, source)] : [])];
    return candidates.find((c) => fs.existsSync(c)) ?? candidates[0];
  }

  show(manifestPath: string, fallbackSource?: string): void {
    if (!this.panel) {
      const panel = vscode.window.createWebviewPanel(VIEW_TYPE, 'Manifest', { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false }, this.options());
      this.adopt(panel);
    }
    if (this.render(manifestPath, fallbackSource)) this.panel!.reveal(vscode.ViewColumn.Beside, false);
  }

  private options(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      localResourceRoots: [vscode.Uri.file(path.join(this.ctx.extension.extensionPath, 'dist'))],
      retainContextWhenHidden: false,
    };
  }

  private adopt(panel: vscode.WebviewPanel): void {
    this.panel = panel;
    panel.iconPath = vscode.Uri.file(path.join(this.ctx.extension.extensionPath, 'media', 'icon.png'));
    panel.onDidDispose(() => {
      if (this.panel === panel) {
        this.panel = undefined;
        this.waitingForServer?.dispose();
        this.waitingForServer = undefined;
      }
    });
    panel.webview.onDidReceiveMessage(async (msg) => {
      if (msg?.type === 'ready' || msg?.type === 'width') {
        // The page says how wide its pictures may be: drawn again for a new width, else the pictures it has.
        const width = pictureWidth(Number(msg.width));
        if (width !== undefined) this.width = width;
        if (this.manifestPath && redrawFor(this.drawnFor, this.width)) void this.draw(++this.generation);
        else if (this.pictures && msg.type === 'ready') void panel.webview.postMessage(this.pictures);
      } else if (msg?.type === 'reveal' && typeof msg.layer === 'number' && this.source) {
        await revealLayer(this.source, msg.layer);
      } else if (msg?.type === 'revealLine' && typeof msg.line === 'number' && msg.line >= 1 && this.source) {
        await this.revealLine(this.source, msg.line);
      }
    });
  }

  /** A statement of the document (its 1-based line, as the manifest records it), said to have moved when the
   *  document is no longer the text the bundle was lowered from. */
  private async revealLine(source: string, line: number): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(source));
    const at = new vscode.Position(Math.min(line - 1, doc.lineCount - 1), 0);
    const editor = await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, selection: new vscode.Range(at, at) });
    editor.revealRange(new vscode.Range(at, at), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    if (this.sha256 && crypto.createHash('sha256').update(doc.getText(), 'utf8').digest('hex') !== this.sha256) {
      void vscode.window.setStatusBarMessage(`Streamed: ${path.basename(source)} has changed since this bundle was lowered; line ${line} was its statement then`, 6000);
    }
  }

  private render(manifestPath: string, fallbackSource?: string): boolean {
    let manifest: Manifest;
    try {
      manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
    } catch (e) {
      void vscode.window.showErrorMessage(`Streamed: cannot read ${manifestPath}: ${errorText(e)}`);
      this.panel?.dispose();
      return false;
    }
    const panel = this.panel!;
    this.source = fallbackSource ?? this.resolveSource(manifest.source, manifestPath);
    const doc = manifest.document as { sha256?: unknown } | undefined;
    this.sha256 = typeof doc?.sha256 === 'string' ? doc.sha256 : undefined;
    this.manifestPath = manifestPath;
    const name = manifest.source ? path.basename(manifest.source) : path.basename(path.dirname(manifestPath));
    panel.title = `Manifest — ${name}`;
    const state: ViewState = { manifestPath, source: this.source };
    this.pictures = undefined;
    const script = panel.webview.asWebviewUri(vscode.Uri.file(path.join(this.ctx.extension.extensionPath, 'dist', 'webview.js')));
    panel.webview.html = renderManifestHtml(manifest, {
      cspSource: panel.webview.cspSource,
      nonce: crypto.randomBytes(16).toString('base64'),
      manifestPath,
      state,
      scriptUri: script.toString(),
    });
    void this.draw(++this.generation);
    return true;
  }

  /** Ask the server for the bundle's pictures and post them; while it does not run, wait for it. */
  private async draw(generation: number): Promise<void> {
    this.waitingForServer?.dispose();
    this.waitingForServer = undefined;
    const manifestPath = this.manifestPath;
    if (!manifestPath || !this.panel) return;
    if (!this.ctx.running()) {
      this.post({ type: 'picturesWaiting', message: 'The pictures are drawn by the language server; waiting for it to start…' });
      this.waitingForServer = this.ctx.changed.event(() => {
        if (this.ctx.running() && generation === this.generation) void this.draw(generation);
      });
      return;
    }
    try {
      const width = (this.drawnFor = this.width);
      const p = await this.ctx.executeServerCommand<Pictures>('streamed.pictures', [{ bundle: path.dirname(manifestPath), ...(width ? { width } : {}) }]);
      if (generation === this.generation) this.post(picturesMessage(p));
    } catch (e) {
      if (generation === this.generation) this.post({ type: 'picturesError', message: `The pictures could not be drawn: ${errorText(e)}` });
    }
  }

  private post(msg: NonNullable<ManifestView['pictures']>): void {
    this.pictures = msg;
    void this.panel?.webview.postMessage(msg);
  }

  /** After a reload: the view VS Code kept, rendered again from its manifest (which may have been lowered anew). */
  async deserializeWebviewPanel(panel: vscode.WebviewPanel, state: unknown): Promise<void> {
    const s = state as Partial<ViewState> | undefined;
    if (!s || typeof s.manifestPath !== 'string') {
      panel.dispose();
      return;
    }
    this.panel?.dispose();
    panel.webview.options = this.options();
    this.adopt(panel);
    this.render(s.manifestPath, s.source);
  }
}
