// The manifest view: a bundle's manifest.json as a page (`manifest.ts` renders it), its layer links revealing the
// layers of the document it was lowered from. The view keeps the manifest's path as its state, so VS Code restores it
// after a reload; the bundle last lowered for each document is remembered for Open Manifest.
import * as vscode from 'vscode';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Ctx, errorText } from './ctx';
import { Manifest, renderManifestHtml } from './manifest';
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
      const panel = vscode.window.createWebviewPanel(VIEW_TYPE, 'Manifest', { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false }, {
        enableScripts: true,
        localResourceRoots: [],
        retainContextWhenHidden: false,
      });
      this.adopt(panel);
    }
    if (this.render(manifestPath, fallbackSource)) this.panel!.reveal(vscode.ViewColumn.Beside, false);
  }

  private adopt(panel: vscode.WebviewPanel): void {
    this.panel = panel;
    panel.iconPath = vscode.Uri.file(path.join(this.ctx.extension.extensionPath, 'media', 'icon.png'));
    panel.onDidDispose(() => {
      if (this.panel === panel) this.panel = undefined;
    });
    panel.webview.onDidReceiveMessage(async (msg) => {
      if (msg?.type === 'reveal' && typeof msg.layer === 'number' && this.source) await revealLayer(this.source, msg.layer);
    });
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
    const name = manifest.source ? path.basename(manifest.source) : path.basename(path.dirname(manifestPath));
    panel.title = `Manifest — ${name}`;
    const state: ViewState = { manifestPath, source: this.source };
    panel.webview.html = renderManifestHtml(manifest, {
      cspSource: panel.webview.cspSource,
      nonce: crypto.randomBytes(16).toString('base64'),
      manifestPath,
      state,
    });
    return true;
  }

  /** After a reload: the view VS Code kept, rendered again from its manifest (which may have been lowered anew). */
  async deserializeWebviewPanel(panel: vscode.WebviewPanel, state: unknown): Promise<void> {
    const s = state as Partial<ViewState> | undefined;
    if (!s || typeof s.manifestPath !== 'string') {
      panel.dispose();
      return;
    }
    this.panel?.dispose();
    panel.webview.options = { enableScripts: true, localResourceRoots: [] };
    this.adopt(panel);
    this.render(s.manifestPath, s.source);
  }
}
