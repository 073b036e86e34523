"""How the command stops when it is told to: every signal that would end the process (Ctrl-C, ``kill``, a closed
terminal, ``timeout``) is raised as ``Stopped`` at the point the command had reached, so what it was writing is
cleaned up by the same ``except``/``finally`` paths that clean up after an error — never left half-written.

Only while a bundle is being moved into place (``Signals.deferred``) is a signal held back: the two renames finish,
the bundle is installed, and the command reports that it was — an installed bundle is not "interrupted". From then on
the command is finishing anyway, so the held signal is reported, not raised.

Installed by ``main`` for the duration of one command and restored after, so a program (or a test) that calls
``main`` keeps its own handlers. A signal that lands while they are installed or restored is said like any other
(``main`` catches ``Stopped`` around the installation), and once one has stopped the command, the next (a second
Ctrl-C) does not cut short the cleanup the first started.
"""

from __future__ import annotations

import contextlib
import signal

#: Signals whose default action ends the process and that a process may catch (SIGKILL and SIGSTOP it may not;
#: SIGPIPE is ignored by Python and seen as BrokenPipeError; SIGPROF belongs to profilers).
STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
                                                   "SIGALRM", "SIGXCPU", "SIGXFSZ", "SIGVTALRM")
                 if hasattr(signal, name))


class Stopped(KeyboardInterrupt):
    """The command was told to stop by ``signum``. A ``KeyboardInterrupt``, so code that cleans up after Ctrl-C
    cleans up after ``kill`` too."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM)."""
        return 128 + self.signum


class Signals:
    def __init__(self):
        self.holding = False
        self.held: int | None = None  # the first signal received while holding
        self.stopping = False  # a ``Stopped`` is on its way: the cleanup it runs is not cut short by another

    def _handler(self, signum, frame):
        if self.stopping:
            return
        if self.holding:
            if self.held is None:
                self.held = signum
            return
        self.stopping = True
        raise Stopped(signum)

    @contextlib.contextmanager
    def installed(self):
        """Raise ``Stopped`` for every stopping signal while the block runs (in the main thread only: elsewhere
        handlers cannot be set, and nothing is changed)."""
        self.holding, self.held, self.stopping = False, None, False
        previous = {}
        try:
            for s in STOPPING:
                try:
                    # Kept before the new one is set: a signal that lands as it is set still has it restored.
                    previous[s] = signal.getsignal(s)
                    signal.signal(s, self._handler)
                except (ValueError, OSError):  # not the main thread, or a signal this platform will not hand over
                    previous.pop(s, None)
            yield self
        finally:
            for s, handler in previous.items():
                if handler is not None:  # None: a handler not set from Python, which cannot be put back
                    signal.signal(s, handler)

    @contextlib.contextmanager
    def deferred(self):
        """Hold stopping signals back while the block runs. If it fails, holding ends and the failure is what the
        command reports. If it succeeds, holding goes on: the command reports what it did, and ``main`` adds that a
        signal came meanwhile (``held``) and was acted on by finishing."""
        self.holding = True
        try:
            yield
        except BaseException:
            self.holding = False
            raise
        # Holding on: the bundle is in place and the command is finishing.


#: The command line's signals (one process, one command at a time).
SIGNALS = Signals()
