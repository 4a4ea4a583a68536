"""The tools layer: figures (matplotlib), notebook widgets (ipywidgets) and the `streamlab` command line.

Tools sit on top of the library: they may import `streamlab.core` and `streamlab.net`, plus plotting and
widget libraries, never `streamlab.exercises` (tests/project/test_layers.py checks every import). The command line
is the folder `cli/`: `cli/main.py` (the entry point, `parse` and `fixtures`) plus one module per subcommand
group (`standin`, `relay`, `chaos`, `check`, `quiz`); each defines `register(sub)`, and main discovers them,
so no tool edits another's module.
"""
