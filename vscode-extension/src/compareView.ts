// Compare Layer with Representative: VS Code's diff editor with the representative layer on the left and the layer on
// the right, the layer's names read as the representative's (the server renders both texts), so the lines marked are
// where the two programs differ. The texts are virtual documents of the scheme `streamed-compare`, read-only.
import * as vscode from 'vscode';
import * as path from 'node:path';
import { Ctx, LANG, errorText } from './ctx';

export const SCHEME = 'streamed-compare';

interface Comparison {
  layer: number;
  representative: number;
  kind: string;
  why: string | null;
  representativeText: string;
  layerText: string;
}

export class CompareView implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;

  constructor(private readonly ctx: Ctx) {}

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? '';
  }

  private put(uri: vscode.Uri, text: string): void {
    this.texts.set(uri.toString(), text);
    this.emitter.fire(uri);
  }

  /**
   * Opens the diff of a layer (a code lens's `{uri, layer}`, or the cursor's layer) with its representative. One
   * pair of virtual documents per document and layer: comparing again shows the document as it is now.
   */
  async compare(arg?: unknown): Promise<void> {
    const a: any = Array.isArray(arg) ? arg[0] : arg;
    let request: Record<string, unknown>;
    let doc: vscode.Uri;
    if (a && typeof a === 'object' && typeof a.uri === 'string' && typeof a.layer === 'number') {
      doc = vscode.Uri.parse(a.uri);
      request = { uri: a.uri, layer: a.layer, show: false };
    } else {
      const editor = vscode.window.activeTextEditor;
      if (!editor || editor.document.languageId !== LANG || editor.document.uri.scheme === SCHEME) {
        void vscode.window.showWarningMessage('Streamed: place the cursor in a layer of a model program to compare it with its representative.');
        return;
      }
      doc = editor.document.uri;
      const p = editor.selection.active;
      request = { uri: doc.toString(), position: { line: p.line, character: p.character }, show: false };
    }
    let c: Comparison;
    try {
      c = await this.ctx.executeServerCommand<Comparison>('streamed.compareWithRepresentative', [request]);
    } catch (e) {
      void vscode.window.showWarningMessage(`Streamed: ${errorText(e)}`);
      return;
    }
    const name = path.basename(doc.path);
    // Paths end in .lgm: the texts are highlighted as model programs (and, of another scheme, never analysed).
    const at = (layer: number, side: string) =>
      vscode.Uri.from({ scheme: SCHEME, path: `/${name}/layer ${layer}.lgm`, query: `${side}&${doc.toString()}` });
    const left = at(c.representative, `representative-of-${c.layer}`);
    const right = at(c.layer, 'renamed');
    this.put(left, c.representativeText);
    this.put(right, c.layerText);
    const title = `Layer ${c.representative} ↔ Layer ${c.layer} in layer ${c.representative}'s names (${name})`;
    await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: false });
  }
}
