// The session's WebSocket: connecting, heartbeat, reconnect with backoff, access checks, and resume after a seq.
import { dom, LOGIN_URL, SESSION_ID, session } from "./page.js";

const GAP_WAIT_MS = 1000; // how long a seq or offset gap may stay open before we ask again
const PING_EVERY_MS = 25000;
const PONG_WAIT_MS = 10000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 15000;
// 4003: this page's origin may not open the chat socket (agents/ws_guard.py); 4404: no socket
// at this address. (1009, a frame over the server's maximum, never comes from this page: it
// reconnects like any other close.)
const CLOSE = {
  RECONNECT: 4000,
  LOGGED_OUT: 4001,
  ORIGIN_REFUSED: 4003,
  UNAUTHENTICATED: 4401,
  FORBIDDEN: 4403,
  NOT_FOUND: 4404,
};

const state = {
  socket: null,
  attempt: 0, // reconnect attempts since the last successful open (the backoff exponent)
  failedHandshakes: 0,
  reconnectTimer: null,
  pongTimer: null,
  stopWanted: false,
  gapTimer: null,
  gapSince: 0, // when the oldest gap still open (in seqs or in Coach offsets) was noticed
};

// What the rest of the page does with the socket (main.js sets them before the first connect):
// lastSeq() the seq to resume after, hasGap() whether an event or a piece of text is missing,
// onOpen() after each (re)connect, onEvent(event) for each event, onRefused(why) once for good.
const hooks = {
  lastSeq: () => 0,
  hasGap: () => false,
  onOpen: () => {},
  onEvent: () => {},
  onRefused: () => {},
};

export function configureSocket(given) {
  Object.assign(hooks, given);
}

export function isOpen() {
  return state.socket !== null && state.socket.readyState === WebSocket.OPEN;
}

export function hasSocket() {
  return state.socket !== null;
}

export function transmit(frame) {
  if (!isOpen() || navigator.onLine === false) return false;
  state.socket.send(JSON.stringify(frame));
  return true;
}

// Asks the server to replay every event after the last one applied.
function resume() {
  transmit({ type: "resume", after_seq: hooks.lastSeq() });
}

// Stop the running turn: now, or as soon as we are connected again.
export function requestStop() {
  if (!transmit({ type: "stop" })) state.stopWanted = true;
}

function setConnection(name, text) {
  dom.connection.dataset.state = name;
  dom.connectionText.textContent = text;
  dom.reconnect.hidden = name !== "reconnecting";
}

export function connect() {
  clearTimeout(state.reconnectTimer);
  state.reconnectTimer = null;
  if (state.socket || session.refused) return;
  if (navigator.onLine === false) {
    setConnection("offline", "Offline. Messages you write are kept and sent when you are back online.");
    return; // the browser's `online` event brings us back
  }
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws/sessions/${SESSION_ID}/`);
  let opened = false;
  state.socket = ws;
  setConnection("connecting", state.attempt ? "Reconnecting…" : "Connecting…");
  ws.onopen = () => {
    opened = true;
    state.attempt = 0;
    state.failedHandshakes = 0;
    setConnection("open", "Connected");
    resume(); // first, so the server replays what we missed before anything new
    hooks.onOpen();
    if (state.stopWanted && transmit({ type: "stop" })) state.stopWanted = false;
  };
  ws.onmessage = (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (event.type === "pong") clearPongTimer();
    hooks.onEvent(event);
  };
  ws.onclose = (event) => {
    if (state.socket !== ws) return; // a socket we already gave up on
    state.socket = null;
    clearPongTimer();
    socketClosed(event.code, opened);
  };
}

// At once, without the backoff: the coachee asked, or the browser is back online or awake.
export function reconnectNow() {
  state.attempt = 0;
  connect();
}

function socketClosed(code, opened) {
  if (code === CLOSE.LOGGED_OUT) {
    afterLogout();
  } else if (code === CLOSE.UNAUTHENTICATED || code === CLOSE.FORBIDDEN) {
    refuse();
  } else if (code === CLOSE.ORIGIN_REFUSED) {
    refuse("This page may not open the chat from this address. Open the site at its own address.");
  } else if (code === CLOSE.NOT_FOUND) {
    refuse("There is no chat at this address.");
  } else if (code === CLOSE.RECONNECT) {
    state.attempt = 0;
    connect(); // the server asked: at once, then resume
  } else {
    // A handshake the server refused shows up as 1006 (the ASGI server answers HTTP 403 when
    // a consumer closes before accepting). Twice in a row: ask the page itself why.
    if (!opened && ++state.failedHandshakes >= 2) checkAccess();
    scheduleReconnect();
  }
}

function scheduleReconnect() {
  if (session.refused || state.reconnectTimer) return;
  if (navigator.onLine === false) {
    connect(); // shows the offline state and waits for `online`
    return;
  }
  // Exponential backoff with jitter, so many tabs do not all come back in the same instant.
  const cap = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** state.attempt);
  const delay = cap / 2 + (Math.random() * cap) / 2;
  state.attempt += 1;
  state.reconnectTimer = setTimeout(connect, delay);
  setConnection("reconnecting", `Connection lost. Reconnecting in ${Math.ceil(delay / 1000)} s…`);
}

// Forget a socket that is (or may be) dead without waiting for its closing handshake.
function dropSocket() {
  const ws = state.socket;
  if (!ws) return;
  state.socket = null;
  ws.onopen = ws.onmessage = ws.onclose = null;
  clearPongTimer();
  try {
    ws.close();
  } catch {
    // already closed
  }
}

// The browser says the network is gone: no socket until its `online` event.
export function goOffline() {
  dropSocket();
  clearTimeout(state.reconnectTimer);
  state.reconnectTimer = null;
  setConnection("offline", "Offline. Messages you write are kept and sent when you are back online.");
}

function clearPongTimer() {
  clearTimeout(state.pongTimer);
  state.pongTimer = null;
}

function heartbeat() {
  if (!transmit({ type: "ping" }) || state.pongTimer) return;
  // No pong in time: the connection is half-open (a sleeping laptop, a changed network).
  state.pongTimer = setTimeout(() => {
    state.pongTimer = null;
    dropSocket();
    scheduleReconnect();
  }, PONG_WAIT_MS);
}

export function startHeartbeat() {
  setInterval(heartbeat, PING_EVERY_MS);
}

// --- Access: why the server would not let this page in ----------------------------------------

// Asks for this page again: "ok", "login" (logged out), "refused" or "unknown" (no answer).
async function probeAccess() {
  try {
    const response = await fetch(location.href, { method: "HEAD", credentials: "same-origin", cache: "no-store" });
    const loginPath = new URL(LOGIN_URL, location.href).pathname;
    if (response.redirected && new URL(response.url).pathname === loginPath) return "login";
    if (response.status === 404 || response.status === 403) return "refused";
    return response.ok ? "ok" : "unknown";
  } catch {
    return "unknown";
  }
}

async function checkAccess() {
  const verdict = await probeAccess();
  if (verdict === "login") goToLogin();
  else if (verdict === "refused") refuse();
}

// 4001: the user logged out or changed the password. A password changed in this browser
// keeps our cookie valid (the other tabs share it): then simply reconnect.
async function afterLogout() {
  setConnection("connecting", "Checking your login…");
  const verdict = await probeAccess();
  if (verdict === "ok") {
    state.attempt = 0;
    connect();
  } else if (verdict === "refused") {
    refuse();
  } else {
    goToLogin();
  }
}

function goToLogin() {
  setConnection("closed", "You have been logged out.");
  session.refused = true;
  location.assign(`${LOGIN_URL}?next=${encodeURIComponent(location.pathname)}`);
}

function refuse(why = "This session is not available to you.") {
  dropSocket();
  clearTimeout(state.reconnectTimer);
  session.refused = true;
  setConnection("refused", why);
  hooks.onRefused(why);
}

// --- Gaps: a missing event or piece of text is replayed on request ---------------------------

// A gap may close by itself (the missing event is just late); if it stays open for
// GAP_WAIT_MS, ask for a replay, and again every GAP_WAIT_MS until it closes.
export function scheduleGapCheck() {
  if (!state.gapSince) state.gapSince = Date.now();
  if (!state.gapTimer) state.gapTimer = setTimeout(checkGap, GAP_WAIT_MS);
}

function checkGap() {
  state.gapTimer = null;
  if (!hooks.hasGap()) {
    state.gapSince = 0;
    return;
  }
  if (Date.now() - state.gapSince >= GAP_WAIT_MS) {
    resume();
    state.gapSince = Date.now(); // the replay gets its own GAP_WAIT_MS
  }
  state.gapTimer = setTimeout(checkGap, Math.max(50, GAP_WAIT_MS - (Date.now() - state.gapSince)));
}

// After each event: a gap that has closed needs no more checks.
export function gapsMaybeClosed() {
  if (!state.gapSince || hooks.hasGap()) return;
  clearTimeout(state.gapTimer);
  state.gapTimer = null;
  state.gapSince = 0;
}
