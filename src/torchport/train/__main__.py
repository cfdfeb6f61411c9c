"""``python -m torchport.train ARGS`` == ``torchport train ARGS`` (handy under torchrun)."""

from torchport.cli.train import main

main()
