"""Input-pipeline benchmark: PIL ImageFolder baseline vs torchport's jpeg / predecoded / folder modes.

Runs with no arguments: builds a realistic photo set (scikit-image's photographs, ~500x375, q90)
in the torchport cache dir, packs it, then measures images/s end to end through the DataLoader for
every pipeline with the same worker count, in interleaved rounds, and the training-step experiment.
Same options as ``torchport data bench`` (``--json FILE``, ``--png FILE``, ``--check`` ...).

    python benchmarks/bench_data.py --json data_bench.json --png data_bench.png

Targets (ratio vs the baseline of the same run, 2-core machine): jpeg >= 2.5x, predecoded >= 8x;
training step where the baseline pipeline is >= 50% of step time: step time cut >= 40%.
"""

from __future__ import annotations

import typer

from torchport.data.bench import register_bench_data

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
