// The coachee's chat page: one WebSocket per tab, on one coaching session.
//
// Nothing lost, nothing twice: events that carry a `seq` are persisted by the server and can
// arrive out of order (Daphne and the Celery workers both send) or twice (replays after a
// reconnect). They are applied strictly in seq order, once each. Coach deltas have no seq;
// their character offsets tell overlaps (dropped) from gaps (held, then filled by a resume).
//
// Safety: model text is only ever inserted with textContent. The one exception is Synth's
// `html`, which the server rendered from Markdown and sanitised (nh3).
(() => {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;

  const byId = (id) => document.getElementById(id);
  const dom = {
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

  const SESSION_ID = root.dataset.sessionId;
  const LOGIN_URL = root.dataset.loginUrl || "/accounts/login/";
  const OUTBOX_KEY = `coaching-outbox-${SESSION_ID}`;
  const NOTIFY_KEY = "coaching-notify"; // "yes" once the coachee turned notifications on
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
  const ROLE_LABELS = { user: "You", coach: "Coach", synth: "Full answer" };
  // The status line, in pipeline order: stages run one after another, agents in a stage in parallel.
  const PIPELINE = [["shadow"], ["persona", "plasticity", "stability"], ["synth"]];
  const AGENT_LABELS = {
    shadow: "Shadow",
    persona: "Persona",
    plasticity: "Plasticity",
    stability: "Stability",
    synth: "Synth",
  };
  const STATE_WORDS = { waiting: "waiting", running: "running", done: "done", failed: "failed", stopped: "stopped" };
  // What each agent is doing, in the coachee's words, for the status line while it runs.
  const DOING = {
    shadow: "looking at your patterns",
    persona: "getting a picture of you",
    plasticity: "choosing how to coach you",
    stability: "checking for risks",
    synth: "writing the full answer",
  };
  // The median of this server's recent whole turns (seconds), when it has finished some.
  const USUAL_TURN_MS = Number(root.dataset.usualTurnS) * 1000 || null;
  let PAGE_TITLE = document.title;
  // The server's limit (settings.COACHING_MAX_MESSAGE_CHARS), counted as it counts: code points.
  const MAX_CHARS = Number(root.dataset.maxChars) || 4000;
  const NUMBER = new Intl.NumberFormat();
  // What the server takes for empty (consumers.is_blank): only separators, control or format characters.
  const BLANK = /^[\p{Z}\p{C}]*$/u;

  const state = {
    lastSeq: Number(root.dataset.lastSeq) || 0,
    held: new Map(), // seq -> event that arrived before the ones it follows
    gapTimer: null,
    gapSince: 0, // when the oldest gap still open (in seqs or in Coach offsets) was noticed
    lastResumeAt: 0,
    socket: null,
    attempt: 0, // reconnect attempts since the last successful open (the backoff exponent)
    failedHandshakes: 0,
    reconnectTimer: null,
    pongTimer: null,
    tickTimer: null,
    refused: false,
    ended: root.dataset.sessionStatus !== "open",
    stopWanted: false,
    turns: new Map(), // turn_id -> {id, text, status, degraded, missing, agents, startedAt, endedAt}
    currentTurn: null, // the turn the status line shows: the latest one
    streams: new Map(), // coach message_id -> {text, ahead: Map(offset -> text), final}
    retryText: null,
  };
  // client_id -> {text, queued}, until the server acknowledges it. A queued message waits for the
  // running turn to end (one turn at a time: a second one would compete with it for the models).
  const outbox = loadOutbox();

  // --- Small DOM helpers ------------------------------------------------------------------

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function findMessage(id) {
    if (id === null || id === undefined) return null;
    return dom.list.querySelector(`li[data-message-id="${CSS.escape(String(id))}"]`);
  }

  function makeBubble(role, text) {
    const li = el("li", `msg msg-${role}`);
    li.dataset.role = role;
    li.append(el("span", "who", ROLE_LABELS[role]), el("div", "body", text || ""));
    decorate(li);
    return li;
  }

  // --- Under each message: its time, Copy, and on a full answer thumbs up / down ---------------

  const TIME = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const WHEN = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

  function stamp(time, date) {
    time.dateTime = date.toISOString();
    time.textContent = TIME.format(date);
    time.title = WHEN.format(date);
  }

  // A rendered message has its server time; one that arrives live is stamped on arrival.
  function decorate(li) {
    let foot = li.querySelector(".msg-foot");
    if (!foot) {
      foot = el("div", "msg-foot");
      li.append(foot);
    }
    if (foot.dataset.ready) return;
    foot.dataset.ready = "yes";
    let time = foot.querySelector("time");
    if (!time) {
      time = el("time");
      foot.append(time);
      stamp(time, new Date());
    } else if (time.dateTime) {
      stamp(time, new Date(time.dateTime)); // the reader's own clock and format
    }
    const copy = el("button", "msg-action copy", "Copy");
    copy.type = "button";
    copy.setAttribute("aria-label", `Copy ${ROLE_LABELS[li.dataset.role] || "message"}`);
    copy.addEventListener("click", () => copyMessage(li, copy));
    foot.append(copy);
    if (li.dataset.role === "synth") foot.append(thumbs(li));
  }

  async function copyMessage(li, button) {
    const text = li.querySelector(".body").innerText.trim();
    let copied = false;
    try {
      await navigator.clipboard.writeText(text);
      copied = true;
    } catch {
      copied = copyByHand(text); // no clipboard API outside secure contexts
    }
    button.textContent = copied ? "Copied" : "Copy failed";
    announce(copied ? "Copied." : "Could not copy.");
    setTimeout(() => (button.textContent = "Copy"), 1500);
  }

  function copyByHand(text) {
    const area = el("textarea", "visually-hidden");
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }

  function thumbs(li) {
    const group = el("span", "thumbs");
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "Was this answer helpful?");
    for (const [rating, label] of [
      ["up", "Helpful"],
      ["down", "Not helpful"],
    ]) {
      const button = el("button", `msg-action thumb thumb-${rating}`);
      button.append(thumbIcon(rating));
      button.type = "button";
      button.dataset.rating = rating;
      button.setAttribute("aria-label", label);
      button.title = label;
      button.setAttribute("aria-pressed", String(li.dataset.feedback === rating));
      button.addEventListener("click", () => rate(li, li.dataset.feedback === rating ? "none" : rating));
      group.append(button);
    }
    return group;
  }

  // Feather's thumbs icons (MIT), drawn rather than emoji: not every system has an emoji font.
  const THUMB_PATHS = {
    up: "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3",
    down: "M10 15v4a3 3 0 0 0 3 3l4-9V2H5.72a2 2 0 0 0-2 1.7l-1.38 9a2 2 0 0 0 2 2.3zm7-13h2.67A2.31 2.31 0 0 1 22 4v7a2.31 2.31 0 0 1-2.33 2H17",
  };

  function thumbIcon(rating) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", THUMB_PATHS[rating]);
    svg.append(path);
    return svg;
  }

  function csrfToken() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  async function postFeedback(li, rating, comment) {
    const url = root.dataset.feedbackUrl.replace("/0/", `/${encodeURIComponent(li.dataset.messageId)}/`);
    const body = new URLSearchParams({ rating, comment: comment || "" });
    const response = await fetch(url, {
      method: "POST",
      body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() },
    });
    if (!response.ok) throw new Error(`feedback: HTTP ${response.status}`);
  }

  async function rate(li, rating) {
    const before = li.dataset.feedback || "none";
    showRating(li, rating); // at once; put back if the server refuses
    try {
      await postFeedback(li, rating);
      announce(rating === "none" ? "Rating removed." : "Thanks for your feedback.");
      if (rating === "down") askWhy(li);
    } catch {
      showRating(li, before);
      showNotice("Your rating could not be saved. Please try again.");
    }
  }

  function showRating(li, rating) {
    if (rating === "none") delete li.dataset.feedback;
    else li.dataset.feedback = rating;
    for (const button of li.querySelectorAll(".thumb")) {
      button.setAttribute("aria-pressed", String(button.dataset.rating === rating));
    }
    if (rating !== "down") {
      const why = li.querySelector(".why-form");
      if (why) why.remove();
    }
  }

  // After a thumbs-down: what was wrong, in a few words (optional), for the coach.
  function askWhy(li) {
    if (li.querySelector(".why-form")) return;
    const form = el("form", "why-form");
    const id = `why-${li.dataset.messageId}`;
    const label = el("label", null, "What was wrong? (optional, your coach reads it)");
    label.htmlFor = id;
    const input = el("input");
    input.id = id;
    input.maxLength = 500;
    const send = el("button", "small", "Send");
    send.type = "submit";
    form.append(label, input, send);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        await postFeedback(li, "down", input.value);
        form.replaceChildren(el("span", "muted", "Thank you. Your coach will see it."));
      } catch {
        showNotice("Your comment could not be saved. Please try again.");
      }
    });
    li.append(form);
    input.focus();
  }

  function nearBottom() {
    const list = dom.list;
    return list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  }

  function scrollToBottom() {
    dom.list.scrollTop = dom.list.scrollHeight;
  }

  // Changes the list and keeps it scrolled to the newest message, unless the reader scrolled up.
  function changeList(change) {
    const stick = nearBottom();
    change();
    if (stick) scrollToBottom();
  }

  function announce(text) {
    dom.announcer.textContent = text;
  }

  function seconds(ms) {
    return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
  }

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

  function sendUserMessage(text) {
    const clientId = newClientId();
    const item = { text, queued: busy() };
    outbox.set(clientId, item);
    saveOutbox();
    changeList(() => dom.list.append(pendingBubble(clientId, item)));
    // Queued: the queue note (a status region) says so; announcing it too would say it twice.
    if (!item.queued) transmit({ type: "user.message", client_id: clientId, text });
    renderQueueNote();
  }

  function flushOutbox() {
    for (const [clientId, item] of outbox) {
      if (!item.queued) transmit({ type: "user.message", client_id: clientId, text: item.text });
    }
    pumpQueue();
  }

  // Sends the oldest queued message once nothing runs; its turn then keeps the rest waiting.
  function pumpQueue() {
    if (!state.ended && !state.refused && !busy() && isOpen()) {
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
  function renderQueueNote() {
    const running = anyTurnHolding() && !state.ended && !state.refused;
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
  function confirmSent(event) {
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

  // --- The connection -----------------------------------------------------------------------

  function isOpen() {
    return state.socket !== null && state.socket.readyState === WebSocket.OPEN;
  }

  function transmit(frame) {
    if (!isOpen() || navigator.onLine === false) return false;
    state.socket.send(JSON.stringify(frame));
    return true;
  }

  function resume() {
    state.lastResumeAt = Date.now();
    transmit({ type: "resume", after_seq: state.lastSeq });
  }

  function setConnection(name, text) {
    dom.connection.dataset.state = name;
    dom.connectionText.textContent = text;
    dom.reconnect.hidden = name !== "reconnecting";
  }

  function connect() {
    clearTimeout(state.reconnectTimer);
    state.reconnectTimer = null;
    if (state.socket || state.refused) return;
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
      flushOutbox();
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
      receive(event);
    };
    ws.onclose = (event) => {
      if (state.socket !== ws) return; // a socket we already gave up on
      state.socket = null;
      clearPongTimer();
      socketClosed(event.code, opened);
    };
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
    if (state.refused || state.reconnectTimer) return;
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
    state.refused = true;
    location.assign(`${LOGIN_URL}?next=${encodeURIComponent(location.pathname)}`);
  }

  function refuse(why = "This session is not available to you.") {
    dropSocket();
    clearTimeout(state.reconnectTimer);
    state.refused = true;
    setConnection("refused", why);
    disableComposer(why);
  }

  function disableComposer(note) {
    dom.input.disabled = true;
    dom.send.disabled = true;
    dom.stop.hidden = true;
    dom.note.textContent = note;
    dom.note.hidden = false;
  }

  // --- Applying events in seq order -----------------------------------------------------------

  function receive(event) {
    applyEvent(event);
    gapsMaybeClosed();
  }

  function applyEvent(event) {
    if (typeof event.seq !== "number") {
      dispatch(event);
      return;
    }
    if (event.seq <= state.lastSeq) {
      if (event.type === "message.accepted") confirmSent(event);
      return; // seen already: a replay overlap or a repeated acknowledgement
    }
    if (event.seq > state.lastSeq + 1) {
      state.held.set(event.seq, event);
      scheduleGapCheck();
      return;
    }
    applyInOrder(event);
    while (state.held.has(state.lastSeq + 1)) {
      const next = state.held.get(state.lastSeq + 1);
      state.held.delete(next.seq);
      applyInOrder(next);
    }
  }

  function applyInOrder(event) {
    state.lastSeq = event.seq;
    dispatch(event);
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

  function hasGap() {
    if (state.held.size) return true;
    for (const s of state.streams.values()) if (!s.final && s.ahead.size) return true;
    return false;
  }

  // A gap may close by itself (the missing event is just late); if it stays open for
  // GAP_WAIT_MS, ask for a replay, and again every GAP_WAIT_MS until it closes.
  function scheduleGapCheck() {
    if (!state.gapSince) state.gapSince = Date.now();
    if (!state.gapTimer) state.gapTimer = setTimeout(checkGap, GAP_WAIT_MS);
  }

  function checkGap() {
    state.gapTimer = null;
    if (!hasGap()) {
      state.gapSince = 0;
      return;
    }
    if (Date.now() - state.gapSince >= GAP_WAIT_MS) {
      resume();
      state.gapSince = Date.now(); // the replay gets its own GAP_WAIT_MS
    }
    state.gapTimer = setTimeout(checkGap, Math.max(50, GAP_WAIT_MS - (Date.now() - state.gapSince)));
  }

  function gapsMaybeClosed() {
    if (!state.gapSince || hasGap()) return;
    clearTimeout(state.gapTimer);
    state.gapTimer = null;
    state.gapSince = 0;
  }

  // --- Turns and the status line --------------------------------------------------------------

  function turnFor(id) {
    let turn = state.turns.get(id);
    if (!turn) {
      // A turn we did not see start (the page was loaded while it ran): it is running,
      // since some time we do not know.
      turn = {
        id,
        text: null,
        status: "running",
        degraded: false,
        missing: [],
        agents: {},
        startedAt: null,
        seenAt: Date.now(),
      };
      state.turns.set(id, turn);
      // The newest turn is the last one heard of (events come in seq order); ids are not in
      // turn order (they are reserved ahead, see context_ahead).
      state.currentTurn = id;
      turnsChanged();
    }
    return turn;
  }

  function startTurn(id, text) {
    const turn = turnFor(id);
    turn.text = text;
    if (turn.startedAt === null) turn.startedAt = Date.now();
    state.currentTurn = id;
    hideNotice();
    turnsChanged();
  }

  // The server ends every turn by its deadline (a watchdog sends turn.done). A turn this page
  // still counts as running well past that missed its end (heard of from a stray event after
  // a reload): it no longer holds queued messages back. The server refuses a message while a
  // turn really runs (turn_running), which puts it back in the queue.
  const TURN_DEADLINE_MS = (Number(root.dataset.turnDeadlineS) || 180) * 1000;
  const STALE_AFTER_MS = TURN_DEADLINE_MS + 30000;

  function isRunning(turn) {
    return turn.status === "running" && Date.now() - turn.seenAt < STALE_AFTER_MS;
  }

  function anyTurnRunning() {
    for (const turn of state.turns.values()) if (isRunning(turn)) return true;
    return false;
  }

  // A turn the crisis pre-gate answered does not hold the next message back (the server takes
  // it at once too: services.turn_accept).
  function anyTurnHolding() {
    for (const turn of state.turns.values()) if (isRunning(turn) && !turn.crisis) return true;
    return false;
  }

  function tick() {
    if (anyTurnRunning()) renderStatus();
    else turnsChanged(); // the last running turn went stale: stop ticking, send what waits
  }

  function turnsChanged() {
    const running = anyTurnRunning();
    dom.stop.hidden = !running || state.ended || state.refused;
    if (!running) {
      dom.stop.disabled = false;
      dom.stop.textContent = "Stop";
    }
    // The elapsed times tick while something runs, and stop when nothing does.
    if (running && !state.tickTimer) state.tickTimer = setInterval(tick, 200);
    if (!running && state.tickTimer) {
      clearInterval(state.tickTimer);
      state.tickTimer = null;
    }
    renderStatus();
    pumpQueue();
  }

  function agentView(turn, name) {
    const agent = turn.agents[name];
    if (!agent) return { state: turn.status === "running" ? "waiting" : "skipped", time: "" };
    if (agent.state === "running") {
      if (turn.status !== "running") return { state: "stopped", time: seconds(turn.endedAt - agent.since) };
      return { state: "running", time: seconds(Date.now() - agent.since) };
    }
    return { state: agent.state, time: agent.ms === null ? "" : seconds(agent.ms) };
  }

  function renderAgent(turn, name) {
    const view = agentView(turn, name);
    const item = el("li", "agent");
    item.dataset.agent = name;
    item.dataset.state = view.state;
    item.append(el("span", "agent-name", AGENT_LABELS[name]));
    item.append(el("span", "visually-hidden", ` ${STATE_WORDS[view.state] || "not run"}`));
    if (view.time) item.append(el("span", "agent-time", view.time));
    return item;
  }

  // "Checking for risks, choosing how to coach you": the agents running now, in plain words.
  function doingNow(turn) {
    const running = PIPELINE.flat().filter((name) => turn.agents[name] && turn.agents[name].state === "running");
    if (!running.length) return turn.agents.shadow ? "Putting it together" : "Getting started";
    const words = running.map((name) => DOING[name]).join(", ");
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  function waitEstimate(turn) {
    if (!USUAL_TURN_MS || turn.startedAt === null) return "";
    const left = USUAL_TURN_MS - (Date.now() - turn.startedAt);
    if (left <= 0) return " · taking longer than usual";
    return ` · full answer in about ${Math.max(5, Math.round(left / 5000) * 5)} s`;
  }

  function turnSummary(turn) {
    const took = turn.startedAt === null ? "" : seconds((turn.endedAt || Date.now()) - turn.startedAt);
    if (turn.status === "running") return `${doingNow(turn)}… ${took}${waitEstimate(turn)}`.trim();
    if (turn.status === "stopped") return took ? `Stopped after ${took}` : "Stopped";
    if (turn.status === "failed") return "Failed";
    if (turn.degraded) return took ? `Done, with gaps (${took})` : "Done, with gaps";
    return took ? `Done in ${took}` : "Done";
  }

  function renderStatus() {
    const turn = state.turns.get(state.currentTurn);
    dom.status.replaceChildren();
    if (!turn) {
      dom.status.dataset.state = "idle";
      return;
    }
    dom.status.dataset.state = turn.status;
    dom.status.dataset.degraded = String(Boolean(turn.degraded));
    dom.status.dataset.turnId = turn.id;
    const summary = el("span", "turn-summary", turnSummary(turn));
    if (turn.status !== "running" && !Object.keys(turn.agents).length) {
      dom.status.append(summary); // a turn that ended before we saw any of it
      return;
    }
    const pipeline = el("ol", "pipeline");
    pipeline.setAttribute("aria-label", "Agents");
    PIPELINE.forEach((stage, index) => {
      if (index > 0) pipeline.append(el("li", "sep stage-sep", "→"));
      stage.forEach((name, i) => {
        if (i > 0) pipeline.append(el("li", "sep", "·"));
        pipeline.append(renderAgent(turn, name));
      });
    });
    for (const sep of pipeline.querySelectorAll(".sep")) sep.setAttribute("aria-hidden", "true");
    dom.status.append(pipeline, summary);
  }

  // --- Notices and Retry ----------------------------------------------------------------------

  function showNotice(text, retryText) {
    dom.noticeText.textContent = text;
    state.retryText = retryText || null;
    dom.retry.hidden = !state.retryText || state.ended || state.refused;
    dom.notice.hidden = false;
  }

  function hideNotice() {
    dom.notice.hidden = true;
    dom.noticeText.textContent = "";
    dom.retry.hidden = true;
    state.retryText = null;
  }

  function lastUserText() {
    const bubbles = dom.list.querySelectorAll("li.msg-user .body");
    return bubbles.length ? bubbles[bubbles.length - 1].textContent : null;
  }

  function turnTrouble(turnId, text) {
    const turn = turnId === null || turnId === undefined ? null : state.turns.get(turnId);
    showNotice(text, (turn && turn.text) || lastUserText());
  }

  // --- Event handlers -------------------------------------------------------------------------

  // A new session is named after its first message, as the server names it on the next load
  // (services_sessions.title_from_words).
  const TITLE_FROM_WORDS = 60;

  function nameSession(text) {
    if (root.dataset.untitled !== "yes") return;
    root.dataset.untitled = "";
    const words = text.split(/\s+/).filter(Boolean).join(" ");
    let title = words;
    if (words.length > TITLE_FROM_WORDS) {
      const cut = words.slice(0, TITLE_FROM_WORDS);
      const space = cut.lastIndexOf(" ");
      title = `${space > 0 ? cut.slice(0, space) : cut}…`;
    }
    const heading = byId("chat-title");
    if (heading) heading.textContent = title;
    const current = document.querySelector('.sessions a[aria-current="page"] .session-name');
    if (current) current.textContent = title;
    PAGE_TITLE = `${title} · Coaching`;
    if (document.visibilityState !== "hidden") document.title = PAGE_TITLE;
  }

  function onMessageAccepted(e) {
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

  function stream(messageId) {
    let s = state.streams.get(messageId);
    if (!s) {
      const li = findMessage(messageId);
      s = {
        text: li ? li.querySelector(".body").textContent : "",
        ahead: new Map(),
        final: li ? li.dataset.status !== "streaming" : false,
      };
      state.streams.set(messageId, s);
    }
    return s;
  }

  // `piece` starts at `offset` <= text.length: keep only what extends the text.
  function extend(text, offset, piece) {
    return offset + piece.length > text.length ? text + piece.slice(text.length - offset) : text;
  }

  function drainAhead(s) {
    let progressed = true;
    while (progressed) {
      progressed = false;
      for (const [offset, piece] of s.ahead) {
        if (offset > s.text.length) continue;
        s.text = extend(s.text, offset, piece);
        s.ahead.delete(offset);
        progressed = true;
      }
    }
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

  function onCoachStarted(e) {
    turnFor(e.turn_id);
    coachBubble(e);
    renderStream(e.message_id);
  }

  function onCoachDelta(e) {
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

  function onCoachSnapshot(e) {
    const s = stream(e.message_id);
    if (s.final) return;
    if (e.text.length > s.text.length) s.text = e.text; // the text so far; ours may already be longer
    drainAhead(s);
    renderStream(e.message_id);
  }

  function onCoachDone(e) {
    const s = stream(e.message_id);
    s.text = e.text;
    s.final = true;
    s.ahead.clear();
    const li = coachBubble(e);
    li.dataset.status = e.status;
    li.removeAttribute("aria-busy");
    renderStream(e.message_id);
  }

  function onAgentStatus(e) {
    if (!(e.agent in AGENT_LABELS)) return; // the critic runs inside Synth's stage
    const turn = turnFor(e.turn_id);
    const agent = turn.agents[e.agent] || {};
    if (e.state === "started") {
      turn.agents[e.agent] = { state: "running", since: Date.now(), ms: null };
    } else {
      const ms = e.ms !== null && e.ms !== undefined ? e.ms : agent.since ? Date.now() - agent.since : null;
      turn.agents[e.agent] = { state: e.state === "succeeded" ? "done" : "failed", since: agent.since, ms };
    }
    if (e.turn_id === state.currentTurn) renderStatus();
  }

  function placeSynth(li, coachId) {
    const coach = findMessage(coachId);
    if (coach && coach.dataset.role === "coach") {
      li.dataset.completes = coachId;
      li.classList.add("attached");
      coach.classList.add("completed");
      changeList(() => coach.after(li)); // grouped right under the reply it completes
    } else {
      changeList(() => dom.list.append(li));
    }
  }

  function onSynthDone(e) {
    turnFor(e.turn_id);
    if (!findMessage(e.message_id)) {
      const li = makeBubble("synth", "");
      li.dataset.messageId = e.message_id;
      li.dataset.seq = e.seq;
      li.dataset.status = "complete";
      li.querySelector(".body").innerHTML = e.html; // rendered and sanitised on the server (nh3)
      if (e.fallback) li.classList.add("fallback");
      placeSynth(li, e.completes_message_id);
    }
    if (e.fallback) {
      turnTrouble(e.turn_id, "The full answer could not be prepared this time. Your message is saved.");
    } else {
      announce("The full answer is ready.");
      tellIfAway("Your full answer is ready.");
    }
  }

  // --- While the tab is hidden: the title, and a notification if the coachee allowed them ------

  function tellIfAway(text) {
    if (document.visibilityState !== "hidden") return;
    document.title = `● ${text} · ${PAGE_TITLE}`;
    if ("Notification" in window && Notification.permission === "granted" && notifyWanted()) {
      const note = new Notification("Coaching", { body: text, tag: `coaching-session-${root.dataset.sessionId}` });
      note.onclick = () => window.focus();
    }
  }

  function notifyWanted() {
    return localStorage.getItem(NOTIFY_KEY) === "yes";
  }

  function renderNotifyToggle() {
    if (!dom.notify) return;
    const supported = "Notification" in window;
    dom.notify.hidden = !supported || Notification.permission === "denied";
    if (!supported) return;
    const on = Notification.permission === "granted" && notifyWanted();
    dom.notify.setAttribute("aria-pressed", String(on));
    dom.notify.textContent = on ? "Notifications on" : "Notify me when an answer is ready";
  }

  async function toggleNotify() {
    if (Notification.permission === "granted" && notifyWanted()) {
      localStorage.setItem(NOTIFY_KEY, "no");
    } else if ((await Notification.requestPermission()) === "granted") {
      localStorage.setItem(NOTIFY_KEY, "yes");
    }
    renderNotifyToggle();
  }

  function onTurnDone(e) {
    const turn = turnFor(e.turn_id);
    turn.status = e.status;
    turn.degraded = e.degraded;
    turn.missing = e.missing || [];
    turn.endedAt = Date.now();
    for (const name of turn.missing) {
      const agent = turn.agents[name];
      if (name in AGENT_LABELS && (!agent || agent.state === "running")) {
        turn.agents[name] = { state: "failed", since: agent && agent.since, ms: null };
      }
    }
    turnsChanged();
    if (e.status === "stopped") {
      announce("Stopped.");
    } else if (e.status !== "done") {
      turnTrouble(e.turn_id, "This turn failed. Your message is saved.");
    } else if (e.degraded) {
      const missing = turn.missing.map((name) => AGENT_LABELS[name] || name).join(", ");
      const why = missing ? ` (${missing} could not help this time)` : "";
      const said = turn.degradedText ? `${turn.degradedText} ` : "";
      turnTrouble(e.turn_id, `${said}Part of the answer could not be prepared${why}.`);
    }
  }

  function onError(e) {
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

  function onSessionEnded() {
    state.ended = true;
    disableComposer("This session has ended. Start a new session to continue.");
    for (const li of dom.list.querySelectorAll("li.pending, li.queued")) {
      markQueued(li, false);
      li.classList.replace("pending", "not-sent");
    }
    outbox.clear();
    saveOutbox();
    hideNotice();
    turnsChanged();
  }

  function safeHttpUrl(raw) {
    try {
      const url = new URL(raw, location.href);
      return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
    } catch {
      return null;
    }
  }

  function renderResource(resource) {
    const item = el("li", "resource");
    item.append(el("strong", "resource-name", resource.name));
    if (resource.contact) {
      const contact = el("span", "resource-contact");
      if (/^\+?[\d\s()-]{3,}$/.test(resource.contact)) {
        const call = el("a", null, resource.contact);
        call.href = `tel:${resource.contact.replace(/[^\d+]/g, "")}`;
        contact.append(call);
      } else {
        contact.textContent = resource.contact;
      }
      item.append(contact);
    }
    const href = resource.url ? safeHttpUrl(resource.url) : null;
    if (href) {
      const link = el("a", "resource-url", new URL(href).host);
      link.href = href;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      item.append(link);
    }
    if (resource.description) item.append(el("p", "resource-description", resource.description));
    return item;
  }

  function onSafetyNotice(e) {
    turnFor(e.turn_id).crisis = true;
    turnsChanged(); // a message waiting behind this turn goes out now
    const li = el("li", "safety");
    li.dataset.seq = e.seq;
    li.dataset.turnId = e.turn_id;
    li.dataset.level = e.level;
    const card = el("div", "safety-card");
    card.setAttribute("role", "alert");
    // The server sends the heading and footer in the coachee's language; English otherwise.
    const title =
      e.title ||
      (e.level === "crisis"
        ? "If you are in danger or thinking about harming yourself, please reach out now."
        : "You do not have to carry this alone. People are ready to help.");
    card.append(el("h2", "safety-title", title));
    const resources = Array.isArray(e.resources) ? e.resources : [];
    if (resources.length) {
      const list = el("ul", "resources");
      for (const resource of resources) list.append(renderResource(resource));
      card.append(list);
    }
    card.append(el("p", "safety-footer", e.footer || "In immediate danger, call your local emergency number."));
    li.append(card);
    changeList(() => dom.list.append(li));
  }

  // A model endpoint is failing: the message is saved and the answer will be shorter.
  // Kept on the turn, so the end-of-turn notice repeats it instead of replacing it.
  function onServiceDegraded(e) {
    const text = e.text || "Some parts of the coaching system are unavailable; your message is saved.";
    turnFor(e.turn_id).degradedText = text;
    showNotice(text);
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

  // --- The page as the server rendered it ---------------------------------------------------

  // Full answers rendered by the server go right under the Coach reply they complete.
  function attachRenderedSynths() {
    for (const li of dom.list.querySelectorAll("li.msg-synth[data-completes]")) {
      const coach = findMessage(li.dataset.completes);
      if (!coach) continue;
      li.classList.add("attached");
      coach.classList.add("completed");
      if (coach.nextElementSibling !== li) coach.after(li);
    }
  }

  function restorePage() {
    for (const li of dom.list.querySelectorAll("li.msg")) decorate(li);
    attachRenderedSynths();
    for (const li of dom.list.querySelectorAll('li.msg-coach[data-status="streaming"]')) {
      li.setAttribute("aria-busy", "true");
    }
    for (const [clientId, item] of outbox) dom.list.append(pendingBubble(clientId, item));
    // A turn that was running when the page was rendered: messages sent now wait for it.
    if (root.dataset.runningTurn) turnFor(Number(root.dataset.runningTurn));
    renderCounter();
    renderQueueNote();
    if (state.ended) disableComposer("This session has ended. Start a new session to continue.");
    // Opened at one message (a link from the memory page): show it, not the newest.
    const target = location.hash.startsWith("#msg-") ? document.getElementById(location.hash.slice(1)) : null;
    if (target) target.scrollIntoView({ block: "center" });
    else scrollToBottom();
  }

  // --- User input ---------------------------------------------------------------------------

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

  function renderCounter() {
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

  dom.form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (state.ended || state.refused) return;
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
  });

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
    if (!transmit({ type: "stop" })) state.stopWanted = true; // sent as soon as we are back
  });

  dom.retry.addEventListener("click", () => {
    const text = state.retryText;
    hideNotice();
    if (text) sendUserMessage(text); // a new message with a new client_id
  });

  dom.reconnect.addEventListener("click", () => {
    state.attempt = 0;
    connect();
  });

  window.addEventListener("online", () => {
    state.attempt = 0;
    connect();
  });

  window.addEventListener("offline", () => {
    dropSocket();
    clearTimeout(state.reconnectTimer);
    state.reconnectTimer = null;
    setConnection("offline", "Offline. Messages you write are kept and sent when you are back online.");
  });

  // Phones freeze background tabs; coming back to one should not wait for the backoff.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") document.title = PAGE_TITLE;
    if (document.visibilityState === "visible" && !state.socket) {
      state.attempt = 0;
      connect();
    }
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
  setInterval(heartbeat, PING_EVERY_MS);
  restorePage();
  connect();
})();
