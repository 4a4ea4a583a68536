"""Sphinx settings for the course site (`python3 dev.py site`; test tooling outside the package).

`tools/course_site.py` stages the course's pages (the labs with their committed outputs, the guides, the glossary and
the cheat-sheet) into one source folder and runs Sphinx with this folder as its configuration: MyST-NB reads
the notebooks without executing them, MyST the Markdown, and the Book theme draws the pages. Nothing is fetched
at build time: the theme's assets ship in its wheel, and the diagrams are drawn in the reader's browser by the
`mermaid` package's own script, copied from npm into `_static/` by the build.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERATED = HERE.parent.parent / "build" / "site" / "static"  # mermaid.min.js, copied there from npm by the build

project = "streamlab"
author = "the streamlab authors"
copyright = "the streamlab authors, MIT licence"
root_doc = "index"

extensions = ["myst_nb"]
nb_execution_mode = "off"  # the committed outputs are the course: never re-run a lab to build its page
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "dollarmath", "html_image"]
myst_heading_anchors = 6
# GitHub's anchors (tools/course_site.py rewrites the labs' JupyterLab-style ones to them)
suppress_warnings = ["mystnb.unknown_mime_type"]  # widget views: not saved in the committed outputs

html_theme = "sphinx_book_theme"
html_title = "streamlab: streamed model output, byte by byte"
html_static_path = [str(HERE / "_static"), str(GENERATED)]
html_css_files = ["site.css"]
html_js_files = ["mermaid.min.js", "mermaid-init.js"]
html_theme_options = {"show_toc_level": 2, "use_download_button": True, "home_page_in_toc": True}
html_copy_source = False
html_show_sourcelink = False
exclude_patterns = ["_build", "README.md"]  # README.md is the home page, included by index.md
