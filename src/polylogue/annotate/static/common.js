/* Shared rendering for the annotate and adjudicate pages. Plain ES2020, no build step.
   Every piece of corpus text goes through textContent, never innerHTML. */
"use strict";

const Poly = (() => {
  const INITIAL_TURNS = 15;  // turns shown before "show earlier"

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  async function api(method, url, body) {
    const opts = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(url, opts);
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(data.detail || `${res.status} ${res.statusText}`);
    return data;
  }

  function keyFromPath() {
    const parts = window.location.pathname.split("/").filter(Boolean);
    return decodeURIComponent(parts[parts.length - 1] || "");
  }

  /* Session clock (m:ss) for turn-taking; clip-relative seconds for MeetingToM, matching the
     questions' "around 15.0s". */
  function fmtTime(t, clipRelative) {
    if (t === null || t === undefined) return "";
    const v = Math.max(0, t);
    if (clipRelative) return `${v.toFixed(1)}s`;
    const m = Math.floor(v / 60), s = Math.floor(v % 60);
    return `${m}:${String(s).padStart(2, "0")}`;
  }

  /* Transcript of a turn-taking point or a MeetingToM window. The target's own turns carry a
     "target" badge; the last turn of a turn-taking context is the one that just ended. */
  function renderContext(payload, showAll) {
    const meta = document.getElementById("context-meta");
    const list = document.getElementById("transcript");
    const parts = document.getElementById("participants");
    const earlier = document.getElementById("show-earlier");
    list.replaceChildren();
    parts.replaceChildren();
    if (payload.kind === "turntaking") {
      meta.textContent = `${payload.corpus} · ${payload.domain}`;
      for (const p of payload.participants || []) {
        const li = el("li", p.is_target ? "participant is-target" : "participant", p.name);
        if (p.role) li.appendChild(el("span", "role", ` (${p.role})`));
        if (p.is_target) li.appendChild(el("span", "badge", "target"));
        parts.appendChild(li);
      }
    } else {
      const w = payload.window;
      meta.textContent = `MeetingToM · ${payload.task} · ${payload.session_id}` +
        (w ? ` · ${w.start.toFixed(1)}–${w.end.toFixed(1)} s` : "") +
        (payload.target_agent ? ` · target participant ${payload.target_agent}` : "");
    }
    const turns = payload.transcript || [];
    list.classList.toggle("no-times", turns.every((u) => u.start === null || u.start === undefined));
    if (!payload.transcript) {
      list.appendChild(el("li", "muted", "No transcript for this item (AMI words not available)."));
    }
    const hidden = showAll ? 0 : Math.max(0, turns.length - INITIAL_TURNS);
    const omitted = (payload.omitted_turns || 0);
    if (hidden > 0) {
      earlier.textContent = `Show ${hidden} earlier turn${hidden === 1 ? "" : "s"}`;
      earlier.classList.remove("hidden");
    } else {
      earlier.classList.add("hidden");
    }
    if (omitted > 0 && (showAll || hidden === 0)) {
      list.appendChild(el("li", "muted omitted", `… ${omitted} earlier turns not included in this study …`));
    }
    turns.slice(hidden).forEach((u, i, shown) => {
      const isLast = payload.kind === "turntaking" && i === shown.length - 1;
      const li = el("li", "turn" + (u.is_target ? " is-target" : "") + (isLast ? " is-current" : ""));
      const who = el("span", "speaker", u.name);
      if (u.is_target) who.appendChild(el("span", "badge", "target"));
      li.appendChild(el("span", "time", fmtTime(u.start, payload.kind !== "turntaking")));  // empty cell keeps the grid aligned
      li.appendChild(who);
      li.appendChild(el("span", "text", u.text));
      list.appendChild(li);
    });
    if (payload.kind === "turntaking") {
      list.appendChild(el("li", "pause", "— pause: should the target take the turn? —"));
    }
    const last = list.lastElementChild;
    if (last && last.scrollIntoView) last.scrollIntoView({ block: "end" });
  }

  /* Question blocks with option buttons; returns nothing, calls onChoose(qid, label). */
  function renderQuestions(questions, answers, activeQid, onChoose) {
    const box = document.getElementById("questions");
    box.replaceChildren();
    for (const q of questions) {
      const block = el("div", "question" + (q.id === activeQid ? " active" : ""));
      block.dataset.qid = q.id;
      block.appendChild(el("div", "qtext", q.text));
      const opts = el("div", "options");
      q.options.forEach((opt, i) => {
        const b = el("button", "option" + (answers[q.id] === opt ? " chosen" : ""));
        b.type = "button";
        b.dataset.label = opt;
        b.appendChild(el("kbd", null, q.keys[i].toUpperCase()));
        b.appendChild(el("span", null, " " + opt));
        b.addEventListener("click", () => onChoose(q.id, opt));
        opts.appendChild(b);
      });
      block.appendChild(opts);
      box.appendChild(block);
    }
  }

  function setStatus(text, cls) {
    const s = document.getElementById("save-status");
    s.textContent = text;
    s.className = "save " + (cls || "");
  }

  /* The option of the active question bound to a key press, or null. */
  function optionForKey(questions, activeQid, key) {
    const q = questions.find((x) => x.id === activeQid) || questions[0];
    if (!q) return null;
    const i = q.keys.findIndex((k) => k.toLowerCase() === key.toLowerCase());
    return i >= 0 ? { qid: q.id, label: q.options[i] } : null;
  }

  return { api, el, keyFromPath, renderContext, renderQuestions, setStatus, optionForKey };
})();
