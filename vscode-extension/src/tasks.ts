// Tasks of type `streamed`: `streamed check FILE` under the deployment, target and checkpoint of the settings, run
// with the server's Python in a terminal of the extension's own (a pseudoterminal). One task per model program of the
// workspace; a tasks.json entry `{"type": "streamed", "file": "…"}` also works.
//
// What it finds goes to the Problems panel once: a file open in an editor is the language server's to report (it
// says the same thing, live), so the task reports only files that are not open, and forgets a file's problems when
// it is opened. Its terminal ends with a sentence — `2 errors and 1 warning in tiny.lgm` — and the check's exit
// status, never VS Code's "failed to launch" (which VS Code says of a terminal that ends within half a second).
import * as vscode from 'vscode';
import * as cp from 'node:child_process';
import * as path from 'node:path';
import { Ctx } from './ctx';
import { deploymentInputs } from './config';
import { CheckLine, checkSummary, parseCheckLine } from './check';

export const TASK_TYPE = 'streamed';

/** VS Code calls a terminal that ends sooner than this after it started one that failed to launch. */
const LAUNCH_MS = 500;

interface CheckDefinition extends vscode.TaskDefinition {
  type: 'streamed';
  /** the model program, absolute or relative to the workspace folder */
  file: string;
}

/** `streamed check` arguments for a file under the current settings. */
export function checkArgs(ctx: Ctx, file: string): string[] {
  const o = ctx.initOptions();
  const args = ['-m', 'streamed', 'check', file, '--mode', o.deployment.mode];
  for (const k of deploymentInputs(o.deployment.mode)) args.push(`--${k}`, String(o.deployment[k]));
  args.push('--target', o.target);
  if (o.checkpoint) args.push('--checkpoint', o.checkpoint);
  return args;
}

/** The problems the check tasks found, for the files no editor has open. */
export class CheckProblems implements vscode.Disposable {
  readonly collection = vscode.languages.createDiagnosticCollection('streamed check');
  private readonly subscriptions: vscode.Disposable[];

  constructor() {
    this.subscriptions = [vscode.workspace.onDidOpenTextDocument((d) => this.collection.delete(d.uri))];
  }

  /**
   * What one run of the check of `file` found (each line's file made absolute): it replaces what the last run said
   * of those files, and is kept only for files no editor has open (the server reports those).
   */
  set(file: string, lines: CheckLine[]): void {
    const byFile = new Map<string, vscode.Diagnostic[]>([[file, []]]);
    for (const l of lines) {
      const where = new vscode.Position(Math.max(0, l.line - 1), Math.max(0, l.column - 1));
      const d = new vscode.Diagnostic(new vscode.Range(where, where), l.message,
        l.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning);
      d.source = 'streamed check';
      byFile.set(l.file, [...(byFile.get(l.file) ?? []), d]);
    }
    const open = new Set(vscode.workspace.textDocuments.filter((d) => d.uri.scheme === 'file').map((d) => d.uri.fsPath));
    for (const [f, ds] of byFile) {
      const uri = vscode.Uri.file(f);
      if (open.has(uri.fsPath) || !ds.length) this.collection.delete(uri);
      else this.collection.set(uri, ds);
    }
  }

  dispose(): void {
    this.collection.dispose();
    for (const s of this.subscriptions) s.dispose();
  }
}

/** The terminal of one check: the command's output as it comes, then the sentence; the problems to `problems`. */
class CheckTerminal implements vscode.Pseudoterminal {
  private readonly written = new vscode.EventEmitter<string>();
  private readonly closed = new vscode.EventEmitter<number>();
  readonly onDidWrite = this.written.event;
  readonly onDidClose = this.closed.event;
  private child: cp.ChildProcess | undefined;

  constructor(private readonly python: string, private readonly args: string[], private readonly cwd: string | undefined,
              private readonly file: string, private readonly problems: CheckProblems) {}

  open(): void {
    const started = Date.now();
    const shown = path.basename(this.file);
    this.write(`streamed check ${shown}\n`);
    const lines: CheckLine[] = [];
    let tail = '';
    const take = (chunk: string, out: boolean) => {
      const text = tail + chunk;
      const parts = text.split('\n');
      tail = parts.pop() ?? '';
      for (const p of parts) {
        this.write(p + '\n');
        const l = out ? parseCheckLine(p) : undefined;
        if (l) lines.push({ ...l, file: path.resolve(this.cwd ?? path.dirname(this.file), l.file) });
      }
    };
    const child = cp.spawn(this.python, this.args, { cwd: this.cwd });
    this.child = child;
    child.stdout.setEncoding('utf8').on('data', (c: string) => take(c, true));
    child.stderr.setEncoding('utf8').on('data', (c: string) => take(c, false));
    const finish = (code: number, sentence: string) => {
      if (tail) take('\n', true);
      this.write(`\n${sentence}\n`);
      this.child = undefined;
      setTimeout(() => this.closed.fire(code), Math.max(0, LAUNCH_MS + 100 - (Date.now() - started)));
    };
    child.on('error', (e) => finish(2, `streamed check could not run ${this.python}: ${e.message}`));
    child.on('close', (code) => {
      if (code === 0 || code === 1) {
        this.problems.set(this.file, lines);
        finish(code, checkSummary(lines, shown));
      } else {
        finish(code ?? 2, `streamed check stopped (exit status ${code ?? 'unknown'}): its last line above says why`);
      }
    });
  }

  close(): void {
    this.child?.kill();
  }

  private write(text: string): void {
    this.written.fire(text.replace(/\r?\n/g, '\r\n'));
  }
}

export class CheckTasks implements vscode.TaskProvider {
  constructor(private readonly ctx: Ctx, private readonly problems: CheckProblems) {}

  private task(definition: CheckDefinition, scope: vscode.WorkspaceFolder | vscode.TaskScope): vscode.Task {
    const cwd = this.ctx.workspaceDir();
    const file = path.isAbsolute(definition.file) ? definition.file : path.resolve(cwd ?? '.', definition.file);
    const execution = new vscode.CustomExecution(async () =>
      new CheckTerminal(this.ctx.server?.python ?? 'python3', checkArgs(this.ctx, definition.file), cwd, file, this.problems));
    const task = new vscode.Task(definition, scope, `check ${definition.file}`, TASK_TYPE, execution, []);
    task.group = vscode.TaskGroup.Build;
    task.presentationOptions = { reveal: vscode.TaskRevealKind.Silent, clear: true };
    return task;
  }

  async provideTasks(): Promise<vscode.Task[]> {
    const files = await vscode.workspace.findFiles('**/*.lgm', '**/{node_modules,.venv,*.bundle}/**', 50);
    return files.map((f) => {
      const folder = vscode.workspace.getWorkspaceFolder(f);
      const file = folder ? path.relative(folder.uri.fsPath, f.fsPath) : f.fsPath;
      return this.task({ type: TASK_TYPE, file }, folder ?? vscode.TaskScope.Workspace);
    });
  }

  resolveTask(task: vscode.Task): vscode.Task | undefined {
    const d = task.definition as CheckDefinition;
    if (d.type !== TASK_TYPE || typeof d.file !== 'string' || !d.file) return undefined;
    return this.task(d, task.scope ?? vscode.TaskScope.Workspace);
  }
}
