"""The labs in a real browser (test suite): JupyterLab driven by headless Chromium; see conftest.py.

A package, so that its conftest.py is imported as `browser.conftest` and never shadows tests/conftest.py,
which the unit tests import as `conftest`.
"""
