// The sidebar on a narrow screen (CSS hides it below 700 px, and beside an open references
// drawer below 900 px): the menu button opens it over the page; picking a conversation, starting
// one, the scrim, its Close button or Escape closes it.

import { icon } from "./icons.js";

export class SidebarOverlay {
  /**
   * @param {HTMLElement} sidebar
   * @param {HTMLButtonElement} menuButton
   * @param {HTMLElement} scrim the shade over the page while the sidebar is open
   */
  constructor(sidebar, menuButton, scrim) {
    this.sidebar = sidebar;
    this.menuButton = menuButton;
    this.scrim = scrim;
    menuButton.prepend(icon("menu"));
    menuButton.addEventListener("click", () => this.open());
    scrim.addEventListener("click", () => this.close());
    sidebar.querySelector("#sidebar-close").addEventListener("click", () => this.close());
    // After the list's own handlers (this one listens on the way up): the choice is made, get out of the way.
    sidebar.addEventListener("click", (event) => {
      if (this.isOpen && event.target.closest(".session-open, #new-chat")) this.close();
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.isOpen) this.close();
    });
  }

  get isOpen() {
    return this.sidebar.classList.contains("open");
  }

  open() {
    this.sidebar.classList.add("open");
    this.scrim.hidden = false;
    this.menuButton.setAttribute("aria-expanded", "true");
    this.sidebar.querySelector("#new-chat").focus();
  }

  close() {
    const hadFocus = this.sidebar.contains(document.activeElement);
    this.sidebar.classList.remove("open");
    this.scrim.hidden = true;
    this.menuButton.setAttribute("aria-expanded", "false");
    if (hadFocus && this.menuButton.offsetParent !== null) this.menuButton.focus();
  }
}
