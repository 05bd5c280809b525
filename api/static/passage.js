// A reference's passage on its card: the document's Markdown rendered safely (markdown.js escapes
// everything it did not write itself: a passage is a document's text, and documents are not
// trusted), and the part of it the answer drew on found, marked and scrolled to.
//
// A reference's offsets point into its document (document.js opens it there), not into the passage
// shown here (a passage may be joined with its neighbours or widened), so the part is found by its
// words: the sentence each citation stands after (markdown.js keeps it as the citation's claims),
// or, for a passage no sentence cites, the child chunk the search matched inside its parent
// (metadata child_content). The block (paragraph, list item, table row, heading) that covers most
// of those words is the one marked.

import { renderMarkdown } from "./markdown.js";

// The passage's stored images are shown as thumbnails under it (images.js), not as their handles.
const STORED_IMAGE = /!\[[^\]\n]*\]\(local:\/\/images\/[^)\s]+\)/g;
const FENCE = /^\s*(```|~~~)/;
// A line that starts a block of its own: it never joins the line above it.
const BLOCK_START = /^\s*(?:#{1,6}\s|[-*+]\s|\d{1,9}[.)]\s|>|```|~~~)/;
const HEADING = /^\s*#{1,6}\s/;
const LEAF_BLOCKS = "p, li, tr, h1, h2, h3, h4, h5, h6, pre";
const WORD = /[\p{L}\p{N}]+/gu;
const HAN = /\p{Script=Han}/u;
// Words too common to tell two blocks apart (English; other languages count every word).
const COMMON = new Set("the and with for from that this are was were has have had its into than then not but can you your our all any one per also".split(" "));
const MIN_COVERAGE = 0.34; // a block must hold at least a third of a claim's words to be marked
const MIN_SHARED = 2; // ... and two of them (unless the claim has fewer)

/** Put `text` into `container` as safe HTML. */
export function renderPassage(container, text) {
  const shown = reflow(String(text || "").replace(STORED_IMAGE, "")).trim();
  container.innerHTML = renderMarkdown(shown || "(no text)"); // safe: renderMarkdown escapes all it did not write
}

/**
 * Mark the block of `container` each target (a claim, or the matched child chunk) was drawn from.
 * @param {HTMLElement} container a rendered passage
 * @param {string[]} targets
 * @returns {HTMLElement|null} the first marked block, in reading order
 */
export function markUsed(container, targets) {
  const blocks = [...container.querySelectorAll(LEAF_BLOCKS)].filter((block) => !block.querySelector(LEAF_BLOCKS));
  const blockWords = blocks.map((block) => wordsOf(textOf(block)));
  const marked = new Set();
  for (const target of targets) {
    const wanted = wordsOf(target);
    if (!wanted.size) continue;
    let best = -1, bestScore = 0;
    blockWords.forEach((words, index) => {
      const shared = [...wanted].filter((word) => words.has(word)).length;
      const coverage = shared / wanted.size;
      if (shared < Math.min(MIN_SHARED, wanted.size) || coverage < MIN_COVERAGE) return;
      const score = coverage + 0.1 * (shared / words.size); // the tighter of two equal covers
      if (score > bestScore) [best, bestScore] = [index, score];
    });
    if (best >= 0) marked.add(blocks[best]);
  }
  for (const block of marked) {
    block.classList.add("used");
    block.title = "The part of the passage the answer drew on";
  }
  return blocks.find((block) => marked.has(block)) || null;
}

/** Scroll a folded passage so that its marked block is the first thing shown. */
export function scrollToUsed(container, used) {
  if (!used) return;
  const top = used.getBoundingClientRect().top - container.getBoundingClientRect().top + container.scrollTop;
  container.scrollTop = Math.max(0, top - 2);
}

// A table row's cells are read apart: their texts touch in textContent ("humidity1 %").
function textOf(block) {
  return block.tagName === "TR" ? [...block.cells].map((cell) => cell.textContent).join(" ") : block.textContent;
}

function wordsOf(text) {
  const words = new Set();
  for (const [word] of String(text).toLowerCase().matchAll(WORD)) {
    if (HAN.test(word)) {
      // Chinese has no spaces: its characters pairwise stand in for words.
      const chars = [...word];
      if (chars.length === 1) words.add(word);
      for (let i = 0; i + 1 < chars.length; i++) words.add(chars[i] + chars[i + 1]);
    } else if ((word.length > 2 || /\d/.test(word)) && !COMMON.has(word)) {
      words.add(word);
    }
  }
  return words;
}

// Documents are often hard-wrapped: a line break inside a paragraph is only the source's width,
// so such lines are joined. Blank lines, headings, list items, quotes, code and table rows keep
// their own lines (a table flattened into one line of pipes reads as noise).
function reflow(text) {
  const out = [];
  let fenced = false;
  for (const line of text.replace(/\r\n?/g, "\n").split("\n")) {
    const fence = FENCE.test(line);
    const previous = out[out.length - 1];
    const joins = !fenced && !fence && previous !== undefined && previous.trim() !== "" && line.trim() !== ""
      && !/^\s/.test(line) && !BLOCK_START.test(line) && !line.includes("|")
      && !HEADING.test(previous) && !FENCE.test(previous) && !previous.includes("|");
    if (joins) out[out.length - 1] = `${previous} ${line}`;
    else out.push(line);
    if (fence) fenced = !fenced;
  }
  return out.join("\n");
}
