"""Input-pipeline benchmark: torchport's jpeg / predecoded / folder modes vs PIL, DALI (CPU) and torchvision.io.

Runs with no arguments: builds a realistic photo set (scikit-image's photographs, ~500x375, q90)
in the torchport cache dir, packs it, then measures images/s end to end for every pipeline --
2 DataLoader workers (or 2 DALI threads), each pipeline in its own fresh process, interleaved
rounds, medians of 3 -- plus CPU ms per image, the machine's memcpy bandwidth, a stage-by-stage
profile of a JPEG worker and the training-step experiment. Same options as ``torchport data bench``
(``--baselines pil,dali,torchvision-io``, ``--json FILE`` or ``-``, ``--png FILE``, ``--check`` ...).
DALI comes from the ``bench`` extra (``pip install 'torchport[bench]'``); without it the run says so
in one line and measures the rest.

    python benchmarks/bench_data.py --json data_bench.json --png data_bench.png

Targets (ratios within the same run, 2-core machine): jpeg >= 3.5x PIL and >= 2.0x DALI-CPU,
predecoded >= 15x PIL; training step where the PIL pipeline is >= 50% of step time: cut >= 40%.
"""

from __future__ import annotations

import typer

from torchport.cli.data_bench import register_bench_data

app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)


@app.callback()
def _group() -> None:
    """torchport input-pipeline benchmark."""


register_bench_data(app)

if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["data"]:
        sys.argv.insert(1, "data")  # `python benchmarks/bench_data.py [options]` == `torchport data bench [options]`
    app()
