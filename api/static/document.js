// A reference's place in its document: the label its card shows ("p. 3", "Install > Pairing")
// and a dialog that opens the document's text at the passage, highlighted. The text comes from
// GET .../documents/{id}/text, the parsed text the reference's offsets (location.start, .end)
// count in; it is set as text nodes only (a document is not trusted), the passage in a <mark>,
// a PDF's page breaks labelled.

import { element } from "./dom.js";

const WINDOW = 200_000; // characters of a long document shown around the passage
const BESIDE = WINDOW / 2;

/** "p. 3" or "pp. 2–3" for a PDF passage; "" when the pages are unknown. */
export function pagesLabel(location) {
  const pages = location?.pages || [];
  if (!pages.length) return "";
  const first = pages[0], last = pages[pages.length - 1];
  return first === last ? `p. ${first}` : `pp. ${first}–${last}`;
}

/** Where a passage stands, in words: its pages, then its heading path ("p. 3 · Install > Pairing"). */
export function locationLabel(location) {
  if (!location) return "";
  return [pagesLabel(location), (location.headings || []).join(" > ")].filter(Boolean).join(" · ");
}

/** Whether a reference can be opened in its document (a passage of a knowledge base with offsets). */
export function canOpen(reference) {
  const location = reference?.location;
  return Boolean(reference?.knowledge_base_id && reference?.knowledge_id && Number.isInteger(location?.start) && Number.isInteger(location?.end));
}

export class DocumentViewer {
  /**
   * @param {HTMLDialogElement} dialog holds #doc-title, #doc-where, #doc-text, #doc-message, #doc-close
   * @param {import("./api.js").Api} api
   */
  constructor(dialog, api) {
    this.dialog = dialog;
    this.api = api;
    this.title = dialog.querySelector("#doc-title");
    this.where = dialog.querySelector("#doc-where");
    this.text = dialog.querySelector("#doc-text");
    this.message = dialog.querySelector("#doc-message");
    dialog.querySelector("#doc-close").addEventListener("click", () => dialog.close());
  }

  /** Open the reference's document with its passage marked and scrolled into view. */
  async open(reference) {
    const { start, end } = reference.location;
    this.title.textContent = reference.title || "Document";
    this.where.textContent = locationLabel(reference.location);
    this.text.replaceChildren();
    this.message.hidden = true;
    if (!this.dialog.open) this.dialog.showModal();
    const offset = Math.max(0, start - BESIDE);
    const path = `knowledge-bases/${encodeURIComponent(reference.knowledge_base_id)}/documents/${encodeURIComponent(reference.knowledge_id)}/text`;
    let doc;
    try {
      doc = await this.api.json(`${path}?offset=${offset}&limit=${Math.max(WINDOW, end - offset + 1)}`);
    } catch (error) {
      this.message.textContent = `The document could not be opened: ${error.message}`;
      this.message.hidden = false;
      return;
    }
    this.show(doc, start, end);
  }

  /** The text with its page breaks labelled ("Page 2") and the passage marked (a mark per page it touches). */
  show(doc, start, end) {
    const from = Math.max(0, start - doc.offset), to = Math.max(from, Math.min(doc.text.length, end - doc.offset));
    const pages = new Map((doc.page_starts || []).map((at, index) => [at - doc.offset, index + 1]).filter(([at]) => at >= 0 && at < doc.text.length));
    const cuts = [...new Set([0, from, to, doc.text.length, ...pages.keys()])].sort((a, b) => a - b);
    const parts = [];
    if (doc.offset > 0) parts.push(element("span", "doc-elided", "… (the text before is not shown)\n\n"));
    for (let i = 0; i + 1 < cuts.length; i++) {
      const [a, b] = [cuts[i], cuts[i + 1]];
      if (pages.has(a)) parts.push(element("span", "doc-page", `Page ${pages.get(a)}`));
      const text = doc.text.slice(a, b);
      parts.push(a >= from && b <= to && b > a ? element("mark", "doc-passage", text) : document.createTextNode(text));
    }
    if (doc.offset + doc.text.length < doc.total_chars) parts.push(element("span", "doc-elided", "\n\n… (the text after is not shown)"));
    this.text.replaceChildren(...parts);
    this.text.querySelector("mark.doc-passage")?.scrollIntoView({ block: "center" });
  }
}
