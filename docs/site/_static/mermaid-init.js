// The labs' diagrams: drawn from their Mermaid source by the mermaid package's own script (no CDN).
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  mermaid.initialize({startOnLoad: false, theme: "neutral", securityLevel: "strict"});
  mermaid.run({querySelector: "pre.mermaid"});
});
