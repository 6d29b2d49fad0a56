// The page: a File tab and a Live tab (WAI-ARIA tabs: arrow keys move between them).
import { setToken } from "./common.js";
import { setupFile } from "./file.js";
import { setupLive } from "./live.js";

function setupTabs() {
  const tabs = [...document.querySelectorAll("[role=tab]")];
  const select = (tab) => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    tab.focus();
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (step) select(tabs[(i + step + tabs.length) % tabs.length]);
    });
  });
}

setupTabs();
document.getElementById("token").addEventListener("input", (e) => setToken(e.target.value));
setupFile();
setupLive();
