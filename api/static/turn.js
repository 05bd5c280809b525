// One assistant answer on screen: progress windows, folded thinking, the Markdown answer with
// citation superscripts, and a status line. Built from stream events, or from a stored message.

import { element } from "./dom.js";
import { answerImages, questionImages } from "./images.js";
import { renderAnswer } from "./markdown.js";

// The progress windows the pipeline opens (graph/events.py ProgressWindow), in people's words.
const STEP_LABELS = {
  query_understand: { running: "Understanding the question…", done: "Understood the question", failed: "Could not rewrite the question; it was searched as asked" },
  knowledge_search: { running: "Searching the knowledge bases…", done: "Searched the knowledge bases", failed: "The knowledge base search failed" },
  // agent mode's tools (nodes/tools/)
  search_knowledge: { running: "Searching the knowledge bases…", done: "Searched the knowledge bases", failed: "The knowledge base search failed" },
  read_chunks: { running: "Reading a document…", done: "Read a document", failed: "Could not read the document" },
};

// Why an answer failed (the error event's data.code, graph/state.py ErrorKind), in people's
// words; the server's own text follows under "Details" for whoever runs the service.
const FAILURES = {
  model_call: "The language model could not be reached or returned an error.",
  get_chat_model: "The configured chat model could not be loaded.",
  retrieval: "Searching the knowledge bases failed: a store is unavailable.",
  rerank: "Re-ranking the search results failed.",
  internal: "Something went wrong while answering.",
};

function failureOf(event) {
  const code = event.data?.code || "";
  const detail = event.content || "";
  if (code === "invalid_input") return { text: `This question could not be answered as asked: ${detail}`, detail: "" };
  return { text: `${FAILURES[code] || "The answer failed."} Try again; if it keeps happening, the service's log tells more.`, detail };
}

export const UNSEARCHED_NOTE = "No knowledge base was searched: this answer is the model's own, not from your documents.";

function labelsFor(toolName) {
  return STEP_LABELS[toolName] || { running: `Running ${toolName}…`, done: `Finished ${toolName}`, failed: `${toolName} failed` };
}

export class Turn {
  /**
   * @param {HTMLElement} container the thread
   * @param {{onCite: (turn: Turn, number: number) => void, onReferences: (turn: Turn) => void, images?: import("./images.js").ImageLoader,
   *   onDecide?: (turn: Turn, callId: string, approved: boolean) => Promise<void>}} hooks
   */
  constructor(container, { onCite, onReferences, images, onDecide }) {
    this.onReferences = onReferences;
    this.onDecide = onDecide;
    this.images = images;
    this.messageId = null;
    this.answer = "";
    this.unsegmented = ""; // the answer's text without an agent-mode segment (the pipeline's)
    this.segments = new Map(); // agent mode: round -> the text the model wrote in it
    this.thinking = "";
    this.references = [];
    this.citations = [];
    this.steps = new Map(); // tool_call_id -> {item, labels}
    this.finished = false;
    this.renderQueued = false;
    this.unsearched = false; // asked with no knowledge base: the answer is the model's own

    this.root = element("article", "msg assistant pending"); // pending until finish()
    this.stepList = element("ol", "steps");
    this.thinkingBox = element("details", "thinking");
    this.thinkingBox.hidden = true;
    this.thinkingSummary = element("summary", "", "Thinking…");
    this.thinkingText = element("div", "thinking-text");
    this.thinkingBox.append(this.thinkingSummary, this.thinkingText);
    this.body = element("div", "answer markdown");
    this.figures = element("div", "answer-images"); // the images the answer's passages hold
    this.figures.hidden = true;
    this.status = element("p", "status");
    this.status.hidden = true;
    this.root.append(this.stepList, this.thinkingBox, this.body, this.figures, this.status);
    container.append(this.root);

    // One listener for every superscript of this answer, present and future.
    this.body.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-cite]");
      if (button) onCite(this, Number(button.dataset.cite));
    });
  }

  get busy() { return !this.finished; }

  /** Apply one StreamResponse event. */
  apply(event) {
    const data = event.data || {};
    switch (event.response_type) {
      case "agent_query":
        this.setMessageId(event.assistant_message_id);
        break;
      case "tool_call":
        this.openStep(data.tool_call_id || data.tool_name, data.tool_name || "tool");
        break;
      case "tool_result":
        this.closeStep(data.tool_call_id || data.tool_name, data.success ? "done" : "failed", data.error);
        break;
      case "tool_approval_required":
        this.askApproval(data.tool_call_id, data.tool_name || "tool", data.arguments || {});
        break;
      case "tool_approval_resolved":
        this.resolveApproval(data.tool_call_id, data.approved, data.reason);
        break;
      case "mcp_oauth_required":
        this.askAuthorization(data.server || "MCP server", data.authorization_url || "");
        break;
      case "mcp_oauth_resolved":
        this.resolveApproval(`oauth:${data.server}`, data.authorized, data.reason, ["authorized", "not authorized"]);
        break;
      case "references":
        this.references = event.knowledge_references || [];
        this.showImages();
        this.onReferences(this);
        break;
      case "thinking":
        if (data.thought) this.supersede(data.superseded_segment);
        this.addThinking(data.thought && this.thinking ? `\n\n${event.content || ""}` : event.content || "", Boolean(data.replace));
        break;
      case "answer":
        this.addAnswer(event.content || "", Boolean(data.replace), data.segment);
        if (event.done && data.truncated) this.setStatus("The answer was cut off at the output limit.", "note");
        break;
      case "stop":
        this.setStatus("Stopping…", "progress");
        break;
      case "error": {
        const failure = failureOf(event);
        this.finish("failed", failure.text, failure.detail);
        break;
      }
      case "complete":
        if (data.stopped) this.finish("stopped", "Stopped. The partial answer is kept.");
        else if (!this.finished) this.finish("done");
        break;
      default:
        break; // session_title and the rest are the page's business, or not shown
    }
  }

  setMessageId(id) {
    if (!id) return;
    this.messageId = id;
    this.root.dataset.messageId = id;
  }

  // --- progress windows ---

  openStep(id, toolName) {
    if (this.steps.has(id)) return; // a replay after reconnecting may repeat the opening
    const labels = labelsFor(toolName);
    const item = element("li", "step running");
    item.dataset.tool = toolName;
    item.append(element("span", "step-icon"), element("span", "step-label", labels.running));
    item.querySelector(".step-icon").setAttribute("aria-hidden", "true");
    this.stepList.append(item);
    this.steps.set(id, { item, labels });
  }

  closeStep(id, outcome, detail) {
    const step = this.steps.get(id);
    if (!step || !step.item.classList.contains("running")) return;
    step.item.classList.replace("running", outcome);
    const text = outcome === "done" ? step.labels.done : outcome === "failed" ? step.labels.failed : `${step.labels.running.replace(/…$/, "")}: stopped`;
    step.item.querySelector(".step-label").textContent = detail && outcome === "failed" ? `${text} (${detail})` : text;
  }

  /** Agent mode: a call waiting for the user's approval, with Approve and Deny buttons. */
  askApproval(id, toolName, args) {
    if (!id || this.steps.has(`approval:${id}`)) return; // a replay after reconnecting repeats the question
    const item = element("li", "step approval");
    item.dataset.tool = toolName;
    const query = typeof args.query === "string" ? `: “${args.query}”` : "";
    const icon = element("span", "step-icon");
    icon.setAttribute("aria-hidden", "true");
    item.append(icon, element("span", "step-label", `The assistant asks to run ${toolName}${query}`));
    const approve = element("button", "approve", "Approve");
    const deny = element("button", "deny", "Deny");
    for (const [button, approved] of [[approve, true], [deny, false]]) {
      button.type = "button";
      button.addEventListener("click", async () => {
        approve.disabled = deny.disabled = true;
        try {
          await this.onDecide?.(this, id, approved);
        } catch {
          approve.disabled = deny.disabled = false; // the page said why; the user may try again
        }
      });
    }
    item.append(approve, deny);
    this.stepList.append(item);
    this.steps.set(`approval:${id}`, { item, labels: labelsFor(toolName) });
  }

  /** An MCP server needs the user's own sign-in: a link that opens its authorization in a new tab. */
  askAuthorization(server, url) {
    const id = `oauth:${server}`;
    if (this.steps.has(`approval:${id}`) || !/^https?:\/\//.test(url)) return; // a replay repeats it; only web links open
    const item = element("li", "step approval");
    const icon = element("span", "step-icon");
    icon.setAttribute("aria-hidden", "true");
    const link = element("a", "authorize", `Sign in to ${server}`);
    link.href = url;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    item.append(icon, element("span", "step-label", `${server} needs your authorization`), link);
    this.stepList.append(item);
    this.steps.set(`approval:${id}`, { item, labels: labelsFor(server) });
  }

  resolveApproval(id, approved, reason, [yes, no] = ["approved", "denied"]) {
    const step = this.steps.get(`approval:${id}`);
    if (!step) return;
    step.item.classList.replace("approval", approved ? "done" : "failed");
    step.item.querySelectorAll("button, a.authorize").forEach((control) => control.remove());
    const label = step.item.querySelector(".step-label");
    label.textContent = approved ? `${label.textContent}: ${yes}` : `${label.textContent}: ${no}${reason ? ` (${reason})` : ""}`;
  }

  /** Close every window still open: no spinner outlives its answer (stop, error, lost stream). */
  closeOpenSteps(outcome) {
    for (const id of this.steps.keys()) this.closeStep(id, outcome);
  }

  // --- images ---

  /** Thumbnails of the stored images among the references, each opening its passage's card. */
  showImages() {
    if (!this.images) return;
    const figures = answerImages(this.references).map((image) => {
      const button = element("button", "answer-image");
      button.type = "button";
      button.title = image.caption || "Show the passage this image belongs to";
      button.append(this.images.thumbnail(image));
      button.addEventListener("click", () => this.onReferences(this, this.references[image.index]));
      return button;
    });
    this.figures.replaceChildren(...figures);
    this.figures.hidden = figures.length === 0;
  }

  // --- text ---

  addThinking(text, replace) {
    this.thinking = replace ? text : this.thinking + text;
    this.thinkingBox.hidden = !this.thinking;
    this.thinkingText.textContent = this.thinking; // plain text: never markup
  }

  addAnswer(text, replace, segment) {
    if (segment === undefined || segment === null) {
      this.unsegmented = replace ? text : this.unsegmented + text;
      if (replace) this.segments.clear(); // a replace is the whole answer (the saved one, after a takeover or an agent's rounds)
    } else {
      this.segments.set(segment, (replace ? "" : this.segments.get(segment) || "") + text);
    }
    this.answer = this.unsegmented + [...this.segments.values()].join("");
    if (this.answer && !this.thinkingBox.hidden) this.thinkingSummary.textContent = "Thought";
    this.scheduleRender();
  }

  /** Agent mode: the text of a round that went on to call tools was the model thinking aloud (its
   * `thought` carries it to the thinking box); it is no part of the answer. */
  supersede(segment) {
    if (segment === undefined || segment === null || !this.segments.delete(segment)) return;
    this.answer = this.unsegmented + [...this.segments.values()].join("");
    this.scheduleRender();
  }

  // Deltas arrive faster than frames are painted: render at most once per frame.
  scheduleRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      this.render();
    });
  }

  render() {
    const { html, citations } = renderAnswer(this.answer, { final: this.finished });
    this.body.innerHTML = html; // safe: renderAnswer escapes everything it did not write itself
    this.citations = citations;
  }

  // --- the end ---

  /**
   * The answer is over: close open windows, render the final text, show why it ended.
   * @param {"done"|"stopped"|"failed"|"interrupted"} outcome
   */
  finish(outcome, message, detail = "") {
    this.finished = true;
    this.root.classList.remove("pending");
    this.root.classList.add(outcome);
    this.closeOpenSteps(outcome === "done" ? "done" : outcome === "failed" ? "failed" : "stopped");
    if (!this.thinkingBox.hidden) this.thinkingSummary.textContent = "Thought";
    this.render();
    if (message) this.setStatus(message, outcome === "failed" || outcome === "interrupted" ? "error" : "note", detail);
    else if (outcome === "done" && this.unsearched) this.setStatus(UNSEARCHED_NOTE, "note");
    else if (this.status.dataset.kind === "progress") this.setStatus(""); // "Stopping…", "Reconnecting…"
  }

  setStatus(text, kind = "note", detail = "") {
    this.status.textContent = text;
    this.status.dataset.kind = kind;
    this.status.hidden = !text;
    if (detail) {
      const more = element("details", "status-detail");
      more.append(element("summary", "", "Details"), element("code", "", detail));
      this.status.append(" ", more);
    }
  }

  /** Show a stored message (GET .../messages): no progress windows, references kept for the panel. */
  showMessage(message) {
    this.setMessageId(message.id);
    this.references = message.knowledge_references || [];
    this.showImages();
    this.answer = this.unsegmented = message.content || "";
    if (message.stopped) this.finish("stopped", "Stopped. The partial answer is kept.");
    else if (message.truncated) this.finish("done", "The answer was cut off at the output limit.");
    else this.finish("done");
  }
}

/** A user's question: plain text, kept as typed, with the pictures it carried. */
export function addQuestion(container, text, images = []) {
  const node = element("div", "msg user", text);
  const pictures = questionImages(images);
  if (pictures) node.prepend(pictures);
  container.append(node);
  return node;
}
