// `$/progress` (LSP work-done progress) → VS Code's progress.report({message, increment}).
// VS Code wants increments; the server sends absolute percentages. Pure.

export interface WorkDoneValue {
  kind: 'begin' | 'report' | 'end';
  title?: string;
  message?: string;
  percentage?: number;
  cancellable?: boolean;
}

export interface ProgressStep {
  message?: string;
  increment?: number;
}

export class ProgressMapper {
  private last = 0;
  private title: string | undefined;

  /** The step to report for one `$/progress` value, or undefined when there is nothing to show. */
  map(value: WorkDoneValue): ProgressStep | undefined {
    if (!value || typeof value !== 'object') return undefined;
    if (value.kind === 'begin') {
      this.last = 0;
      this.title = value.title;
    }
    const step: ProgressStep = {};
    const text = value.kind === 'end' ? value.message ?? 'done' : value.message ?? (value.kind === 'begin' ? value.title : undefined);
    if (text !== undefined) step.message = this.title && value.kind !== 'begin' && value.message ? value.message : text;
    let pct = value.kind === 'end' ? 100 : value.percentage;
    if (typeof pct === 'number' && Number.isFinite(pct)) {
      pct = Math.max(0, Math.min(100, pct));
      if (pct > this.last) {
        step.increment = pct - this.last;
        this.last = pct;
      }
    }
    return step.message === undefined && step.increment === undefined ? undefined : step;
  }

  get percentage(): number {
    return this.last;
  }
}
