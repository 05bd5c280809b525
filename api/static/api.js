// The service's HTTP API as the page uses it: the API key, JSON requests, and errors turned into
// sentences a person can act on.

const KEY_STORAGE = "ragline.apiKey";
export const V1 = "/api/v1";

/** An error with a message meant for people; `status` 0 means the server was not reached. */
export class ApiError extends Error {
  constructor(message, { status = 0, code = "" } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }

  get unauthorized() { return this.status === 401; }

  // Worth another try later: the server was unreachable, overloaded or restarting.
  get retryable() { return this.status === 0 || this.status === 502 || this.status === 503 || this.status === 504; }
}

export const UNREACHABLE = "Can't reach the Ragline server. Check that `ragline serve` is running and the network is up.";

// The server's own messages are written for people (api/errors.py); a status without one gets a
// sentence here, so nobody ever reads "HTTP 500" or a stack trace.
function messageFor(status, serverMessage) {
  if (status === 401) return "This API key was not accepted. Sign in with a valid key.";
  if (status === 413) return serverMessage || "The file is too large.";
  if (status >= 500) {
    const detail = serverMessage && serverMessage !== "internal server error" ? ` (${serverMessage})` : "";
    return `The server ran into a problem${detail}. Try again; if it keeps happening, check the server's log.`;
  }
  return serverMessage || `The request was refused (HTTP ${status}).`;
}

/** The ApiError for a non-2xx response (reads its `{"error": {"code", "message"}}` body). */
export async function errorFromResponse(response) {
  let code = "", serverMessage = "";
  try {
    const body = await response.json();
    code = body?.error?.code || "";
    serverMessage = body?.error?.message || "";
  } catch { /* not JSON: the status alone speaks */ }
  return new ApiError(messageFor(response.status, serverMessage), { status: response.status, code });
}

/** The same, for an XMLHttpRequest (uploads use XHR for its upload progress events). */
export function errorFromXhr(xhr) {
  if (xhr.status === 0) return new ApiError(UNREACHABLE, { code: "unreachable" });
  let code = "", serverMessage = "";
  try {
    const body = JSON.parse(xhr.responseText);
    code = body?.error?.code || "";
    serverMessage = body?.error?.message || "";
  } catch { /* not JSON */ }
  return new ApiError(messageFor(xhr.status, serverMessage), { status: xhr.status, code });
}

export class Api {
  constructor() {
    this.key = localStorage.getItem(KEY_STORAGE) || "";
    this.onUnauthorized = () => {};
  }

  setKey(key) {
    this.key = key.trim();
    if (this.key) localStorage.setItem(KEY_STORAGE, this.key);
    else localStorage.removeItem(KEY_STORAGE);
  }

  /** Headers every API call carries (a dev server without keys ignores the key). */
  headers(extra = {}) {
    return this.key ? { "X-API-Key": this.key, ...extra } : { ...extra };
  }

  /** fetch() with the key; network failures become an ApiError with status 0. */
  async fetch(path, { method = "GET", body, headers = {}, signal } = {}) {
    const init = { method, headers: this.headers(headers), signal, cache: "no-store" };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(path.startsWith("/") ? path : `${V1}/${path}`, init);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(UNREACHABLE, { code: "unreachable" });
    }
    if (!response.ok) {
      const error = await errorFromResponse(response);
      if (error.unauthorized) this.onUnauthorized(error);
      throw error;
    }
    return response;
  }

  /** A JSON call; resolves to the parsed body (null for 204). */
  async json(path, options = {}) {
    const response = await this.fetch(path, options);
    return response.status === 204 ? null : response.json();
  }

  /** Whether the server wants a key at all (GET /health, which is public). */
  async devMode() {
    const health = await this.json("/health");
    return String(health.auth || "").startsWith("dev");
  }
}
