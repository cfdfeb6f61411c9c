"""Command-line interface: ``cli/main.py`` holds the app, one module per verb."""
