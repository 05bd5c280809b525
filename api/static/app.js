// The chat page: wires the pieces together.
//
//   api.js         the API key, JSON calls, errors in plain words
//   stream.js      one answer's SSE stream, reconnecting with Last-Event-ID
//   turn.js        one answer on screen (progress windows, thinking, Markdown, status)
//   markdown.js    safe Markdown + citation superscripts
//   references.js  the references panel
//   passage.js     a reference's passage: safe Markdown, the part the answer used marked
//   document.js    a reference's location on its card, and its document opened at the passage
//   images.js      attached pictures, and thumbnails of the images answers draw on
//   attachments.js the pictures the next question carries
//   sessions.js    the conversation list
//   sidebar.js     the sidebar as an overlay on narrow screens (the menu button)
//   welcome.js     the empty conversation, with the sample's question to try
//   knowledge.js   knowledge base picker, documents and uploads
//   assistants.js  assistant picker (a question's assistant_id)
//
// What survives a reload: the API key and the open conversation (localStorage), and which answer
// this tab was streaming (sessionStorage). After a reload that answer's stream is replayed from
// its start (the server coalesces it into a few frames), which rebuilds its progress windows,
// references and text so far, then followed live. Within a page, a dropped connection resumes
// with Last-Event-ID instead (stream.js): the page still holds what it was shown.

import { Api } from "./api.js";
import { AssistantPicker } from "./assistants.js";
import { DocumentViewer } from "./document.js";
import { Attachments } from "./attachments.js";
import { ImageLoader } from "./images.js";
import { DocumentsDialog, KnowledgePicker } from "./knowledge.js";
import { ReferencePanel } from "./references.js";
import { SessionList } from "./sessions.js";
import { SidebarOverlay } from "./sidebar.js";
import { followAnswer } from "./stream.js";
import { Turn, addQuestion } from "./turn.js";
import { Welcome } from "./welcome.js";

const SESSION_STORAGE = "ragline.session";
const PENDING_STORAGE = "ragline.pendingAnswer";
const NOTICE_MS = 10_000;

const $ = (id) => document.getElementById(id);

const api = new Api();
const state = {
  devMode: false,
  sessionId: null,
  live: null, // the answer being followed: {turn, sessionId, abort}
};

const thread = $("thread");
const welcome = $("welcome"); // the empty-conversation hint, put back by showWelcome()
const images = new ImageLoader(api);
const references = new ReferencePanel($("references"), images, new DocumentViewer($("doc-dialog"), api));
const attachments = new Attachments($("attachments"), $("attach-input"), { onError: notify });
const sessions = new SessionList($("sessions"), api, { onOpen: openSession, onDeleted: sessionDeleted, onError: notify });
const documents = new DocumentsDialog($("kb-dialog"), api);
const suggestions = new Welcome(welcome, { onAsk: (question) => ask(question) });
const assistants = new AssistantPicker($("assistant-box"), api);
const picker = new KnowledgePicker($("knowledge"), api, {
  onOpenDocuments: (kb) => documents.open(kb), onError: notify, onChange: () => suggestions.update(picker.selectedBases()),
});
new SidebarOverlay($("sidebar"), $("menu"), $("scrim"));

// --- notices ---

let noticeTimer = 0;

/** Show an error (or any message) in the banner above the conversation. */
function notify(errorOrText) {
  const text = typeof errorOrText === "string" ? errorOrText : errorOrText.message;
  if (errorOrText?.unauthorized) return; // the sign-in dialog is already asking for a key
  $("notice-text").textContent = text;
  $("notice").hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { $("notice").hidden = true; }, NOTICE_MS);
}

// --- sign in ---

function showSignIn(reason = "") {
  leaveLiveAnswer();
  $("signin-error").textContent = reason;
  $("signin-error").hidden = !reason;
  if (!$("signin").open) $("signin").showModal();
  $("signin-key").focus();
}

async function signIn(event) {
  event.preventDefault();
  api.setKey($("signin-key").value);
  try {
    await api.json("sessions?page=1&page_size=1"); // any authenticated call tells whether the key works
  } catch (error) {
    $("signin-error").textContent = error.message;
    $("signin-error").hidden = false;
    return;
  }
  $("signin-key").value = "";
  $("signin").close();
  await start();
}

function signOut() {
  api.setKey("");
  localStorage.removeItem(SESSION_STORAGE);
  sessionStorage.removeItem(PENDING_STORAGE);
  state.sessionId = null;
  clearThread();
  sessions.sessions = [];
  sessions.render();
  showSignIn();
}

function showAccount() {
  const tail = api.key ? api.key.slice(-4) : "";
  $("account-label").textContent = state.devMode ? "Dev server: no API key needed" : `Signed in with key …${tail}`;
  $("sign-out").hidden = state.devMode;
}

// --- conversations ---

function clearThread() {
  leaveLiveAnswer();
  thread.replaceChildren();
  references.clear();
}

function showWelcome() {
  thread.replaceChildren(welcome);
}

function setCurrentSession(id) {
  state.sessionId = id;
  if (id) localStorage.setItem(SESSION_STORAGE, id);
  else localStorage.removeItem(SESSION_STORAGE);
  sessions.setActive(id);
}

function newTurn() {
  return new Turn(thread, {
    onCite: (turn, number) => references.focus(turn, number),
    onReferences: (turn, reference) => (reference ? references.open(turn, reference) : references.show(turn)),
    onDecide: decide,
    images,
  });
}

/** Open a conversation: its messages, and the answer still being written, if any, followed live. */
async function openSession(id) {
  clearThread();
  setCurrentSession(id);
  let page;
  try {
    page = await api.json(`sessions/${encodeURIComponent(id)}/messages?limit=200`);
  } catch (error) {
    notify(error);
    return;
  }
  if (state.sessionId !== id) return; // another conversation was opened meanwhile
  if (page.has_more) thread.append(Object.assign(document.createElement("p"), { className: "hint", textContent: "Older messages are not shown." }));
  let last = null;
  let writing = null;
  for (const message of page.items) {
    if (message.role === "user") {
      addQuestion(thread, message.content, message.images);
    } else if (message.is_completed) {
      last = newTurn();
      last.showMessage(message);
    } else {
      writing = message.id; // still being written: a reload mid-answer, or another tab's question
      followLive(newTurn(), id, { messageId: message.id });
    }
  }
  // This tab was streaming an answer the list does not show yet (it had only just started).
  const pending = pendingAnswer();
  if (!writing && pending?.sessionId === id && !page.items.some((m) => m.id === pending.messageId)) {
    followLive(newTurn(), id, { messageId: pending.messageId });
  }
  if (last && !state.live) references.show(last);
  if (!page.items.length) showWelcome();
  scrollToEnd(true);
}

function sessionDeleted(id) {
  if (id === state.sessionId) {
    setCurrentSession(null);
    clearThread();
    showWelcome();
  }
}

function newConversation() {
  setCurrentSession(null);
  clearThread();
  showWelcome();
  $("question").focus();
}

// --- asking, following, stopping ---

async function ask(question) {
  if ((state.live && !state.live.ended) || (!question.trim() && !attachments.urls.length)) return;
  let sessionId = state.sessionId;
  if (!sessionId) {
    try {
      const session = await api.json("sessions", { method: "POST", body: {} });
      sessions.upsert(session);
      sessionId = session.id;
      setCurrentSession(sessionId);
    } catch (error) {
      notify(error);
      return;
    }
  }
  welcome.remove();
  $("question").value = "";
  const pictures = attachments.urls.map((url) => ({ url }));
  attachments.set([]);
  addQuestion(thread, question, pictures);
  const turn = newTurn();
  references.clear();
  scrollToEnd(true);
  const assistant = assistants.chosen();
  const kbIds = assistants.takesKnowledgeBases() ? picker.selectedIds() : [];
  const base = `sessions/${encodeURIComponent(sessionId)}`;
  // With no knowledge base checked (and no assistant searching its own), the pure chat route
  // answers from the model alone.
  const body = { query: question, ...(pictures.length ? { images: pictures } : {}), ...(assistant ? { assistant_id: assistant.id } : {}) };
  const searches = Boolean(kbIds.length || assistants.searches());
  const request = searches
    ? { method: "POST", path: `${base}/knowledge-chat`, body: kbIds.length ? { ...body, knowledge_base_ids: kbIds } : body }
    : { method: "POST", path: `${base}/chat`, body };
  turn.unsearched = !searches;
  await followLive(turn, sessionId, { request });
  // Refused before it began (a conflict, a bad key): give the question back to edit or resend.
  if (!turn.messageId && !$("question").value) {
    $("question").value = question;
    if (!attachments.urls.length) attachments.set(pictures.map((picture) => picture.url));
  }
}

/** Follow one answer into `turn` until it ends, is stopped, fails, or the page moves on. */
async function followLive(turn, sessionId, { request, messageId }) {
  leaveLiveAnswer();
  const abort = new AbortController();
  state.live = { turn, sessionId, abort };
  showBusy(true);
  const result = await followAnswer({
    api, sessionId, request, messageId, signal: abort.signal,
    onEvent: (event) => {
      turn.apply(event);
      if (event.response_type === "agent_query") rememberPending(sessionId, turn.messageId);
      if (event.response_type === "session_title") sessions.setTitle(sessionId, event.content);
      if (turn.finished) answerEnded(turn);
      scrollToEnd();
    },
    onConnection: (connection, attempt) => {
      if (connection === "reconnecting") turn.setStatus(`Connection lost. Reconnecting… (attempt ${attempt})`, "progress");
      else if (turn.status.dataset.kind === "progress") turn.setStatus("");
    },
  });
  if (result.outcome === "failed" && !turn.finished) turn.finish("interrupted", result.error.message);
  if (result.outcome === "complete" && !turn.finished) turn.finish("done");
  if (result.outcome === "aborted") return;
  answerEnded(turn);
  if (state.live?.turn === turn) state.live = null;
}

/** The answer is over for this page: the composer is free again and a reload has nothing to resume. */
function answerEnded(turn) {
  references.refresh(turn); // its final citations: the sentences they back are marked in the passages
  if (state.live?.turn !== turn) return;
  forgetPending();
  showBusy(false);
  // The stream stays open a moment for a new session's title; state.live is kept until then so
  // the title still reaches the list, but a new question may already be asked.
  state.live = { ...state.live, ended: true };
}

/** Stop following the current answer on this page (the answer itself goes on on the server). */
function leaveLiveAnswer() {
  if (!state.live) return;
  state.live.abort.abort();
  state.live = null;
  showBusy(false);
}

/** The user's decision on a tool call the running answer waits on (agent mode's approval). */
async function decide(turn, callId, approved) {
  const sessionId = state.live?.turn === turn ? state.live.sessionId : state.sessionId;
  const body = { tool_call_id: callId, approved, ...(turn.messageId ? { message_id: turn.messageId } : {}) };
  try {
    await api.json(`sessions/${encodeURIComponent(sessionId)}/approvals`, { method: "POST", body });
  } catch (error) {
    if (error.status === 409) return; // decided already (another tab), or the answer ended: the stream says how
    notify(error);
    throw error;
  }
}

async function stop() {
  const live = state.live;
  if (!live || live.ended) return;
  $("stop").disabled = true;
  const body = live.turn.messageId ? { message_id: live.turn.messageId } : {};
  try {
    await api.json(`sessions/${encodeURIComponent(live.sessionId)}/stop`, { method: "POST", body });
  } catch (error) {
    if (error.status !== 409) notify(error); // 409: it had just finished by itself
  }
}

function showBusy(busy) {
  $("ask").hidden = busy;
  $("stop").hidden = !busy;
  $("stop").disabled = false;
}

// --- resuming after a reload ---

function rememberPending(sessionId, messageId) {
  sessionStorage.setItem(PENDING_STORAGE, JSON.stringify({ sessionId, messageId }));
}

function forgetPending() {
  sessionStorage.removeItem(PENDING_STORAGE);
}

function pendingAnswer() {
  try {
    return JSON.parse(sessionStorage.getItem(PENDING_STORAGE) || "null");
  } catch {
    return null;
  }
}

// --- scrolling ---

/** Keep the newest text in view, unless the reader scrolled up to read something else. */
function scrollToEnd(force = false) {
  const nearEnd = thread.scrollHeight - thread.scrollTop - thread.clientHeight < 120;
  if (force || nearEnd) thread.scrollTop = thread.scrollHeight;
}

// --- start ---

async function start() {
  showAccount();
  try {
    await Promise.all([sessions.load(), picker.load(), assistants.load()]);
  } catch (error) {
    notify(error);
    return;
  }
  // After a reload mid-answer the tab reopens that conversation; openSession follows the answer.
  const pending = pendingAnswer();
  const wanted = pending?.sessionId || localStorage.getItem(SESSION_STORAGE);
  if (wanted && sessions.sessions.some((s) => s.id === wanted)) await openSession(wanted);
  else setCurrentSession(null);
}

function wire() {
  $("composer").addEventListener("submit", (event) => { event.preventDefault(); ask($("question").value); });
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ask($("question").value);
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", newConversation);
  $("notice-close").addEventListener("click", () => { $("notice").hidden = true; });
  $("signin-form").addEventListener("submit", signIn);
  $("signin").addEventListener("cancel", (event) => event.preventDefault()); // no way around the key
  $("sign-out").addEventListener("click", signOut);
  api.onUnauthorized = (error) => showSignIn(api.key ? error.message : "");
}

async function boot() {
  wire();
  try {
    state.devMode = await api.devMode();
  } catch (error) {
    notify(error);
    return;
  }
  if (!state.devMode && !api.key) showSignIn();
  else await start();
}

boot();
