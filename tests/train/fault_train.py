"""Test-only entry point: ``python tests/train/fault_train.py ARGS`` == ``torchport train ARGS`` plus faults
injected from outside the loop, through :func:`torchport.train.loop.train`'s ``callbacks`` (the production loop
reads no test variables). Usable under torchrun (``torchrun ... tests/train/fault_train.py ARGS``).

* ``TORCHPORT_FAULT_STEP_DELAY_S=0.15`` -- sleep after every optimizer step (so a test can SIGKILL mid-epoch);
* ``TORCHPORT_FAULT_EXIT=RANK:STEP`` -- that rank exits with status 3 right after that optimizer step, in the
  first attempt only (``TORCHELASTIC_RESTART_COUNT`` 0 or unset), so an elastic restart runs through;
* ``TORCHPORT_FAULT_HANG=RANK:STEP`` -- that rank stops answering right after that optimizer step (sleeps, alive,
  in no collective), first attempt only: the others wait in their next collective until the collective timeout.
"""

from __future__ import annotations

import functools
import os
import time


def fault(*, step: int, epoch: int, rank: int) -> None:
    delay = float(os.environ.get("TORCHPORT_FAULT_STEP_DELAY_S") or 0)
    if delay:
        time.sleep(delay)
    exit_at = os.environ.get("TORCHPORT_FAULT_EXIT")
    first_attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0) == 0
    if exit_at and first_attempt and tuple(int(v) for v in exit_at.split(":")) == (rank, step):
        os._exit(3)
    hang_at = os.environ.get("TORCHPORT_FAULT_HANG")
    if hang_at and first_attempt and tuple(int(v) for v in hang_at.split(":")) == (rank, step):
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    from torchport.cli.train import main
    from torchport.train import loop

    loop.train = functools.partial(loop.train, callbacks=[fault])
    main()
