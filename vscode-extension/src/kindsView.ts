// The Layer Kinds view (its own container in the activity bar): the kinds of the model program being worked on (from
// `streamed.showKinds`), each with its layers; clicking a layer reveals its heading. It keeps showing that program
// while a comparison, a webview or a panel has the focus; with nothing to show, its welcome text says why.
import * as vscode from 'vscode';
import * as path from 'node:path';
import { Ctx, activeModelDocument, errorText, findColumn } from './ctx';
import { Kind, TreeNode, findLayerLine, kindsToTree } from './kinds';

export class KindsView implements vscode.TreeDataProvider<TreeNode> {
  private readonly emitter = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private nodes: TreeNode[] = [];
  private uri: vscode.Uri | undefined;
  private shown: string | undefined;

  constructor(private readonly ctx: Ctx) {}

  /** Refreshed when what it shows may have changed: another document, the server (re)started, a new analysis. */
  follow(): void {
    const active = activeModelDocument();
    const shown = this.ctx.running() && active ? active.uri.toString() + JSON.stringify(this.ctx.analysisOf(active.uri)) : undefined;
    if (shown === this.shown) return;
    this.shown = shown;
    void this.refresh(active?.uri);
  }

  async refresh(uri: vscode.Uri | undefined): Promise<void> {
    this.uri = uri;
    if (!uri || !this.ctx.running()) {
      this.nodes = [];
      void vscode.commands.executeCommand('setContext', 'streamed.hasKinds', false);
      this.emitter.fire(undefined);
      return;
    }
    try {
      const kinds = await this.ctx.executeServerCommand<Kind[] | null>('streamed.showKinds', [{ uri: uri.toString() }]);
      if (this.uri?.toString() !== uri.toString()) return; // a newer refresh is under way
      this.nodes = kindsToTree(Array.isArray(kinds) ? kinds : []);
    } catch (e) {
      this.ctx.output.warn(`[client] showKinds failed: ${errorText(e)}`);
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
        : n.icon === 'reason'
          ? new vscode.ThemeIcon('info')
          : n.icon === 'kind'
            ? new vscode.ThemeIcon('symbol-class')
            : n.icon === 'representative'
              ? new vscode.ThemeIcon('star-full')
              : new vscode.ThemeIcon('symbol-field');
    item.contextValue = n.icon === 'kind-refused' ? 'kindRefused' : n.children ? 'kind' : n.icon === 'reason' ? 'reason' : 'layer';
    if (n.icon === 'reason') item.command = { command: 'workbench.actions.view.problems', title: 'Show Problems' };
    if (n.layer !== undefined && this.uri) {
      item.command = { command: 'streamed.client.revealLayer', title: 'Reveal Layer', arguments: [this.uri.toString(), n.layer] };
    }
    return item;
  }

  getChildren(n?: TreeNode): TreeNode[] {
    return n ? n.children ?? [] : this.nodes;
  }
}

/** Shows `## Layer N` of a document at the top of its editor, the cursor on it. */
export async function revealLayer(uri: string | vscode.Uri, layer: number): Promise<void> {
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
