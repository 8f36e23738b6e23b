"""SIGTERM ends a command as Ctrl-C does: what schedulers (SLURM's ``scancel`` and time limit,
Kubernetes, systemd) and ``kill`` send to stop a job.

Python turns SIGINT into ``KeyboardInterrupt``, which a run answers with a record saying
``failure_kind: interrupted``, a checkpoint to resume from, one line and exit status 130
(``bench/run/execute.py``). SIGTERM's default is to die with no record at all, and Lightning's
own handler only notes it; ``stop_on_sigterm`` makes it raise ``Terminated``, a
``KeyboardInterrupt``, so the same path records it, and the command exits 128 + 15 = 143 as a
shell reports a process ended by SIGTERM. (Where plmbench's command line is not the entry point,
a SLURM task under submitit, Lightning's own ``SIGTERMException`` is read the same way:
``bench/run/execute.interrupting_signal``.) A second SIGTERM during the shutdown is ignored (the
scheduler's SIGKILL follows its grace period)."""

from __future__ import annotations

import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread was when it came."""


def _terminate(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the shutdown runs once
    raise Terminated("SIGTERM")


def stop_on_sigterm() -> None:
    """From now on SIGTERM raises ``Terminated`` (only the main thread can set a handler)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)


def stopping_signal(err: BaseException | None) -> signal.Signals | None:
    """The signal behind ``err`` (SIGTERM or SIGINT), following what it was raised while
    handling (Lightning's graceful shutdown ends in ``sys.exit(1)``); None for anything else."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, Terminated) or getattr(err, "signum", None) == signal.SIGTERM:
            return signal.SIGTERM
        if isinstance(err, KeyboardInterrupt):
            return signal.SIGINT
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def described(signum: signal.Signals) -> str:
    """How a record and the command's last line name the signal."""
    return ("SIGTERM (scancel, scontrol requeue, a preemption or kill)"
            if signum == signal.SIGTERM else "Ctrl-C (SIGINT)")
