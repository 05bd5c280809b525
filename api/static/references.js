// The references panel: the passages an answer was given (the `references` event), numbered like
// the superscripts that cite them. Titles and scores are set as textContent; a passage is the
// document's Markdown, rendered by markdown.js, which escapes everything it did not write itself,
// so a document's text never becomes markup (passage.js).

import { element } from "./dom.js";
import { storedImages } from "./images.js";
import { MATCHED_NOTE } from "./markdown.js";
import { canOpen, locationLabel } from "./document.js";
import { markUsed, renderPassage, scrollToUsed } from "./passage.js";

// The same identity markdown.js gives a citation: chunk for a passage, address for a web page.
function keyOf(reference) {
  return reference.source === "web_search" ? `web:${reference.url || reference.chunk_id}` : `kb:${reference.chunk_id}`;
}

function cardKey(item) {
  return item.dataset.chunkId || `#${item.dataset.number}`;
}

export class ReferencePanel {
  /**
   * @param {HTMLElement} root the <aside> holding a list and an empty-state hint
   * @param {import("./images.js").ImageLoader} [images] loads the thumbnails of image passages
   * @param {import("./document.js").DocumentViewer} [documents] opens a passage in its document
   */
  constructor(root, images, documents) {
    this.root = root;
    this.images = images;
    this.documents = documents;
    this.list = root.querySelector("#ref-list");
    this.empty = root.querySelector("#ref-empty");
    this.caption = root.querySelector("#ref-caption");
    this.turn = null;
    this.citations = null; // the citations of the answer shown, as they were when it was shown
    root.querySelector("#ref-close").addEventListener("click", () => this.root.classList.remove("open"));
  }

  /** Show one answer's references; cited passages first, in citation order. */
  show(turn) {
    // Shown again (the answer finished, a citation was clicked): unfolded cards stay unfolded.
    const unfolded = this.turn === turn ? new Set([...this.list.querySelectorAll(".ref.expanded")].map(cardKey)) : new Set();
    this.turn = turn;
    this.citations = turn.citations;
    const cited = new Map(turn.citations.map((citation, index) => [citation.key, index + 1]));
    const cards = turn.references.map((reference) => ({ reference, number: cited.get(keyOf(reference)) }));
    for (const card of cards) card.matched = Boolean(card.number && turn.citations[card.number - 1].attributed);
    // A citation whose passage is not among the references (an older message) still gets a card.
    for (const [key, number] of cited) {
      if (!cards.some((card) => card.number === number)) cards.push({ reference: null, number, citation: turn.citations[number - 1], key, matched: Boolean(turn.citations[number - 1].attributed) });
    }
    cards.sort((a, b) => (a.number ?? Infinity) - (b.number ?? Infinity));
    for (const card of cards) card.claims = card.number ? turn.citations[card.number - 1].claims || [] : [];
    this.list.replaceChildren(...cards.map((card) => this.card(card)));
    for (const item of this.list.children) {
      if (unfolded.has(cardKey(item))) {
        item.classList.add("expanded");
        item.querySelector(".ref-header").setAttribute("aria-expanded", "true");
      }
    }
    this.empty.hidden = cards.length > 0;
    this.caption.textContent = cards.length ? `${turn.references.length} passage${turn.references.length === 1 ? "" : "s"} retrieved` : "";
    for (const item of this.list.children) this.reveal(item); // laid out now: a folded card opens at the part used
  }

  /** Show `turn` again if it is shown and its citations changed (its answer finished rendering). */
  refresh(turn) {
    if (this.turn === turn && this.citations !== turn.citations) this.show(turn);
  }

  /** Scroll a folded card's passage to the part the answer drew on (an unfolded one shows it all). */
  reveal(item) {
    const passage = item.querySelector(".ref-passage");
    if (passage && !item.classList.contains("expanded")) scrollToUsed(passage, passage.querySelector(".used"));
  }

  /** Open the passage cited as `number` in `turn`: panel shown, card expanded and scrolled to. */
  focus(turn, number) {
    this.show(turn);
    this.root.classList.add("open");
    for (const card of this.list.children) card.classList.remove("focused");
    const card = this.list.querySelector(`[data-number="${number}"]`);
    if (!card) return;
    this.expand(card);
  }

  /** Unfold a card and bring it into view, at the part the answer drew on when it was found. */
  expand(card) {
    card.classList.add("focused", "expanded");
    card.querySelector(".ref-header").setAttribute("aria-expanded", "true");
    const used = card.querySelector(".ref-passage .used");
    if (used) used.scrollIntoView({ block: "center", behavior: "smooth" });
    else card.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  /** Open the card of one reference (an image thumbnail under the answer was clicked). */
  open(turn, reference) {
    this.show(turn);
    this.root.classList.add("open");
    for (const card of this.list.children) card.classList.remove("focused");
    const card = [...this.list.children].find((item) => item.dataset.chunkId === reference?.chunk_id);
    if (!card) return;
    this.expand(card);
  }

  clear() {
    this.turn = null;
    this.citations = null;
    this.list.replaceChildren();
    this.empty.hidden = false;
    this.caption.textContent = "";
  }

  card({ reference, number, citation, matched, claims }) {
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
    const where = locationLabel(reference?.location);
    if (where) {
      const label = element("span", "ref-location", where);
      label.title = `Where the passage stands in ${title}: ${where}`;
      header.append(label);
    }
    const about = reference ? meta(reference) : null;
    if (about?.text) {
      const label = element("span", "ref-meta", about.text);
      label.title = about.title;
      header.append(label);
    }
    header.addEventListener("click", () => {
      const expanded = item.classList.toggle("expanded");
      header.setAttribute("aria-expanded", String(expanded));
      this.reveal(item);
    });
    item.append(header);

    const passage = element("div", "ref-passage markdown");
    if (reference) {
      renderPassage(passage, reference.content);
      const child = reference.metadata?.child_content; // the part the search matched, inside its parent's text
      markUsed(passage, claims?.length ? claims : child ? [String(child)] : []);
    } else {
      passage.textContent = "This passage is not among the answer's stored references.";
    }
    item.append(passage);
    const pictures = this.images ? storedImages(reference) : [];
    if (pictures.length) {
      const strip = element("div", "ref-images");
      strip.append(...pictures.map((image) => this.images.thumbnail(image)));
      item.append(strip);
    }
    if (this.documents && canOpen(reference)) {
      const open = element("button", "ref-open link", "Open in document");
      open.type = "button";
      open.addEventListener("click", () => this.documents.open(reference));
      item.append(open);
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

// What a reference's score and search kind mean, in people's words (retrieval/types.py MatchType,
// plus the kinds the merge and the entity search add).
const MATCH_KINDS = {
  hybrid: ["keywords + meaning", "Found by both searches: it shares words with the question (keyword search) and is close to it in meaning (embedding search)."],
  vector: ["meaning", "Found by meaning: its embedding is close to the question's, whatever the words."],
  keyword: ["keywords", "Found by keyword search: it shares words with the question."],
  image_vector: ["image", "Found through the image it holds."],
  history: ["earlier answer", "Carried over from the previous answer in this conversation."],
  graph: ["entity graph", "Found through the things it mentions (the entity graph)."],
};

/** The card's score label and its explanation (a tooltip). */
function meta(reference) {
  const parts = [];
  const explained = [];
  if (typeof reference.score === "number" && reference.score > 0) {
    const score = reference.score.toFixed(2);
    parts.push(`match ${score}`);
    explained.push(`Match score ${score}, from 0 to 1: how closely this passage fits the question (higher is closer); passages are ranked by it.`);
  }
  if (reference.match_type) {
    const [label, sentence] = MATCH_KINDS[reference.match_type] || [reference.match_type.replace(/_/g, " "), ""];
    parts.push(label);
    if (sentence) explained.push(sentence);
  }
  return { text: parts.join(" · "), title: explained.join(" ") };
}
