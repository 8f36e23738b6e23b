"""``python -m tests.bench.killed_run STEP ARGS...``: ``plmbench ARGS`` that kills itself with
SIGKILL right after optimizer step STEP, as a crash or a preempted cluster job ends a run: no
handler runs, no record is written, only the checkpoints already on disk remain."""

import os
import signal
import sys

from bench import checkpoints, cli


def main() -> int:
    step, args = int(sys.argv[1]), sys.argv[2:]
    checked = checkpoints.FiniteLoss.on_train_batch_end

    def then_die(self, trainer, *rest):
        checked(self, trainer, *rest)
        if trainer.global_step == step:
            os.kill(os.getpid(), signal.SIGKILL)

    checkpoints.FiniteLoss.on_train_batch_end = then_die
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
