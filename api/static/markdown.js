// Markdown for model answers (renderAnswer) and for documents' passages (renderMarkdown), safe by
// construction.
//
// Order matters: (1) citation tags are lifted out of the raw text by a strict regex and replaced
// by placeholders, (2) EVERYTHING left is HTML-escaped, (3) the Markdown rules run on escaped
// text and only ever add the few tags they own (p, h1-h6, ul/ol/li, pre/code, blockquote, table,
// strong, em, del, a, hr, br), (4) the placeholders become numbered superscript buttons.
// So no character the model or a document wrote can become markup; a tag that does not match the
// citation regex exactly simply stays visible as text.

// `<kb chunk_id="..." knowledge_id="..." title="..."/>` and `<web url="..." title="..."/>`, as
// citations/tags.py writes them: lower-case names, double-quoted values without < > or ".
// `attributed="true"` marks a source Ragline matched to the sentence, not one the model cited;
// `<kb unsupported="true"/>` (no chunk) marks a sentence that no passage supports.
// Spaces before a tag go with it: the superscript sits right after the claim's last word.
const CITATION_TAG = /[ \t]*<(kb|web)((?:\s+[a-z_]+="[^"<>]*")*)\s*\/>/g;
const CITATION_ATTR = /([a-z_]+)="([^"<>]*)"/g;
// The start of a citation tag cut off at the end of a streamed text: hidden until it completes.
const PARTIAL_TAG_AT_END = /<(?:k|kb(?:\s[^<>]*)?|w|we|web(?:\s[^<>]*)?)?$/;
// Private-use characters frame placeholders; any the model wrote itself are dropped first.
const PRIVATE = /[\uE000-\uE003]/g;
const CITE_OPEN = "\uE000", CITE_CLOSE = "\uE001", CODE_OPEN = "\uE002", CODE_CLOSE = "\uE003";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
// The entities Python's html.escape(quote=True) writes into tag attributes.
const ATTR_ENTITIES = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#x27;": "'", "&#39;": "'" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function unescapeAttribute(value) {
  return value.replace(/&(?:amp|lt|gt|quot|#x27|#39);/g, (entity) => ATTR_ENTITIES[entity]);
}

function attributesOf(text) {
  const attributes = {};
  for (const [, name, value] of text.matchAll(CITATION_ATTR)) {
    if (!(name in attributes)) attributes[name] = unescapeAttribute(value);
  }
  return attributes;
}

// A citation's identity: the chunk for a knowledge-base passage, the address for a web page.
function citationOf(kind, attributes) {
  if (kind === "kb" && attributes.chunk_id) {
    return { kind, key: `kb:${attributes.chunk_id}`, chunkId: attributes.chunk_id, knowledgeId: attributes.knowledge_id || "", title: attributes.title || "" };
  }
  if (kind === "web" && attributes.url) {
    return { kind, key: `web:${attributes.url}`, url: attributes.url, title: attributes.title || attributes.url };
  }
  return null;
}

// Replace citation tags with placeholders; the same source cited twice keeps its first number.
// A placeholder of a matched (attributed) occurrence carries an "m"; a citation counts as matched
// only while the model cited it nowhere in the answer.
// Each citation also keeps its claims: the sentence before each of its tags, which the
// references panel looks for in the passage (references.js, passage.js).
function liftCitations(text, citations) {
  return text.replace(CITATION_TAG, (tag, kind, rest, offset) => {
    const attributes = attributesOf(rest);
    if (kind === "kb" && attributes.unsupported === "true" && !attributes.chunk_id) return `${CITE_OPEN}u${CITE_CLOSE}`;
    const citation = citationOf(kind, attributes);
    if (!citation) return ""; // a citation tag naming nothing: nothing to show
    const matched = attributes.attributed === "true";
    let index = citations.findIndex((c) => c.key === citation.key);
    if (index < 0) index = citations.push({ ...citation, attributed: matched, claims: [] }) - 1;
    else if (!matched) citations[index].attributed = false;
    const claim = claimBefore(text, offset);
    if (claim && !citations[index].claims.includes(claim)) citations[index].claims.push(claim);
    return `${CITE_OPEN}${matched ? "m" : ""}${index}${CITE_CLOSE}`;
  });
}

const CLAIM_LOOKBACK = 600; // characters before a tag searched for its sentence: a long sentence, not a chapter
const ANY_CITATION_TAG = /<(?:kb|web)(?:\s+[a-z_]+="[^"<>]*")*\s*\/>/g;
const SENTENCE_BREAK = /(?<=[.!?\u3002\uff01\uff1f])\s+|\n+/;

/** The sentence a citation tag at `offset` stands after (other tags removed). */
function claimBefore(text, offset) {
  const before = text.slice(Math.max(0, offset - CLAIM_LOOKBACK), offset).replace(ANY_CITATION_TAG, " ");
  const sentences = before.split(SENTENCE_BREAK).filter((sentence) => sentence.trim());
  return (sentences.pop() || "").trim();
}

export const MATCHED_NOTE = "matched by Ragline, not cited by the model";
export const UNSUPPORTED_NOTE = "No passage of the knowledge base supports this sentence";

function citationButtons(html, citations) {
  const unsupported = `<sup class="unsupported" title="${UNSUPPORTED_NOTE}" aria-label="${UNSUPPORTED_NOTE}">?</sup>`;
  const pattern = new RegExp(`${CITE_OPEN}(?:(u)|(m?)(\\d+))${CITE_CLOSE}`, "g");
  return html.replace(pattern, (_, mark, matched, index) => {
    if (mark) return unsupported;
    const citation = citations[Number(index)];
    const number = Number(index) + 1;
    const source = citation.title ? `Source ${number}: ${citation.title}` : `Source ${number}`;
    const label = escapeHtml(matched ? `${source} (${MATCHED_NOTE})` : source);
    const kind = matched ? ' class="attributed"' : "";
    return `<sup class="cite"><button type="button"${kind} data-cite="${number}" title="${label}" aria-label="${label}">${number}</button></sup>`;
  });
}

// --- inline rules (input and output are escaped HTML) ---

/** The host an http(s) address leads to, without "www." ("" for anything else). */
function hostOf(escapedHref) {
  try {
    const url = new URL(escapedHref.replace(/&amp;/g, "&"));
    return /^https?:$/.test(url.protocol) ? url.hostname.replace(/^www\./, "") : "";
  } catch {
    return "";
  }
}

function inline(text) {
  // Code spans and links are rendered first and parked in placeholders, so that no later rule
  // touches a code span's content or an address (an underscore in a URL is not emphasis).
  const parked = [];
  const park = (html) => `${CODE_OPEN}${parked.push(html) - 1}${CODE_CLOSE}`;
  let out = text.replace(/`([^`\n]+)`/g, (_, code) => park(`<code>${code}</code>`));
  // A Markdown image is never loaded: its address could carry the question to its host (the
  // service drops such images from answers; an older stored answer or a passage may still hold one).
  // Its words stay, with the host it would have come from. Before links: "![a](u)" holds "[a](u)".
  out = out.replace(/!\[([^\]\n]*)\]\(([^\s()]+)\)/g,
    (_, alt, src) => park(`<span class="image-left-out">${alt ? `${alt} ` : ""}(image from ${hostOf(src) || "elsewhere"} not shown)</span>`));
  // Links only to http(s) and mailto; the address is already escaped, so it cannot leave its quotes.
  // Its host follows the label, which may say anything ("Read more"), unless the label or the
  // answer (the service writes " (host)" after a link it keeps) already names it.
  out = out.replace(/\[([^\]\n]+)\]\(((?:https?:\/\/|mailto:)[^\s()]+)\)/g, (match, label, href, offset, whole) => {
    const host = hostOf(href);
    const named = !host || label.toLowerCase().includes(host) || whole.startsWith(` (${host})`, offset + match.length);
    return park(`<a href="${href}" target="_blank" rel="noopener noreferrer">${label}</a>${named ? "" : ` <span class="link-host">(${host})</span>`}`);
  });
  out = out.replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, "<strong>$1</strong>");
  out = out.replace(/(^|[^\w])__(?=\S)(.*?\S)__(?=[^\w]|$)/g, "$1<strong>$2</strong>");
  out = out.replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?=[^*\w]|$)/g, "$1<em>$2</em>");
  out = out.replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?=[^\w]|$)/g, "$1<em>$2</em>");
  out = out.replace(/~~(?=\S)(.*?\S)~~/g, "<del>$1</del>");
  out = out.replace(/\n/g, "<br>");
  const unpark = (html) => html.replace(new RegExp(`${CODE_OPEN}(\\d+)${CODE_CLOSE}`, "g"), (_, i) => parked[Number(i)]);
  return unpark(unpark(out)); // twice: a link label may hold a parked code span
}

// --- block rules (lines of escaped text) ---

const FENCE = /^\s*(```|~~~)/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s*&gt;\s?/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_DIVIDER = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
    || LIST_ITEM.test(line) || (line.includes("|") && next !== undefined && TABLE_DIVIDER.test(next));
}

function tableCells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => inline(cell.trim()));
}

function renderTable(lines) {
  const [head, , ...rows] = lines;
  const headHtml = tableCells(head).map((cell) => `<th>${cell}</th>`).join("");
  const bodyHtml = rows.map((row) => `<tr>${tableCells(row).map((cell) => `<td>${cell}</td>`).join("")}</tr>`).join("");
  return `<table><thead><tr>${headHtml}</tr></thead><tbody>${bodyHtml}</tbody></table>`;
}

// A list: items at the first item's indentation; deeper lines belong to the item above them.
function renderList(lines, start) {
  const first = lines[start].match(LIST_ITEM);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items = [];
  let i = start;
  for (; i < lines.length; i++) {
    const line = lines[i];
    const item = line.match(LIST_ITEM);
    if (item && item[1].length === indent && /\d/.test(item[2]) === ordered) {
      items.push([item[3]]);
    } else if (line.trim() === "") {
      const next = lines[i + 1];
      if (next === undefined || (next.match(/^\s*/)[0].length <= indent && !LIST_ITEM.test(next))) break;
      items[items.length - 1].push("");
    } else if (line.match(/^\s*/)[0].length > indent || !startsBlock(line, lines[i + 1])) {
      items[items.length - 1].push(line.slice(Math.min(line.match(/^\s*/)[0].length, indent + 2)));
    } else {
      break;
    }
  }
  const body = items.map((itemLines) => {
    const html = renderBlocks(itemLines);
    // A tight item is one paragraph: shown without the <p> margins.
    const tight = html.match(/^<p>([\s\S]*?)<\/p>([\s\S]*)$/);
    return `<li>${tight ? tight[1] + tight[2] : html}</li>`;
  }).join("");
  const startAttr = ordered && parseInt(first[2], 10) !== 1 ? ` start="${parseInt(first[2], 10)}"` : "";
  return { html: ordered ? `<ol${startAttr}>${body}</ol>` : `<ul>${body}</ul>`, next: i };
}

function renderBlocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") { i++; continue; }
    if (FENCE.test(line)) {
      const fence = line.match(FENCE)[1];
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) code.push(lines[i]);
      i++;
      out.push(`<pre><code>${code.join("\n")}</code></pre>`);
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      const level = heading[1].length;
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
      i++;
      continue;
    }
    if (RULE.test(line)) { out.push("<hr>"); i++; continue; }
    if (QUOTE.test(line)) {
      const quoted = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i++) quoted.push(lines[i].replace(QUOTE, ""));
      out.push(`<blockquote>${renderBlocks(quoted)}</blockquote>`);
      continue;
    }
    if (LIST_ITEM.test(line)) {
      const list = renderList(lines, i);
      out.push(list.html);
      i = list.next;
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_DIVIDER.test(lines[i + 1])) {
      const table = [line, lines[i + 1]];
      for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim() !== ""; i++) table.push(lines[i]);
      out.push(renderTable(table));
      continue;
    }
    const paragraph = [line];
    for (i++; i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i], lines[i + 1]); i++) paragraph.push(lines[i]);
    out.push(`<p>${inline(paragraph.join("\n"))}</p>`);
  }
  return out.join("");
}

/**
 * Render a document's Markdown (a reference's passage) to safe HTML. Unlike an answer it has no
 * citations: a citation tag a document holds stays visible as text, like any other markup.
 * @param {string} text
 * @returns {string}
 */
export function renderMarkdown(text) {
  const source = String(text || "").replace(PRIVATE, "");
  return renderBlocks(escapeHtml(source).replace(/\r\n?/g, "\n").split("\n"));
}

/**
 * Render an answer to safe HTML.
 * @param {string} text the answer so far (citation tags included)
 * @param {{final?: boolean}} options final=false while streaming: a half-received tag is hidden
 * @returns {{html: string, citations: Array<object>}} citations in the order of their numbers
 */
export function renderAnswer(text, { final = true } = {}) {
  let source = String(text || "").replace(PRIVATE, "");
  if (!final) source = source.replace(PARTIAL_TAG_AT_END, "");
  const citations = [];
  const lifted = liftCitations(source, citations);
  const html = renderBlocks(escapeHtml(lifted).replace(/\r\n?/g, "\n").split("\n"));
  return { html: citationButtons(html, citations), citations };
}
