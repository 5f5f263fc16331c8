// The chat page: one WebSocket per session, events applied exactly once by their seq.
// Streamed model text is inserted as text; only the server-sanitised Synth HTML is
// inserted as HTML.
(function () {
  "use strict";
  const root = document.getElementById("chat");
  if (!root) return;
  const sessionId = root.dataset.sessionId;
  const list = document.getElementById("messages");
  const input = document.getElementById("message-input");
  const form = document.getElementById("composer");
  const stopButton = document.getElementById("stop-button");
  const statusLine = document.getElementById("status-line");
  const notice = document.getElementById("notice");
  const connection = document.getElementById("connection");

  let lastSeq = Number(root.dataset.lastSeq || 0);
  let socket = null;
  let retry = 0;
  const outbox = new Map(); // client_id -> text, until the server accepts it
  const agents = {}; // agent -> {state, ms}
  let runningTurn = null;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function bubble(role, id, text) {
    let node = id ? list.querySelector(`[data-message-id="${id}"]`) : null;
    if (node) return node;
    node = el("li", `msg msg-${role}`);
    if (id) node.dataset.messageId = id;
    node.appendChild(el("span", "who", role === "user" ? "You" : role === "coach" ? "Coach" : "Full answer"));
    node.appendChild(el("div", "body", text || ""));
    list.appendChild(node);
    node.scrollIntoView({ block: "end" });
    return node;
  }

  function setStatus() {
    const order = ["shadow", "persona", "plasticity", "stability", "synth"];
    const parts = order.map((name) => {
      const a = agents[name];
      if (!a) return `${name}: waiting`;
      return a.ms != null ? `${name}: ${a.state} (${(a.ms / 1000).toFixed(1)} s)` : `${name}: ${a.state}`;
    });
    statusLine.textContent = parts.join(" · ");
  }

  function showNotice(text) {
    notice.textContent = text;
    notice.hidden = !text;
  }

  function newClientId() {
    return (window.crypto && crypto.randomUUID) ? crypto.randomUUID() : `c${Date.now()}${Math.random().toString(16).slice(2)}`;
  }

  function send(obj) {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(obj));
      return true;
    }
    return false;
  }

  function flushOutbox() {
    for (const [clientId, text] of outbox) send({ type: "user.message", client_id: clientId, text });
  }

  const handlers = {
    "message.accepted"(e) {
      outbox.delete(e.client_id);
      const pending = e.client_id ? list.querySelector(`[data-client-id="${e.client_id}"]`) : null;
      const node = pending || bubble("user", e.message_id, e.text);
      node.dataset.messageId = e.message_id;
      node.classList.remove("pending");
      runningTurn = e.turn_id;
      for (const k of Object.keys(agents)) delete agents[k];
      setStatus();
      stopButton.hidden = false;
    },
    "coach.started"(e) {
      bubble("coach", e.message_id, "").dataset.status = "streaming";
    },
    "coach.delta"(e) {
      const body = bubble("coach", e.message_id, "").querySelector(".body");
      const have = body.textContent.length;
      if (e.offset + e.text.length <= have) return; // already shown
      if (e.offset > have) { resync(); return; } // a gap: ask for the missed part
      body.textContent += e.text.slice(have - e.offset);
    },
    "coach.snapshot"(e) {
      const body = bubble("coach", e.message_id, "").querySelector(".body");
      if (e.text.length > body.textContent.length) body.textContent = e.text;
    },
    "coach.done"(e) {
      const node = bubble("coach", e.message_id, "");
      node.querySelector(".body").textContent = e.text;
      node.dataset.status = e.status;
    },
    "agent.status"(e) {
      agents[e.agent] = { state: e.state, ms: e.ms };
      setStatus();
    },
    "synth.done"(e) {
      const node = bubble("synth", e.message_id, "");
      node.querySelector(".body").innerHTML = e.html; // sanitised on the server (nh3)
      if (e.completes_message_id) node.dataset.completes = e.completes_message_id;
      if (e.fallback) node.classList.add("fallback");
    },
    "turn.done"(e) {
      runningTurn = null;
      stopButton.hidden = true;
      const extra = e.status === "stopped" ? "stopped" : e.degraded ? `done, with gaps (${e.missing.join(", ") || "partial"})` : "done";
      statusLine.textContent = `Turn ${extra}.`;
      statusLine.dataset.state = e.status === "done" && !e.degraded ? "done" : e.status;
      if (e.degraded) showNotice("Part of the answer could not be prepared this time. You can send your message again.");
    },
    error(e) {
      showNotice(e.detail || "Something went wrong.");
    },
    pong() {},
  };

  function apply(event) {
    if (typeof event.seq === "number") {
      if (event.seq <= lastSeq) return; // seen already (replay overlap, second tab)
      lastSeq = event.seq;
    }
    const handler = handlers[event.type];
    if (handler) handler(event);
  }

  function resync() {
    send({ type: "resume", after_seq: lastSeq });
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/sessions/${sessionId}/`);
    connection.textContent = "Connecting…";
    socket.onopen = () => {
      retry = 0;
      connection.textContent = "Connected";
      connection.dataset.state = "open";
      resync();
      flushOutbox();
    };
    socket.onmessage = (msg) => {
      try { apply(JSON.parse(msg.data)); } catch (err) { console.error(err); }
    };
    socket.onclose = (ev) => {
      connection.dataset.state = "closed";
      if (ev.code === 4401 || ev.code === 4403) {
        connection.textContent = "This session is not available to you.";
        return;
      }
      const delay = Math.min(10000, 500 * 2 ** retry) * (0.75 + Math.random() / 2);
      retry += 1;
      connection.textContent = `Reconnecting in ${Math.round(delay / 1000)} s…`;
      setTimeout(connect, delay);
    };
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    const clientId = newClientId();
    const node = bubble("user", null, text);
    node.dataset.clientId = clientId;
    node.classList.add("pending");
    outbox.set(clientId, text);
    input.value = "";
    showNotice("");
    send({ type: "user.message", client_id: clientId, text });
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener("click", () => send({ type: "stop" }));
  setInterval(() => send({ type: "ping" }), 25000);
  connect();
})();
