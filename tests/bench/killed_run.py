"""``python -m tests.bench.killed_run STEP[:SIGNAL] ARGS...``: ``plmbench ARGS`` that sends itself
SIGNAL (default KILL) right after optimizer step STEP. SIGKILL is how a crash or a preempted
cluster job ends a run: no handler runs, no record is written, only the checkpoints already on
disk remain. SIGINT is Ctrl-C: Lightning's Trainer shuts down "gracefully" and the run's record
must say it was interrupted."""

import os
import signal
import sys

from bench import cli
from bench.run import checkpoints


def main() -> int:
    at, _, name = sys.argv[1].partition(":")
    step, sent, args = int(at), signal.Signals[f"SIG{name or 'KILL'}"], sys.argv[2:]
    checked = checkpoints.FiniteLoss.on_train_batch_end

    def then_signal(self, trainer, *rest):
        checked(self, trainer, *rest)
        if trainer.global_step == step:
            os.kill(os.getpid(), sent)

    checkpoints.FiniteLoss.on_train_batch_end = then_signal
    # as from a terminal: a suite started in the background by a non-interactive shell passes
    # SIGINT on ignored, and Python then installs no KeyboardInterrupt handler for Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
