// Accessibility fixes to the theme's markup (pydata-sphinx-theme 0.17 / sphinx-book-theme 1.3)
// and to docutils' bibliography markup, found by axe-core (tests/test_site.py). Each fixes
// what the theme's templates write; remove one when the theme release fixes it.
document.addEventListener("DOMContentLoaded", () => {
  // WCAG 4.1.2: the navigation's expand/collapse toggles are <summary> elements holding
  // only an icon, so a screen reader announces them without a name.
  for (const summary of document.querySelectorAll("details > summary")) {
    if (summary.textContent.trim() || summary.hasAttribute("aria-label")) continue;
    const link = summary.parentElement.parentElement.querySelector(":scope > a");
    const title = link ? link.textContent.trim() : "this section";
    summary.setAttribute("aria-label", `Show or hide the sections of ${title}`);
  }
  // WCAG 2.5.3 (label in name): a control whose visible text is not part of its
  // aria-label ("Search" on a button reading "Search... Ctrl+K") is named by its text.
  // The colour-mode button's icons carry titles ("Light", "System Settings") that count
  // as its text; the button's own label names it, so the icons are hidden from the name.
  // Font Awesome's script turns each <i title> into <svg><title>, before or after this
  // runs, so the icons are cleaned now and whenever it replaces them.
  const untitle = (button) => {
    for (const icon of button.querySelectorAll("i[title], svg")) {
      icon.removeAttribute("title");
      icon.removeAttribute("aria-labelledby");
      icon.setAttribute("aria-hidden", "true");
      for (const title of icon.querySelectorAll("title")) title.remove();
    }
  };
  for (const button of document.querySelectorAll("button[aria-label]")) {
    untitle(button);
    new MutationObserver(() => untitle(button)).observe(button, {childList: true, subtree: true});
  }
  for (const el of document.querySelectorAll("button[aria-label], a[aria-label]")) {
    const text = el.innerText.replace(/\s+/g, " ").trim();
    const label = el.getAttribute("aria-label");
    if (text && !label.toLowerCase().includes(text.toLowerCase())) {
      el.setAttribute("aria-label", `${text}, ${label}`);
    }
  }
  // docutils marks each reference "doc-biblioentry", a role ARIA 1.2 deprecates;
  // its list is role="list", so the entries are list items.
  for (const entry of document.querySelectorAll('[role="doc-biblioentry"]')) {
    entry.setAttribute("role", "listitem");
  }
});
