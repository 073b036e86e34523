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
const artifacts = path.join(here, 'artifacts');
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

// ------------------------------------------------------------------------------------------------ the .vsix, always built
const vsix = path.join(ext, 'streamed.vsix');
fs.rmSync(vsix, { force: true });
execFileSync('npm', ['run', '-s', 'package'], { cwd: ext, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, STREAMED_PYTHON: python } });
const vsixFiles = execFileSync('unzip', ['-Z1', vsix], { encoding: 'utf8' }).split('\n').filter(Boolean);
const wheelInVsix = vsixFiles.find((f) => /^extension\/server\/streamed_lgm-.*\.whl$/.test(f));
if (!wheelInVsix) fail(`the .vsix carries no server wheel: ${vsixFiles.join(', ')}`);
const version = JSON.parse(fs.readFileSync(path.join(ext, 'package.json'), 'utf8')).version;
console.log(`package: streamed.vsix ${version}, ${vsixFiles.length} files, ${(fs.statSync(vsix).size / 1024).toFixed(0)} KiB, carrying ${path.basename(wheelInVsix)}`);

// ------------------------------------------------------------------------------------------------ setup
execFileSync('bash', [path.join(here, 'setup.sh')], { stdio: 'inherit' });
fs.rmSync(artifacts, { recursive: true, force: true });
fs.mkdirSync(artifacts, { recursive: true });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'streamed-e2e-'));

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
      'extensions.ignoreRecommendations': true,
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'telemetry.telemetryLevel': 'off',
      'update.mode': 'none',
      'git.enabled': false,
      'editor.codeLens': true,
      'editor.minimap.enabled': false,
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
const cs = spawn(
  codeServer,
  [...csArgs, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check',
    '--disable-workspace-trust', '--disable-getting-started-override', workspace],
  { stdio: ['ignore', csLog, csLog], detached: true, env: { ...process.env, PASSWORD: undefined } },
);
const base = `http://127.0.0.1:${port}`;
for (let i = 0; ; i++) {
  try {
    const r = await fetch(`${base}/healthz`);
    if (r.ok) break;
  } catch {
    /* not up yet */
  }
  if (i > 120) throw new Error('code-server did not start; see e2e/artifacts/code-server.log');
  await new Promise((r) => setTimeout(r, 500));
}
log(`code-server up on ${base}`);

// ------------------------------------------------------------------------------------------------ the browser
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
const page = await context.newPage();
const consoleLines = [];
page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));

const results = [];
let step = 0;
async function shot(name) {
  const file = path.join(artifacts, `${String(++step).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file });
  return file;
}
async function check(name, fn) {
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
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, fn, timeout = 30000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (${last.message})` : ''}`);
}
async function runCommand(title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible' });
  await input.fill(`>${title}`);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  await row.waitFor({ state: 'visible', timeout: 10000 });
  await sleep(150);
  await row.click();
}
async function goToLine(line, col = 1) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible' });
  await input.fill(`:${line}:${col}`);
  await sleep(150);
  await page.keyboard.press('Enter');
  await sleep(200);
}
async function cursorPosition() {
  const t = await page.locator('.statusbar-item[id="status.editor.selection"]').innerText();
  const m = /Ln (\d+), Col (\d+)/.exec(t);
  return m ? { line: Number(m[1]), col: Number(m[2]) } : undefined;
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
async function openFolder(dir, doc) {
  await page.goto(`${base}/?folder=${encodeURIComponent(dir)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: doc }).first();
  await row.waitFor({ timeout: 60000 });
  await row.click();
  await page.locator('.monaco-editor .view-lines').first().waitFor();
}
// The text the panel's editors show (the Output view's channel, among them).
// (Monaco renders spaces as no-break spaces.)
const panelText = () => page.evaluate(() => [...document.querySelectorAll('.part.panel .view-lines')].map((e) => e.innerText).join('\n').replace(/\u00a0/g, ' '));
async function reloadWindow() {
  await sleep(1000);
  await runCommand('Developer: Reload Window');
  await sleep(3000);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
}
const statusKinds = () => page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first();
const docText = fs.readFileSync(path.join(workspace, docName), 'utf8');
const docLines = docText.split('\n');
const lineOf = (re, from = 0) => {
  for (let i = from; i < docLines.length; i++) if (re.test(docLines[i])) return i;
  return -1;
};
const layerHeadings = docLines.map((l, i) => (/^##\s*Layer\s+\d+/.test(l) ? i : -1)).filter((i) => i >= 0);

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
  const box = await shown.boundingBox();
  if (!box || box.width < 400 || box.height < 300) throw new Error(`the floorplan is ${JSON.stringify(box)}`);
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
    const b = await frame.locator(`${id} svg text`).filter({ hasText: /\S/ }).first().boundingBox();
    if (!b || b.width <= 0 || b.height <= 0) throw new Error(`${id}'s labels have no size: ${JSON.stringify(b)}`);
  }
  return { tabs, chipText, memory, roofline, spills };
}

async function checkPictures() {
  await check('the manifest view draws the chip, the memory and the roofline from the bundle', async () => {
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
    await page.locator('.tab', { hasText: /^Manifest/ }).first().click();
  });

  await check('a new user opening examples/qwen3.8.lgm and lowering it sees the chip, the memory and the roofline', async () => {
    const name = 'qwen3.8.lgm';
    fs.copyFileSync(path.join(repo, 'examples', name), path.join(workspace, name));
    await page.locator('.monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+P');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill(name);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first().waitFor({ timeout: 20000 });
    await page.keyboard.press('Enter');
    await page.locator('.tab.active', { hasText: name }).waitFor({ timeout: 20000 });
    await page.locator('.statusbar-item', { hasText: /2 kinds · 64 layers/ }).first().waitFor({ timeout: 120000 });
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Lower SN50 Bundle');
    // Answer whatever the lowering asks (the deployment from the settings, no checkpoint, the proposed folder) until
    // the manifest of qwen3.8 is shown.
    const frame = await waitFor('the manifest of qwen3.8', async () => {
      const shown = await shownManifest('qwen3.8');
      if (shown) return shown;
      if (await input.isVisible().catch(() => false)) {
        const widget = await page.locator('.quick-input-widget').innerText().catch(() => '');
        if (/No checkpoint/.test(widget)) await input.fill('No checkpoint');
        else if (/\bdecode\b/.test(widget) && (await page.locator('.quick-input-list .monaco-list-row').count()) > 1) await input.fill('decode');
        await sleep(200);
        await page.keyboard.press('Enter');
        await sleep(500);
      }
      return undefined;
    }, 180000);
    const bundle = JSON.parse(fs.readFileSync(path.join(workspace, 'qwen3.8.bundle', 'manifest.json'), 'utf8'));
    const drawn = await picturesDrawn(frame, ['gated deltanet', 'attention']);
    if (!drawn.tabs.join(' ').includes('gated deltanet')) throw new Error(drawn.tabs.join(', '));
    const tokens = `${Number(bundle.estimate.tokens_per_second).toPrecision(3).replace(/\.?0+$/, '')} tokens/s`;
    if (!drawn.roofline.includes(tokens)) throw new Error(`the roofline does not say ${tokens}: ${drawn.roofline.slice(0, 200)}`);
    const run = await frame.locator('tr.run-row td').nth(1).innerText();
    if (!/\(gated deltanet ×3 · attention\) ×16/.test(run)) throw new Error(`the layers read ${run}`);
    // The picture for the README: the manifest view alone, tall enough for the three pictures, from the chip down.
    await runCommand('Notifications: Clear All Notifications');
    await runCommand('View: Toggle Maximize Editor Group');
    await page.setViewportSize({ width: 1600, height: 2000 });
    await sleep(800);
    await frame.evaluate(() => document.querySelectorAll('h2').forEach((h) => h.textContent === 'Chip' && window.scrollTo(0, h.offsetTop - 8)));
    await sleep(500);
    await shot('manifest-pictures');
    fs.copyFileSync(path.join(artifacts, `${String(step).padStart(2, '0')}-manifest-pictures.png`), path.join(artifacts, 'manifest-pictures.png'));
    await page.setViewportSize({ width: 1600, height: 1000 });
    await sleep(500);
    await runCommand('View: Toggle Maximize Editor Group');
    log(`  qwen3.8: ${tokens}; ${run}`);
    await page.locator('.tab', { hasText: docName }).first().click();
  });
}

try {
  log('opening VS Code');
  await page.goto(`${base}/?folder=${encodeURIComponent(workspace)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await page.locator('.explorer-folders-view .monaco-list-row', { hasText: docName }).first().waitFor({ timeout: 60000 });

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
    await page.locator('.explorer-folders-view .monaco-list-row', { hasText: docName }).first().click();
    await page.locator('.monaco-editor .view-lines').first().waitFor();
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
    const item = page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first();
    await item.waitFor({ timeout: 60000 });
    const text = await item.innerText();
    if (!new RegExp(`· ${layerHeadings.length} layers`).test(text)) throw new Error(`status bar says "${text}"`);
    log(`  status bar: ${text.trim()}`);
  });

  await check('a code lens on a layer header names its kind', async () => {
    const lens = page.locator('.codelens-decoration', { hasText: /· \d+ layers? · first: layer \d+/ }).first();
    await lens.waitFor({ timeout: 60000 });
    log(`  code lens: ${(await lens.innerText()).trim()}`);
    await shot('code-lens');
  });

  await check('the Layer Kinds view lists the kinds', async () => {
    const header = page.locator('.pane-header', { hasText: 'Layer Kinds' });
    await header.waitFor({ timeout: 20000 });
    // Give the view the sidebar: collapse the folder's pane.
    const folderHeader = page.locator('.pane-header', { hasText: /^workspace/i }).first();
    if ((await folderHeader.getAttribute('aria-expanded')) === 'true') await folderHeader.click();
    if ((await header.getAttribute('aria-expanded')) !== 'true') await header.click();
    const pane = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Layer Kinds' }) });
    const kindRows = pane.locator('.monaco-list-row[aria-level="1"]');
    await waitFor('kind rows', async () => (await kindRows.count()) >= 1, 30000);
    const labels = await kindRows.allInnerTexts();
    log(`  kinds: ${labels.map((l) => l.replace(/\s+/g, ' ').trim()).join(' | ')}`);
    if (!labels.some((l) => /attention/.test(l))) throw new Error(`no attention kind in ${labels}`);
    const layerRows = pane.locator('.monaco-list-row[aria-level="2"]', { hasText: /^Layer \d+/ });
    await waitFor('layer rows', async () => (await layerRows.count()) >= 1);
    // Clicking a layer reveals its heading: the last layer row on screen.
    const texts = await layerRows.allInnerTexts();
    const n = Number(/Layer (\d+)/.exec(texts[texts.length - 1])[1]);
    const heading = lineOf(new RegExp(`^##\\s*Layer\\s+${n}(?![0-9])`));
    await layerRows.nth(texts.length - 1).click();
    await waitFor(`the cursor on ## Layer ${n}`, async () => (await cursorPosition())?.line === heading + 1);
    await shot('layer-kinds-view');
  });

  await check('Go to Representative moves the cursor to the representative layer', async () => {
    // A line inside a layer that is not its kind's representative: the second layer's 5th line.
    const second = layerHeadings[1];
    const target = second + 5;
    await page.locator('.monaco-editor .view-lines').first().click();
    await goToLine(target + 1, 5);
    const before = await cursorPosition();
    if (before?.line !== target + 1) throw new Error(`could not place the cursor: ${JSON.stringify(before)}`);
    await runCommand('Streamed: Go to Representative Layer');
    const after = await waitFor('the cursor to move', async () => {
      const p = await cursorPosition();
      return p && p.line !== before.line ? p : undefined;
    }, 20000);
    const inFirst = after.line - 1 >= layerHeadings[0] && after.line - 1 < layerHeadings[1];
    log(`  cursor ${before.line}:${before.col} → ${after.line}:${after.col}`);
    if (!inFirst) throw new Error(`cursor went to line ${after.line}, not into the first layer`);
    await shot('go-to-representative');
  });

  await check('a divergence inserted in a layer appears in the Problems panel', async () => {
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
    const kindsBefore = Number(/(\d+) kinds?/.exec(await page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first().innerText())[1]);
    await page.locator('.monaco-editor .view-lines').first().click();
    await goToLine(ln + 1, col + 1);
    await page.keyboard.press('Shift+End');
    await page.keyboard.insertText(replace(m[2]) + m[3]);
    log(`  edited line ${ln + 1}: ${docLines[ln].trim()} → ${m[1]}${replace(m[2])}`);
    await page.keyboard.press('Control+Shift+M');
    const marker = page.locator('.markers-panel .monaco-list-row', { hasText: /diverg|differ/i }).first();
    await marker.waitFor({ timeout: 30000 });
    log(`  problem: ${(await marker.innerText()).replace(/\s+/g, ' ').trim().slice(0, 200)}`);
    // Shown once: the diagnostics are not duplicated (push and pull).
    const rows = await page.locator('.markers-panel .monaco-list-row[aria-level="2"]').allInnerTexts();
    const dupes = rows.filter((r, i) => rows.indexOf(r) !== i);
    if (dupes.length) throw new Error(`diagnostics shown twice: ${dupes[0].replace(/\s+/g, ' ').slice(0, 120)}`);
    // The Layer Kinds view and the status bar follow the analysis: the edited layer is a kind of its own now.
    const kindsPane = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Layer Kinds' }) });
    const status = page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first();
    const statusKinds = async () => Number(/(\d+) kinds?/.exec(await status.innerText())[1]);
    await waitFor('the status bar to count one more kind', async () => (await statusKinds()) === kindsBefore + 1, 20000);
    // The code lens of the edited layer names its new kind.
    const editedHeading = docLines[from];
    await waitFor('the code lens of the edited layer to change', async () => {
      const lenses = await page.locator('.codelens-decoration').allInnerTexts();
      return lenses.some((t) => /\(layer \d+\)|· 1 layer ·/.test(t));
    }, 20000);
    log(`  code lenses refreshed (${editedHeading.trim()})`);
    // (rows are virtualised: a kind row's aria-setsize is the number of kinds)
    await waitFor('the Layer Kinds view to list one more kind', async () =>
      Number(await kindsPane.locator('.monaco-list-row[aria-level="1"]').first().getAttribute('aria-setsize')) === kindsBefore + 1, 20000);
    await shot('divergence-in-problems');
    // The lens on the diverging layer opens the diff with its representative: exactly the edited statement is
    // marked, on the left as the representative has it, on the right in the representative's names.
    const repIdx = layerHeadings.findIndex((h) => docLines[h].replace(/\d+/, '') === docLines[from].replace(/\d+/, ''));
    const repLayer = Number(/Layer (\d+)/.exec(docLines[layerHeadings[repIdx]])[1]);
    const editedLayer = Number(/Layer (\d+)/.exec(docLines[from])[1]);
    const lens = page.locator('.codelens-decoration a', { hasText: `Compare layer ${editedLayer} with layer ${repLayer}` }).first();
    await lens.waitFor({ timeout: 20000 });
    await lens.click();
    const diff = page.locator('.monaco-diff-editor').first();
    await diff.waitFor({ timeout: 20000 });
    const repLine = docLines[lineOf(finder, layerHeadings[repIdx])].trim();
    const expectedLeft = [repLine];
    const expectedRight = [repLine.replace(re, (_a, p1, p2, p3) => p1 + replace(p2) + p3)];
    const marked = (side, cls) => page.evaluate(([side, cls]) => {
      const ed = document.querySelector(`.monaco-diff-editor .editor.${side}`);
      if (!ed) return undefined;
      const tops = new Set([...ed.querySelectorAll(`.view-overlays > div`)].filter((d) => d.querySelector(`.${cls}`)).map((d) => d.style.top));
      return [...ed.querySelectorAll('.view-lines > .view-line')].filter((l) => tops.has(l.style.top)).map((l) => l.textContent.replace(/\u00a0/g, ' ').trim());
    }, [side, cls]);
    const got = await waitFor('the marked lines of the diff', async () => {
      const left = await marked('original', 'line-delete');
      const right = await marked('modified', 'line-insert');
      return left && right && (left.length || right.length) ? { left, right } : undefined;
    }, 20000);
    log(`  diff marks ${JSON.stringify(got)}`);
    if (JSON.stringify(got) !== JSON.stringify({ left: expectedLeft, right: expectedRight })) {
      throw new Error(`the diff marks ${JSON.stringify(got)}, expected ${JSON.stringify({ left: expectedLeft, right: expectedRight })}`);
    }
    const tabTitle = await page.locator('.tab.active').first().innerText();
    if (!new RegExp(`Layer ${repLayer} ↔ Layer ${editedLayer}`).test(tabTitle)) throw new Error(`the diff's title is "${tabTitle}"`);
    await shot('compare-with-representative');
    await page.keyboard.press('Control+W');
    await page.locator('.tab', { hasText: docName }).first().click();
    // Undo, and the problem goes away.
    await page.locator('.monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+Z');
    await page.keyboard.press('Control+S');
    await waitFor('the divergence to clear', async () => (await page.locator('.markers-panel .monaco-list-row', { hasText: /diverg|differ/i }).count()) === 0);
    await waitFor('the code lenses to name the kinds again', async () => {
      const lenses = await page.locator('.codelens-decoration').allInnerTexts();
      return lenses.length > 0 && !lenses.some((t) => /\(layer \d+\)|· 1 layer ·/.test(t));
    }, 20000);
    await runCommand('View: Hide Panel');
  });

  await check('streamed.trace.server alone shows the LSP trace in the Streamed Trace channel', async () => {
    // verbose: every message with its parameters (the log level of the channel was never touched)
    const text = await waitFor('the trace', async () => {
      const t = channelText('Streamed Trace');
      return /Sending request 'initialize/.test(t) && /Params: \{/.test(t) ? t : undefined;
    }, 20000);
    log(`  trace: ${text.split('\n').length} lines, e.g. ${text.split('\n').find((l) => /Sending request 'initialize/.test(l)).trim().slice(0, 100)}`);
    await runCommand('Output: Show Output Channels');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Streamed Trace' }).first().click();
    // The channel scrolls to its end, a verbose result's JSON: the Output view's filter shows the requests sent.
    const filter = page.locator('.part.panel .viewpane-filter input, .part.panel input[placeholder="Filter"]').first();
    // The filter box can be swapped while the channel's 27,000 lines load, dropping what was typed: type it again
    // until the view shows it applied.
    const wanted = "Sending request 'textDocument/";
    await waitFor('the trace in the Output view', async () => {
      if ((await filter.inputValue().catch(() => '')) !== wanted) await filter.fill(wanted);
      return /Sending request 'textDocument\//.test(await panelText());
    }, 30000);
    await shot('trace-output');
    await filter.fill('');
    await runCommand('View: Hide Panel');
  });

  await check('Lower SN50 Bundle writes the bundle and opens the manifest view', async () => {
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Lower SN50 Bundle');
    const input = page.locator('.quick-input-widget input');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'decode' }).first().waitFor();
    await shot('lower-pick-deployment');
    await input.fill('decode');
    await sleep(150);
    await page.keyboard.press('Enter');
    await waitFor('the ctx input', async () => /ctx/.test(await page.locator('.quick-input-widget').innerText()));
    await page.keyboard.press('Enter'); // ctx: the default from settings
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'No checkpoint' }).first().waitFor();
    await input.fill('No checkpoint');
    await sleep(150);
    await page.keyboard.press('Enter');
    // The bundle folder: a save dialog (code-server's is a quick input holding the path), <stem>.bundle proposed.
    const bundleDir = path.join(workspace, docName.replace(/\.lgm$/, '.bundle'));
    await waitFor('the save dialog for the bundle folder', async () => (await input.isVisible()) && (await input.inputValue()).endsWith(path.basename(bundleDir)), 20000);
    await shot('lower-bundle-folder');
    await page.keyboard.press('Enter');
    // The manifest view: a webview (nested iframes) with one row per layer.
    const frame = await waitFor('the manifest webview', async () => {
      for (const f of page.frames()) {
        if ((await f.locator('#layers').count().catch(() => 0)) > 0) return f;
      }
      return undefined;
    }, 120000);
    const rows = await waitFor('layer rows', async () => {
      const n = await frame.locator('tr.layer-row').count();
      return n > 0 ? n : undefined;
    });
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
    const bundles = fs.readdirSync(workspace, { recursive: true }).filter((f) => String(f).endsWith('manifest.json') && !String(f).startsWith('.venv'));
    if (!fs.existsSync(path.join(bundleDir, 'manifest.json'))) throw new Error(`no manifest.json in ${bundleDir}: ${bundles.join(', ')}`);
    log(`  manifest: ${bundles.join(', ')}; ${rows} layer rows`);
    await sleep(500);
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
    const tab = page.locator('.tab', { hasText: /^Manifest/ }).first();
    await tab.click();
    await page.keyboard.press('Control+W');
    await waitFor('the manifest view to close', async () => (await page.locator('.tab', { hasText: /^Manifest/ }).count()) === 0);
    await page.locator('.tab', { hasText: docName }).first().click();
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Open Manifest');
    const frame = await waitFor('the manifest webview', async () => {
      for (const f of page.frames()) if ((await f.locator('#layers').count().catch(() => 0)) > 0) return f;
      return undefined;
    }, 30000);
    const rows = await frame.locator('tr.layer-row').count();
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
  });

  await check('the manifest view comes back after a reload', async () => {
    await reloadWindow();
    const frame = await waitFor('the restored manifest webview', async () => {
      for (const f of page.frames()) if ((await f.locator('#layers').count().catch(() => 0)) > 0) return f;
      return undefined;
    }, 60000);
    const rows = await frame.locator('tr.layer-row').count();
    if (rows !== layerHeadings.length) throw new Error(`${rows} layer rows for ${layerHeadings.length} layers`);
    await page.locator('.tab', { hasText: docName }).first().click();
    await statusKinds().waitFor({ timeout: 60000 });
  });

  await checkPictures();

  await check('Author Model from Config… writes the document and opens it', async () => {
    const cfgSrc = path.join(repo, 'examples', 'configs', 'small-gemma3.json');
    if (!fs.existsSync(cfgSrc)) throw new Error(`no ${cfgSrc}`);
    fs.mkdirSync(path.join(workspace, 'configs'), { recursive: true });
    const cfg = path.join(workspace, 'configs', 'small-gemma3.json');
    fs.copyFileSync(cfgSrc, cfg);
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Author Model from Config');
    // code-server's file dialogs are quick inputs holding a path.
    const input = page.locator('.quick-input-widget input');
    await waitFor('the open dialog', async () => (await input.isVisible()) && (await input.inputValue()).startsWith('/'));
    // (the dialog fills its own folder in as it opens: type until the path stays)
    await waitFor('the config path in the dialog', async () => {
      await input.fill(cfg);
      await sleep(500);
      return (await input.inputValue()) === cfg;
    }, 20000);
    await shot('author-pick-config');
    await page.keyboard.press('Enter');
    await waitFor('the save dialog', async () => (await input.isVisible()) && /small-gemma3\.lgm$/.test(await input.inputValue()), 20000);
    await page.keyboard.press('Enter');
    const out = path.join(workspace, 'small-gemma3.lgm');
    await waitFor('the authored document', async () => fs.existsSync(out), 60000);
    await page.locator('.tab', { hasText: 'small-gemma3.lgm' }).first().waitFor({ timeout: 20000 });
    await page.locator('.codelens-decoration', { hasText: /first: layer|\d+ kinds? · / }).first().waitFor({ timeout: 60000 });
    log(`  authored ${path.basename(out)}: ${fs.readFileSync(out, 'utf8').split('\n')[0]}`);
    await shot('authored-document');
  });

  await check('the language status shows the deployment and changes it with a quick pick', async () => {
    await page.locator('.tab', { hasText: docName }).first().click();
    await page.locator('.monaco-editor .view-lines').first().click();
    const status = page.locator('.statusbar-item[id="status.languageStatus"]').first();
    await status.click();
    const hover = page.locator('.monaco-hover', { hasText: 'decode · ctx 4096 · SN50' }).first();
    await hover.waitFor({ timeout: 20000 });
    await shot('language-status');
    await hover.getByText('Change Deployment').first().click();
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'prefill' }).first().waitFor();
    const input = page.locator('.quick-input-widget input');
    await input.fill('prefill');
    await sleep(150);
    await page.keyboard.press('Enter');
    await waitFor('the ctx input', async () => /ctx/.test(await page.locator('.quick-input-widget').innerText()));
    await page.keyboard.press('Enter');
    await waitFor('the chunk input', async () => /chunk/.test(await page.locator('.quick-input-widget').innerText()));
    await input.fill('256');
    await page.keyboard.press('Enter');
    const settings = path.join(workspace, '.vscode', 'settings.json');
    await waitFor('the workspace settings', async () => {
      const j = fs.existsSync(settings) ? JSON.parse(fs.readFileSync(settings, 'utf8')) : {};
      return j['streamed.deployment.mode'] === 'prefill' && j['streamed.deployment.chunk'] === 256;
    }, 20000);
    await page.locator('.monaco-editor .view-lines').first().click();
    await status.click();
    await page.locator('.monaco-hover', { hasText: 'prefill · ctx 4096 · chunk 256 · SN50' }).first().waitFor({ timeout: 20000 });
    await page.keyboard.press('Escape');
  });

  await check('a crashed server is restarted, and Streamed: Restart Server restarts it', async () => {
    const [pid] = await waitFor('the server process', async () => serverPids(workspace)[0] !== undefined && serverPids(workspace), 10000);
    process.kill(pid, 'SIGKILL');
    const [pid2] = await waitFor('a new server process', async () => {
      const p = serverPids(workspace);
      return p.length && !p.includes(pid) ? p : undefined;
    }, 30000);
    log(`  killed server ${pid}; restarted as ${pid2}`);
    await waitFor('the restarted server to analyse the document', async () =>
      (await page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).count()) > 0, 30000);
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Streamed: Restart Server');
    const [pid3] = await waitFor('the restarted server process', async () => {
      const p = serverPids(workspace);
      return p.length && !p.includes(pid2) ? p : undefined;
    }, 30000);
    log(`  Restart Server: ${pid2} → ${pid3}`);
    await page.locator('.statusbar-item', { hasText: /\d+ kinds? · \d+ layers?/ }).first().waitFor({ timeout: 30000 });
    await shot('server-restarted');
  });

  // ---------------------------------------------------------------------------------------------- first run
  // A workspace without a .venv, no setting, no Python extension: python3 from the PATH has no server.
  const fresh = path.join(tmp, 'workspace-fresh');
  fs.mkdirSync(fresh, { recursive: true });
  // The document with a divergence (its fourth layer's first epsilon changed), so that diagnostics have something to say.
  const diverging = lineOf(/\brmsnorm of .*epsilon/, layerHeadings[Math.min(3, layerHeadings.length - 1)]);
  fs.writeFileSync(path.join(fresh, docName), docLines.map((l, i) => (i === diverging ? l.replace(/epsilon (\S+?)\./, (_m, v) => `epsilon ${v}0.`) : l)).join('\n'));
  const envDir = path.join(globalStorage, 'server-env');
  const stampFile = path.join(globalStorage, 'server-env.json');
  await check('first run: no Python has the server → Set Up Server → the private environment from the bundled wheel → diagnostics', async () => {
    if (fs.existsSync(envDir)) throw new Error(`${envDir} exists before the first run`);
    await openFolder(fresh, docName);
    const toast = page.locator('.notification-toast', { hasText: 'the language server is not installed in' }).first();
    await toast.waitFor({ timeout: 60000 });
    const text = (await toast.innerText()).replace(/\s+/g, ' ');
    log(`  notification: ${text.slice(0, 240)}`);
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
    await page.keyboard.press('Control+Shift+M');
    const marker = page.locator('.markers-panel .monaco-list-row', { hasText: /diverg|differ/i }).first();
    await marker.waitFor({ timeout: 30000 });
    await sleep(2000);
    const shown = await page.locator('.markers-panel .monaco-list-row[aria-level="2"]', { hasText: /is not one program/ }).count();
    if (shown !== 1) throw new Error(`the divergence is shown ${shown} times`);
    log(`  server ${server.pid}: ${server.python} (made with ${stamp.python}); problem: ${(await marker.innerText()).replace(/\s+/g, ' ').trim().slice(0, 120)}`);
    await shot('first-run-diagnostics');
  });

  await check('the task streamed: check puts what streamed check says in the Problems panel', async () => {
    await page.locator('.monaco-editor .view-lines').first().click();
    await runCommand('Tasks: Run Task');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'streamed' }).first().click();
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: `check ${docName}` }).first();
    await row.waitFor({ timeout: 20000 });
    await row.click();
    await runCommand('View: Focus Problems');
    const fromTask = page.locator('.markers-panel .monaco-list-row', { hasText: 'streamed check' }).first();
    await fromTask.waitFor({ timeout: 60000 });
    const text = (await fromTask.innerText()).replace(/\s+/g, ' ');
    if (!/is not one program with layer/.test(text)) throw new Error(`the task's problem: ${text}`);
    log(`  task problem: ${text.slice(0, 160)}`);
    await shot('check-task');
  });

  await check('a private environment made by another version of the extension is upgraded before the server starts', async () => {
    const stamp = JSON.parse(fs.readFileSync(stampFile, 'utf8'));
    fs.writeFileSync(stampFile, JSON.stringify({ ...stamp, extension: '0.0.1' }));
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
    const toast = page.locator('.notification-toast', { hasText: 'stopped at start-up' }).first();
    await toast.waitFor({ timeout: 60000 });
    await sleep(4000); // any other notification the failure would raise has arrived by now
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
    await waitFor('the output with the traceback', async () =>
      /No module named 'lsprotocol'/.test(await panelText()), 20000);
    await shot('start-up-crash-output');
    // Restart Server tries that Python again (the same message); Set Up Server then starts the private environment.
    await page.locator('.monaco-editor .view-lines').first().click();
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
  await shot('FAILED-workbench').catch(() => undefined);
} finally {
  fs.writeFileSync(path.join(artifacts, 'browser-console.log'), consoleLines.join('\n'));
  await browser.close().catch(() => undefined);
  try {
    process.kill(-cs.pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  const serverLogs = path.join(userData, 'logs');
  if (fs.existsSync(serverLogs)) fs.cpSync(serverLogs, path.join(artifacts, 'logs'), { recursive: true });
  if (!process.env.STREAMED_E2E_KEEP) fs.rmSync(tmp, { recursive: true, force: true });
  else log(`kept ${tmp}`);
}

const failed = results.filter((r) => !r.ok);
console.log(`\ne2e: ${((Date.now() - t0) / 1000).toFixed(0)}s, artifacts in ${path.relative(process.cwd(), artifacts) || '.'}`);
for (const r of results) console.log(`  ${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.ok ? '' : ` — ${r.error?.message ?? r.error}`}`);
console.log(`e2e: ${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
