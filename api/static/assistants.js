// The assistant picker: the tenant's assistants (stored configurations, GET /assistants) in a
// select, the choice remembered in localStorage. A question goes with the chosen one's id as
// assistant_id; its knowledge bases are the assistant's own unless it lets a turn choose them.

import { element } from "./dom.js";

const CHOICE_STORAGE = "ragline.assistant";
const KNOWLEDGE = ["knowledge_base_ids", "knowledge_ids", "search_targets"];

export class AssistantPicker {
  /**
   * @param {HTMLElement} root the sidebar section (a select and a hint inside), hidden while the tenant has none
   * @param {Api} api
   */
  constructor(root, api) {
    this.root = root;
    this.select = root.querySelector("select");
    this.about = root.querySelector(".hint");
    this.api = api;
    this.assistants = [];
    this.select.addEventListener("change", () => {
      localStorage.setItem(CHOICE_STORAGE, this.select.value);
      this.describe();
    });
  }

  async load() {
    this.assistants = (await this.api.json("assistants?page_size=100")).items;
    const none = element("option", "", "None (this page's choices)");
    none.value = "";
    this.select.replaceChildren(none, ...this.assistants.map((a) => {
      const option = element("option", "", a.name);
      option.value = a.id;
      return option;
    }));
    const remembered = localStorage.getItem(CHOICE_STORAGE) || "";
    this.select.value = this.assistants.some((a) => a.id === remembered) ? remembered : "";
    this.root.hidden = !this.assistants.length;
    this.describe();
  }

  /** The chosen assistant, or null. */
  chosen() {
    return this.assistants.find((a) => a.id === this.select.value) || null;
  }

  /** Whether a question may name its own knowledge bases (always without an assistant). */
  takesKnowledgeBases() {
    const assistant = this.chosen();
    return !assistant || assistant.overridable.includes("knowledge_base_ids");
  }

  /** Whether the chosen assistant searches knowledge of its own (then knowledge-chat answers). */
  searches() {
    const config = this.chosen()?.config || {};
    return KNOWLEDGE.some((name) => (config[name] || []).length) || Boolean(config.web_search_enabled || config.chat_history_search);
  }

  describe() {
    const assistant = this.chosen();
    this.about.textContent = !assistant ? ""
      : `${assistant.description || assistant.name} (version ${assistant.version})`
        + (this.takesKnowledgeBases() ? "" : ": it answers from its own knowledge bases");
  }
}
