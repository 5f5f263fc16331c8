// Rendering into the page: message bubbles and their actions (time, Copy, ratings), safety cards, notices.
//
// Safety: model text is only ever inserted with textContent. The one exception is Synth's
// `html`, which the server rendered from Markdown and sanitised (nh3).
import { closed, dom, root } from "./page.js";

const ROLE_LABELS = { user: "You", coach: "Coach", synth: "Full answer" };

// --- Small DOM helpers ------------------------------------------------------------------

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

export function findMessage(id) {
  if (id === null || id === undefined) return null;
  return dom.list.querySelector(`li[data-message-id="${CSS.escape(String(id))}"]`);
}

export function makeBubble(role, text) {
  const li = el("li", `msg msg-${role}`);
  li.dataset.role = role;
  li.append(el("span", "who", ROLE_LABELS[role]), el("div", "body", text || ""));
  decorate(li);
  return li;
}

function nearBottom() {
  const list = dom.list;
  return list.scrollHeight - list.scrollTop - list.clientHeight < 80;
}

export function scrollToBottom() {
  dom.list.scrollTop = dom.list.scrollHeight;
}

// Changes the list and keeps it scrolled to the newest message, unless the reader scrolled up.
export function changeList(change) {
  const stick = nearBottom();
  change();
  if (stick) scrollToBottom();
}

export function announce(text) {
  dom.announcer.textContent = text;
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
export function decorate(li) {
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

// --- Full answers: grouped right under the Coach reply they complete --------------------------

export function synthBubble(e) {
  const li = makeBubble("synth", "");
  li.dataset.messageId = e.message_id;
  li.dataset.seq = e.seq;
  li.dataset.status = "complete";
  li.querySelector(".body").innerHTML = e.html; // rendered and sanitised on the server (nh3)
  if (e.fallback) li.classList.add("fallback");
  return li;
}

export function placeSynth(li, coachId) {
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

// Full answers rendered by the server go right under the Coach reply they complete.
export function attachRenderedSynths() {
  for (const li of dom.list.querySelectorAll("li.msg-synth[data-completes]")) {
    const coach = findMessage(li.dataset.completes);
    if (!coach) continue;
    li.classList.add("attached");
    coach.classList.add("completed");
    if (coach.nextElementSibling !== li) coach.after(li);
  }
}

// --- Safety cards ---------------------------------------------------------------------------

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

export function safetyCard(e) {
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
  return li;
}

// --- Notices and Retry ----------------------------------------------------------------------

let retryText = null; // what Retry sends again, when the notice offers it

export function showNotice(text, retry) {
  dom.noticeText.textContent = text;
  retryText = retry || null;
  dom.retry.hidden = !retryText || closed();
  dom.notice.hidden = false;
}

export function hideNotice() {
  dom.notice.hidden = true;
  dom.noticeText.textContent = "";
  dom.retry.hidden = true;
  retryText = null;
}

export function noticeRetryText() {
  return retryText;
}

export function lastUserText() {
  const bubbles = dom.list.querySelectorAll("li.msg-user .body");
  return bubbles.length ? bubbles[bubbles.length - 1].textContent : null;
}
