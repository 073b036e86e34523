/// <reference lib="dom" />
// The manifest view's page script (bundled by esbuild into dist/webview.js, loaded under the view's Content
// Security Policy: no inline code, no eval — Vega runs its expressions through vega-interpreter). It keeps the view's
// state for VS Code, folds and unfolds runs of layers, switches the chip's program, sends clicks on a layer or a chip
// region to the extension (which reveals it in the document), and places the pictures the extension posts: the
// chip's SVG as the server drew it, the memory and the roofline rendered from their Vega-Lite specifications.
import embed from 'vega-embed';

declare function acquireVsCodeApi(): { postMessage(msg: unknown): void; setState(state: unknown): void };

const vscode = acquireVsCodeApi();
const kept = document.getElementById('view-state');
if (kept?.textContent) vscode.setState(JSON.parse(kept.textContent));

function dark(): boolean {
  return document.body.classList.contains('vscode-dark') || document.body.classList.contains('vscode-high-contrast');
}

document.addEventListener('click', (e) => {
  const target = e.target as Element | null;
  if (!target || !target.closest) return;
  const link = target.closest<HTMLElement>('.layer-link');
  if (link) {
    e.preventDefault();
    vscode.postMessage({ type: 'reveal', layer: Number(link.dataset.layer) });
    return;
  }
  const run = target.closest<HTMLElement>('tr.run-row');
  if (run) {
    const toggle = run.querySelector<HTMLElement>('.run-toggle');
    const open = toggle?.getAttribute('aria-expanded') !== 'true';
    toggle?.setAttribute('aria-expanded', String(open));
    run.parentElement?.querySelectorAll<HTMLElement>('tr.layer-row').forEach((row) => (row.hidden = !open));
    return;
  }
  const tab = target.closest<HTMLElement>('.chip-tab');
  if (tab) {
    const program = tab.dataset.program;
    document.querySelectorAll<HTMLElement>('.chip-tab').forEach((t) => t.setAttribute('aria-selected', String(t === tab)));
    document.querySelectorAll<HTMLElement>('.chip-pane').forEach((p) => (p.hidden = p.dataset.program !== program));
    return;
  }
  const region = target.closest('g.region[data-line]');
  if (region) vscode.postMessage({ type: 'revealLine', line: Number(region.getAttribute('data-line')) });
});

async function draw(id: string, spec: unknown): Promise<void> {
  const el = document.getElementById(id);
  if (!el) return;
  if (!spec) {
    el.innerHTML = '<p class="muted">not drawn</p>';
    return;
  }
  try {
    await embed(el, spec as any, {
      renderer: 'svg',
      actions: false,
      defaultStyle: false,
      ast: true,
      theme: dark() ? 'dark' : undefined,
      config: { background: 'transparent' },
      tooltip: { disableDefaultStyle: true, theme: dark() ? 'dark' : 'light' },
    });
    el.setAttribute('data-drawn', 'true');
  } catch (err) {
    el.innerHTML = '';
    const p = document.createElement('p');
    p.className = 'error';
    p.textContent = `This picture could not be drawn: ${err instanceof Error ? err.message : String(err)}`;
    el.append(p);
  }
}

function says(id: string, text: string, error = false): void {
  const el = document.getElementById(id);
  if (!el) return;
  el.innerHTML = '';
  const p = document.createElement('p');
  p.className = error ? 'error' : 'muted';
  p.textContent = text;
  el.append(p);
}

// A chip region's hover: what its <title> says (the op, its units, its statement at its line), shown at once beside
// the pointer — the titles move into `data-hover`, so the browser's own slower tooltip does not show them twice.
const hover = document.createElement('div');
hover.id = 'chip-hover';
hover.setAttribute('role', 'tooltip');
document.body.append(hover);

function hoverable(root: Element): void {
  root.querySelectorAll('g.region, rect.phase').forEach((g) => {
    const title = g.querySelector(':scope > title');
    if (!title) return;
    g.setAttribute('data-hover', title.textContent ?? '');
    title.remove();
  });
}

document.addEventListener('mousemove', (e) => {
  const target = e.target as Element | null;
  const over = target?.closest?.('[data-hover]');
  if (!over) {
    hover.classList.remove('visible');
    return;
  }
  hover.textContent = over.getAttribute('data-hover');
  hover.classList.add('visible');
  const x = Math.min(e.clientX + 14, window.innerWidth - hover.offsetWidth - 8);
  const y = e.clientY + 16 + hover.offsetHeight > window.innerHeight ? e.clientY - hover.offsetHeight - 10 : e.clientY + 16;
  hover.style.left = `${Math.max(x, 4)}px`;
  hover.style.top = `${Math.max(y, 4)}px`;
});

window.addEventListener('message', (event) => {
  const msg = event.data;
  if (msg?.type === 'pictures') {
    const chip = document.getElementById('chip');
    if (chip) {
      chip.innerHTML = String(msg.chip ?? '');
      hoverable(chip);
      chip.setAttribute('data-drawn', 'true');
    }
    const spills = document.getElementById('spills');
    if (spills) {
      spills.innerHTML = '';
      for (const s of Array.isArray(msg.spills) ? msg.spills : []) {
        const li = document.createElement('li');
        li.textContent = String(s);
        spills.append(li);
      }
    }
    void draw('memory', msg.memory);
    void draw('roofline', msg.roofline);
  } else if (msg?.type === 'picturesWaiting' || msg?.type === 'picturesError') {
    for (const id of ['chip', 'memory', 'roofline']) says(id, String(msg.message ?? ''), msg.type === 'picturesError');
  }
});

// How wide the pictures may be: the picture sections' width, said when the page is ready and again (settled) when
// the panel is resized — the server draws every picture to fit it (moved beside the document, to full width, into a
// narrow sidebar).
function pictureWidth(): number {
  return document.getElementById('chip')?.clientWidth ?? document.body.clientWidth;
}
let resized: ReturnType<typeof setTimeout> | undefined;
window.addEventListener('resize', () => {
  if (resized) clearTimeout(resized);
  resized = setTimeout(() => vscode.postMessage({ type: 'width', width: pictureWidth() }), 250);
});

vscode.postMessage({ type: 'ready', width: pictureWidth() });
