/* Adjudicator view: items whose annotators tied, with everyone's votes; keys choose the label. */
"use strict";

(() => {
  const key = Poly.keyFromPath();
  const base = `/api/adj/${encodeURIComponent(key)}`;
  const state = { items: [], index: 0, showAll: false, busy: false };

  function current() { return state.items[state.index]; }

  function render() {
    const open = state.items.filter((x) => !x.decision).length;
    document.getElementById("queue-text").textContent =
      `${state.items.length - open} / ${state.items.length} decided`;
    document.getElementById("done").classList.toggle("hidden", open > 0);
    const it = current();
    if (!it) return;
    Poly.renderContext(it.payload, state.showAll);
    const votes = document.getElementById("votes");
    votes.replaceChildren(Poly.el("div", "qtext", "Annotators' answers"));
    for (const [who, label] of Object.entries(it.votes)) {
      votes.appendChild(Poly.el("div", "vote", `${who}: ${label}`));
    }
    const answers = it.decision ? { [it.question.id]: it.decision } : {};
    Poly.renderQuestions([it.question], answers, it.question.id, decide);
    document.getElementById("position").textContent = `Tie ${state.index + 1} of ${state.items.length}`;
    document.getElementById("prev").disabled = state.index === 0;
    document.getElementById("next").disabled = state.index >= state.items.length - 1;
  }

  async function decide(qid, label) {
    const it = current();
    if (!it || state.busy) return;
    state.busy = true;
    Poly.setStatus("Saving…", "pending");
    try {
      await Poly.api("POST", `${base}/decisions`, { item_id: it.item_id, question_id: qid, label });
      it.decision = label;
      Poly.setStatus("Saved ✓", "ok");
      const next = state.items.findIndex((x, i) => i > state.index && !x.decision);
      if (next >= 0) { state.index = next; state.showAll = false; }
      render();
    } catch (err) {
      Poly.setStatus(`Not saved: ${err.message}`, "error");
    } finally {
      state.busy = false;
    }
  }

  function go(delta) {
    const i = state.index + delta;
    if (i < 0 || i >= state.items.length) return;
    state.index = i;
    state.showAll = false;
    render();
  }

  document.getElementById("prev").addEventListener("click", () => go(-1));
  document.getElementById("next").addEventListener("click", () => go(1));
  document.getElementById("show-earlier").addEventListener("click", () => { state.showAll = true; render(); });
  document.addEventListener("keydown", (ev) => {
    const it = current();
    if (!it || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "ArrowLeft") { ev.preventDefault(); go(-1); return; }
    if (ev.key === "ArrowRight") { ev.preventDefault(); go(1); return; }
    const hit = Poly.optionForKey([it.question], it.question.id, ev.key);
    if (hit) { ev.preventDefault(); decide(hit.qid, hit.label); }
  });

  (async () => {
    try {
      const q = await Poly.api("GET", `${base}/queue`);
      document.getElementById("study").textContent = q.study;
      document.getElementById("annotator").textContent = q.adjudicator;
      state.items = q.items;
      const firstOpen = state.items.findIndex((x) => !x.decision);
      state.index = firstOpen >= 0 ? firstOpen : 0;
      render();
      document.body.dataset.ready = "1";
    } catch (err) {
      Poly.setStatus(`Cannot load: ${err.message}`, "error");
    }
  })();
})();
