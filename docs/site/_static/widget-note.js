// The labs' explorers (ipywidgets) on the static site. The committed notebooks keep no widget state, so a widget's
// saved view has nothing to draw outside a running kernel and MyST-NB leaves an empty placeholder: say what is
// there instead, so a reader does not take the blank for a broken page.
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
  views.forEach((view) => {
    const note = document.createElement("p");
    note.className = "streamlab-widget-note";
    note.innerHTML =
      "<i>An interactive explorer draws here when the lab runs in JupyterLab " +
      "(<code>python3 dev.py lab</code>): its sliders and menus need a running kernel, which a static page " +
      "does not have.</i>";
    view.after(note);
  });
});
