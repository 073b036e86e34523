#!/usr/bin/env node
// End-to-end tests in a real VS Code: code-server with the .vsix built from this checkout installed, driven in
// Debian's headless Chromium with playwright-core, the real language server behind it. Screenshots of every step go
// to e2e/artifacts/. The run fails — never skips — when something it needs is missing.
//
//   node e2e/run.mjs                      builds the .vsix (npm run package), installs it, runs every check
//   STREAMED_PYTHON=/path/python          a Python with the server (default: the repository's .venv): the .venv the
//                                         test workspace carries, and the Python that builds the wheel
//   STREAMED_E2E_DOC=path.lgm             the model to open (default: grammars/tests/snap/tiny.lgm)
//   STREAMED_E2E_KEEP=1                   keep the temporary workspaces and code-server profile
//   STREAMED_E2E_VSIX=path.vsix           install this .vsix instead of building one (the cleanup test)
//   STREAMED_E2E_ARTIFACTS=dir            where screenshots and logs go (default: e2e/artifacts)
//   CHROMIUM=path                         the browser (default: Debian's /usr/bin/chromium)
//
// Every check starts from a known editor state (`knownState`: nothing modal, no notification, no panel, the document
// it reads open alone, its analysis shown) and waits for what it reads — so one check's failure does not become the
// next one's. code-server, its processes and the temporary folder are removed on every exit path: the checks ending,
// a failure before them (Chromium that cannot start), an exception, Ctrl-C or SIGTERM.
//
// Windows (workspaces) in order: the main one, whose `.venv` has the server (no setting names a Python); a fresh one
// where no Python has it (Set Up Server makes the private environment from the bundled wheel); the same after the
// private environment is marked as made by an older version (it is upgraded); one whose Python crashes at start-up.
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.resolve(here, '..');
const repo = path.resolve(ext, '..');
const artifacts = process.env.STREAMED_E2E_ARTIFACTS ? path.resolve(process.env.STREAMED_E2E_ARTIFACTS) : path.join(here, 'artifacts');
const CS_VERSION = process.env.CODE_SERVER_VERSION || '4.100.3';
const cache = process.env.STREAMED_E2E_CACHE || path.join(here, '.cache');
const codeServer = path.join(cache, `code-server-${CS_VERSION}`, 'node_modules', '.bin', 'code-server');
const t0 = Date.now();
const log = (m) => console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);
const fail = (m) => {
  console.error(`e2e: FAILED before the checks: ${m}`);
  console.log('e2e: 0 passed, 1 failed');
  process.exit(1);
};

// ------------------------------------------------------------------------------------------------ the server's Python
const venvPython = path.join(repo, '.venv', 'bin', 'python');
const python = process.env.STREAMED_PYTHON || venvPython;
const probe = spawnSync(python, ['-c', 'import streamed_lsp.handlers'], { encoding: 'utf8' });
if (probe.status !== 0) {
  fail(`the language server does not import with ${python}: ${(probe.stderr || probe.error?.message || '').trim().split('\n').pop()}` +
    ' — run `make test` (it creates .venv) or set STREAMED_PYTHON to a Python with the project installed');
}
log(`server: streamed_lsp with ${python}`);
const bareBase = ['/usr/bin/python3', 'python3'].find((p) => spawnSync(p, ['-c', 'import venv, ensurepip'], { encoding: 'utf8' }).status === 0);
if (!bareBase) fail('no python3 that can make a virtual environment (Debian: apt-get install python3-venv)');
if (spawnSync(bareBase, ['-I', '-c', 'import streamed_lsp']).status === 0) fail(`${bareBase} already has the server: the first-run test needs a Python without it`);

// ------------------------------------------------------------------------------------------------ the .vsix
const vsix = process.env.STREAMED_E2E_VSIX ? path.resolve(process.env.STREAMED_E2E_VSIX) : path.join(ext, 'streamed.vsix');
if (!process.env.STREAMED_E2E_VSIX) {
  fs.rmSync(vsix, { force: true });
  execFileSync('npm', ['run', '-s', 'package'], { cwd: ext, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, STREAMED_PYTHON: python } });
}
const vsixFiles = execFileSync('unzip', ['-Z1', vsix], { encoding: 'utf8' }).split('\n').filter(Boolean);
const wheelInVsix = vsixFiles.find((f) => /^extension\/server\/streamed_lgm-.*\.whl$/.test(f));
if (!wheelInVsix) fail(`the .vsix carries no server wheel: ${vsixFiles.join(', ')}`);
const version = JSON.parse(fs.readFileSync(path.join(ext, 'package.json'), 'utf8')).version;
console.log(`package: streamed.vsix ${version}, ${vsixFiles.length} files, ${(fs.statSync(vsix).size / 1024).toFixed(0)} KiB, carrying ${path.basename(wheelInVsix)}`);

// ------------------------------------------------------------------------------------------------ lifetime
// Everything this run starts and makes is undone on every way out: `cleanup` is synchronous, so the `exit` event can
// run it (a thrown error, process.exit), and the signals run it before they end the run with 128 + N.
let cs; // code-server (the leader of its own process group: the extension hosts and language servers are in it)
let tmp; // the temporary folder: workspaces, profile, extensions, and the TMPDIR of everything this run starts
let browser; // Chromium, through Playwright
let cleaned = false;
/** What still runs from inside our temporary folder (Chromium's helpers, whose profile is in it): ours, by construction. */
function leftInTmp() {
  if (!tmp) return [];
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d) && Number(d) !== process.pid).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(tmp);
    } catch {
      return false;
    }
  }).map(Number);
}
function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}
function cleanup() {
  if (cleaned) return;
  cleaned = true;
  if (cs?.pid && groupAlive(cs.pid)) {
    try {
      process.kill(-cs.pid, 'SIGTERM');
    } catch {
      /* gone */
    }
    const pause = new Int32Array(new SharedArrayBuffer(4));
    for (let i = 0; i < 50 && groupAlive(cs.pid); i++) Atomics.wait(pause, 0, 0, 100);
    if (groupAlive(cs.pid)) {
      try {
        process.kill(-cs.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
  for (const pid of leftInTmp()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  if (tmp && !process.env.STREAMED_E2E_KEEP) fs.rmSync(tmp, { recursive: true, force: true });
  else if (tmp) console.log(`kept ${tmp}`);
}
process.on('exit', cleanup);
// The exit status a signal asked for: once set, the run ends with it — the checks that fail as the browser closes
// under them reach the end of the run before the handler's own exit, and must not end it with 1 (or 0).
let signalled;
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) {
  process.once(signal, async () => {
    signalled = code;
    log(`${signal}: closing the browser, stopping code-server and removing ${tmp ?? 'nothing'}`);
    await Promise.race([browser?.close().catch(() => undefined), new Promise((r) => setTimeout(r, 5000))]);
    cleanup();
    process.exit(code);
  });
}

// ------------------------------------------------------------------------------------------------ setup
execFileSync('bash', [path.join(here, 'setup.sh')], { stdio: 'inherit' });
fs.rmSync(artifacts, { recursive: true, force: true });
fs.mkdirSync(artifacts, { recursive: true });
tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'streamed-e2e-'));
// What code-server, Chromium and Playwright put in the temporary folder (sockets, profiles) goes inside ours.
process.env.TMPDIR = path.join(tmp, 'tmp');
// The servers the editor starts compile no kernels ahead in the background: the private environment's may be another
// numba's, and a minute of compiling would run beside the tests (streamed.numerics.ahead).
process.env.STREAMED_COMPILE_AHEAD = '0';
fs.mkdirSync(process.env.TMPDIR);

const userData = path.join(tmp, 'user-data');
const extensionsDir = path.join(tmp, 'extensions');
const workspace = path.join(tmp, 'workspace');
fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
fs.mkdirSync(workspace, { recursive: true });
const docSrc = process.env.STREAMED_E2E_DOC || path.join(repo, 'grammars', 'tests', 'snap', 'tiny.lgm');
const docName = path.basename(docSrc);
fs.copyFileSync(docSrc, path.join(workspace, docName));
// The workspace's own virtual environment: the Python that has the server (no setting names it).
const venvRoot = path.resolve(path.dirname(python), '..');
if (fs.existsSync(path.join(venvRoot, 'pyvenv.cfg'))) fs.symlinkSync(venvRoot, path.join(workspace, '.venv'), 'dir');
else {
  fs.mkdirSync(path.join(workspace, '.venv', 'bin'), { recursive: true });
  fs.symlinkSync(python, path.join(workspace, '.venv', 'bin', 'python'));
}
const globalStorage = path.join(userData, 'User', 'globalStorage', 'streamed.streamed');
fs.writeFileSync(
  path.join(userData, 'User', 'settings.json'),
  JSON.stringify(
    {
      'security.workspace.trust.enabled': false,
      'workbench.startupEditor': 'none',
      'workbench.tips.enabled': false,
      'workbench.enableExperiments': false,
      'workbench.editor.enablePreview': false,
      'extensions.ignoreRecommendations': true,
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'telemetry.telemetryLevel': 'off',
      'update.mode': 'none',
      'git.enabled': false,
      'search.exclude': { '**/.venv': true },
      'editor.codeLens': true,
      'editor.minimap.enabled': false,
      'editor.stickyScroll.enabled': true,
      'terminal.integrated.gpuAcceleration': 'off',
      'window.restoreWindows': 'none',
      'workbench.colorTheme': 'Default Dark Modern',
      'streamed.trace.server': 'verbose',
    },
    null,
    2,
  ),
);
const csConfig = path.join(tmp, 'code-server.yaml');
fs.writeFileSync(csConfig, 'auth: none\ncert: false\n');
const csArgs = ['--config', csConfig, '--user-data-dir', userData, '--extensions-dir', extensionsDir];
log('installing the .vsix');
execFileSync(codeServer, [...csArgs, '--install-extension', vsix], { stdio: 'inherit' });

const port = await new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const csLog = fs.openSync(path.join(artifacts, 'code-server.log'), 'w');
cs = spawn(
  codeServer,
  [...csArgs, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check',
    '--disable-workspace-trust', '--disable-getting-started-override', workspace],
  { stdio: ['ignore', csLog, csLog], detached: true, env: { ...process.env, PASSWORD: undefined } },
);
const base = `http://127.0.0.1:${port}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (let i = 0; ; i++) {
  try {
    const r = await fetch(`${base}/healthz`);
    if (r.ok) break;
  } catch {
    /* not up yet */
  }
  if (i > 120) fail('code-server did not start; see e2e/artifacts/code-server.log');
  await sleep(500);
}
log(`code-server up on ${base} (process group ${cs.pid}, in ${tmp})`);

// ------------------------------------------------------------------------------------------------ the checks' tools
const results = [];
let step = 0;
let page;
const consoleLines = [];
async function shot(name) {
  const file = path.join(artifacts, `${String(++step).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file });
  return file;
}
async function check(name, fn) {
  if (signalled !== undefined) return; // the run is being ended: no check starts
  const started = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    log(`PASS ${name} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
  } catch (e) {
    results.push({ name, ok: false, error: e });
    log(`FAIL ${name}: ${e?.message ?? e}`);
    await shot(`FAILED-${name.replace(/[^a-z0-9]+/gi, '-')}`).catch(() => undefined);
  }
}
/** `fn()` until it gives something truthy (every 100 ms), or an error naming `what`. */
async function waitFor(what, fn, timeout = 30000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (e?.fatal) throw e;
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (${last.message})` : ''}`);
}
const quickInput = () => page.locator('.quick-input-widget');
const quickInputText = () => page.locator('.quick-input-widget input');
/**
 * The quick input, opened from the command center of the title bar: a click works wherever the focus is (F1 or
 * Ctrl+P pressed while a webview — the walkthrough, the manifest — has the focus go to the webview).
 */
async function openQuickInput() {
  // (a click while the workbench moves the focus — a webview closing, an editor opening — can open the quick input and
  // see it closed at once: clicked again until it is open)
  await waitFor('the quick input to open', async () => {
    if (await quickInput().isVisible()) await page.keyboard.press('Escape');
    await page.locator('.command-center .command-center-center').first().click({ timeout: 5000 });
    await quickInputText().waitFor({ state: 'visible', timeout: 3000 });
    return true;
  }, 20000);
}
/**
 * Runs a command of the palette by its exact title. (A view that takes the focus as it opens — a manifest view a
 * lowering opened, a webview still loading after the check before — closes a palette opened a moment before: it is
 * opened again until the command is clicked. Each action in the attempt gives up within seconds once the palette is
 * gone, so the next attempt, not one action's default 30 s, is what waits; the attempts end when the palette offered
 * the command and it was clicked, or after two minutes of it being taken away.)
 */
async function runCommand(title) {
  const row = page.locator('.quick-input-list .monaco-list-row').filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) }) }).first();
  await waitFor(`the palette to offer ${title}`, async () => {
    await openQuickInput();
    await quickInputText().fill(`>${title}`, { timeout: 3000 });
    await row.waitFor({ state: 'visible', timeout: 5000 });
    await row.click({ timeout: 5000 });
    return true;
  }, 120000);
  await waitFor(`the palette to close after ${title}`, async () => !(await quickInput().isVisible()) || !((await quickInputText().inputValue()).startsWith('>')), 10000);
}
async function cursorPosition() {
  const t = await page.locator('.statusbar-item[id="status.editor.selection"]').innerText();
  const m = /Ln (\d+), Col (\d+)/.exec(t);
  return m ? { line: Number(m[1]), col: Number(m[2]) } : undefined;
}
/** The cursor on `line`:`col` (1-based) of the active editor, once the status bar says it is there. */
async function goToLine(line, col = 1) {
  await page.keyboard.press('Control+G');
  await quickInputText().waitFor({ state: 'visible' });
  await quickInputText().fill(`:${line}:${col}`);
  await waitFor('the go-to-line hint', async () => /line \d+/i.test(await quickInput().innerText()), 5000);
  await page.keyboard.press('Enter');
  await waitFor(`the cursor on ${line}:${col}`, async () => {
    const p = await cursorPosition();
    return p?.line === line && p?.col === col;
  }, 10000);
}

// The language servers of this VS Code: python processes running streamed_lsp, with their working directory (the
// window's workspace) and the interpreter they were started with (argv[0]).
function serverProcesses() {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).flatMap((pid) => {
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!argv.includes('streamed_lsp')) return [];
      return [{ pid: Number(pid), python: argv[0], cwd: fs.readlinkSync(`/proc/${pid}/cwd`) }];
    } catch {
      return [];
    }
  });
}
const serverPids = (cwd) => serverProcesses().filter((p) => p.cwd === cwd).map((p) => p.pid);
// What the extension wrote to an output channel, read from the files VS Code keeps them in (`<name>.log`).
function channelText(name) {
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === `${name}.log` || e.name.endsWith(`-${name}.log`)) out.push(fs.readFileSync(p, 'utf8'));
    }
  };
  const logs = path.join(userData, 'logs');
  if (fs.existsSync(logs)) walk(logs);
  return out.join('\n');
}
async function toasts() {
  return (await page.locator('.notification-toast').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
}
// The text the panel's editors show (the Output view's channel, among them).
// (Monaco renders spaces as no-break spaces.)
const panelText = () => page.evaluate(() => [...document.querySelectorAll('.part.panel .view-lines')].map((e) => e.innerText).join('\n').replace(/\u00a0/g, ' '));
/** Developer: Reload Window, waited for: the old page gone, the new workbench up. */
async function reloadWindow() {
  await page.evaluate(() => {
    window.__e2eBeforeReload = true;
  });
  await runCommand('Developer: Reload Window');
  await waitFor('the window to reload', async () => !(await page.evaluate(() => window.__e2eBeforeReload === true).catch(() => false)), 60000);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
}
const statusKinds = () => page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first();
const docText = fs.readFileSync(path.join(workspace, docName), 'utf8');
const docLines = docText.split('\n');
const docTitle = /^#\s+(.*)$/m.exec(docText)?.[1];
const lineOf = (re, from = 0, lines = docLines) => {
  for (let i = from; i < lines.length; i++) if (re.test(lines[i])) return i;
  return -1;
};
const layerHeadings = docLines.map((l, i) => (/^##\s*Layer\s+\d+/.test(l) ? i : -1)).filter((i) => i >= 0);

// ------------------------------------------------------------------------------------------------ a known editor state
let currentFolder;
/** The window on `folder` (a reload of VS Code's page on it), its explorer listing `doc`. */
async function openFolder(folder, doc) {
  await page.goto(`${base}/?folder=${encodeURIComponent(folder)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await page.locator('.explorer-folders-view .monaco-list-row', { hasText: doc }).first().waitFor({ timeout: 60000 });
  currentFolder = folder;
}
/** A modal dialog, if one is up, answered with `button` (the one that changes nothing, by default). */
async function dismissDialog(button = /^(Don't Save|Cancel|OK|Close)$/) {
  const dialog = page.locator('.monaco-dialog-box');
  if (await dialog.isVisible().catch(() => false)) await dialog.locator('.monaco-button', { hasText: button }).first().click();
}
/** `folder`'s workspace settings: exactly `settings` (written only when they differ, so nothing reloads for nothing). */
function workspaceSettings(folder, settings) {
  const file = path.join(folder, '.vscode', 'settings.json');
  const now = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined;
  const want = JSON.stringify(settings, null, 2);
  if (now === want || (now === undefined && !Object.keys(settings).length)) return false;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, want);
  return true;
}
/** The active editor group focused (the editor takes keys), without moving the cursor. */
async function focusEditor() {
  await runCommand('View: Focus Active Editor Group');
}
/** `doc` (a file of the open folder) in the active editor, through Quick Open, and focused. */
async function openDocument(doc) {
  const focused = page.locator('.quick-input-list .monaco-list-row.focused .label-name').first();
  // (its whole path: Quick Open lists that one file, not whatever else matches as the search results arrive; opened
  // again when something takes the quick input away before the file is first in it)
  await waitFor(`${doc} first in Quick Open`, async () => {
    if (!(await quickInput().isVisible()) || (await quickInputText().inputValue({ timeout: 1000 })) !== path.join(currentFolder, doc)) {
      await openQuickInput();
      await quickInputText().fill(path.join(currentFolder, doc), { timeout: 3000 });
    }
    return (await focused.textContent({ timeout: 1000 })).trim() === doc;
  }, 60000);
  await page.keyboard.press('Enter');
  await waitFor(`${doc} in the active editor`, async () => (await page.locator('.tab.active').first().innerText().catch(() => '')).includes(doc), 20000);
  await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().waitFor();
  await focusEditor();
}
/**
 * The state every check starts from, whatever the one before it left behind: no key held down, nothing modal or
 * half-open (a quick input, a menu, a hover, a dialog), no notification, the panel hidden, the workspace settings exactly `settings`,
 * `files` on disk as given (the documents a check edits), every editor closed and then `doc` open alone — and, once
 * the server has analysed it, its analysis shown in the status bar (`status`, when given, is what it must say).
 */
async function knownState({ folder = workspace, doc = docName, settings = {}, files = { [docName]: docText }, status } = {}) {
  for (const key of ['Control', 'Shift', 'Alt', 'Meta']) await page.keyboard.up(key); // a key press that threw holds none
  for (let i = 0; i < 3; i++) await page.keyboard.press('Escape');
  await dismissDialog();
  if (currentFolder !== folder) await openFolder(folder, doc);
  workspaceSettings(folder, settings);
  await runCommand('View: Close All Editors');
  await dismissDialog(/^Don't Save$/);
  await waitFor('every editor closed', async () => (await page.locator('.tab').count()) === 0, 10000);
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(folder, name);
    if (fs.existsSync(file) && fs.readFileSync(file, 'utf8') !== text) fs.writeFileSync(file, text);
  }
  await runCommand('Notifications: Clear All Notifications');
  if (await page.locator('.part.panel').isVisible().catch(() => false)) await runCommand('View: Hide Panel');
  if (!doc) return;
  await openDocument(doc);
  await waitFor(`the analysis of ${doc} in the status bar${status ? ` (${status})` : ''}`, async () => {
    const t = await statusKinds().innerText().catch(() => '');
    return status ? status.test(t) : /\d+ kinds? · \d+ layers?/.test(t) && !/refused/.test(t);
  }, 60000);
}

/** The rows of a tree in the side bar (`pane`: the Layer Kinds view, the Outline…) as `[level, text, tooltip]`. */
const treeRows = (pane) => pane.locator('.monaco-list-row').evaluateAll((rows) => rows.map((r) => [Number(r.getAttribute('aria-level')), r.innerText.replace(/\s+/g, ' ').trim(), r.getAttribute('aria-label') ?? '']));
/** The Layer Kinds view, shown (the Streamed container of the activity bar). */
async function kindsView() {
  await runCommand('Streamed: Show Layer Kinds');
  const pane = page.locator('.part.sidebar .pane', { has: page.locator('.pane-header', { hasText: 'Layer Kinds' }) });
  await pane.waitFor({ timeout: 10000 });
  return pane;
}
/** The Problems panel's rows (its level-2 rows: the problems, under their files), as text; the panel shown first. */
async function problems() {
  if (!(await page.locator('.markers-panel').isVisible().catch(() => false))) await runCommand('View: Focus Problems (Errors, Warnings, Infos)');
  return (await page.locator('.markers-panel .monaco-list-row[aria-level="2"]').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
}
/** The colour a word is drawn in, in the active editor's `line` (1-based), or undefined while it is not on screen. */
const wordColour = (line, word, nth = 0) => page.evaluate(([line, word, nth]) => {
  const ed = document.querySelector('.editor-group-container.active .monaco-editor');
  const top = [...ed.querySelectorAll('.margin-view-overlays .line-numbers')].find((n) => n.textContent.trim() === String(line));
  if (!top) return undefined;
  const y = top.closest('[style*="top"]').style.top;
  const row = [...ed.querySelectorAll('.view-lines > .view-line')].find((l) => l.style.top === y);
  const spans = row ? [...row.querySelectorAll('span > span')].filter((s) => s.textContent === word) : [];
  return spans[nth] ? getComputedStyle(spans[nth]).color : undefined;
}, [line, word, nth]);
/** The left edge (px) of the `nth` `word` in each of the active editor's lines `lines` (1-based) that are on screen. */
const wordLefts = (lines, word) => page.evaluate(([lines, word]) => {
  const ed = document.querySelector('.editor-group-container.active .monaco-editor');
  const out = {};
  for (const n of ed.querySelectorAll('.margin-view-overlays .line-numbers')) {
    const line = Number(n.textContent.trim());
    if (!lines.includes(line)) continue;
    const y = n.closest('[style*="top"]').style.top;
    const row = [...ed.querySelectorAll('.view-lines > .view-line')].find((l) => l.style.top === y);
    const span = row && [...row.querySelectorAll('span > span')].find((s) => s.textContent === word);
    if (span) out[line] = Math.round(span.getBoundingClientRect().left);
  }
  return out;
}, [lines, word]);
/** The diff editor's marked lines: `left` as the original marks them deleted, `right` as the modified marks them added. */
const diffMarks = () => page.evaluate(() => {
  const side = (cls, mark) => {
    const ed = document.querySelector(`.monaco-diff-editor .editor.${cls}`);
    if (!ed) return undefined;
    const tops = new Set([...ed.querySelectorAll('.view-overlays > div')].filter((d) => d.querySelector(`.${mark}`)).map((d) => d.style.top));
    return [...ed.querySelectorAll('.view-lines > .view-line')].filter((l) => tops.has(l.style.top)).map((l) => l.textContent.replace(/\u00a0/g, ' ').trim());
  };
  return { left: side('original', 'line-delete'), right: side('modified', 'line-insert') };
});
/** Right-click on the cursor's line of the active editor: the editor's context menu, its entries' labels. */
async function contextMenu() {
  const { line } = await cursorPosition();
  const y = await page.evaluate((line) => {
    const ed = document.querySelector('.editor-group-container.active .monaco-editor');
    const n = [...ed.querySelectorAll('.margin-view-overlays .line-numbers')].find((x) => !x.closest('.sticky-widget') && x.textContent.trim() === String(line));
    const r = n.getBoundingClientRect();
    return r.top + r.height / 2;
  }, line);
  // (past the end of the line's text: a click on an inlay hint is the hint's)
  const editor = await page.locator('.editor-group-container.active .monaco-editor').first().boundingBox();
  await page.mouse.click(editor.x + editor.width - 80, y, { button: 'right' });
  const menu = page.locator('.monaco-menu').first();
  await menu.waitFor({ timeout: 10000 });
  return (await menu.locator('.action-label').allInnerTexts()).map((t) => t.trim()).filter(Boolean);
}
/** Runs the entry `label` of the open context menu (a click that lands while the menu still opens is ignored by it:
 * the entry is clicked until the menu closes). */
async function menuEntry(label) {
  const menu = page.locator('.monaco-menu').first();
  const entry = menu.locator('.action-label', { hasText: new RegExp(`^${label}$`) });
  await waitFor(`the menu's ${label} to run`, async () => {
    if (!(await menu.isVisible())) return true;
    await entry.click({ timeout: 2000 }).catch(() => undefined);
    return false;
  }, 10000);
}

// ------------------------------------------------------------------------------------------------ the pictures
// The manifest view's chip, memory and roofline (drawn by the server from the bundle, rendered in the webview): each
// is there, with its labels as text a person reads; a chip region says and reveals its statement; a run of layers
// folds out. Then a new user's path: open examples/qwen3.8.lgm, lower it, see the three pictures.
async function shownManifest(title) {
  for (const f of page.frames()) {
    if ((await f.locator('#layers').count().catch(() => 0)) === 0) continue;
    if (!title || (await f.locator('h1').first().textContent({ timeout: 1000 }).catch(() => '')).includes(title)) return f;
  }
  return undefined;
}
const manifestFrame = (title, timeout = 60000) =>
  waitFor(`the manifest webview${title ? ` of ${title}` : ''}`, () => shownManifest(title), timeout);
const svgTexts = (frame, selector) => frame.locator(`${selector} svg text`).allTextContents();
async function picturesDrawn(frame, kindNames) {
  await frame.locator('#chip svg.floorplan').first().waitFor({ state: 'attached', timeout: 60000 });
  const tabs = (await frame.locator('.chip-tab').allInnerTexts()).map((t) => t.trim());
  for (const k of kindNames) if (!tabs.includes(k)) throw new Error(`no chip tab for the kind ${k}: ${tabs.join(', ')}`);
  const shown = frame.locator('.chip-pane:not([hidden]) svg.floorplan');
  if ((await shown.count()) !== 1) throw new Error(`${await shown.count()} floorplans shown`);
  const chipText = (await shown.locator('text').allTextContents()).join(' | ');
  for (const want of [/PCUs: [\d,]+ of [\d,]+ used/, /PMUs: [\d,]+ of [\d,]+ used/, /phases/, /Let \w+ be /]) {
    if (!want.test(chipText)) throw new Error(`the chip says no ${want}: ${chipText.slice(0, 300)}`);
  }
  let box;
  await waitFor('the floorplan laid out', async () => {
    box = await shown.boundingBox();
    return box && box.width >= 400 && box.height >= 300;
  }, 30000).catch(() => {
    throw new Error(`the floorplan is ${JSON.stringify(box)}`);
  });
  await frame.locator('#memory[data-drawn="true"] svg').waitFor({ timeout: 60000 });
  const memory = (await svgTexts(frame, '#memory')).join(' | ');
  for (const tier of ['SRAM', 'HBM', 'DDR']) if (!new RegExp(`${tier} · `).test(memory)) throw new Error(`the memory has no ${tier} bar: ${memory.slice(0, 300)}`);
  for (const k of kindNames) if (!memory.includes(`: ${k}`)) throw new Error(`the memory names no part of ${k}: ${memory.slice(0, 400)}`);
  await frame.locator('#roofline[data-drawn="true"] svg').waitFor({ timeout: 60000 });
  const roofline = (await svgTexts(frame, '#roofline')).join(' | ');
  for (const want of [/tokens\/s · (memory|compute)-bound/, /BF16 peak/, /HBM/, /tokens\/s by batch/]) {
    if (!want.test(roofline)) throw new Error(`the roofline says no ${want}: ${roofline.slice(0, 300)}`);
  }
  const spills = await frame.locator('#spills li').allInnerTexts();
  if (!spills.length) throw new Error('the memory says nothing about what spills');
  // Readable: every picture's labels are laid out (a text node with no size would be one nobody can read).
  for (const id of ['#memory', '#roofline']) {
    let b;
    await waitFor(`${id}'s labels laid out`, async () => {
      b = await frame.locator(`${id} svg text`).filter({ hasText: /\S/ }).first().boundingBox();
      return b && b.width > 0 && b.height > 0;
    }, 30000).catch(() => {
      throw new Error(`${id}'s labels have no size: ${JSON.stringify(b)}`);
    });
  }
  return { tabs, chipText, memory, roofline, spills };
}

// Whole: every element of the three pictures (the shown chip, the memory, the roofline) lies inside the view's box
// and no picture scrolls sideways — once they are drawn for the view's width (the server draws each to fit it).
async function picturesWhole(frame, where) {
  await waitFor(`the pictures drawn for the view's width (${where})`, () => frame.evaluate(() => {
    const chip = document.querySelector('.chip-pane:not([hidden]) svg.floorplan');
    const box = document.getElementById('chip');
    return Boolean(chip && box && Math.abs(Number(chip.getAttribute('width')) - box.clientWidth) < 24 &&
      document.querySelector('#memory[data-drawn="true"] svg') && document.querySelector('#roofline[data-drawn="true"] svg'));
  }).catch(() => false), 60000);
  const out = await frame.evaluate(() => {
    const view = document.documentElement.clientWidth;
    const bad = [];
    for (const id of ['chip', 'memory', 'roofline']) {
      const root = document.getElementById(id);
      if (root.scrollWidth > root.clientWidth + 1) bad.push(`#${id} scrolls sideways: ${root.scrollWidth} > ${root.clientWidth}`);
      const shown = root.querySelectorAll(id === 'chip' ? '.chip-pane:not([hidden]) svg *' : 'svg *');
      for (const el of shown) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (r.left < -1 || r.right > view + 1) {
          bad.push(`#${id} <${el.tagName}> "${(el.textContent || '').trim().slice(0, 40)}" at ${Math.round(r.left)}–${Math.round(r.right)}`);
        }
      }
    }
    return { view, bad: bad.slice(0, 6), count: bad.length };
  });
  if (out.count) throw new Error(`${where}: ${out.count} elements outside the view's ${out.view} px: ${out.bad.join('; ')}`);
  log(`  ${where}: every element of the three pictures inside the view's ${out.view} px`);
  return out.view;
}

async function checkPictures() {
  await check('the manifest view draws the chip, the memory and the roofline from the bundle', async () => {
    await knownState();
    await runCommand('Streamed: Open Manifest');
    const frame = await manifestFrame();
    const bundle = JSON.parse(fs.readFileSync(path.join(workspace, docName.replace(/\.lgm$/, '.bundle'), 'manifest.json'), 'utf8'));
    const kinds = bundle.kinds.map((k) => k.name);
    const drawn = await picturesDrawn(frame, kinds);
    log(`  chip tabs: ${drawn.tabs.join(' | ')}; spills: ${drawn.spills[0].slice(0, 80)}`);
    // The layer rows fold into runs: a run's summary opens into its layers.
    const runRow = frame.locator('tr.run-row').first();
    if ((await runRow.count()) === 1) {
      const before = await frame.locator('tr.layer-row:visible').count();
      await runRow.click();
      await waitFor('the run to fold out', async () => (await frame.locator('tr.layer-row:visible').count()) > before, 10000);
      await runRow.click();
    }
    // A chip region says its statement on hover and reveals it in the document on a click.
    const regions = frame.locator('.chip-pane:not([hidden]) g.region[data-line]');
    const sizes = await regions.evaluateAll((gs) => gs.map((g) => g.getBoundingClientRect().width * g.getBoundingClientRect().height));
    const region = regions.nth(sizes.indexOf(Math.max(...sizes))); // the largest: where a person's pointer lands
    const line = Number(await region.getAttribute('data-line'));
    await region.locator('rect').first().hover();
    const tip = frame.locator('#chip-hover.visible');
    await tip.waitFor({ timeout: 10000 });
    const said = await tip.innerText();
    if (!said.includes(`line ${line}: `) || !/Let |Set |Return /.test(said)) throw new Error(`the region's hover says ${said}`);
    await shot('manifest-chip-hover');
    await region.locator('rect').first().click();
    await waitFor(`the cursor on line ${line}`, async () => (await cursorPosition())?.line === line, 20000);
    log(`  region → line ${line}: ${said.split('\n').pop().slice(0, 80)}`);
  });

  await check('a new user opening examples/qwen3.8.lgm and lowering it sees the chip, the memory and the roofline', async () => {
    const name = 'qwen3.8.lgm';
    fs.copyFileSync(path.join(repo, 'examples', name), path.join(workspace, name));
    await knownState({ doc: name, status: /2 kinds · 64 layers/ });
    await runCommand('Streamed: Lower SN50 Bundle');
    // One step: the deployment of the settings, no question asked, until the manifest of qwen3.8 is shown.
    const frame = await waitFor('the manifest of qwen3.8', async () => {
      if (await quickInput().isVisible()) throw Object.assign(new Error(`a question was asked: ${await quickInput().innerText()}`), { fatal: true });
      return shownManifest('qwen3.8');
    }, 180000);
    const bundle = JSON.parse(fs.readFileSync(path.join(workspace, 'qwen3.8.bundle', 'manifest.json'), 'utf8'));
    const drawn = await picturesDrawn(frame, ['gated deltanet', 'attention']);
    if (!drawn.tabs.join(' ').includes('gated deltanet')) throw new Error(drawn.tabs.join(', '));
    const tokens = `${Number(bundle.estimate.tokens_per_second).toPrecision(3).replace(/\.?0+$/, '')} tokens/s`;
    if (!drawn.roofline.includes(tokens)) throw new Error(`the roofline does not say ${tokens}: ${drawn.roofline.slice(0, 200)}`);
    const run = await frame.locator('tr.run-row td').nth(1).innerText();
    if (!/\(gated deltanet ×3 · attention\) ×16/.test(run)) throw new Error(`the layers read ${run}`);
    // Whole at two panel widths: beside the document (where the view opens), then the whole window.
    const beside = await picturesWhole(frame, 'beside the document');
    await frame.evaluate(() => document.getElementById('chip')?.scrollIntoView());
    await shot('pictures-beside-the-document');
    // The picture for the README: the manifest view alone, tall enough for the three pictures, from the chip down.
    await runCommand('Notifications: Clear All Notifications');
    await runCommand('View: Toggle Maximize Editor Group');
    await page.setViewportSize({ width: 1600, height: 2000 });
    await waitFor('the view laid out at its new height', async () => (await frame.evaluate(() => window.innerHeight)) > 1500, 20000);
    const full = await picturesWhole(frame, 'the whole window');
    if (full < beside + 200) throw new Error(`the view is ${full} px wide maximized and ${beside} px beside the document`);
    const chipAtTop = () => frame.evaluate(() => {
      const h = [...document.querySelectorAll('h2')].find((x) => x.textContent === 'Chip');
      if (!h) return false;
      window.scrollTo(0, h.offsetTop - 8);
      return Math.abs(h.getBoundingClientRect().top - 8) < 2;
    });
    await waitFor('the view scrolled to the chip', chipAtTop, 20000);
    await shot('manifest-pictures');
    fs.copyFileSync(path.join(artifacts, `${String(step).padStart(2, '0')}-manifest-pictures.png`), path.join(artifacts, 'manifest-pictures.png'));
    await page.setViewportSize({ width: 1600, height: 1000 });
    await waitFor('the view laid out at its height again', async () => (await frame.evaluate(() => window.innerHeight)) < 1500, 20000);
    await runCommand('View: Toggle Maximize Editor Group');
    log(`  qwen3.8: ${tokens}; ${run}`);
  });
}

// A picture for the walkthrough (media/walkthrough/NAME.png), from this run: written to artifacts/walkthrough/, to be
// copied over the shipped one when the view it shows changes.
async function walkthroughShot(name, clip) {
  fs.mkdirSync(path.join(artifacts, 'walkthrough'), { recursive: true });
  await page.screenshot({ path: path.join(artifacts, 'walkthrough', `${name}.png`), clip });
}

// ================================================================================================ the checks
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  page = await context.newPage();
  page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
  log('opening VS Code');
  await openFolder(workspace, docName);

  await check("the workspace's .venv runs the server, with no setting naming a Python", async () => {
    const [server] = await waitFor('the server process', async () => {
      const p = serverProcesses().filter((x) => x.cwd === workspace);
      return p.length ? p : undefined;
    }, 60000);
    if (server.python !== path.join(workspace, '.venv', 'bin', 'python')) throw new Error(`the server runs with ${server.python}`);
    await waitFor('the output to say where the Python came from', async () =>
      channelText('Streamed').includes(`server Python: ${path.join(workspace, '.venv', 'bin', 'python')} (the workspace's virtual environment)`), 20000);
    log(`  server ${server.pid}: ${server.python}`);
  });

  await check('the model opens with highlighting applied', async () => {
    await knownState();
    await waitFor('the language mode to be the model language', async () =>
      /Streamed model program/.test(await page.locator('.statusbar-item[id="status.editor.mode"]').innerText()));
    // Tokens are coloured by the grammar: `Let` (keyword), a name and an operation in different colours.
    const colours = await waitFor('coloured tokens', async () => {
      const c = await page.evaluate(() => {
        const out = {};
        for (const span of document.querySelectorAll('.monaco-editor .view-lines .view-line span span')) {
          const t = span.textContent.trim();
          if (['Let', 'rmsnorm', 'weight', 'Return', '64', '--'].includes(t) && !out[t]) out[t] = getComputedStyle(span).color;
        }
        return out;
      });
      return c.Let && c.weight && c.Let !== c.weight ? c : undefined;
    });
    const distinct = new Set(Object.values(colours));
    if (distinct.size < 3) throw new Error(`expected at least 3 token colours, got ${JSON.stringify(colours)}`);
    await shot('highlighting');
  });

  await check('the status bar shows kinds and layers', async () => {
    await knownState();
    const text = await statusKinds().innerText();
    if (!new RegExp(`· ${layerHeadings.length} layers`).test(text)) throw new Error(`status bar says "${text}"`);
    log(`  status bar: ${text.trim()}`);
  });

  await check('a code lens on a layer header names its kind', async () => {
    await knownState();
    const lens = page.locator('.codelens-decoration', { hasText: /· \d+ layers? · first: layer \d+/ }).first();
    await lens.waitFor({ timeout: 60000 });
    log(`  code lens: ${(await lens.innerText()).trim()}`);
    await shot('code-lens');
  });

  await check('the Layer Kinds view has the side bar, reads whole, and reveals a layer', async () => {
    await knownState();
    const pane = await kindsView();
    // Its own container: expanded, the side bar's height, not a collapsed strip under the explorer's folders.
    if ((await pane.locator('.pane-header').getAttribute('aria-expanded')) === 'false') throw new Error('the view is collapsed');
    const height = (await pane.boundingBox()).height;
    if (height < 400) throw new Error(`the view is ${height} px high`);
    await waitFor('kind rows', async () => (await treeRows(pane)).some(([level]) => level === 1), 30000);
    const rows = await treeRows(pane);
    const kinds = rows.filter(([level]) => level === 1);
    log(`  kinds: ${kinds.map(([, t]) => t).join(' | ')}`);
    if (!kinds.some(([, t]) => /attention/.test(t))) throw new Error(`no attention kind in ${JSON.stringify(kinds)}`);
    // Every label and description is read whole (nothing cut with an ellipsis); the tooltip has the rest.
    const cut = await pane.locator('.monaco-list-row .monaco-icon-label-container').evaluateAll((els) =>
      els.filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent));
    if (cut.length) throw new Error(`cut rows: ${JSON.stringify(cut)}`);
    for (const [, text, tooltip] of kinds) {
      if (!/^\d+ layers?: [\d–, ]+\nfirst: layer \d+, its representative$/m.test(tooltip.split('\n').slice(1).join('\n'))) {
        throw new Error(`the tooltip of "${text}" is ${JSON.stringify(tooltip)}`);
      }
    }
    await walkthroughShot('kinds', { x: 48, y: 30, width: 560, height: 330 });
    // Clicking a layer reveals its heading: the last layer row.
    const layerRows = pane.locator('.monaco-list-row[aria-level="2"]', { hasText: /^Layer \d+/ });
    const texts = await layerRows.allInnerTexts();
    const n = Number(/Layer (\d+)/.exec(texts[texts.length - 1])[1]);
    const heading = lineOf(new RegExp(`^##\\s*Layer\\s+${n}(?![0-9])`));
    await layerRows.nth(texts.length - 1).click();
    await waitFor(`the cursor on ## Layer ${n}`, async () => (await cursorPosition())?.line === heading + 1);
    await shot('layer-kinds-view');
  });

  await check('outline, breadcrumbs and sticky scroll follow the layers in document order', async () => {
    await knownState();
    const third = layerHeadings[3];
    await goToLine(third + 6, 1);
    const crumbs = await waitFor('the breadcrumbs of layer 3', async () => {
      const t = (await page.locator('.editor-group-container.active .breadcrumbs-control').first().innerText()).replace(/\s+/g, ' ');
      return /Layer 3$/.test(t) ? t : undefined;
    }, 20000);
    log(`  breadcrumbs: ${crumbs}`);
    // The outline: the sections in the order of the text, each layer once, with its kind.
    await runCommand('Explorer: Focus on Outline View');
    const folders = page.locator('.pane-header', { hasText: new RegExp(`^${path.basename(workspace)}`, 'i') }).first();
    if ((await folders.getAttribute('aria-expanded')) === 'true') await folders.click();
    const outline = page.locator('.part.sidebar .pane', { has: page.locator('.pane-header', { hasText: /^Outline/i }) });
    await outline.locator('.pane-header').hover();
    await outline.locator('.pane-header .action-label[aria-label*="Collapse"]').click();
    const want = ['Model', 'Embed', ...layerHeadings.map((h) => `Layer ${/Layer (\d+)/.exec(docLines[h])[1]}`), 'Head'];
    const got = await waitFor('the outline', async () => {
      const r = (await treeRows(outline)).filter(([level]) => level === 1).map(([, t]) => t);
      return r.length === want.length ? r : undefined;
    }, 20000);
    if (!got.every((t, i) => t.startsWith(want[i]))) throw new Error(`the outline is ${JSON.stringify(got)}`);
    if (!/^Layer 3attention/.test(got[5])) throw new Error(`layer 3's outline entry is "${got[5]}"`);
    // Sticky scroll: scrolled into layer 3, its heading stays on top.
    await focusEditor();
    await goToLine(third + 1, 1);
    // Scroll (the view, not the cursor) until the heading is three lines above the top.
    const top = await page.evaluate(() => Math.min(...[...document.querySelectorAll('.editor-group-container.active .margin-view-overlays .line-numbers')]
      .filter((n) => !n.closest('.sticky-widget')).map((n) => Number(n.textContent.trim())).filter((n) => n > 0)));
    for (let i = top; i < third + 1 + 3; i++) await page.keyboard.press('Control+ArrowDown');
    const sticky = page.locator('.editor-group-container.active .sticky-widget').first();
    await waitFor('## Layer 3 in the sticky scroll', async () => (await sticky.innerText().catch(() => '')).replace(/\u00a0/g, ' ').includes('## Layer 3'), 20000);
    await shot('outline-breadcrumbs-sticky');
  });

  await check('the editor’s context menu has the Streamed entries in code-server, and goes to the representative', async () => {
    await knownState();
    const second = layerHeadings[1];
    await goToLine(second + 5, 5);
    const labels = await contextMenu();
    for (const want of ['Go to Representative Layer', 'Compare Layer with Representative', 'Lower SN50 Bundle', 'Lower SN50 Bundle With…']) {
      if (!labels.includes(want)) throw new Error(`no "${want}" in ${JSON.stringify(labels)}`);
    }
    await menuEntry('Go to Representative Layer');
    const after = await waitFor('the cursor to move', async () => {
      const p = await cursorPosition();
      return p && p.line !== second + 5 ? p : undefined;
    }, 20000);
    if (!(after.line - 1 >= layerHeadings[0] && after.line - 1 < layerHeadings[1])) throw new Error(`the cursor went to line ${after.line}, not into the first layer`);
  });

  await check('Go to Representative moves the cursor to the representative layer', async () => {
    await knownState();
    // A line inside a layer that is not its kind's representative: the second layer's 5th line.
    const target = layerHeadings[1] + 5;
    await goToLine(target + 1, 5);
    await runCommand('Streamed: Go to Representative Layer');
    const after = await waitFor('the cursor to move', async () => {
      const p = await cursorPosition();
      return p && p.line !== target + 1 ? p : undefined;
    }, 20000);
    const inFirst = after.line - 1 >= layerHeadings[0] && after.line - 1 < layerHeadings[1];
    log(`  cursor ${target + 1}:5 → ${after.line}:${after.col}`);
    if (!inFirst) throw new Error(`cursor went to line ${after.line}, not into the first layer`);
    await shot('go-to-representative');
  });

  await check('a mistyped word is one problem: no unbound name, no divergence derived from it', async () => {
    await knownState();
    const ln = lineOf(/\btimes\b/, layerHeadings[1]);
    const col = docLines[ln].indexOf(' times ') + 2;
    await goToLine(ln + 1, col);
    await page.keyboard.press('Control+Shift+ArrowRight');
    await page.keyboard.insertText('timse');
    const rows = await waitFor('the syntax error in the Problems panel', async () => {
      const r = await problems();
      return r.some((t) => t.includes('timse')) ? r : undefined;
    }, 30000);
    log(`  problems: ${JSON.stringify(rows)}`);
    if (rows.length !== 1) throw new Error(`${rows.length} problems for one mistake: ${JSON.stringify(rows)}`);
    await focusEditor();
    await page.keyboard.press('Control+Z');
    await waitFor('no problem left', async () => (await problems()).length === 0, 30000);
  });

  await check('a divergence inserted in a layer appears once in the Problems panel, and Compare shows exactly it', async () => {
    await knownState();
    // Change the epsilon of one rmsnorm in the fourth layer (a layer like its siblings): `epsilon 1e-6` → `1e-5`;
    // without an epsilon, `heads H` of a rope → `heads 2H`.
    const layerIdx = layerHeadings.length >= 4 ? 3 : layerHeadings.length - 1;
    const from = layerHeadings[layerIdx];
    const until = layerHeadings[layerIdx + 1] ?? docLines.length;
    let finder = /\brmsnorm of .*epsilon [0-9.e-]+/;
    let ln = lineOf(finder, from);
    let re = /(epsilon )([0-9.e-]+?)(\.?\s*(--.*)?)$/;
    let replace = (v) => (v === '1e-5' ? '1e-4' : '1e-5');
    if (ln < 0 || ln >= until) {
      finder = /\brope of .* heads \d+/;
      ln = lineOf(finder, from);
      re = /(heads )(\d+)(.*)$/;
      replace = (v) => String(Number(v) * 2);
    }
    const m = re.exec(docLines[ln]);
    const col = m.index + m[1].length;
    const kindsBefore = Number(/(\d+) kinds?/.exec(await statusKinds().innerText())[1]);
    await goToLine(ln + 1, col + 1);
    await page.keyboard.press('Shift+End');
    await page.keyboard.insertText(replace(m[2]) + m[3]);
    log(`  edited line ${ln + 1}: ${docLines[ln].trim()} → ${m[1]}${replace(m[2])}`);
    const rows = await waitFor('the divergence in the Problems panel', async () => {
      const r = await problems();
      return r.some((t) => /is not one program/.test(t)) ? r : undefined;
    }, 30000);
    log(`  problem: ${rows[0].slice(0, 200)}`);
    // Shown once (push and pull are not both shown), its kind named in parentheses once.
    if (rows.length !== 1) throw new Error(`problems: ${JSON.stringify(rows)}`);
    if (/\(\(|\)\)/.test(rows[0])) throw new Error(`the kind is parenthesised twice: ${rows[0]}`);
    // The Layer Kinds view and the status bar follow the analysis: the edited layer is a kind of its own now.
    await waitFor('the status bar to count one more kind', async () => Number(/(\d+) kinds?/.exec(await statusKinds().innerText())[1]) === kindsBefore + 1, 20000);
    // VS Code asks for code lenses again only while the editor has the focus (a blur cancels the request it had
    // scheduled): the editor keeps it until the edited layer's lens names the layer's own kind and offers the
    // comparison — both come in one answer, so neither is read from an older one.
    await focusEditor();
    const repIdx = layerHeadings.findIndex((h) => docLines[h].replace(/\d+/, '') === docLines[from].replace(/\d+/, ''));
    const repLayer = Number(/Layer (\d+)/.exec(docLines[layerHeadings[repIdx]])[1]);
    const editedLayer = Number(/Layer (\d+)/.exec(docLines[from])[1]);
    const ownKind = new RegExp(`\\(layer ${editedLayer}\\) · 1 layer · first: layer ${editedLayer}`);
    const lens = page.locator('.codelens-decoration a', { hasText: `Compare layer ${editedLayer} with layer ${repLayer}` }).first();
    await waitFor(`the lens of layer ${editedLayer} to name its own kind and offer the comparison`, async () =>
      (await page.locator('.codelens-decoration', { hasText: ownKind }).count()) > 0 && (await lens.count()) > 0, 30000);
    const pane = await kindsView();
    // (rows are virtualised: a kind row's aria-setsize is the number of kinds)
    const kindCount = async () => Number(await pane.locator('.monaco-list-row[aria-level="1"]').first().getAttribute('aria-setsize'));
    await waitFor('the Layer Kinds view to list one more kind', async () => (await kindCount()) === kindsBefore + 1, 20000);
    await shot('divergence-in-problems');
    // The lens on the diverging layer opens the diff with its representative: exactly the edited statement is
    // marked, on the left as the representative has it, on the right in the representative's names.
    await lens.click();
    await page.locator('.monaco-diff-editor').first().waitFor({ timeout: 20000 });
    const repLine = docLines[lineOf(finder, layerHeadings[repIdx])].trim();
    const expected = JSON.stringify({ left: [repLine], right: [repLine.replace(re, (_a, p1, p2, p3) => p1 + replace(p2) + p3)] });
    // Both sides are marked once the diff is computed: wait for the marks to be what they must be (they are read
    // again until then; a diff caught half-drawn is not the answer).
    let got;
    await waitFor(`the diff to mark ${expected}`, async () => {
      got = JSON.stringify(await diffMarks());
      return got === expected;
    }, 20000).catch((e) => {
      throw new Error(`${e.message}; it marks ${got}`);
    });
    log(`  diff marks ${got}`);
    const tabTitle = await page.locator('.tab.active').first().innerText();
    if (!new RegExp(`Layer ${repLayer} ↔ Layer ${editedLayer}`).test(tabTitle)) throw new Error(`the diff's title is "${tabTitle}"`);
    // The Layer Kinds view still shows the document's kinds while the diff has the focus.
    if ((await kindCount()) !== kindsBefore + 1 || !(await pane.locator('.monaco-list-row[aria-level="1"]').count())) {
      throw new Error('the Layer Kinds view is blank while the diff is active');
    }
    await shot('compare-with-representative');
  });

  await check('streamed.trace.server alone shows the LSP trace in the Streamed Trace channel', async () => {
    await knownState();
    // verbose: every message with its parameters (the log level of the channel was never touched)
    const text = await waitFor('the trace', async () => {
      const t = channelText('Streamed Trace');
      return /Sending request 'initialize/.test(t) && /Params: \{/.test(t) ? t : undefined;
    }, 20000);
    log(`  trace: ${text.split('\n').length} lines, e.g. ${text.split('\n').find((l) => /Sending request 'initialize/.test(l)).trim().slice(0, 100)}`);
    await runCommand('Output: Show Output Channels...');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Streamed Trace' }).first().click();
    // The Output view shows the channel, scrolled to its end: a verbose trace's last message, its parameters or its
    // result as indented JSON.
    await waitFor('the trace in the Output view', async () => /^\s+"\w+": /m.test(await panelText()), 30000);
    await shot('trace-output');
  });

  const bundleDir = path.join(workspace, docName.replace(/\.lgm$/, '.bundle'));
  // (before the context menu's lowering, whose bundle the checks after it read)
  await check('the lens on ## Model lowers in one step: the current deployment, no question, the manifest view', async () => {
    await knownState();
    fs.rmSync(bundleDir, { recursive: true, force: true });
    await goToLine(lineOf(/^## Model/) + 1, 1); // (the editor shows the lines it showed last)
    const lens = page.locator('.codelens-decoration a', { hasText: /^\d+ kinds? · Lower SN50 bundle$/ }).first();
    await lens.waitFor({ timeout: 30000 });
    await lens.click();
    await waitFor('the manifest webview', async () => {
      if (await quickInput().isVisible()) throw Object.assign(new Error(`a question was asked: ${await quickInput().innerText()}`), { fatal: true });
      return shownManifest(docTitle);
    }, 120000);
    const written = JSON.parse(fs.readFileSync(path.join(bundleDir, 'manifest.json'), 'utf8'));
    if (written.mode !== 'decode' || written.ctx !== 4096) throw new Error(`lowered for ${written.mode}, ctx ${written.ctx}: not the current deployment`);
  });

  await check('Lower SN50 Bundle writes the bundle and opens the manifest view', async () => {
    await knownState();
    fs.rmSync(bundleDir, { recursive: true, force: true });
    // One step, from the editor's context menu: the current deployment, no question asked.
    await contextMenu();
    await walkthroughShot('lower', await page.locator('.monaco-menu').first().boundingBox().then((m) => ({ x: Math.max(0, m.x - 150), y: m.y - 24, width: Math.min(560, m.width + 180), height: Math.min(420, m.height + 48) })));
    await menuEntry('Lower SN50 Bundle');
    // The manifest view: a webview (nested iframes) with one row per layer — and no quick input on the way.
    const frame = await waitFor('the manifest webview', async () => {
      if (await quickInput().isVisible()) throw Object.assign(new Error(`a question was asked: ${await quickInput().innerText()}`), { fatal: true });
      for (const f of page.frames()) if ((await f.locator('#layers').count().catch(() => 0)) > 0) return f;
      return undefined;
    }, 120000);
    const rows = await waitFor('layer rows', async () => {
      const n = await frame.locator('tr.layer-row').count();
      return n > 0 ? n : undefined;
    });
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
    if (!fs.existsSync(path.join(bundleDir, 'manifest.json'))) throw new Error(`no manifest.json in ${bundleDir}`);
    const written = JSON.parse(fs.readFileSync(path.join(bundleDir, 'manifest.json'), 'utf8'));
    if (written.mode !== 'decode' || written.ctx !== 4096) throw new Error(`lowered for ${written.mode}, ctx ${written.ctx}: not the current deployment`);
    log(`  manifest: ${path.relative(workspace, bundleDir)}/manifest.json; ${rows} layer rows`);
    const file = await shot('manifest-view');
    fs.copyFileSync(file, path.join(artifacts, 'extension.png'));
    // A layer row links back to the document.
    await frame.locator('a.layer-link').nth(2).click();
    await waitFor('the document to show the layer', async () => {
      const p = await cursorPosition();
      return p && layerHeadings.includes(p.line - 1);
    }, 20000);
  });

  await check('Streamed: Open Manifest shows the bundle of the document again', async () => {
    await knownState();
    await runCommand('Streamed: Open Manifest');
    const frame = await manifestFrame(undefined, 30000);
    const rows = await waitFor('layer rows', async () => (await frame.locator('tr.layer-row').count()) || undefined);
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
  });

  await check('the manifest view comes back after a reload', async () => {
    await knownState();
    await runCommand('Streamed: Open Manifest');
    await manifestFrame(undefined, 30000);
    await reloadWindow();
    const frame = await manifestFrame(undefined, 60000);
    const rows = await waitFor('layer rows', async () => (await frame.locator('tr.layer-row').count()) || undefined);
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
  });

  await checkPictures();

  await check('Lower SN50 Bundle With… asks for the deployment, the checkpoint and the folder', async () => {
    await knownState();
    await runCommand('Streamed: Lower SN50 Bundle With…');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'prefill' }).first().waitFor();
    await shot('lower-pick-deployment');
    await quickInputText().fill('prefill');
    await waitFor('prefill alone in the list', async () => (await page.locator('.quick-input-list .monaco-list-row').count()) === 1, 5000);
    await page.keyboard.press('Enter');
    for (const what of ['ctx', 'chunk']) {
      await waitFor(`the ${what} input`, async () => new RegExp(`: ${what}$`, 'm').test(await quickInput().innerText()));
      await page.keyboard.press('Enter'); // the default from settings
    }
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'No checkpoint' }).first().waitFor();
    await quickInputText().fill('No checkpoint');
    await waitFor('No checkpoint alone in the list', async () => (await page.locator('.quick-input-list .monaco-list-row').count()) === 1, 5000);
    await page.keyboard.press('Enter');
    // The bundle folder: a save dialog (code-server's is a quick input holding the path), a free name proposed.
    // (the first of <stem>.bundle, <stem>.prefill.bundle, … that does not exist yet)
    const prefillDir = await waitFor('the save dialog for the bundle folder', async () => {
      const v = (await quickInput().isVisible()) ? await quickInputText().inputValue() : '';
      return /\.bundle$/.test(v) && !fs.existsSync(v) ? v : undefined;
    }, 20000);
    await shot('lower-bundle-folder');
    await page.keyboard.press('Enter');
    await manifestFrame(undefined, 120000);
    const written = JSON.parse(fs.readFileSync(path.join(prefillDir, 'manifest.json'), 'utf8'));
    if (written.mode !== 'prefill' || written.chunk !== 512) throw new Error(`lowered for ${written.mode}, chunk ${written.chunk}`);
  });

  await check('a deployment the analysis refuses: Lower offers Show Problems and Change Deployment, and asks nothing', async () => {
    // (tiny.lgm's 4 query heads do not split over 8 chips; over 4 they do, each chip holding the KV head it reads)
    await knownState({ settings: { 'streamed.deployment.mode': 'tp', 'streamed.deployment.tp': 8 }, status: /· \d+ refused/ });
    const said = await statusKinds().innerText();
    log(`  status bar: ${said.trim()}`);
    // The language status says the deployment with each word once.
    await page.locator('.statusbar-item[id="status.languageStatus"]').first().click();
    const deployment = page.locator('.monaco-hover', { hasText: 'tp 8 · ctx 4096 · SN50' }).first();
    await deployment.waitFor({ timeout: 20000 });
    const words = (await deployment.innerText()).replace(/\s+/g, ' ');
    if (/\btp · /.test(words)) throw new Error(`the language status says "${words}"`);
    await page.keyboard.press('Escape');
    const manifest = path.join(bundleDir, 'manifest.json');
    const before = fs.existsSync(manifest) ? fs.statSync(manifest).mtimeMs : undefined;
    await runCommand('Streamed: Lower SN50 Bundle');
    // The notification says why — the reason and the widths that lower — not only where to look.
    const toast = page.locator('.notification-toast', { hasText: 'does not lower for tp 8 · ctx 4096 · SN50: tensor parallel over 8 chips' }).first();
    await toast.waitFor({ timeout: 20000 });
    const toastText = (await toast.innerText()).replace(/\s+/g, ' ');
    if (!/do not split over 8 chips — tp 2 or 4 lower/.test(toastText)) throw new Error(`the notification says: ${toastText}`);
    if (await quickInput().isVisible()) throw new Error(`a question was asked: ${await quickInput().innerText()}`);
    for (const b of ['Show Problems', 'Change Deployment']) {
      if ((await toast.locator('.monaco-button', { hasText: b }).count()) !== 1) throw new Error(`no ${b} button`);
    }
    log(`  notification: ${(await toast.innerText()).replace(/\s+/g, ' ').slice(0, 200)}`);
    await shot('lower-refused');
    if ((fs.existsSync(manifest) ? fs.statSync(manifest).mtimeMs : undefined) !== before) throw new Error('a bundle was written');
    await toast.locator('.monaco-button', { hasText: 'Show Problems' }).click();
    await waitFor('the refusals in the Problems panel', async () =>
      (await page.locator('.markers-panel .monaco-list-row[aria-level="2"]', { hasText: 'do not split over 8 chips' }).count()) > 0, 20000);
    // The Layer Kinds view marks the refused kinds, each with its reason as a row of its own.
    const pane = await kindsView();
    const reasons = await waitFor('the reasons in the Layer Kinds view', async () => {
      const r = (await treeRows(pane)).filter(([, , tip]) => tip.startsWith('Lowering refused: '));
      return r.length ? r : undefined;
    }, 20000);
    if (!reasons.every(([, text]) => /^Tensor parallel over 8 chips/.test(text))) throw new Error(`reasons: ${JSON.stringify(reasons)}`);
    // Change Deployment, from the same message: tp over 4 chips (which tiny.lgm's heads split over) ends the refusal.
    await runCommand('Streamed: Lower SN50 Bundle');
    await toast.waitFor({ timeout: 20000 });
    await toast.locator('.monaco-button', { hasText: 'Change Deployment' }).click();
    const current = page.locator('.quick-input-list .monaco-list-row', { hasText: '(current)' }).first();
    await current.waitFor({ timeout: 20000 });
    const currentMode = (await current.locator('.label-name').first().innerText()).trim();
    if (currentMode !== 'tp') throw new Error(`the current deployment is listed as ${currentMode}`);
    await page.keyboard.press('Enter');
    await waitFor('the ctx input', async () => /: ctx$/m.test(await quickInput().innerText()));
    await page.keyboard.press('Enter');
    await waitFor('the tp input', async () => /: tp$/m.test(await quickInput().innerText()));
    await quickInputText().fill('4');
    await page.keyboard.press('Enter');
    await waitFor('the status bar to say nothing is refused at tp 4', async () => {
      const t = await statusKinds().innerText().catch(() => '');
      return /\d+ kinds? · \d+ layers?/.test(t) && !/refused/.test(t);
    }, 60000);
    // ... and the lowering the refusal stopped goes on, at tp 4, with no further click.
    const lowered = await waitFor('the bundle lowered at tp 4', async () => {
      if (!fs.existsSync(manifest) || fs.statSync(manifest).mtimeMs === before) return undefined;
      const m = JSON.parse(fs.readFileSync(manifest, 'utf8'));
      return m.mode === 'tp' && m.tp === 4 ? m : undefined;
    }, 120000);
    log(`  Change Deployment → lowered: ${lowered.mode}, tp ${lowered.tp}`);
  });

  const authored = path.join(workspace, 'small-gemma3.lgm');
  await check('Author Model from Config… writes the document and opens it', async () => {
    await knownState();
    const cfgSrc = path.join(repo, 'examples', 'configs', 'small-gemma3.json');
    if (!fs.existsSync(cfgSrc)) throw new Error(`no ${cfgSrc}`);
    fs.mkdirSync(path.join(workspace, 'configs'), { recursive: true });
    const cfg = path.join(workspace, 'configs', 'small-gemma3.json');
    fs.copyFileSync(cfgSrc, cfg);
    await runCommand('Streamed: Author Model from Config…');
    // code-server's file dialogs are quick inputs holding a path.
    await waitFor('the open dialog', async () => (await quickInput().isVisible()) && (await quickInputText().inputValue()).startsWith('/'));
    // (the dialog fills its own folder in as it opens: type until the path stays and the dialog lists the file)
    await waitFor('the config path in the dialog', async () => {
      if ((await quickInputText().inputValue()) !== cfg) await quickInputText().fill(cfg);
      return (await quickInputText().inputValue()) === cfg &&
        (await page.locator('.quick-input-list .monaco-list-row', { hasText: 'small-gemma3.json' }).count()) > 0;
    }, 20000);
    await shot('author-pick-config');
    await page.keyboard.press('Enter');
    await waitFor('the save dialog', async () => (await quickInput().isVisible()) && /small-gemma3\.lgm$/.test(await quickInputText().inputValue()), 20000);
    await page.keyboard.press('Enter');
    await waitFor('the authored document', async () => fs.existsSync(authored), 60000);
    await page.locator('.tab', { hasText: 'small-gemma3.lgm' }).first().waitFor({ timeout: 20000 });
    await page.locator('.codelens-decoration', { hasText: /first: layer|\d+ kinds? · / }).first().waitFor({ timeout: 60000 });
    log(`  authored ${path.basename(authored)}: ${fs.readFileSync(authored, 'utf8').split('\n')[0]}`);
    await shot('authored-document');
  });
  const authoredText = () => fs.readFileSync(authored, 'utf8');

  await check('on the line after the last layer, completion offers the next layer, which fits the document', async () => {
    const text = authoredText();
    const lines = text.split('\n');
    const layers = lines.filter((l) => /^## Layer \d+/.test(l)).length;
    await knownState({ doc: 'small-gemma3.lgm', files: { 'small-gemma3.lgm': text, [docName]: docText } });
    const head = lineOf(/^## Head/, 0, lines);
    if (lines[head - 1] !== '') throw new Error(`line ${head} is not blank`);
    await goToLine(head, 1);
    await page.keyboard.type('lay');
    await page.keyboard.press('Control+Space');
    const item = page.locator('.suggest-widget .monaco-list-row', { hasText: `## Layer ${layers}` }).first();
    await item.waitFor({ timeout: 20000 });
    await shot('new-layer-completion');
    await page.keyboard.press('Enter');
    await waitFor(`${layers + 1} layers and no problem`, async () =>
      new RegExp(`· ${layers + 1} layers`).test(await statusKinds().innerText()) && (await problems()).length === 0, 30000);
    await focusEditor();
    await page.keyboard.press('Control+Z');
    await waitFor(`${layers} layers again`, async () => new RegExp(`· ${layers} layers`).test(await statusKinds().innerText()), 30000);
  });

  await check('inlay hints keep the author’s aligned `be` column aligned', async () => {
    const text = authoredText();
    const lines = text.split('\n');
    await knownState({ doc: 'small-gemma3.lgm', files: { 'small-gemma3.lgm': text } });
    const first = lineOf(/^## Layer 0/, 0, lines);
    await goToLine(first + 1, 1);
    // The layer's first statements: their `be` stand in one column in the text.
    const lets = [];
    for (let i = first + 1; i < first + 12; i++) if (/^Let \S+\s+be /.test(lines[i])) lets.push(i + 1);
    if (new Set(lets.map((l) => lines[l - 1].indexOf(' be '))).size !== 1) throw new Error('the document does not align `be`');
    const lefts = await waitFor('the hints drawn and every `be` placed', async () => {
      const shown = await page.locator('.editor-group-container.active .view-lines').first().innerText();
      if (!/: rows×128/.test(shown.replace(/\u00a0/g, ' '))) return undefined;
      const l = await wordLefts(lets, 'be');
      return Object.keys(l).length === lets.length ? l : undefined;
    }, 30000);
    log(`  \`be\` at ${JSON.stringify(Object.values(lefts))} px`);
    if (new Set(Object.values(lefts)).size !== 1) throw new Error(`the \`be\` column moved apart: ${JSON.stringify(lefts)}`);
    const lens = await page.locator('.codelens-decoration', { hasText: 'first: layer 0' }).first().boundingBox();
    const editor = await page.locator('.editor-group-container.active .monaco-editor').first().boundingBox();
    await walkthroughShot('author', { x: editor.x, y: Math.max(editor.y, lens.y - 120), width: Math.min(560, editor.width), height: 300 });
  });

  await check('the word `weight` in a checkpoint tensor’s name is drawn as the string it is in', async () => {
    const text = authoredText();
    const lines = text.split('\n');
    await knownState({ doc: 'small-gemma3.lgm', files: { 'small-gemma3.lgm': text } });
    const entry = lineOf(/^Emb\s+is "[^"]*\.weight"/, 0, lines);
    const decl = lineOf(/^Let Emb\s+be a weight of vocab by d\./, 0, lines);
    await goToLine(decl + 1, 1);
    // The server's semantic tokens are drawn once a constant (`vocab`) and a name (`Emb`) differ in colour.
    await waitFor('the semantic tokens', async () => {
      const [constant, name] = [await wordColour(decl + 1, 'vocab'), await wordColour(decl + 1, 'Emb')];
      return constant && name && constant !== name;
    }, 30000);
    const spans = await page.evaluate((line) => {
      const ed = document.querySelector('.editor-group-container.active .monaco-editor');
      const n = [...ed.querySelectorAll('.margin-view-overlays .line-numbers')].find((x) => x.textContent.trim() === String(line));
      const row = [...ed.querySelectorAll('.view-lines > .view-line')].find((l) => l.style.top === n.closest('[style*="top"]').style.top);
      return [...row.querySelectorAll('span > span')].map((s) => [s.textContent, getComputedStyle(s).color]);
    }, entry + 1);
    const start = spans.findIndex(([t]) => t.startsWith('"'));
    const inString = [];
    for (let i = start; i < spans.length; i++) {
      inString.push(spans[i]);
      if (spans[i][0].endsWith('"') && (i > start || spans[i][0].length > 1)) break;
    }
    if (new Set(inString.map(([, c]) => c)).size !== 1) throw new Error(`the string is drawn in several colours: ${JSON.stringify(inString)}`);
  });

  await check('the walkthrough: its images, its link to the language reference, and Lower with two programs open', async () => {
    await knownState({ doc: 'small-gemma3.lgm', files: { 'small-gemma3.lgm': authoredText(), [docName]: docText } });
    await openDocument(docName); // two model programs open, this one last
    fs.rmSync(bundleDir, { recursive: true, force: true });
    await runCommand('Welcome: Open Walkthrough...');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Get Started with Streamed' }).first().click();
    const steps = ['author', 'kinds', 'lower'];
    for (const id of steps) {
      const stepEl = page.locator(`.getting-started-step[data-step-id$="#${id}"]`);
      await stepEl.waitFor({ timeout: 20000 });
      if (!/expanded/.test(await stepEl.getAttribute('class'))) await stepEl.locator('.step-title').first().click();
      const img = await waitFor(`the ${id} step's image`, async () => {
        for (const f of page.frames()) {
          const found = await f.evaluate((name) => {
            const i = [...document.querySelectorAll('img')].find((x) => x.getAttribute('src')?.includes(`${name}.png`));
            return i && i.complete ? { width: i.naturalWidth, shown: i.getBoundingClientRect().width, alt: i.alt } : undefined;
          }, id).catch(() => undefined);
          if (found?.width > 0 && found.shown > 0) return found;
        }
        return undefined;
      }, 20000);
      log(`  ${id}: image ${img.width} px wide, shown ${Math.round(img.shown)} px, "${img.alt}"`);
      // Readable: shown at no less than 80% of its size, its text at least 80% of the editor's.
      if (img.shown < 0.8 * img.width) throw new Error(`the ${id} image (${img.width} px) is shown ${Math.round(img.shown)} px wide: its text cannot be read`);
    }
    await shot('walkthrough');
    // The language reference opens from the link, in the editor.
    const authorStep = page.locator('.getting-started-step[data-step-id$="#author"]');
    await authorStep.locator('.step-title').first().click();
    await authorStep.locator('a', { hasText: 'the language reference' }).first().click();
    await waitFor('the language reference', async () => {
      for (const f of page.frames()) {
        if (await f.locator('h1', { hasText: 'The model authoring language' }).count().catch(() => 0)) return true;
      }
      return false;
    }, 30000);
    await page.locator('.tab', { hasText: 'Walkthrough' }).first().click();
    // The Lower button lowers the program last worked on, though the walkthrough has the editor.
    const lowerStep = page.locator('.getting-started-step[data-step-id$="#lower"]');
    await lowerStep.locator('.step-title').first().click();
    await lowerStep.locator('.monaco-button', { hasText: 'Lower SN50 Bundle' }).first().click();
    await waitFor(`${path.basename(bundleDir)}/manifest.json`, async () => {
      const warned = (await toasts()).find((t) => /open a model program/.test(t));
      if (warned) throw Object.assign(new Error(`the button said: ${warned}`), { fatal: true });
      return fs.existsSync(path.join(bundleDir, 'manifest.json'));
    }, 120000);
    // The lowering ends with its manifest view opened: its tab, for this document. (What the view draws is the other
    // checks' to read; here the webview's content is not waited for — code-server's webview service worker now and
    // then keeps a new webview blank for a minute, "Found unexpected service worker controller".)
    await page.locator('.tab', { hasText: `Manifest — ${docName}` }).first().waitFor({ timeout: 60000 });
  });

  await check('the language status shows the deployment and changes it with a quick pick', async () => {
    await knownState();
    const status = page.locator('.statusbar-item[id="status.languageStatus"]').first();
    await status.click();
    const hover = page.locator('.monaco-hover', { hasText: 'decode · ctx 4096 · SN50' }).first();
    await hover.waitFor({ timeout: 20000 });
    await shot('language-status');
    await hover.getByText('Change Deployment').first().click();
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'prefill' }).first().waitFor();
    await quickInputText().fill('prefill');
    await waitFor('prefill alone in the list', async () => (await page.locator('.quick-input-list .monaco-list-row').count()) === 1, 5000);
    await page.keyboard.press('Enter');
    await waitFor('the ctx input', async () => /: ctx$/m.test(await quickInput().innerText()));
    await page.keyboard.press('Enter');
    await waitFor('the chunk input', async () => /: chunk$/m.test(await quickInput().innerText()));
    await quickInputText().fill('256');
    await page.keyboard.press('Enter');
    const settings = path.join(workspace, '.vscode', 'settings.json');
    await waitFor('the workspace settings', async () => {
      const j = fs.existsSync(settings) ? JSON.parse(fs.readFileSync(settings, 'utf8')) : {};
      return j['streamed.deployment.mode'] === 'prefill' && j['streamed.deployment.chunk'] === 256;
    }, 20000);
    await focusEditor();
    await status.click();
    await page.locator('.monaco-hover', { hasText: 'prefill · chunk 256 · ctx 4096 · SN50' }).first().waitFor({ timeout: 20000 });
    await page.keyboard.press('Escape');
  });

  await check('a crashed server is restarted, and Streamed: Restart Server restarts it', async () => {
    await knownState();
    const [pid] = await waitFor('the server process', async () => serverPids(workspace)[0] !== undefined && serverPids(workspace), 10000);
    process.kill(pid, 'SIGKILL');
    const [pid2] = await waitFor('a new server process', async () => {
      const p = serverPids(workspace);
      return p.length && !p.includes(pid) ? p : undefined;
    }, 30000);
    log(`  killed server ${pid}; restarted as ${pid2}`);
    await waitFor('the restarted server to analyse the document', async () => (await statusKinds().count()) > 0, 30000);
    await runCommand('Streamed: Restart Server');
    const [pid3] = await waitFor('the restarted server process', async () => {
      const p = serverPids(workspace);
      return p.length && !p.includes(pid2) ? p : undefined;
    }, 30000);
    log(`  Restart Server: ${pid2} → ${pid3}`);
    await statusKinds().waitFor({ timeout: 30000 });
    await shot('server-restarted');
  });

  // ---------------------------------------------------------------------------------------------- first run
  // A workspace without a .venv, no setting, no Python extension: python3 from the PATH has no server.
  const fresh = path.join(tmp, 'workspace-fresh');
  fs.mkdirSync(fresh, { recursive: true });
  // The document with a divergence (its fourth layer's first epsilon changed), so that diagnostics have something to say.
  const diverging = lineOf(/\brmsnorm of .*epsilon/, layerHeadings[Math.min(3, layerHeadings.length - 1)]);
  const freshText = docLines.map((l, i) => (i === diverging ? l.replace(/epsilon (\S+?)\./, (_m, v) => `epsilon ${v}0.`) : l)).join('\n');
  fs.writeFileSync(path.join(fresh, docName), freshText);
  // A second program the user has not opened, with a typo in it: the check task's to report.
  const typoLine = lineOf(/\btimes\b/, layerHeadings[1]);
  const closedText = docLines.map((l, i) => (i === typoLine ? l.replace(' times ', ' timse ') : l)).join('\n');
  fs.writeFileSync(path.join(fresh, 'closed.lgm'), closedText);
  const envDir = path.join(globalStorage, 'server-env');
  const stampFile = path.join(globalStorage, 'server-env.json');
  await check('first run: no Python has the server → Set Up Server → the private environment from the bundled wheel → diagnostics', async () => {
    if (fs.existsSync(envDir)) throw new Error(`${envDir} exists before the first run`);
    await openFolder(fresh, docName);
    await openDocument(docName);
    const toast = page.locator('.notification-toast', { hasText: 'the language server is not installed in' }).first();
    await toast.waitFor({ timeout: 60000 });
    const text = (await toast.innerText()).replace(/\s+/g, ' ');
    log(`  notification: ${text.slice(0, 240)}`);
    // The Layer Kinds view has nothing to show: its welcome text says why, and what to do.
    const pane = await kindsView();
    const welcome = await waitFor('the welcome text', async () => {
      const t = await pane.locator('.welcome-view-content').innerText().catch(() => '');
      return /language server is not running/.test(t) ? t : undefined;
    }, 20000);
    if (!/Set Up Server/.test(welcome)) throw new Error(`welcome: ${welcome}`);
    await shot('first-run-offer');
    await toast.locator('.monaco-button', { hasText: 'Set Up Server' }).click();
    await page.locator('.notification-toast', { hasText: 'Setting up the Streamed language server' }).first().waitFor({ timeout: 30000 });
    await shot('first-run-setting-up');
    await statusKinds().waitFor({ timeout: 300000 });
    const server = serverProcesses().find((p) => p.cwd === fresh);
    if (!server || server.python !== path.join(envDir, 'bin', 'python')) throw new Error(`the server runs with ${server?.python}`);
    const stamp = JSON.parse(fs.readFileSync(stampFile, 'utf8'));
    if (stamp.extension !== version || !stamp.wheel.startsWith(`${path.basename(wheelInVsix)}#`)) throw new Error(`stamp ${JSON.stringify(stamp)}`);
    const show = spawnSync(path.join(envDir, 'bin', 'python'), ['-m', 'pip', 'show', '-f', 'streamed-lgm'], { encoding: 'utf8' });
    if (!/Name: streamed-lgm/.test(show.stdout) || !/streamed_lsp\/handlers\.py/.test(show.stdout)) throw new Error(`pip show: ${show.stdout}${show.stderr}`);
    const rows = await waitFor('the divergence in the Problems panel', async () => {
      const r = await problems();
      return r.some((t) => /is not one program/.test(t)) ? r : undefined;
    }, 60000);
    if (rows.length !== 1) throw new Error(`problems: ${JSON.stringify(rows)}`);
    log(`  server ${server.pid}: ${server.python} (made with ${stamp.python}); problem: ${rows[0].slice(0, 120)}`);
    await shot('first-run-diagnostics');
  });

  /** Runs the task `check FILE` and answers what its terminal said once it ended. */
  async function runCheckTask(file) {
    await runCommand('Tasks: Run Task');
    // (the task type's entry, not a recently run task that names it)
    await page.locator('.quick-input-list .monaco-list-row[aria-label="All streamed tasks"]').first().click();
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: `check ${file}` }).first();
    await row.waitFor({ timeout: 20000 });
    await row.click();
    await runCommand('Terminal: Focus Terminal'); // (its text is drawn while it is shown)
    return waitFor(`the end of check ${file}`, async () => {
      const t = await page.evaluate(() => [...document.querySelectorAll('.part.panel .xterm-rows')].map((e) => e.innerText).join('\n').replace(/\u00a0/g, ' '));
      return /Terminal will be reused by tasks/.test(t) && t.includes(`streamed check ${file}`) ? t : undefined;
    }, 60000);
  }
  await check('the check task reports each problem once, says what it found, and leaves nothing behind after the fix', async () => {
    await knownState({ folder: fresh, files: { [docName]: freshText, 'closed.lgm': closedText } });
    // A program no editor has open: the task's problems are the only ones.
    const closed = await runCheckTask('closed.lgm');
    log(`  terminal: ${closed.split('\n').filter((l) => l.trim()).slice(-4).join(' / ')}`);
    if (!closed.includes('streamed check: 1 error in closed.lgm (in the Problems panel)')) throw new Error(`the terminal says: ${closed}`);
    if (/failed to launch/.test(closed) || (await toasts()).some((t) => /failed to launch/.test(t))) throw new Error('"failed to launch"');
    const fromTask = page.locator('.markers-panel .monaco-list-row', { hasText: 'streamed check' });
    await runCommand('View: Focus Problems (Errors, Warnings, Infos)');
    await waitFor('the task’s problem', async () => (await fromTask.count()) > 0, 20000);
    await shot('check-task');
    // The program open in the editor: the server reports it; the task adds nothing twice.
    const open = await runCheckTask(docName);
    if (!open.includes(`streamed check: 1 warning in ${docName}`)) throw new Error(`the terminal says: ${open}`);
    await runCommand('View: Focus Problems (Errors, Warnings, Infos)');
    const divergences = page.locator('.markers-panel .monaco-list-row[aria-level="2"]', { hasText: /is not one program/ });
    await waitFor('the divergence shown', async () => (await divergences.count()) > 0, 20000);
    if ((await divergences.count()) !== 1) throw new Error(`the divergence is shown ${await divergences.count()} times`);
    // Opening the closed program hands it to the server (one problem), and fixing it leaves none.
    await openDocument('closed.lgm');
    await waitFor('the typo reported once, by the server', async () => {
      const r = (await problems()).filter((t) => t.includes('timse'));
      return r.length === 1 && (await fromTask.count()) === 0;
    }, 30000);
    const col = closedText.split('\n')[typoLine].indexOf(' timse ') + 2;
    await goToLine(typoLine + 1, col);
    await page.keyboard.press('Control+Shift+ArrowRight');
    await page.keyboard.insertText('times');
    await waitFor('no problem left for closed.lgm', async () => !(await problems()).some((t) => /timse/.test(t)) && (await fromTask.count()) === 0, 30000);
  });

  await check('a private environment made by another version of the extension is upgraded before the server starts', async () => {
    const stamp = JSON.parse(fs.readFileSync(stampFile, 'utf8'));
    fs.writeFileSync(stampFile, JSON.stringify({ ...stamp, extension: '0.0.1' }));
    await knownState({ folder: fresh, files: { [docName]: freshText, 'closed.lgm': closedText }, status: /kinds? · \d+ layers?/ });
    await reloadWindow();
    await waitFor('the stamp of this version', async () => JSON.parse(fs.readFileSync(stampFile, 'utf8')).extension === version, 180000);
    await statusKinds().waitFor({ timeout: 120000 });
    if (!channelText('Streamed').includes(`made by version 0.0.1; upgrading it to ${version}`)) throw new Error('the output does not say it upgraded');
    const server = serverProcesses().find((p) => p.cwd === fresh);
    if (!server || server.python !== path.join(envDir, 'bin', 'python')) throw new Error(`the server runs with ${server?.python}`);
  });

  await check('a server that crashes at start-up is one message with its last line and what to do', async () => {
    // A Python where `import streamed_lsp` works but the server cannot start: the project's sources on the path of a
    // fresh environment without its dependencies (as when pygls or lsprotocol is missing).
    const crashEnv = path.join(tmp, 'crash-env');
    execFileSync(bareBase, ['-m', 'venv', '--without-pip', crashEnv]);
    const src = path.join(tmp, 'crash-src');
    fs.mkdirSync(src, { recursive: true });
    fs.symlinkSync(path.join(repo, 'server'), path.join(src, 'streamed_lsp'), 'dir');
    fs.symlinkSync(path.join(repo, 'streamed'), path.join(src, 'streamed'), 'dir');
    const site = spawnSync(path.join(crashEnv, 'bin', 'python'), ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], { encoding: 'utf8' }).stdout.trim();
    fs.writeFileSync(path.join(site, 'streamed-src.pth'), src + '\n');
    const crashPython = path.join(crashEnv, 'bin', 'python');
    if (spawnSync(crashPython, ['-c', 'import streamed_lsp']).status !== 0) throw new Error('the crash Python cannot import streamed_lsp');
    const ws = path.join(tmp, 'workspace-crash');
    fs.mkdirSync(path.join(ws, '.vscode'), { recursive: true });
    fs.writeFileSync(path.join(ws, docName), docText);
    fs.writeFileSync(path.join(ws, '.vscode', 'settings.json'), JSON.stringify({ 'streamed.server.python': crashPython }));
    await openFolder(ws, docName);
    await openDocument(docName);
    const toast = page.locator('.notification-toast', { hasText: 'stopped at start-up' }).first();
    await toast.waitFor({ timeout: 60000 });
    // Any other notification the failure would raise comes with the server's exit, which the message waited for:
    // the output channel's last word on it is written by then.
    await waitFor('the output to say the server did not start', async () => /the server did not start/.test(channelText('Streamed')), 20000);
    const all = await toasts();
    log(`  notifications: ${JSON.stringify(all).slice(0, 400)}`);
    const text = all.find((t) => t.includes('stopped at start-up'));
    if (!text.includes("ModuleNotFoundError: No module named 'lsprotocol'")) throw new Error(`the message does not give the last line: ${text}`);
    for (const b of ['Show Output', 'Open Settings', 'Set Up Server']) {
      if ((await toast.locator('.monaco-button', { hasText: b }).count()) !== 1) throw new Error(`no ${b} button`);
    }
    const others = all.filter((t) => t !== text);
    if (others.length) throw new Error(`more than one message: ${JSON.stringify(others)}`);
    await shot('start-up-crash');
    await toast.locator('.monaco-button', { hasText: 'Show Output' }).click();
    await waitFor('the output with the traceback', async () => /No module named 'lsprotocol'/.test(await panelText()), 20000);
    await shot('start-up-crash-output');
    // Restart Server tries that Python again (the same message); Set Up Server then starts the private environment.
    await runCommand('Notifications: Clear All Notifications');
    await runCommand('Streamed: Restart Server');
    const again = page.locator('.notification-toast', { hasText: 'stopped at start-up' }).first();
    await again.waitFor({ timeout: 60000 });
    await again.locator('.monaco-button', { hasText: 'Set Up Server' }).click();
    await statusKinds().waitFor({ timeout: 120000 });
    const server = serverProcesses().find((p) => p.cwd === ws);
    if (!server || server.python !== path.join(envDir, 'bin', 'python')) throw new Error(`after Set Up Server the server runs with ${server?.python}`);
    log(`  Set Up Server: the server runs with ${server.python}`);
  });
} catch (e) {
  results.push({ name: 'the workbench', ok: false, error: e });
  log(`FAIL: ${e?.stack ?? e}`);
  if (page) await shot('FAILED-workbench').catch(() => undefined);
} finally {
  fs.writeFileSync(path.join(artifacts, 'browser-console.log'), consoleLines.join('\n'));
  await browser?.close().catch(() => undefined);
  const serverLogs = path.join(userData, 'logs');
  if (fs.existsSync(serverLogs)) fs.cpSync(serverLogs, path.join(artifacts, 'logs'), { recursive: true });
  cleanup();
}

const failed = results.filter((r) => !r.ok);
console.log(`\ne2e: ${((Date.now() - t0) / 1000).toFixed(0)}s, artifacts in ${path.relative(process.cwd(), artifacts) || '.'}`);
for (const r of results) console.log(`  ${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.ok ? '' : ` — ${r.error?.message ?? r.error}`}`);
console.log(`e2e: ${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(signalled ?? (failed.length ? 1 : 0));
