"""``python -m torchport`` == the ``torchport`` command."""

from torchport.cli.main import main

main()
