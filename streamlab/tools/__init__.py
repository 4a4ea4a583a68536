"""The tools layer: figures (matplotlib), notebook widgets (ipywidgets) and the `streamlab` command line.

Tools sit on top of the library: they may import `streamlab.core` and `streamlab.net`, plus plotting and
widget libraries, never `streamlab.exercises` (tests/test_layers.py checks every import). The command line
is `cli.py` plus one `cli_<name>.py` module per subcommand group; each defines `register(sub)`, and cli.py
discovers them, so no tool edits another's module.
"""
