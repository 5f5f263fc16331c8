// The chat page's elements, the settings the server wrote into its data attributes, and whether it is closed.

export const root = document.getElementById("chat");
// Read once, at start-up; empty on a page without the chat (main.js then does nothing).
const data = root ? root.dataset : {};

export const byId = (id) => document.getElementById(id);

export const dom = {
  list: byId("messages"),
  input: byId("message-input"),
  form: byId("composer"),
  send: byId("send-button"),
  stop: byId("stop-button"),
  status: byId("status-line"),
  notice: byId("notice"),
  noticeText: byId("notice-text"),
  retry: byId("retry-button"),
  note: byId("composer-note"),
  connection: byId("connection"),
  connectionText: byId("connection-text"),
  reconnect: byId("reconnect-button"),
  announcer: byId("announcer"),
  notify: byId("notify-button"),
  composerError: byId("composer-error"),
  counter: byId("char-count"),
  queueNote: byId("queue-note"),
  endForm: byId("end-session-form"),
  endDialog: byId("end-dialog"),
};

export const SESSION_ID = data.sessionId;
export const LOGIN_URL = data.loginUrl || "/accounts/login/";
// The last seq the server rendered into the page: the socket resumes after it.
export const RENDERED_SEQ = Number(data.lastSeq) || 0;
// The median of this server's recent whole turns (seconds), when it has finished some.
export const USUAL_TURN_MS = Number(data.usualTurnS) * 1000 || null;
// The server's limit (settings.COACHING_MAX_MESSAGE_CHARS), counted as it counts: code points.
export const MAX_CHARS = Number(data.maxChars) || 4000;
// The server ends every turn by this deadline (a watchdog sends turn.done).
export const TURN_DEADLINE_MS = (Number(data.turnDeadlineS) || 180) * 1000;

// Ended: the session is over. Refused: this page may not (or no longer) use it. Either closes
// the composer for good.
export const session = {
  ended: data.sessionStatus !== "open",
  refused: false,
};

export function closed() {
  return session.ended || session.refused;
}
