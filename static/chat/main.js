// The coachee's chat page, one WebSocket per tab on one coaching session: wiring and start-up.
//
// Nothing lost, nothing twice (order.js): events are applied strictly in seq order, once each;
// Coach's streamed text is put together by character offset (stream.js). Model text is only
// ever inserted with textContent, except Synth's server-sanitised `html` (render.js).
import { admit, createOrder, hasHeld, takeHeld } from "./order.js";
import {
  closeComposerIfEnded,
  confirmSent,
  disableComposer,
  flushOutbox,
  onError,
  onMessageAccepted,
  onSessionEnded,
  pumpQueue,
  renderCounter,
  renderQueueNote,
  restoreOutbox,
  sendUserMessage,
  submitComposer,
} from "./outbox.js";
import { dom, RENDERED_SEQ, root } from "./page.js";
import {
  announce,
  attachRenderedSynths,
  changeList,
  decorate,
  findMessage,
  hideNotice,
  noticeRetryText,
  placeSynth,
  safetyCard,
  scrollToBottom,
  synthBubble,
} from "./render.js";
import {
  configureSocket,
  connect,
  gapsMaybeClosed,
  goOffline,
  hasSocket,
  reconnectNow,
  requestStop,
  scheduleGapCheck,
  startHeartbeat,
} from "./socket.js";
import {
  onAgentStatus,
  onServiceDegraded,
  onTurnDone,
  renderNotifyToggle,
  showPageTitle,
  tellIfAway,
  toggleNotify,
  turnFor,
  turnsChanged,
  turnTrouble,
  whenTurnsChange,
} from "./status.js";
import { hasStreamGap, onCoachDelta, onCoachDone, onCoachSnapshot, onCoachStarted } from "./stream.js";

const order = createOrder(RENDERED_SEQ);

// --- Events that concern several parts of the page --------------------------------------------

function onSynthDone(e) {
  turnFor(e.turn_id);
  if (!findMessage(e.message_id)) placeSynth(synthBubble(e), e.completes_message_id);
  if (e.fallback) {
    turnTrouble(e.turn_id, "The full answer could not be prepared this time. Your message is saved.");
  } else {
    announce("The full answer is ready.");
    tellIfAway("Your full answer is ready.");
  }
}

function onSafetyNotice(e) {
  turnFor(e.turn_id).crisis = true;
  turnsChanged(); // a message waiting behind this turn goes out now
  const li = safetyCard(e);
  changeList(() => dom.list.append(li));
}

const HANDLERS = {
  "message.accepted": onMessageAccepted,
  "coach.started": onCoachStarted,
  "coach.delta": onCoachDelta,
  "coach.snapshot": onCoachSnapshot,
  "coach.done": onCoachDone,
  "agent.status": onAgentStatus,
  "synth.done": onSynthDone,
  "turn.done": onTurnDone,
  "safety.notice": onSafetyNotice,
  "service.degraded": onServiceDegraded,
  "session.ended": onSessionEnded,
  error: onError,
  pong() {},
};

// --- Applying events in seq order -----------------------------------------------------------

function receive(event) {
  applyEvent(event);
  gapsMaybeClosed();
}

function applyEvent(event) {
  const verdict = admit(order, event);
  if (verdict === "seen") {
    if (event.type === "message.accepted") confirmSent(event);
    return;
  }
  if (verdict === "held") {
    scheduleGapCheck();
    return;
  }
  dispatch(event);
  for (let next = takeHeld(order); next; next = takeHeld(order)) dispatch(next);
}

function dispatch(event) {
  const handler = HANDLERS[event.type];
  if (!handler) return; // an event type this page does not know yet
  try {
    handler(event);
  } catch (error) {
    console.error("chat: could not apply", event.type, error);
  }
}

// --- The page as the server rendered it ---------------------------------------------------

function restorePage() {
  for (const li of dom.list.querySelectorAll("li.msg")) decorate(li);
  attachRenderedSynths();
  for (const li of dom.list.querySelectorAll('li.msg-coach[data-status="streaming"]')) {
    li.setAttribute("aria-busy", "true");
  }
  restoreOutbox();
  // A turn that was running when the page was rendered: messages sent now wait for it.
  if (root.dataset.runningTurn) turnFor(Number(root.dataset.runningTurn));
  renderCounter();
  renderQueueNote();
  closeComposerIfEnded();
  // Opened at one message (a link from the memory page): show it, not the newest.
  const target = location.hash.startsWith("#msg-") ? document.getElementById(location.hash.slice(1)) : null;
  if (target) target.scrollIntoView({ block: "center" });
  else scrollToBottom();
}

// --- Start-up -------------------------------------------------------------------------------

function start() {
  whenTurnsChange(pumpQueue); // a turn that ends lets the next queued message go
  configureSocket({
    lastSeq: () => order.lastSeq,
    hasGap: () => hasHeld(order) || hasStreamGap(),
    onOpen: flushOutbox,
    onEvent: receive,
    onRefused: disableComposer,
  });

  dom.form.addEventListener("submit", submitComposer);
  dom.input.addEventListener("input", renderCounter);
  dom.input.addEventListener("keydown", (ev) => {
    // Enter sends; Shift+Enter is a new line; Enter that confirms an IME composition is neither.
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      dom.form.requestSubmit();
    }
  });

  dom.stop.addEventListener("click", () => {
    dom.stop.disabled = true;
    dom.stop.textContent = "Stopping…";
    requestStop(); // sent as soon as we are back, if not now
  });

  dom.retry.addEventListener("click", () => {
    const text = noticeRetryText();
    hideNotice();
    if (text) sendUserMessage(text); // a new message with a new client_id
  });

  dom.reconnect.addEventListener("click", reconnectNow);
  window.addEventListener("online", reconnectNow);
  window.addEventListener("offline", goOffline);

  // Phones freeze background tabs; coming back to one should not wait for the backoff.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") showPageTitle();
    if (document.visibilityState === "visible" && !hasSocket()) reconnectNow();
  });

  // Ending a session cannot be undone: ask first (without script, the form simply posts).
  if (dom.endForm && dom.endDialog && typeof dom.endDialog.showModal === "function") {
    dom.endForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      dom.endDialog.returnValue = "";
      dom.endDialog.showModal();
    });
    dom.endDialog.addEventListener("close", () => {
      if (dom.endDialog.returnValue === "end") dom.endForm.submit();
    });
  }

  if (dom.notify) dom.notify.addEventListener("click", toggleNotify);
  renderNotifyToggle();
  startHeartbeat();
  restorePage();
  connect();
}

if (root) start();
