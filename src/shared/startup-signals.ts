import type { Logger } from './logger.js';

type Signal = 'SIGTERM' | 'SIGINT';
const SIGNALS: Signal[] = ['SIGTERM', 'SIGINT'];

/**
 * SIGTERM and SIGINT from the first line of a process's start-up. Without a handler, a signal that arrives
 * while the process is still starting (opening the database, applying migrations) kills it by the signal:
 * exit status 143 for a process manager that only asked it to stop, and an embedded database whose
 * migrations were cut off in memory. Here the signal is noted instead; the start-up calls
 * `stopIfRequested` between its steps (never inside one, so a migration always runs to its end) and
 * exits 0 there after closing what it opened; once serving, `handOver` gives the signals to the process's
 * own graceful shutdown (a signal noted before that runs it at once).
 */
export class StartupSignals {
  private requested: Signal | null = null;
  private readonly early = (signal: Signal) => {
    if (this.requested) return;
    this.requested = signal;
    this.log.info({ signal }, 'stop requested while starting: stopping after the current step');
  };
  private readonly listeners = new Map<Signal, () => void>();

  constructor(private readonly log: Logger) {
    for (const s of SIGNALS) {
      const l = () => this.early(s);
      this.listeners.set(s, l);
      process.on(s, l);
    }
  }

  /** When a stop was requested: closes what the start-up opened so far, logs "stopped", exits 0. */
  async stopIfRequested(close: () => Promise<unknown> = async () => undefined): Promise<void> {
    if (!this.requested) return;
    try {
      await close();
    } catch (err) {
      this.log.error({ err }, 'stopping during start-up failed');
      process.exit(1);
    }
    this.log.info('stopped');
    process.exit(0);
  }

  /** From now on the signals run `shutdown`; one noted during the start-up runs it at once. */
  handOver(shutdown: (signal: Signal) => void): void {
    for (const [s, l] of this.listeners) process.off(s, l);
    for (const s of SIGNALS) process.on(s, () => shutdown(s));
    if (this.requested) shutdown(this.requested);
  }
}
