// Following one answer's event stream (SSE over fetch) until it completes, reconnecting by itself.
//
// EventSource cannot POST a question nor set the API key header, so the page reads the SSE
// frames from a fetch() body. Every frame has an `id:` of the form <message id>:<entry id>; when
// the connection drops, the next request sends the last one as Last-Event-ID to continue-stream
// and the server resumes right after it: nothing is lost and nothing is shown twice.

import { ApiError } from "./api.js";

// The server sends a `: ping` comment every 15 s on a quiet stream; three missed pings mean a
// connection that died without closing, which is then dropped and re-opened.
const SILENCE_LIMIT_MS = 45_000;
// Reconnect delays: the server's `retry:` hint (1 s) growing to at most 5 s, for about 3 minutes,
// long enough for a service restart behind a shared stream store.
const RETRY_MAX_MS = 5_000;
const MAX_ATTEMPTS = 40;

const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
});

/** Parse SSE text into frames; returns the unparsed rest (a frame cut mid-way). */
function parseFrames(buffer, onFrame, onRetry) {
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    let id = "", data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue; // heartbeat comment
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "data") data.push(value);
      else if (field === "retry" && /^\d+$/.test(value)) onRetry(Number(value));
    }
    if (data.length) onFrame({ id, event: JSON.parse(data.join("\n")) });
  }
  return rest;
}

/** One HTTP request's worth of frames. Resolves when the server closes the stream. */
async function readOnce(api, request, lastEventId, onFrame, onRetry, signal) {
  const attempt = new AbortController();
  const abort = () => attempt.abort();
  signal.addEventListener("abort", abort, { once: true });
  let watchdog = setTimeout(abort, SILENCE_LIMIT_MS);
  try {
    const headers = { Accept: "text/event-stream", ...(lastEventId ? { "Last-Event-ID": lastEventId } : {}) };
    const response = await api.fetch(request.path, { method: request.method, body: request.body, headers, signal: attempt.signal });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      clearTimeout(watchdog);
      watchdog = setTimeout(abort, SILENCE_LIMIT_MS);
      buffer = parseFrames(buffer + value, onFrame, onRetry);
    }
  } catch (error) {
    if (signal.aborted) throw error; // the user left this answer: not a connection problem
    if (error instanceof ApiError) throw error;
    throw new ApiError("The connection to the server was lost.", { status: 0 }); // dropped mid-stream, or silent too long
  } finally {
    clearTimeout(watchdog);
    signal.removeEventListener("abort", abort);
  }
}

/**
 * Follow an answer to its end.
 * @param {object} o
 * @param {Api} o.api
 * @param {string} o.sessionId
 * @param {{method: string, path: string, body?: object}} [o.request] the first request (the question's POST);
 *        without it the stream is joined through continue-stream (a reload, or another tab's answer)
 * @param {string} [o.messageId] the assistant message, when known
 * @param {(event: object, id: string) => void} o.onEvent every StreamResponse, in order
 * @param {(state: "reconnecting"|"connected", attempt: number) => void} [o.onConnection]
 * @param {AbortSignal} o.signal aborting stops following (the answer itself goes on on the server)
 * @returns {Promise<{outcome: "complete"|"failed"|"aborted", error?: ApiError}>}
 */
export async function followAnswer({ api, sessionId, request, messageId = null, onEvent, onConnection = () => {}, signal }) {
  let lastEventId = null;
  let complete = false;
  let retryMs = 1000;
  let next = request || continueRequest(sessionId, messageId);
  let failures = 0; // in a row: a stream that delivers again starts the count over
  for (;;) {
    const rejoining = next !== request; // continue-stream, not the question's own POST
    try {
      await readOnce(api, next, lastEventId, (frame) => {
        if (failures) { failures = 0; onConnection("connected", 0); }
        lastEventId = frame.id || lastEventId;
        messageId = messageId || frame.event.assistant_message_id || null;
        if (frame.event.response_type === "complete") complete = true;
        onEvent(frame.event, frame.id);
      }, (ms) => { retryMs = ms; }, signal);
      if (complete) return { outcome: "complete" };
      // Closed before `complete` (a restart, a proxy timeout): pick the answer up again below.
    } catch (error) {
      if (signal.aborted) return { outcome: "aborted" };
      if (complete) return { outcome: "complete" }; // only the wait for a session title was cut
      if (!error.retryable) return { outcome: "failed", error: rejoining ? explainJoinError(error, lastEventId) : error };
      // The question's POST never reached a server: say so now instead of retrying in the dark.
      if (!rejoining && error.code === "unreachable") return { outcome: "failed", error };
    }
    failures += 1;
    if (failures > MAX_ATTEMPTS) {
      return { outcome: "failed", error: new ApiError("The connection to the server was lost and did not come back. Reload the page to see the answer.") };
    }
    onConnection("reconnecting", failures);
    await sleep(Math.min(retryMs * failures, RETRY_MAX_MS), signal);
    if (signal.aborted) return { outcome: "aborted" };
    next = continueRequest(sessionId, messageId);
  }
}

function continueRequest(sessionId, messageId) {
  const query = messageId ? `?message_id=${encodeURIComponent(messageId)}` : "";
  return { method: "GET", path: `sessions/${encodeURIComponent(sessionId)}/continue-stream${query}` };
}

// A rejoin that the server refuses needs a sentence about what happened, not the raw refusal.
function explainJoinError(error, lastEventId) {
  if (error.status === 409 && !lastEventId) {
    return new ApiError("The connection dropped before the answer started, so it was not asked. Ask again.", { status: 409 });
  }
  if (error.status === 404) {
    return new ApiError("This answer's live stream is no longer available (the server restarted or it expired). What was saved is shown below.", { status: 404 });
  }
  return error;
}

/**
 * Follow any other event stream (an ingestion job's progress) with the key in a header, never in
 * the URL (a URL ends up in access logs and browser history), resuming with Last-Event-ID.
 * @param {object} o
 * @param {Api} o.api
 * @param {string} o.path
 * @param {(event: object) => boolean} o.onEvent every event in order; true when it was the last
 * @param {AbortSignal} [o.signal]
 * @returns {Promise<{outcome: "complete"|"failed"|"aborted", error?: ApiError}>}
 */
export async function followEvents({ api, path, onEvent, signal = new AbortController().signal }) {
  let lastEventId = null;
  let finished = false;
  let retryMs = 1000;
  let failures = 0;
  for (;;) {
    try {
      await readOnce(api, { method: "GET", path }, lastEventId, (frame) => {
        failures = 0;
        lastEventId = frame.id || lastEventId;
        if (onEvent(frame.event)) finished = true;
      }, (ms) => { retryMs = ms; }, signal);
      if (finished) return { outcome: "complete" };
    } catch (error) {
      if (signal.aborted) return { outcome: "aborted" };
      if (finished) return { outcome: "complete" };
      if (!error.retryable) return { outcome: "failed", error };
    }
    failures += 1;
    if (failures > MAX_ATTEMPTS) return { outcome: "failed", error: new ApiError("The connection to the server was lost and did not come back.") };
    await sleep(Math.min(retryMs * failures, RETRY_MAX_MS), signal);
    if (signal.aborted) return { outcome: "aborted" };
  }
}
