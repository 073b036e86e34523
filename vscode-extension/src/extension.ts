// The Streamed extension, wired: the server (`client.ts`, which `bootstrap.ts` finds or sets up), the commands, the
// views (Layer Kinds, manifest, compare), the status items and the check tasks. Each part is its own file; this one
// only connects them to VS Code and to each other.
import * as vscode from 'vscode';
import { Ctx, activeModelDocument, isModel, normalizeUri, rememberActive } from './ctx';
import { Server } from './client';
import { Commands } from './commands';
import { CompareView, SCHEME } from './compareView';
import { KindsView, revealLayer } from './kindsView';
import { ManifestView, VIEW_TYPE } from './manifestView';
import { Status } from './status';
import { CheckProblems, CheckTasks, TASK_TYPE } from './tasks';

let server: Server | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const ctx = new Ctx(context, vscode.window.createOutputChannel('Streamed', { log: true }));
  server = new Server(ctx);
  const srv = server;
  const kinds = new KindsView(ctx);
  const manifests = new ManifestView(ctx);
  const compare = new CompareView(ctx);
  const commands = new Commands(ctx, manifests);
  const status = new Status(ctx, srv);
  const checkProblems = new CheckProblems();
  const lower = (arg?: unknown) => commands.lowerBundle(arg);
  const lowerWith = (arg?: unknown) => commands.lowerBundleWith(arg);
  const refreshKinds = () => kinds.refresh(activeModelDocument()?.uri);

  context.subscriptions.push(
    ctx.output,
    status,
    ctx.changed,
    ctx.changed.event(() => {
      status.update();
      kinds.follow();
    }),
    vscode.window.registerTreeDataProvider('streamed.layerKinds', kinds),
    vscode.window.registerWebviewPanelSerializer(VIEW_TYPE, manifests),
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, compare),
    checkProblems,
    vscode.tasks.registerTaskProvider(TASK_TYPE, new CheckTasks(ctx, checkProblems)),
    vscode.commands.registerCommand('streamed.client.lowerBundle', lower),
    vscode.commands.registerCommand('streamed.client.lowerBundleSN40L', lower),
    vscode.commands.registerCommand('streamed.client.lowerBundleForTarget', lower),
    vscode.commands.registerCommand('streamed.client.lowerBundleWith', lowerWith),
    vscode.commands.registerCommand('streamed.client.lowerBundleSN40LWith', lowerWith),
    vscode.commands.registerCommand('streamed.client.lowerBundleForTargetWith', lowerWith),
    vscode.commands.registerCommand('streamed.client.openLanguageReference', () => commands.openLanguageReference()),
    vscode.commands.registerCommand('streamed.client.openManifest', (arg) => commands.openManifest(arg)),
    vscode.commands.registerCommand('streamed.client.goToRepresentative', (arg) => commands.goToRepresentative(arg)),
    vscode.commands.registerCommand('streamed.client.compareWithRepresentative', (arg) => compare.compare(arg)),
    vscode.commands.registerCommand('streamed.client.authorModel', () => commands.authorModel()),
    vscode.commands.registerCommand('streamed.client.chooseDeployment', () => commands.chooseDeployment()),
    vscode.commands.registerCommand('streamed.client.restartServer', () => srv.restart(true)),
    vscode.commands.registerCommand('streamed.client.setUpServer', () => srv.setUp()),
    vscode.commands.registerCommand('streamed.client.showOutput', () => ctx.output.show()),
    vscode.commands.registerCommand('streamed.client.refreshKinds', refreshKinds),
    vscode.commands.registerCommand('streamed.client.revealLayer', revealLayer),
    vscode.commands.registerCommand('streamed.client.showKinds', () => vscode.commands.executeCommand('streamed.layerKinds.focus')),
    vscode.window.onDidChangeActiveTextEditor((e) => {
      rememberActive(e);
      ctx.changed.fire();
    }),
    vscode.workspace.onDidCloseTextDocument((d) => {
      if (isModel(d)) ctx.analyses.delete(normalizeUri(d.uri.toString()));
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration('streamed')) return;
      ctx.changed.fire();
      await srv.settingsChanged(e);
    }),
  );
  rememberActive(vscode.window.activeTextEditor);
  status.update();
  await srv.start();
}

export async function deactivate(): Promise<void> {
  await server?.deactivate();
}
