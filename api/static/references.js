// The references panel: the passages an answer was given (the `references` event), numbered like
// the superscripts that cite them. Built with textContent only: a document's text never becomes
// markup.

import { element } from "./dom.js";
import { storedImages } from "./images.js";
import { MATCHED_NOTE } from "./markdown.js";

// The same identity markdown.js gives a citation: chunk for a passage, address for a web page.
function keyOf(reference) {
  return reference.source === "web_search" ? `web:${reference.url || reference.chunk_id}` : `kb:${reference.chunk_id}`;
}

export class ReferencePanel {
  /**
   * @param {HTMLElement} root the <aside> holding a list and an empty-state hint
   * @param {import("./images.js").ImageLoader} [images] loads the thumbnails of image passages
   */
  constructor(root, images) {
    this.root = root;
    this.images = images;
    this.list = root.querySelector("#ref-list");
    this.empty = root.querySelector("#ref-empty");
    this.caption = root.querySelector("#ref-caption");
    this.turn = null;
    root.querySelector("#ref-close").addEventListener("click", () => this.root.classList.remove("open"));
  }

  /** Show one answer's references; cited passages first, in citation order. */
  show(turn) {
    this.turn = turn;
    const cited = new Map(turn.citations.map((citation, index) => [citation.key, index + 1]));
    const cards = turn.references.map((reference) => ({ reference, number: cited.get(keyOf(reference)) }));
    for (const card of cards) card.matched = Boolean(card.number && turn.citations[card.number - 1].attributed);
    // A citation whose passage is not among the references (an older message) still gets a card.
    for (const [key, number] of cited) {
      if (!cards.some((card) => card.number === number)) cards.push({ reference: null, number, citation: turn.citations[number - 1], key, matched: Boolean(turn.citations[number - 1].attributed) });
    }
    cards.sort((a, b) => (a.number ?? Infinity) - (b.number ?? Infinity));
    this.list.replaceChildren(...cards.map((card) => this.card(card)));
    this.empty.hidden = cards.length > 0;
    this.caption.textContent = cards.length ? `${turn.references.length} passage${turn.references.length === 1 ? "" : "s"} retrieved` : "";
  }

  /** Open the passage cited as `number` in `turn`: panel shown, card expanded and scrolled to. */
  focus(turn, number) {
    this.show(turn);
    this.root.classList.add("open");
    for (const card of this.list.children) card.classList.remove("focused");
    const card = this.list.querySelector(`[data-number="${number}"]`);
    if (!card) return;
    card.classList.add("focused", "expanded");
    card.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  /** Open the card of one reference (an image thumbnail under the answer was clicked). */
  open(turn, reference) {
    this.show(turn);
    this.root.classList.add("open");
    for (const card of this.list.children) card.classList.remove("focused");
    const card = [...this.list.children].find((item) => item.dataset.chunkId === reference?.chunk_id);
    if (!card) return;
    card.classList.add("focused", "expanded");
    card.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  clear() {
    this.turn = null;
    this.list.replaceChildren();
    this.empty.hidden = false;
    this.caption.textContent = "";
  }

  card({ reference, number, citation, matched }) {
    const item = element("li", "ref");
    if (number) item.dataset.number = String(number);
    if (reference?.chunk_id) item.dataset.chunkId = reference.chunk_id;
    const header = element("button", "ref-header");
    header.type = "button";
    header.setAttribute("aria-expanded", "false");
    const badge = element("span", number ? (matched ? "ref-number matched" : "ref-number") : "ref-number uncited", number ? String(number) : "·");
    if (matched) badge.title = `Source ${number}: ${MATCHED_NOTE}`;
    header.append(badge);
    const title = reference ? reference.title || (reference.source === "web_search" ? reference.url : "Untitled passage") : citation.title || "Cited source";
    header.append(element("span", "ref-title", title));
    if (reference) header.append(element("span", "ref-meta", meta(reference)));
    header.addEventListener("click", () => {
      const expanded = item.classList.toggle("expanded");
      header.setAttribute("aria-expanded", String(expanded));
    });
    item.append(header);

    const passage = element("div", "ref-passage", reference ? reflow(reference.content) || "(no text)" : "This passage is not among the answer's stored references.");
    item.append(passage);
    const pictures = this.images ? storedImages(reference) : [];
    if (pictures.length) {
      const strip = element("div", "ref-images");
      strip.append(...pictures.map((image) => this.images.thumbnail(image)));
      item.append(strip);
    }
    const url = reference?.url || citation?.url;
    if (url && /^https?:\/\//i.test(url)) {
      const link = element("a", "ref-link", url);
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      item.append(link);
    }
    return item;
  }
}

// Documents are often hard-wrapped; a line break inside a paragraph is only the source's width.
// Blank lines, headings and list items keep their own lines.
function reflow(text) {
  return String(text || "").replace(/([^\n])\n(?![\n\s]|[-*+] |\d+[.)] |#)/g, "$1 ");
}

function meta(reference) {
  const parts = [];
  if (typeof reference.score === "number" && reference.score > 0) parts.push(`score ${reference.score.toFixed(2)}`);
  if (reference.match_type) parts.push(reference.match_type.replace(/_/g, " "));
  return parts.join(" · ");
}
