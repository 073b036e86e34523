// What the extension says about the document in the status bar and the language status (the `{}` by the language
// mode): the kinds and layers of the active model program, the deployment it is analysed for (with a quick pick to
// change it), and whether the server runs.
import * as vscode from 'vscode';
import { Ctx, activeModelDocument } from './ctx';
import { NOT_INSTALLED, Server } from './client';
import { chipOf, deploymentSummary } from './config';
import { statusText } from './kinds';

export class Status implements vscode.Disposable {
  private readonly bar = vscode.window.createStatusBarItem('streamed.status', vscode.StatusBarAlignment.Left, 50);
  private readonly language = vscode.languages.createLanguageStatusItem('streamed.deployment', { language: 'streamed' });

  private chip: string | undefined;
  private state: string | undefined;

  constructor(private readonly ctx: Ctx, private readonly server: Server) {
    this.bar.name = 'Streamed';
    this.language.name = 'Streamed';
  }

  update(): void {
    const opts = this.ctx.initOptions();
    // Menus and palette entries whose titles follow the target read this key.
    const chip = chipOf(opts.target) ?? 'file';
    if (chip !== this.chip) void vscode.commands.executeCommand('setContext', 'streamed.chip', (this.chip = chip));
    this.language.detail = deploymentSummary(opts);
    this.language.command = { title: 'Change Deployment', command: 'streamed.client.chooseDeployment', tooltip: 'The deployment the server analyses and lowers for' };
    const doc = activeModelDocument();
    const why = this.server.stopped;
    const state = why === undefined ? 'running' : why === 'starting' ? 'starting' : 'stopped';
    if (state !== this.state) void vscode.commands.executeCommand('setContext', 'streamed.serverState', (this.state = state));
    if (why && why !== 'starting') {
      this.language.text = '$(warning) Streamed: not running';
      this.language.severity = vscode.LanguageStatusSeverity.Error;
      this.language.detail = why;
      this.language.command = { title: 'Show Output', command: 'streamed.client.showOutput' };
      if (!doc) return this.bar.hide();
      this.bar.text = '$(warning) Streamed';
      const notInstalled = why === NOT_INSTALLED;
      this.bar.tooltip = `Streamed: ${why} — click to ${notInstalled ? 'set it up' : 'restart it'}`;
      this.bar.command = notInstalled ? 'streamed.client.setUpServer' : 'streamed.client.restartServer';
      this.bar.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      this.bar.show();
      return;
    }
    const s = doc ? statusText(this.ctx.analysisOf(doc.uri)) : undefined;
    this.language.text = s ? s.text : '$(sync~spin) Streamed';
    this.language.severity = s?.error ? vscode.LanguageStatusSeverity.Error : vscode.LanguageStatusSeverity.Information;
    if (!doc) return this.bar.hide();
    this.bar.backgroundColor = undefined;
    if (!s) {
      this.bar.text = '$(sync~spin) Streamed';
      this.bar.tooltip = why === 'starting' ? 'Streamed: starting the language server…' : 'Streamed: analysing…';
      this.bar.command = 'streamed.layerKinds.focus';
    } else {
      this.bar.text = s.text;
      this.bar.tooltip = s.tooltip;
      this.bar.command = s.error ? 'workbench.actions.view.problems' : 'streamed.layerKinds.focus';
      this.bar.backgroundColor = s.error ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    }
    this.bar.show();
  }

  dispose(): void {
    this.bar.dispose();
    this.language.dispose();
  }
}
