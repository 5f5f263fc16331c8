// The turns this page knows of and the agents' status line; the tab title and the notification while away.
import { byId, closed, dom, root, TURN_DEADLINE_MS, USUAL_TURN_MS } from "./page.js";
import { announce, el, hideNotice, lastUserText, showNotice } from "./render.js";

const NOTIFY_KEY = "coaching-notify"; // "yes" once the coachee turned notifications on
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
// A turn this page still counts as running well past the server's deadline missed its end
// (heard of from a stray event after a reload): it no longer holds queued messages back. The
// server refuses a message while a turn really runs (turn_running), which puts it back in the queue.
const STALE_AFTER_MS = TURN_DEADLINE_MS + 30000;

const turns = new Map(); // turn_id -> {id, text, status, degraded, missing, agents, startedAt, endedAt}
let currentTurn = null; // the turn the status line shows: the latest one
let tickTimer = null;
let afterTurnsChanged = () => {};
let pageTitle = document.title;

// What else follows a change of the running turns (main.js: the outbox sends what waits).
export function whenTurnsChange(listener) {
  afterTurnsChanged = listener;
}

function seconds(ms) {
  return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
}

// --- Turns ----------------------------------------------------------------------------------

export function turnFor(id) {
  let turn = turns.get(id);
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
    turns.set(id, turn);
    // The newest turn is the last one heard of (events come in seq order); ids are not in
    // turn order (they are reserved ahead, see context_ahead).
    currentTurn = id;
    turnsChanged();
  }
  return turn;
}

export function startTurn(id, text) {
  const turn = turnFor(id);
  turn.text = text;
  if (turn.startedAt === null) turn.startedAt = Date.now();
  currentTurn = id;
  hideNotice();
  turnsChanged();
}

function isRunning(turn) {
  return turn.status === "running" && Date.now() - turn.seenAt < STALE_AFTER_MS;
}

function anyTurnRunning() {
  for (const turn of turns.values()) if (isRunning(turn)) return true;
  return false;
}

// A turn the crisis pre-gate answered does not hold the next message back (the server takes
// it at once too: services.turn_accept).
export function anyTurnHolding() {
  for (const turn of turns.values()) if (isRunning(turn) && !turn.crisis) return true;
  return false;
}

function tick() {
  if (anyTurnRunning()) renderStatus();
  else turnsChanged(); // the last running turn went stale: stop ticking, send what waits
}

export function turnsChanged() {
  const running = anyTurnRunning();
  dom.stop.hidden = !running || closed();
  if (!running) {
    dom.stop.disabled = false;
    dom.stop.textContent = "Stop";
  }
  // The elapsed times tick while something runs, and stop when nothing does.
  if (running && !tickTimer) tickTimer = setInterval(tick, 200);
  if (!running && tickTimer) {
    clearInterval(tickTimer);
    tickTimer = null;
  }
  renderStatus();
  afterTurnsChanged();
}

// Something went wrong in a turn: say so, and offer to send its message (or the last one) again.
export function turnTrouble(turnId, text) {
  const turn = turnId === null || turnId === undefined ? null : turns.get(turnId);
  showNotice(text, (turn && turn.text) || lastUserText());
}

// --- The status line ------------------------------------------------------------------------

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
  const turn = turns.get(currentTurn);
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

// --- Events about turns ---------------------------------------------------------------------

export function onAgentStatus(e) {
  if (!(e.agent in AGENT_LABELS)) return; // the critic runs inside Synth's stage
  const turn = turnFor(e.turn_id);
  const agent = turn.agents[e.agent] || {};
  if (e.state === "started") {
    turn.agents[e.agent] = { state: "running", since: Date.now(), ms: null };
  } else {
    const ms = e.ms !== null && e.ms !== undefined ? e.ms : agent.since ? Date.now() - agent.since : null;
    turn.agents[e.agent] = { state: e.state === "succeeded" ? "done" : "failed", since: agent.since, ms };
  }
  if (e.turn_id === currentTurn) renderStatus();
}

export function onTurnDone(e) {
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

// A model endpoint is failing: the message is saved and the answer will be shorter.
// Kept on the turn, so the end-of-turn notice repeats it instead of replacing it.
export function onServiceDegraded(e) {
  const text = e.text || "Some parts of the coaching system are unavailable; your message is saved.";
  turnFor(e.turn_id).degradedText = text;
  showNotice(text);
}

// --- The tab's title, and a notification while the tab is hidden -----------------------------

// A new session is named after its first message, as the server names it on the next load
// (services_sessions.title_from_words).
const TITLE_FROM_WORDS = 60;

export function nameSession(text) {
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
  pageTitle = `${title} · Coaching`;
  if (document.visibilityState !== "hidden") document.title = pageTitle;
}

// Back in the tab: its own title again, without the news it showed while away.
export function showPageTitle() {
  document.title = pageTitle;
}

export function tellIfAway(text) {
  if (document.visibilityState !== "hidden") return;
  document.title = `● ${text} · ${pageTitle}`;
  if ("Notification" in window && Notification.permission === "granted" && notifyWanted()) {
    const note = new Notification("Coaching", { body: text, tag: `coaching-session-${root.dataset.sessionId}` });
    note.onclick = () => window.focus();
  }
}

function notifyWanted() {
  return localStorage.getItem(NOTIFY_KEY) === "yes";
}

export function renderNotifyToggle() {
  if (!dom.notify) return;
  const supported = "Notification" in window;
  dom.notify.hidden = !supported || Notification.permission === "denied";
  if (!supported) return;
  const on = Notification.permission === "granted" && notifyWanted();
  dom.notify.setAttribute("aria-pressed", String(on));
  dom.notify.textContent = on ? "Notifications on" : "Notify me when an answer is ready";
}

export async function toggleNotify() {
  if (Notification.permission === "granted" && notifyWanted()) {
    localStorage.setItem(NOTIFY_KEY, "no");
  } else if ((await Notification.requestPermission()) === "granted") {
    localStorage.setItem(NOTIFY_KEY, "yes");
  }
  renderNotifyToggle();
}
