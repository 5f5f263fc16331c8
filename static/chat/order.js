// Nothing lost, nothing twice: seq ordering of events and offset ordering of Coach's text (no DOM, no timers).
//
// Events that carry a `seq` are persisted by the server and can arrive out of order (Daphne and
// the Celery workers both send) or twice (replays after a reconnect). They are applied strictly
// in seq order, once each. Coach deltas have no seq; their character offsets tell overlaps
// (dropped) from gaps (held, then filled by a resume).

// lastSeq: the last event applied; held: seq -> event that arrived before the ones it follows.
export function createOrder(lastSeq) {
  return { lastSeq, held: new Map() };
}

// What to do with an arriving event: "apply" it now (it has no seq, or it is the next one, which
// then counts as applied), it was "seen" already (a replay overlap or a repeated
// acknowledgement), or it is "held" until the events before it have come.
export function admit(order, event) {
  if (typeof event.seq !== "number") return "apply";
  if (event.seq <= order.lastSeq) return "seen";
  if (event.seq > order.lastSeq + 1) {
    order.held.set(event.seq, event);
    return "held";
  }
  order.lastSeq = event.seq;
  return "apply";
}

// The held event that comes next now, if it has arrived (it then counts as applied), else null.
export function takeHeld(order) {
  if (!order.held.has(order.lastSeq + 1)) return null;
  const next = order.held.get(order.lastSeq + 1);
  order.held.delete(next.seq);
  order.lastSeq = next.seq;
  return next;
}

export function hasHeld(order) {
  return order.held.size > 0;
}

// `piece` starts at `offset` <= text.length: keep only what extends the text.
export function extend(text, offset, piece) {
  return offset + piece.length > text.length ? text + piece.slice(text.length - offset) : text;
}

// Adds the held pieces (`ahead`: offset -> text) that the text now reaches, until none does.
export function drainAhead(s) {
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
