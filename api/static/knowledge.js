// Knowledge bases: which ones a question searches (checkboxes, remembered in localStorage), a new
// one, and a dialog listing a base's documents with uploads that show their progress.

import { V1, UNREACHABLE, errorFromXhr } from "./api.js";
import { element } from "./dom.js";
import { followEvents } from "./stream.js";
import { iconButton } from "./icons.js";

const SELECTION_STORAGE = "ragline.knowledgeBases";

export class KnowledgePicker {
  /**
   * @param {HTMLElement} root the sidebar section (a list and a create form inside)
   * @param {Api} api
   * @param {{onOpenDocuments: (kb: object) => void, onError: (error: Error) => void, onChange?: () => void}} hooks
   *        onChange: the bases a question searches changed (loaded, checked, unchecked)
   */
  constructor(root, api, { onOpenDocuments, onError, onChange = () => {} }) {
    this.list = root.querySelector("#kb-list");
    this.form = root.querySelector("#kb-create");
    this.api = api;
    this.hooks = { onOpenDocuments, onError, onChange };
    this.bases = [];
    const stored = localStorage.getItem(SELECTION_STORAGE);
    this.selected = stored === null ? null : new Set(JSON.parse(stored)); // null: nothing chosen yet
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.create(); });
  }

  async load() {
    this.bases = (await this.api.json("knowledge-bases")).items;
    // On a first visit every base is checked: a question then searches all the user has.
    if (this.selected === null) this.selected = new Set(this.bases.map((kb) => kb.id));
    this.render();
    this.hooks.onChange();
  }

  /** The checked bases that still exist. */
  selectedBases() {
    return this.bases.filter((kb) => this.selected.has(kb.id));
  }

  /** Ids of the checked bases that still exist. */
  selectedIds() {
    return this.selectedBases().map((kb) => kb.id);
  }

  remember() {
    localStorage.setItem(SELECTION_STORAGE, JSON.stringify([...this.selected]));
  }

  render() {
    this.list.replaceChildren(...this.bases.map((kb) => this.item(kb)));
    if (!this.bases.length) this.list.append(element("li", "hint", "No knowledge base yet: answers come from the model alone."));
  }

  item(kb) {
    const item = element("li", "kb");
    item.dataset.id = kb.id;
    const label = element("label", "kb-label");
    const box = element("input");
    box.type = "checkbox";
    box.checked = this.selected.has(kb.id);
    box.addEventListener("change", () => {
      if (box.checked) this.selected.add(kb.id); else this.selected.delete(kb.id);
      this.remember();
      this.hooks.onChange();
    });
    label.append(box, element("span", "kb-name", kb.name));
    if (kb.description) label.title = kb.description;
    const documents = iconButton("docs", `Documents of ${kb.name}`, "kb-documents");
    documents.addEventListener("click", () => this.hooks.onOpenDocuments(kb));
    item.append(label, documents);
    return item;
  }

  async create() {
    const input = this.form.elements.name;
    const name = input.value.trim();
    if (!name) return;
    try {
      const kb = await this.api.json("knowledge-bases", { method: "POST", body: { name } });
      input.value = "";
      this.selected.add(kb.id);
      this.remember();
      await this.load();
      this.hooks.onOpenDocuments(kb); // a new base is empty: the next step is adding documents
    } catch (error) {
      this.hooks.onError(error);
    }
  }
}

export class DocumentsDialog {
  /**
   * @param {HTMLDialogElement} dialog
   * @param {Api} api
   */
  constructor(dialog, api) {
    this.dialog = dialog;
    this.api = api;
    this.kb = null;
    this.title = dialog.querySelector("#kb-dialog-title");
    this.documents = dialog.querySelector("#documents");
    this.uploads = dialog.querySelector("#uploads");
    this.input = dialog.querySelector("#upload-input");
    this.message = dialog.querySelector("#documents-message");
    this.input.addEventListener("change", () => this.uploadAll([...this.input.files]));
    dialog.querySelector("#kb-dialog-close").addEventListener("click", () => dialog.close());
  }

  async open(kb) {
    this.kb = kb;
    this.title.textContent = kb.name;
    this.uploads.replaceChildren();
    this.showMessage("");
    if (!this.dialog.open) this.dialog.showModal();
    await this.refresh();
  }

  showMessage(text) {
    this.message.textContent = text;
    this.message.hidden = !text;
  }

  async refresh() {
    try {
      const { items } = await this.api.json(`knowledge-bases/${encodeURIComponent(this.kb.id)}/documents`);
      this.documents.replaceChildren(...items.map((doc) => this.documentRow(doc)));
      if (!items.length) this.documents.append(element("li", "hint", "No documents yet. Upload files to search them."));
    } catch (error) {
      this.showMessage(error.message);
    }
  }

  documentRow(doc) {
    const row = element("li", "document");
    row.append(element("span", "document-title", doc.title || doc.source || doc.id));
    row.append(element("span", "document-type", doc.file_type));
    // A document is listed once its ingestion job stored it whole, so a listed document is
    // searchable; no chunks means no text could be read from it.
    const ready = doc.chunk_count > 0;
    row.append(element("span", `document-status ${ready ? "ready" : "empty"}`,
      ready ? `indexed · ${doc.chunk_count} chunk${doc.chunk_count === 1 ? "" : "s"}` : "no text found"));
    const planted = doc.metadata && doc.metadata.instruction_like;
    if (planted) {
      // The sentence is shown as text, never as markup; answers never read it (it is left out of their passages).
      const flag = element("span", "document-flag", "speaks to the assistant");
      flag.title = `Left out of every answer's passages: “${planted}”`;
      row.append(flag);
    }
    return row;
  }

  // One file after another, each followed to the end of its job: the list refreshes once all are in.
  async uploadAll(files) {
    this.input.value = "";
    for (const file of files) {
      await this.upload(file);
    }
    await this.refresh();
  }

  /** Upload one file with a progress bar; resolves when the server has indexed it (or refused it). */
  upload(file) {
    const row = element("li", "upload");
    const name = element("span", "upload-name", file.name);
    const bar = element("progress");
    bar.max = 100;
    bar.value = 0;
    const status = element("span", "upload-status", "uploading 0%");
    row.append(name, bar, status);
    this.uploads.append(row);

    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", `${V1}/knowledge-bases/${encodeURIComponent(this.kb.id)}/documents`);
      for (const [header, value] of Object.entries(this.api.headers())) xhr.setRequestHeader(header, value);
      xhr.upload.addEventListener("progress", (event) => {
        if (!event.lengthComputable) return;
        const percent = Math.round((event.loaded / event.total) * 100);
        bar.value = percent;
        status.textContent = `uploading ${percent}%`;
      });
      // Sent: the server answers 202 with an ingestion job at once; a worker parses, chunks and embeds it.
      xhr.upload.addEventListener("load", () => {
        bar.value = 100;
        bar.removeAttribute("value"); // an indeterminate bar until the job reports progress
        status.textContent = "queued…";
      });
      xhr.addEventListener("load", () => {
        if (xhr.status === 202) {
          this.follow(JSON.parse(xhr.responseText), row, bar, status).then(resolve);
          return;
        }
        bar.remove();
        row.classList.add("failed");
        status.textContent = `not added: ${errorFromXhr(xhr).message}`;
        if (xhr.status === 401) this.api.onUnauthorized(errorFromXhr(xhr));
        resolve();
      });
      xhr.addEventListener("error", () => {
        bar.remove();
        row.classList.add("failed");
        status.textContent = `not added: ${UNREACHABLE}`;
        resolve();
      });
      const form = new FormData();
      form.append("file", file, file.name);
      xhr.send(form);
    });
  }

  /** Show an ingestion job's progress from its SSE events; resolves when it is done, failed or canceled.
   *  The events come over fetch() with the key in a header: a key in the URL would reach access logs. */
  async follow(job, row, bar, status) {
    const path = `knowledge-bases/${encodeURIComponent(job.knowledge_base_id)}/jobs/${encodeURIComponent(job.id)}/events`;
    const finish = (className, text) => {
      bar.remove();
      row.classList.add(className);
      status.textContent = text;
    };
    let ended = false;
    const result = await followEvents({
      api: this.api,
      path,
      onEvent: (event) => {
        const state = event.data;
        if (state.state === "done") {
          const count = state.document ? state.document.chunk_count : 0;
          finish("ready", `indexed · ${count} chunk${count === 1 ? "" : "s"}`);
        } else if (state.state === "failed" || state.state === "canceled") {
          finish("failed", `not added: ${state.error || state.state}`);
        } else if (state.phase === "embedding" && state.total > 0) {
          bar.max = state.total;
          bar.value = state.done;
          status.textContent = `embedding ${state.done}/${state.total}`;
          return false;
        } else {
          status.textContent = `${state.phase}…`; // queued, parsing, indexing
          return false;
        }
        ended = true;
        return true;
      },
    });
    if (!ended) finish("failed", `not added: ${result.error ? result.error.message : UNREACHABLE}`);
  }
}
