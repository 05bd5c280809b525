// Small line icons (24x24 paths), drawn as SVG so they look the same with any installed font.

const PATHS = {
  pin: "M16 3l5 5-3 1-4 4 1 5-2 2-4-4-5 5-1-1 5-5-4-4 2-2 5 1 4-4z",
  edit: "M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4",
  trash: "M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13M10 11v6M14 11v6",
  docs: "M6 3h8l4 4v14H6zM14 3v4h4M9 12h6M9 16h6",
  menu: "M4 6h16M4 12h16M4 18h16",
};

/** An <svg> icon; decorative (the button around it carries the label). */
export function icon(name) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.classList.add("icon");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", PATHS[name]);
  svg.append(path);
  return svg;
}

/** A small icon-only button with an accessible name. */
export function iconButton(name, label, className = "") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = `icon-button ${className}`.trim();
  button.title = label;
  button.setAttribute("aria-label", label);
  button.append(icon(name));
  return button;
}
