// What every part of the extension shares: the extension's context, the output channel, the running language client
// (when there is one), the last analysis of each open document, and the helpers that read them.
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';
import { InitOptions, initOptions } from './config';
import { Analysis } from './kinds';
import { Candidate } from './environment';

export const LANG = 'streamed';

export class Ctx {
  /** The running client; undefined while the server is stopped, starting up, or missing. */
  client: LanguageClient | undefined;
  /** The Python the server runs with, once one was found. */
  server: Candidate | undefined;
  readonly analyses = new Map<string, Analysis>();
  /** Fires when an analysis arrives, the server starts or stops, or a setting changes: everything shown follows. */
  readonly changed = new vscode.EventEmitter<void>();

  constructor(readonly extension: vscode.ExtensionContext, readonly output: vscode.LogOutputChannel) {}

  get version(): string {
    return String(this.extension.extension.packageJSON.version ?? '0.0.0');
  }

  config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('streamed');
  }

  workspaceDir(): string | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  }

  initOptions(): InitOptions {
    const c = this.config();
    return initOptions((k) => c.get(k), this.workspaceDir());
  }

  running(): LanguageClient | undefined {
    return this.client?.isRunning() ? this.client : undefined;
  }

  async executeServerCommand<T>(command: string, args: unknown[], token?: vscode.CancellationToken, workDoneToken?: string): Promise<T> {
    const client = this.running();
    if (!client) throw new Error('the Streamed language server is not running');
    const params: any = { command, arguments: args };
    if (workDoneToken) params.workDoneToken = workDoneToken;
    return client.sendRequest(ExecuteCommandRequest.type, params, token) as Promise<T>;
  }

  analysisOf(uri: vscode.Uri): Analysis | undefined {
    return this.analyses.get(normalizeUri(uri.toString()));
  }
}

export function normalizeUri(u: string): string {
  try {
    return vscode.Uri.parse(u).toString();
  } catch {
    return u;
  }
}

/** The model program last active in an editor (kept by `rememberActive`), while it is open. */
let lastActive: string | undefined;

/** Called when the active editor changes: a model program, or a comparison of one, becomes the last active. */
export function rememberActive(editor: vscode.TextEditor | undefined): void {
  const doc = editor && modelOf(editor.document);
  if (doc) lastActive = doc.uri.toString();
}

/** The model program a text belongs to: itself, or — for a text of a comparison (`streamed-compare:`) — its source. */
function modelOf(doc: vscode.TextDocument): vscode.TextDocument | undefined {
  if (isModel(doc)) return doc;
  if (doc.uri.scheme !== 'streamed-compare') return undefined;
  const source = doc.uri.query.slice(doc.uri.query.indexOf('&') + 1);
  return vscode.workspace.textDocuments.find((d) => d.uri.toString() === source && isModel(d));
}

/**
 * The model program the user is working on: the active editor's (a comparison's source counts), else — when a
 * webview, the walkthrough, a panel or another file has the focus — the one last active while it is still open,
 * else a visible one, else the only one open.
 */
export function activeModelDocument(): vscode.TextDocument | undefined {
  const active = vscode.window.activeTextEditor;
  const mine = active && modelOf(active.document);
  if (mine) return mine;
  const open = vscode.workspace.textDocuments.filter(isModel);
  const last = open.find((d) => d.uri.toString() === lastActive);
  if (last) return last;
  const visible = vscode.window.visibleTextEditors.find((e) => isModel(e.document))?.document;
  return visible ?? (open.length === 1 ? open[0] : undefined);
}

/** Every open model program (for a command that must ask which, when none is active). */
export function openModelDocuments(): vscode.TextDocument[] {
  return vscode.workspace.textDocuments.filter(isModel);
}

/** A model program the server analyses: a file or an unsaved one, not a compare view's virtual text. */
export function isModel(doc: vscode.TextDocument): boolean {
  return doc.languageId === LANG && (doc.uri.scheme === 'file' || doc.uri.scheme === 'untitled');
}

export function errorText(e: unknown): string {
  if (e && typeof e === 'object' && 'message' in e) return String((e as Error).message);
  return String(e);
}

export function findColumn(doc: vscode.TextDocument): vscode.ViewColumn | undefined {
  return vscode.window.visibleTextEditors.find((e) => e.document === doc)?.viewColumn;
}
