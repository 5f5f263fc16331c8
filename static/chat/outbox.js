// The composer and its outbox: messages waiting to be sent or acknowledged, the queue, the counter and limits.
import { closed, dom, MAX_CHARS, SESSION_ID, session } from "./page.js";
import { changeList, el, findMessage, hideNotice, makeBubble, showNotice } from "./render.js";
import { isOpen, transmit } from "./socket.js";
import { anyTurnHolding, nameSession, startTurn, turnFor, turnsChanged, turnTrouble } from "./status.js";

const OUTBOX_KEY = `coaching-outbox-${SESSION_ID}`;
// Error codes about the frame itself: sending the same text again would fail the same way.
const INPUT_ERRORS = new Set([
  "empty_message",
  "message_too_long",
  "frame_too_large",
  "invalid_frame",
  "unstorable_text",
]);
// What the server refuses as unstorable (agents/text.py): NUL and unpaired surrogates.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const NUMBER = new Intl.NumberFormat();
// What the server takes for empty (consumers.is_blank): only separators, control or format characters.
const BLANK = /^[\p{Z}\p{C}]*$/u;
const ENDED_NOTE = "This session has ended. Start a new session to continue.";

// client_id -> {text, queued}, until the server acknowledges it. A queued message waits for the
// running turn to end (one turn at a time: a second one would compete with it for the models).
const outbox = new Map();

// --- The outbox: messages typed but not yet acknowledged survive reconnects and reloads -----

function loadOutbox() {
  try {
    const entries = JSON.parse(sessionStorage.getItem(OUTBOX_KEY) || "[]");
    // Pages before the queue stored the text alone.
    return new Map(entries.map(([id, m]) => [id, typeof m === "string" ? { text: m, queued: false } : m]));
  } catch {
    return new Map();
  }
}

function saveOutbox() {
  try {
    if (outbox.size) sessionStorage.setItem(OUTBOX_KEY, JSON.stringify([...outbox]));
    else sessionStorage.removeItem(OUTBOX_KEY);
  } catch {
    // Storage full or switched off: the outbox still lives in memory for this page.
  }
}

// After a reload: the messages this tab had not seen acknowledged are back, as they were.
export function restoreOutbox() {
  for (const [clientId, item] of loadOutbox()) {
    outbox.set(clientId, item);
    dom.list.append(pendingBubble(clientId, item));
  }
}

function newClientId() {
  // getRandomValues works outside secure contexts too (randomUUID does not).
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `c${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function pendingBubble(clientId, item) {
  const li = makeBubble("user", item.text);
  li.dataset.clientId = clientId;
  markQueued(li, item.queued);
  return li;
}

function bubbleOf(clientId) {
  return dom.list.querySelector(`li[data-client-id="${CSS.escape(clientId)}"]`);
}

// A queued bubble says so and can be taken back; a pending one is on its way.
function markQueued(li, queued) {
  li.classList.toggle("queued", queued);
  li.classList.toggle("pending", !queued);
  const old = li.querySelector(".queue-meta");
  if (old) old.remove();
  if (!queued) return;
  const meta = el("div", "queue-meta");
  meta.append(el("span", "queue-label", "Queued · goes out when the current reply is finished"));
  const cancel = el("button", "link small queue-cancel", "Cancel");
  cancel.type = "button";
  cancel.addEventListener("click", () => cancelQueued(li.dataset.clientId));
  meta.append(cancel);
  li.append(meta);
}

// Busy: a turn runs, or a message is on its way and will start one.
function busy() {
  if (anyTurnHolding()) return true;
  for (const item of outbox.values()) if (!item.queued) return true;
  return false;
}

export function sendUserMessage(text) {
  const clientId = newClientId();
  const item = { text, queued: busy() };
  outbox.set(clientId, item);
  saveOutbox();
  changeList(() => dom.list.append(pendingBubble(clientId, item)));
  // Queued: the queue note (a status region) says so; announcing it too would say it twice.
  if (!item.queued) transmit({ type: "user.message", client_id: clientId, text });
  renderQueueNote();
}

// After each (re)connect: what was on its way goes again (the server drops repeats by client_id).
export function flushOutbox() {
  for (const [clientId, item] of outbox) {
    if (!item.queued) transmit({ type: "user.message", client_id: clientId, text: item.text });
  }
  pumpQueue();
}

// Sends the oldest queued message once nothing runs; its turn then keeps the rest waiting.
export function pumpQueue() {
  if (!closed() && !busy() && isOpen()) {
    for (const [clientId, item] of outbox) {
      if (!item.queued) continue;
      item.queued = false;
      saveOutbox();
      const li = bubbleOf(clientId);
      if (li) markQueued(li, false);
      transmit({ type: "user.message", client_id: clientId, text: item.text });
      break;
    }
  }
  renderQueueNote();
}

function cancelQueued(clientId) {
  const item = outbox.get(clientId);
  if (!item || !item.queued) return;
  outbox.delete(clientId);
  saveOutbox();
  const li = bubbleOf(clientId);
  if (li) li.remove();
  // Nothing typed is lost: it goes back into an empty composer.
  if (!dom.input.value.trim()) {
    dom.input.value = item.text;
    renderCounter();
  }
  dom.input.focus();
  renderQueueNote();
}

function queuedCount() {
  let n = 0;
  for (const item of outbox.values()) if (item.queued) n += 1;
  return n;
}

// Above the composer while a reply is still coming: what happens to a message sent now.
export function renderQueueNote() {
  const running = anyTurnHolding() && !closed();
  const queued = queuedCount();
  let text = "";
  if (running && queued) {
    const what = queued === 1 ? "Your next message is" : `${queued} messages are`;
    text = `A reply is still coming. ${what} queued and will be sent when it is finished. Press Stop to end the reply and send now.`;
  } else if (running) {
    text = "A reply is still coming. A message you send now waits until it is finished.";
  } else if (queued) {
    text = "Sending your queued message…";
  }
  if (dom.queueNote.textContent !== text) dom.queueNote.textContent = text;
  dom.queueNote.hidden = !text;
}

// The server acknowledged a message: it leaves the outbox, its bubble is confirmed. Also runs
// for a repeated acknowledgement (a re-sent client_id), whose seq we may already have.
export function confirmSent(event) {
  if (!event.client_id) return;
  if (outbox.delete(event.client_id)) saveOutbox();
  const pending = bubbleOf(event.client_id);
  if (!pending) return;
  const shown = findMessage(event.message_id);
  if (shown && shown !== pending) {
    pending.remove(); // the page's transcript already had it (sent just before a reload)
    return;
  }
  pending.dataset.messageId = event.message_id;
  pending.dataset.seq = event.seq;
  markQueued(pending, false);
  pending.classList.remove("pending");
}

// --- Events about the coachee's messages and the session ----------------------------------

export function onMessageAccepted(e) {
  confirmSent(e);
  nameSession(e.text);
  if (!findMessage(e.message_id)) {
    // Sent from another tab (or before a reload): no local bubble to confirm.
    const li = makeBubble("user", e.text);
    li.dataset.messageId = e.message_id;
    li.dataset.seq = e.seq;
    changeList(() => dom.list.append(li));
  }
  startTurn(e.turn_id, e.text);
}

export function onError(e) {
  if (e.code === "session_closed") {
    onSessionEnded();
    return;
  }
  if (e.code === "turn_running") {
    requeue(e.client_id, e.turn_id);
    return;
  }
  if (e.code === "message_too_long") {
    dropUnsendable((text, clientId) => clientId === e.client_id || charCount(text) > MAX_CHARS);
  }
  if (e.code === "unstorable_text") dropUnsendable((text) => UNSTORABLE.test(text));
  if (INPUT_ERRORS.has(e.code)) {
    showNotice(e.detail || "That message could not be sent.");
    return;
  }
  turnTrouble(e.turn_id, e.detail || "Something went wrong.");
}

// A message the server will never take must not be re-sent on every reconnect.
function dropUnsendable(refused) {
  for (const [clientId, item] of outbox) {
    if (!refused(item.text, clientId)) continue;
    outbox.delete(clientId);
    const li = bubbleOf(clientId);
    if (li) {
      markQueued(li, false);
      li.classList.replace("pending", "not-sent");
    }
  }
  saveOutbox();
  renderQueueNote();
}

// The server still runs a turn (perhaps one this page has not heard of yet): the message
// waits in the queue, ahead of the others, until that turn ends.
function requeue(clientId, turnId) {
  const item = clientId && outbox.get(clientId);
  if (item) {
    item.queued = true;
    const rest = [...outbox].filter(([id]) => id !== clientId);
    outbox.clear();
    outbox.set(clientId, item);
    for (const [id, other] of rest) outbox.set(id, other);
    saveOutbox();
    const li = bubbleOf(clientId);
    if (li) markQueued(li, true);
  }
  if (turnId !== null && turnId !== undefined) {
    const turn = turnFor(turnId);
    turn.status = "running"; // the server says so
    turn.seenAt = Date.now();
    turnsChanged();
  }
  renderQueueNote();
}

export function onSessionEnded() {
  session.ended = true;
  disableComposer(ENDED_NOTE);
  for (const li of dom.list.querySelectorAll("li.pending, li.queued")) {
    markQueued(li, false);
    li.classList.replace("pending", "not-sent");
  }
  outbox.clear();
  saveOutbox();
  hideNotice();
  turnsChanged();
}

// --- The composer ---------------------------------------------------------------------------

export function disableComposer(note) {
  dom.input.disabled = true;
  dom.send.disabled = true;
  dom.stop.hidden = true;
  dom.note.textContent = note;
  dom.note.hidden = false;
}

// An ended session's page is rendered closed; the script keeps it so (no Stop, the note shown).
export function closeComposerIfEnded() {
  if (session.ended) disableComposer(ENDED_NOTE);
}

// Code points, as the server counts (Python's len), of what it would store (stripped).
function charCount(text) {
  return [...text.trim()].length;
}

function showComposerError(text) {
  dom.composerError.textContent = text;
  dom.composerError.hidden = false;
  dom.input.setAttribute("aria-invalid", "true");
}

function hideComposerError() {
  if (dom.composerError.hidden) return;
  dom.composerError.hidden = true;
  dom.composerError.textContent = "";
  delete dom.composerError.dataset.reason;
  dom.input.removeAttribute("aria-invalid");
}

export function renderCounter() {
  const count = charCount(dom.input.value);
  const over = count - MAX_CHARS;
  let text = `${NUMBER.format(count)} / ${NUMBER.format(MAX_CHARS)}`;
  if (over > 0) text += ` · ${NUMBER.format(over)} too many`;
  dom.counter.textContent = text;
  dom.counter.dataset.state = over > 0 ? "over" : count >= MAX_CHARS * 0.9 ? "near" : "ok";
  // A refusal stays until what it refused is fixed.
  if (over <= 0 && dom.composerError.dataset.reason === "too_long") hideComposerError();
  if (count > 0 && dom.composerError.dataset.reason === "empty") hideComposerError();
}

function refuseInput(reason, text) {
  dom.composerError.dataset.reason = reason;
  showComposerError(text);
  dom.input.focus();
}

// Send: refused whole (empty, too long) with the reason under the box, or into the outbox.
export function submitComposer(ev) {
  ev.preventDefault();
  if (closed()) return;
  const text = dom.input.value.trim();
  if (BLANK.test(text)) {
    refuseInput("empty", "Write a message first: an empty message cannot be sent.");
    return;
  }
  const count = charCount(text);
  if (count > MAX_CHARS) {
    // Refused whole, never cut: the text stays in the box to be shortened.
    refuseInput(
      "too_long",
      `Your message is ${NUMBER.format(count)} characters long; the limit is ${NUMBER.format(MAX_CHARS)}. ` +
        `Shorten it by ${NUMBER.format(count - MAX_CHARS)} characters, or split it into two messages. Nothing was sent.`,
    );
    return;
  }
  dom.input.value = "";
  hideComposerError();
  renderCounter();
  hideNotice();
  sendUserMessage(text);
}
