// `streamed check`'s lines (`path:line:col: error|warning: message`) as values, and the sentence that ends a check
// task's terminal. Pure: no `vscode` import, so the unit tests run under plain node.

export interface CheckLine {
  file: string;
  line: number;
  column: number;
  severity: 'error' | 'warning';
  message: string;
}

const LINE = /^(.+?):(\d+):(\d+): (error|warning): (.*)$/;

/** One line of `streamed check`'s output as a problem, or undefined for any other line. */
export function parseCheckLine(text: string): CheckLine | undefined {
  const m = LINE.exec(text.replace(/\r$/, ''));
  if (!m) return undefined;
  return { file: m[1], line: Number(m[2]), column: Number(m[3]), severity: m[4] as 'error' | 'warning', message: m[5] };
}

function count(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** `2 errors and 1 warning in tiny.lgm`, or `no problems in tiny.lgm`: what a finished check says. */
export function checkSummary(lines: CheckLine[], file: string): string {
  const errors = lines.filter((l) => l.severity === 'error').length;
  const warnings = lines.length - errors;
  if (!lines.length) return `streamed check: no problems in ${file}`;
  const parts = [errors ? count(errors, 'error') : '', warnings ? count(warnings, 'warning') : ''].filter(Boolean);
  return `streamed check: ${parts.join(' and ')} in ${file} (in the Problems panel)`;
}
