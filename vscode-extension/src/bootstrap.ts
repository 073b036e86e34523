// Finding a Python that runs the language server, or setting one up: the interpreters of `environment.ts` are probed
// in order; when none has the server, the extension's private environment (a virtual environment in its global
// storage, with the wheel the .vsix carries installed) is used, upgraded when the extension's version changed, or
// offered to be created.
import * as vscode from 'vscode';
import * as cp from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { Ctx, errorText } from './ctx';
import {
  Candidate,
  DISTRIBUTION,
  EnvStamp,
  PROBE,
  Probe,
  SOURCE_NAMES,
  bundledWheel,
  envState,
  interpreterCandidates,
  lastLine,
  pipStep,
  readProbe,
  venvPython,
  wheelIdentity,
} from './environment';

export type Found =
  | { ready: true; server: Candidate }
  /** No Python has the server. `base`: the first Python 3.11+ found, to set the private environment up with. */
  | { ready: false; base?: Candidate; tried: Array<{ candidate: Candidate; probe: Probe }> };

export function probe(python: string, cwd?: string): Promise<Probe> {
  return new Promise((resolve) => {
    cp.execFile(python, ['-c', PROBE], { timeout: 30000, cwd, windowsHide: true }, (err, stdout, stderr) => {
      const failure = err ? (lastLine(String(stderr)) || errorText(err)) : undefined;
      resolve(readProbe(String(stdout), failure));
    });
  });
}

let pythonEnvListener: vscode.Disposable | undefined;

/** The Python extension's active interpreter, when that extension is installed; watching it for changes. */
async function pythonExtensionInterpreter(ctx: Ctx, onChange: () => void): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) return undefined;
  try {
    const api: any = ext.isActive ? ext.exports : await ext.activate();
    const env = api?.environments;
    if (!pythonEnvListener && typeof env?.onDidChangeActiveEnvironmentPath === 'function') {
      pythonEnvListener = env.onDidChangeActiveEnvironmentPath(onChange);
      ctx.extension.subscriptions.push(pythonEnvListener!);
    }
    const p = env?.getActiveEnvironmentPath?.(vscode.workspace.workspaceFolders?.[0]?.uri);
    if (p?.path) return p.path;
    const details = api?.settings?.getExecutionDetails?.(vscode.workspace.workspaceFolders?.[0]?.uri);
    if (Array.isArray(details?.execCommand) && details.execCommand.length) return details.execCommand[0];
  } catch (e) {
    ctx.output.warn(`Python extension: no interpreter (${errorText(e)})`);
  }
  return undefined;
}

function privateEnv(ctx: Ctx): { dir: string; python: string; stamp: string } {
  const root = ctx.extension.globalStorageUri.fsPath;
  const dir = path.join(root, 'server-env');
  return { dir, python: venvPython(dir), stamp: path.join(root, 'server-env.json') };
}

function readStamp(file: string): EnvStamp | undefined {
  try {
    const s = JSON.parse(fs.readFileSync(file, 'utf8'));
    return typeof s?.extension === 'string' && typeof s?.wheel === 'string' ? s : undefined;
  } catch {
    return undefined;
  }
}

/** The wheel this .vsix carries, or undefined in a development build (`npm run package` puts it in `server/`). */
export function wheelOf(ctx: Ctx): string | undefined {
  const dir = path.join(ctx.extension.extensionPath, 'server');
  const files = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
  const w = bundledWheel(files);
  return w ? path.join(dir, w) : undefined;
}

/** The bundled wheel's identity (name and hash): the private environment is made again when it changes. */
function identityOf(wheel: string): string {
  return wheelIdentity(wheel, crypto.createHash('sha256').update(fs.readFileSync(wheel)).digest('hex'));
}

/**
 * Every Python to try, each probed, in order, up to the first that has the server. A Python in `crashed` (its server
 * stopped at start-up in this session) counts as one without the server: it can still make the private environment.
 */
async function probeCandidates(ctx: Ctx, onPythonChange: () => void, crashed: ReadonlySet<string>): Promise<Found> {
  const candidates = interpreterCandidates({
    setting: ctx.config().get('server.python'),
    workspaceFolders: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
    pythonExtension: await pythonExtensionInterpreter(ctx, onPythonChange),
    exists: (f) => fs.existsSync(f),
  });
  const tried: Array<{ candidate: Candidate; probe: Probe }> = [];
  for (const candidate of candidates) {
    let p = await probe(candidate.python, ctx.workspaceDir());
    if (p.status === 'server' && crashed.has(candidate.python)) p = { ...p, status: 'runs', detail: 'its server stopped at start-up' };
    ctx.output.info(`[bootstrap] ${candidate.python} (${SOURCE_NAMES[candidate.source]}): ${p.status}${p.version ? `, Python ${p.version}` : ''}${p.detail ? ` — ${p.detail}` : ''}`);
    if (p.status === 'server') return { ready: true, server: candidate };
    tried.push({ candidate, probe: p });
  }
  return { ready: false, base: tried.find((t) => t.probe.status === 'runs')?.candidate, tried };
}

/**
 * The Python to start the server with: the first candidate that has it; else the private environment, upgraded
 * first (with progress) when another version of the extension made it.
 */
export async function findServer(ctx: Ctx, onPythonChange: () => void, crashed: ReadonlySet<string>): Promise<Found> {
  const found = await probeCandidates(ctx, onPythonChange, crashed);
  if (found.ready) return found;
  const server = await privateServer(ctx, crashed);
  return server ? { ready: true, server } : found;
}

/** The private environment's Python, upgraded first when another version of the extension made it; else undefined. */
export async function privateServer(ctx: Ctx, crashed: ReadonlySet<string>): Promise<Candidate | undefined> {
  const env = privateEnv(ctx);
  const stamp = readStamp(env.stamp);
  const wheel = wheelOf(ctx);
  const state = fs.existsSync(env.python) ? envState(stamp, ctx.version, wheel && identityOf(wheel)) : 'missing';
  if (state === 'missing') return undefined;
  if (state === 'outdated') {
    ctx.output.info(`[bootstrap] the private environment was made by ${stamp ? `version ${stamp.extension}` : 'another version'}; upgrading it to ${ctx.version}`);
    if (!(await installServer(ctx, stamp?.python ?? env.python, 'upgrade'))) return undefined;
  }
  const p = await probe(env.python);
  ctx.output.info(`[bootstrap] ${env.python} (${SOURCE_NAMES.private}): ${p.status}${p.detail ? ` — ${p.detail}` : ''}`);
  return p.status === 'server' && !crashed.has(env.python) ? { python: env.python, source: 'private' } : undefined;
}

/** The Python to create the private environment with: the first candidate that is a Python 3.11+. */
export async function basePython(ctx: Ctx, crashed: ReadonlySet<string>): Promise<Candidate | Found> {
  const found = await probeCandidates(ctx, () => undefined, crashed);
  return !found.ready && found.base ? found.base : found;
}

/** Runs a process for the set-up, its output to the output channel and, line by line, to `onLine`. */
function run(ctx: Ctx, command: string, args: string[], token: vscode.CancellationToken, onLine: (l: string) => void): Promise<{ code: number | null; tail: string }> {
  return new Promise((resolve) => {
    ctx.output.info(`[set-up] ${command} ${args.join(' ')}`);
    const child = cp.spawn(command, args, { windowsHide: true, env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1', PYTHONUNBUFFERED: '1' } });
    let tail = '';
    const read = (stream: NodeJS.ReadableStream, err: boolean) =>
      readline.createInterface({ input: stream, crlfDelay: Infinity }).on('line', (l) => {
        (err ? ctx.output.warn : ctx.output.info).call(ctx.output, `[set-up] ${l}`);
        if (err && l.trim()) tail += l + '\n';
        onLine(l);
      });
    read(child.stdout, false);
    read(child.stderr, true);
    const cancel = token.onCancellationRequested(() => child.kill());
    child.on('error', (e) => {
      tail += errorText(e);
    });
    child.on('close', (code) => {
      cancel.dispose();
      resolve({ code, tail });
    });
  });
}

/**
 * Creates (`create`) or upgrades (`upgrade`) the private environment: `python -m venv` with `base`, then pip installs
 * the bundled wheel, its dependencies from the package index. The stamp, written last, marks it complete: an
 * environment left half-made by a failure or a cancel is made again next time. True when the server is installed.
 */
export async function installServer(ctx: Ctx, base: string, mode: 'create' | 'upgrade'): Promise<boolean> {
  const wheel = wheelOf(ctx);
  if (!wheel) {
    void vscode.window.showErrorMessage(
      'Streamed: this build of the extension carries no server package (a .vsix made by `npm run package` does). ' +
        `Install ${DISTRIBUTION} in a Python and set streamed.server.python to it.`,
      'Open Settings',
    ).then((c) => c && vscode.commands.executeCommand('workbench.action.openSettings', 'streamed.server.python'));
    return false;
  }
  const env = privateEnv(ctx);
  const title = mode === 'create' ? 'Setting up the Streamed language server' : `Upgrading the Streamed language server to ${ctx.version}`;
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title, cancellable: true },
    async (progress, token) => {
      const say = (message: string) => progress.report({ message });
      const step = (l: string) => {
        const m = pipStep(l);
        if (m) say(m);
      };
      fs.rmSync(env.stamp, { force: true });
      if (mode === 'create' || !fs.existsSync(env.python)) {
        fs.rmSync(env.dir, { recursive: true, force: true });
        fs.mkdirSync(path.dirname(env.dir), { recursive: true });
        say(`creating a virtual environment with ${base}`);
        const venv = await run(ctx, base, ['-m', 'venv', env.dir], token, () => undefined);
        if (venv.code !== 0) return { ok: false, why: `${base} -m venv failed: ${lastLine(venv.tail) || `exit ${venv.code}`}` };
      }
      say(`installing ${path.basename(wheel)} and its dependencies`);
      const pip = ['-m', 'pip', 'install', '--no-input'];
      const steps = mode === 'create' ? [[...pip, wheel]] : [[...pip, '--force-reinstall', '--no-deps', wheel], [...pip, wheel]];
      for (const args of steps) {
        const r = await run(ctx, env.python, args, token, step);
        if (token.isCancellationRequested) return { ok: false, why: 'cancelled' };
        if (r.code !== 0) return { ok: false, why: `pip failed: ${lastLine(r.tail) || `exit ${r.code}`}` };
      }
      const stamp: EnvStamp = { extension: ctx.version, wheel: identityOf(wheel), python: base };
      fs.writeFileSync(env.stamp, JSON.stringify(stamp, null, 2));
      say('done');
      return { ok: true, why: '' };
    },
  );
  if (result.ok) {
    ctx.output.info(`[set-up] the server is installed in ${env.dir}`);
    return true;
  }
  ctx.output.error(`[set-up] ${result.why}`);
  if (result.why !== 'cancelled') {
    void vscode.window
      .showErrorMessage(`Streamed: setting up the language server failed — ${result.why}`, 'Show Output', 'Open Settings')
      .then((c) => (c === 'Show Output' ? ctx.output.show() : c && vscode.commands.executeCommand('workbench.action.openSettings', 'streamed.server.python')));
  }
  return false;
}
