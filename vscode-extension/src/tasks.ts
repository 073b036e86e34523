// Tasks of type `streamed`: `streamed check FILE` under the deployment, target and checkpoint of the settings, run
// with the server's Python, its `path:line:col: error|warning: message` lines read by the `$streamed` problem matcher.
// One task per model program of the workspace; a tasks.json entry `{"type": "streamed", "file": "…"}` also works.
import * as vscode from 'vscode';
import * as path from 'node:path';
import { Ctx } from './ctx';
import { deploymentInputs } from './config';

export const TASK_TYPE = 'streamed';

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

export class CheckTasks implements vscode.TaskProvider {
  constructor(private readonly ctx: Ctx) {}

  private task(definition: CheckDefinition, scope: vscode.WorkspaceFolder | vscode.TaskScope): vscode.Task {
    const python = this.ctx.server?.python ?? 'python3';
    const execution = new vscode.ProcessExecution(python, checkArgs(this.ctx, definition.file), { cwd: this.ctx.workspaceDir() });
    const task = new vscode.Task(definition, scope, `check ${definition.file}`, TASK_TYPE, execution, '$streamed');
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
