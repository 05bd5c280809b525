// The session list: open, rename, pin, delete. Pinned sessions come first (the server's order).

import { element } from "./dom.js";
import { iconButton } from "./icons.js";

const PAGE_SIZE = 100; // the server's maximum page: enough for a sidebar

export class SessionList {
  /**
   * @param {HTMLElement} root the <ul>
   * @param {Api} api
   * @param {{onOpen: (id: string) => void, onDeleted: (id: string) => void, onError: (error: Error) => void}} hooks
   */
  constructor(root, api, { onOpen, onDeleted, onError }) {
    this.root = root;
    this.api = api;
    this.hooks = { onOpen, onDeleted, onError };
    this.sessions = [];
    this.activeId = null;
  }

  async load() {
    const page = await this.api.json(`sessions?page=1&page_size=${PAGE_SIZE}`);
    this.sessions = page.items;
    this.render();
  }

  setActive(id) {
    this.activeId = id;
    for (const item of this.root.children) item.classList.toggle("active", item.dataset.id === id);
  }

  /** A session created or changed here (new chat, generated title): shown without a reload. */
  upsert(session) {
    const index = this.sessions.findIndex((s) => s.id === session.id);
    if (index >= 0) this.sessions[index] = { ...this.sessions[index], ...session };
    else this.sessions.unshift(session);
    this.render();
  }

  setTitle(id, title) {
    const session = this.sessions.find((s) => s.id === id);
    if (session) this.upsert({ ...session, title });
  }

  render() {
    // The server's order: pinned first, then the most recently updated.
    const ordered = [...this.sessions].sort((a, b) => Number(b.pinned) - Number(a.pinned) || String(b.updated_at).localeCompare(String(a.updated_at)));
    this.root.replaceChildren(...ordered.map((session) => this.item(session)));
    if (!ordered.length) this.root.append(element("li", "hint", "No conversations yet."));
  }

  item(session) {
    const item = element("li", "session");
    item.dataset.id = session.id;
    item.classList.toggle("active", session.id === this.activeId);
    item.classList.toggle("pinned", Boolean(session.pinned));
    const open = element("button", "session-open", session.title || "New conversation");
    open.type = "button";
    open.addEventListener("click", () => this.hooks.onOpen(session.id));
    const pin = iconButton("pin", session.pinned ? "Unpin" : "Pin", "pin");
    pin.setAttribute("aria-pressed", String(Boolean(session.pinned)));
    pin.addEventListener("click", () => this.run(() => this.patch(session.id, { pinned: !session.pinned })));
    const rename = iconButton("edit", "Rename", "rename");
    rename.addEventListener("click", () => this.startRename(item, session));
    const remove = iconButton("trash", "Delete", "delete");
    remove.addEventListener("click", () => this.confirmDelete(item, session));
    const actions = element("span", "session-actions");
    actions.append(pin, rename, remove);
    item.append(open, actions);
    return item;
  }

  // Rename in place: Enter saves, Escape or leaving the field cancels.
  startRename(item, session) {
    const input = element("input", "session-title-input");
    input.value = session.title;
    input.maxLength = 200;
    input.setAttribute("aria-label", "New title");
    let done = false;
    const finish = (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== session.title) this.run(() => this.patch(session.id, { title }));
      else this.render();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); finish(true); }
      if (event.key === "Escape") finish(false);
    });
    input.addEventListener("blur", () => finish(true));
    item.replaceChildren(input);
    input.focus();
    input.select();
  }

  // A deletion asks once, in place (no browser dialog).
  confirmDelete(item, session) {
    const question = element("span", "confirm-text", "Delete this conversation?");
    const yes = element("button", "danger small", "Delete");
    const no = element("button", "small", "Cancel");
    yes.type = no.type = "button";
    yes.addEventListener("click", () => this.run(async () => {
      await this.api.json(`sessions/${encodeURIComponent(session.id)}`, { method: "DELETE" });
      this.sessions = this.sessions.filter((s) => s.id !== session.id);
      this.render();
      this.hooks.onDeleted(session.id);
    }));
    no.addEventListener("click", () => this.render());
    item.replaceChildren(question, yes, no);
    yes.focus();
  }

  async patch(id, changes) {
    const updated = await this.api.json(`sessions/${encodeURIComponent(id)}`, { method: "PATCH", body: changes });
    this.upsert(updated);
  }

  async run(action) {
    try {
      await action();
    } catch (error) {
      this.render();
      this.hooks.onError(error);
    }
  }
}
