"""Tools on top of the library: figures (matplotlib), notebook widgets (ipywidgets) and the command line."""
