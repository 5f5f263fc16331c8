// Coach's streamed reply: its text as the pieces arrive (at character offsets), and its bubble.
import { dom } from "./page.js";
import { drainAhead, extend } from "./order.js";
import { changeList, findMessage, makeBubble } from "./render.js";
import { scheduleGapCheck } from "./socket.js";
import { turnFor } from "./status.js";

const streams = new Map(); // coach message_id -> {text, ahead: Map(offset -> text), final}

function stream(messageId) {
  let s = streams.get(messageId);
  if (!s) {
    const li = findMessage(messageId);
    s = {
      text: li ? li.querySelector(".body").textContent : "",
      ahead: new Map(),
      final: li ? li.dataset.status !== "streaming" : false,
    };
    streams.set(messageId, s);
  }
  return s;
}

// A reply still being written that holds a piece it cannot place yet (the text before it is missing).
export function hasStreamGap() {
  for (const s of streams.values()) if (!s.final && s.ahead.size) return true;
  return false;
}

function renderStream(messageId) {
  const li = findMessage(messageId);
  if (!li) return; // coach.started (in seq order) creates the bubble and renders then
  const s = stream(messageId);
  const body = li.querySelector(".body");
  if (body.textContent !== s.text) changeList(() => (body.textContent = s.text));
}

function coachBubble(e) {
  let li = findMessage(e.message_id);
  if (!li) {
    li = makeBubble("coach", "");
    li.dataset.messageId = e.message_id;
    li.dataset.status = "streaming";
    li.setAttribute("aria-busy", "true"); // screen readers read it once, when complete
    changeList(() => dom.list.append(li));
  }
  li.dataset.turnId = e.turn_id;
  return li;
}

export function onCoachStarted(e) {
  turnFor(e.turn_id);
  coachBubble(e);
  renderStream(e.message_id);
}

export function onCoachDelta(e) {
  turnFor(e.turn_id);
  const s = stream(e.message_id);
  if (s.final) return; // a late delta of a finished reply
  if (e.offset > s.text.length) {
    s.ahead.set(e.offset, e.text); // a gap before it: hold it until the gap is filled
    scheduleGapCheck();
  } else {
    s.text = extend(s.text, e.offset, e.text);
  }
  drainAhead(s);
  renderStream(e.message_id);
}

export function onCoachSnapshot(e) {
  const s = stream(e.message_id);
  if (s.final) return;
  if (e.text.length > s.text.length) s.text = e.text; // the text so far; ours may already be longer
  drainAhead(s);
  renderStream(e.message_id);
}

export function onCoachDone(e) {
  const s = stream(e.message_id);
  s.text = e.text;
  s.final = true;
  s.ahead.clear();
  const li = coachBubble(e);
  li.dataset.status = e.status;
  li.removeAttribute("aria-busy");
  renderStream(e.message_id);
}
