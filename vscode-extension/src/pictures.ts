// The manifest view's pictures, as the server draws them (`streamed.pictures`: the core's chip SVG per program and
// the Vega-Lite specifications of the memory and the roofline): the sections they fill, and the chip's program tabs.
// Pure (no VS Code, no DOM): the webview script (`webview/manifestPage.ts`) only places what this returns and renders
// the two specifications with vega-embed.
import { escapeHtml } from './html';

export interface ChipPicture {
  program?: string;
  title?: string;
  svg?: string;
}

/** What `streamed.pictures` answers. */
export interface Pictures {
  manifest?: string;
  chip?: ChipPicture[];
  memory?: { spec?: unknown; spills?: string[] };
  roofline?: { spec?: unknown; point?: { tokens_per_second?: number | null; bound?: string } };
}

/** The narrowest and widest panel the server draws for (`server/pictures.py`, `WIDTHS`). */
export const PICTURE_WIDTHS = [200, 8000] as const;

/**
 * The width the pictures are drawn for, from the width of the page's picture sections (CSS pixels): whole pixels,
 * within what the server draws for. Every picture is drawn by the server to fit it, so nothing lies past the view.
 */
export function pictureWidth(clientWidth: number): number | undefined {
  if (!Number.isFinite(clientWidth) || clientWidth <= 0) return undefined;
  return Math.min(PICTURE_WIDTHS[1], Math.max(PICTURE_WIDTHS[0], Math.floor(clientWidth)));
}

/** Whether the pictures drawn for `drawn` pixels are to be drawn again for a panel now `now` wide: a change of a few
 *  pixels (a scroll bar coming and going) is not one. */
export function redrawFor(drawn: number | undefined, now: number | undefined): boolean {
  return now !== undefined && (drawn === undefined || Math.abs(now - drawn) >= 24);
}

/** What the view posts to its page: the chip's HTML made here, the specifications as they came. */
export interface PicturesMessage {
  type: 'pictures';
  chip: string;
  memory: unknown;
  roofline: unknown;
  spills: string[];
}

/** The three sections the pictures fill, each saying what it waits for until they arrive. */
export function pictureSections(waiting = 'Drawing…'): string {
  const wait = `<p class="muted pending">${escapeHtml(waiting)}</p>`;
  return [
    `<h2>Chip</h2>`,
    `<p class="muted">Each program on the chip: its PCUs and PMUs as the target's grids, coloured by the statement they serve (hover a region for it; click to go to it).</p>`,
    `<div id="chip" class="picture">${wait}</div>`,
    `<h2>Memory</h2>`,
    `<div id="memory" class="picture">${wait}</div>`,
    `<ul id="spills" class="spills"></ul>`,
    `<h2>Roofline</h2>`,
    `<div id="roofline" class="picture">${wait}</div>`,
  ].join('\n');
}

/** The program a view shows first: the first layer kind's (the embed and the head are small), else the first. */
export function firstShown(chips: readonly ChipPicture[]): number {
  const k = chips.findIndex((c) => c.program !== 'embed' && c.program !== 'head');
  return k >= 0 ? k : 0;
}

/** One tab per program and its floorplan; only the shown program's floorplan is visible. */
export function renderChips(chips: readonly ChipPicture[]): string {
  if (!chips.length) return '<p class="muted">No program to draw.</p>';
  const shown = firstShown(chips);
  const tabs = chips
    .map((c, i) => `<button type="button" role="tab" class="chip-tab" data-program="${i}" aria-selected="${i === shown}" title="${escapeHtml(c.title ?? c.program ?? '')}">${escapeHtml(c.program ?? `program ${i}`)}</button>`)
    .join('');
  const panes = chips
    .map((c, i) => `<div class="chip-pane" role="tabpanel" data-program="${i}"${i === shown ? '' : ' hidden'}>${typeof c.svg === 'string' ? c.svg : ''}</div>`)
    .join('\n');
  return `<div class="chip-tabs" role="tablist">${tabs}</div>\n${panes}`;
}

export function picturesMessage(p: Pictures): PicturesMessage {
  return {
    type: 'pictures',
    chip: renderChips(Array.isArray(p.chip) ? p.chip : []),
    memory: p.memory?.spec ?? null,
    roofline: p.roofline?.spec ?? null,
    spills: Array.isArray(p.memory?.spills) ? p.memory!.spills!.map(String) : [],
  };
}
