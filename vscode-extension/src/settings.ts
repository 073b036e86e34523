// Settings → the server's initialization options, and the choice of the Python that runs the server.
// Pure: no `vscode` import, so the unit tests run under plain node.
import * as path from 'node:path';
import * as os from 'node:os';

export type Mode = 'forward' | 'decode' | 'prefill' | 'batched' | 'tp' | 'batched-tp';
export const MODES: readonly Mode[] = ['forward', 'decode', 'prefill', 'batched', 'tp', 'batched-tp'];

export interface Deployment {
  mode: Mode;
  ctx: number;
  chunk: number;
  batch: number;
  tp: number;
}

export interface InitOptions {
  target: string;
  deployment: Deployment;
  checkpoint: string | null;
  debounceMs: number;
}

/** Reads one setting of the `streamed` section (e.g. `get('deployment.ctx')`); undefined when unset. */
export type SettingGetter = (key: string) => unknown;

export const DEFAULTS: InitOptions = {
  target: 'sn50',
  deployment: { mode: 'decode', ctx: 4096, chunk: 512, batch: 8, tp: 2 },
  checkpoint: null,
  debounceMs: 150,
};

function positiveInt(v: unknown, fallback: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : fallback;
}

function nonNegativeInt(v: unknown, fallback: number): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : fallback;
}

/** `~`, `${workspaceFolder}` and relative paths, resolved against the first workspace folder. */
export function resolvePath(p: string, workspaceFolder: string | undefined): string {
  let s = p.trim();
  if (workspaceFolder) s = s.split('${workspaceFolder}').join(workspaceFolder);
  if (s === '~' || s.startsWith('~/')) s = path.join(os.homedir(), s.slice(1));
  if (!path.isAbsolute(s) && workspaceFolder) s = path.join(workspaceFolder, s);
  return s;
}

function looksLikePath(s: string): boolean {
  return s.includes('/') || s.includes('\\') || s.endsWith('.toml') || s.startsWith('~') || s.includes('${');
}

export function initOptions(get: SettingGetter, workspaceFolder?: string): InitOptions {
  const rawTarget = get('target');
  let target = typeof rawTarget === 'string' && rawTarget.trim() !== '' ? rawTarget.trim() : DEFAULTS.target;
  if (looksLikePath(target)) target = resolvePath(target, workspaceFolder);
  const rawMode = get('deployment.mode');
  const mode = MODES.includes(rawMode as Mode) ? (rawMode as Mode) : DEFAULTS.deployment.mode;
  const rawCheckpoint = get('checkpoint');
  const checkpoint =
    typeof rawCheckpoint === 'string' && rawCheckpoint.trim() !== '' ? resolvePath(rawCheckpoint, workspaceFolder) : null;
  return {
    target,
    deployment: {
      mode,
      ctx: positiveInt(get('deployment.ctx'), DEFAULTS.deployment.ctx),
      chunk: positiveInt(get('deployment.chunk'), DEFAULTS.deployment.chunk),
      batch: positiveInt(get('deployment.batch'), DEFAULTS.deployment.batch),
      tp: positiveInt(get('deployment.tp'), DEFAULTS.deployment.tp),
    },
    checkpoint,
    debounceMs: nonNegativeInt(get('debounceMs'), DEFAULTS.debounceMs),
  };
}

export type InterpreterSource = 'setting' | 'python-extension' | 'default';
export interface Interpreter {
  command: string;
  source: InterpreterSource;
}

/**
 * The Python that runs the server: `streamed.server.python` when set, else the Python extension's interpreter
 * when that extension is installed and has one, else `python3`.
 */
export function chooseInterpreter(
  setting: unknown,
  pythonExtensionInterpreter: string | undefined,
  workspaceFolder?: string,
): Interpreter {
  if (typeof setting === 'string' && setting.trim() !== '') {
    const s = setting.trim();
    // A bare command (`python3.11`) stays a command looked up on PATH; anything path-like is resolved.
    return { command: looksLikePath(s) ? resolvePath(s, workspaceFolder) : s, source: 'setting' };
  }
  if (pythonExtensionInterpreter && pythonExtensionInterpreter.trim() !== '') {
    return { command: pythonExtensionInterpreter.trim(), source: 'python-extension' };
  }
  return { command: 'python3', source: 'default' };
}

/** Quotes an argument for a POSIX shell (or PowerShell/cmd on Windows when `windows`). */
export function shellQuote(arg: string, windows = false): string {
  if (/^[A-Za-z0-9_\-+=.,/:@%]+$/.test(arg)) return arg;
  if (windows) return `"${arg.replace(/"/g, '""')}"`;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * The exact command that installs `streamed` into `python`: an editable install of the workspace's own checkout
 * when the workspace is the streamed project, else the package by name.
 */
export function installCommand(python: string, projectDir: string | undefined, windows = false): string {
  const py = shellQuote(python, windows);
  const what = projectDir ? `-e ${shellQuote(projectDir, windows)}` : 'streamed';
  return `${windows ? '& ' : ''}${py} -m pip install ${what}`;
}

/** Kinds of deployment and the numbers each one asks for. */
export function deploymentInputs(mode: Mode): Array<'ctx' | 'chunk' | 'batch' | 'tp'> {
  switch (mode) {
    case 'forward':
      return ['ctx'];
    case 'decode':
      return ['ctx'];
    case 'prefill':
      return ['ctx', 'chunk'];
    case 'batched':
      return ['ctx', 'batch'];
    case 'tp':
      return ['ctx', 'tp'];
    case 'batched-tp':
      return ['ctx', 'batch', 'tp'];
  }
}

export function validatePositiveInt(value: string): string | undefined {
  const v = value.trim();
  if (!/^\d+$/.test(v) || Number(v) <= 0) return 'a positive whole number';
  return undefined;
}

export interface LowerArgs {
  uri: string;
  mode: Mode;
  ctx?: number;
  chunk?: number;
  batch?: number;
  tp?: number;
  checkpoint?: string;
  target?: string;
  out?: string;
}

/** The argument of `streamed.lowerBundle` for the answers the user gave. */
export function lowerArgs(
  uri: string,
  mode: Mode,
  numbers: Partial<Record<'ctx' | 'chunk' | 'batch' | 'tp', number>>,
  checkpoint: string | null,
  target: string,
): LowerArgs {
  const args: LowerArgs = { uri, mode };
  for (const k of deploymentInputs(mode)) {
    const v = numbers[k];
    if (v !== undefined) args[k] = v;
  }
  if (checkpoint) args.checkpoint = checkpoint;
  if (target) args.target = target;
  return args;
}

/** The name of the document authored from a config: `llama/config.json` → `llama`, `x.gguf` → `x`, `y.json` → `y`. */
export function authoredName(src: string): string {
  const file = path.basename(src);
  if (file === 'config.json') return path.basename(path.dirname(src)) || 'model';
  return file.replace(/\.(gguf|json)$/i, '') || 'model';
}
