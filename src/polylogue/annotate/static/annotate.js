/* One annotator's view: an item at a time, keyboard answers, saved on every answer. */
"use strict";

(() => {
  const key = Poly.keyFromPath();
  const base = `/api/a/${encodeURIComponent(key)}`;
  const state = { total: 0, position: 0, item: null, active: null, shownAt: 0, showAll: false, busy: false };

  function firstOpen(item) {
    const q = item.questions.find((x) => !(x.id in item.answers));
    return q ? q.id : item.questions[item.questions.length - 1].id;
  }

  function renderProgress(p) {
    document.getElementById("progress").max = p.total;
    document.getElementById("progress").value = p.done;
    document.getElementById("progress-text").textContent = `${p.done} / ${p.total} done`;
    document.getElementById("done").classList.toggle("hidden", p.next_position !== null);
  }

  function renderMedia(item) {
    const box = document.getElementById("media");
    box.replaceChildren();
    const media = item.payload.media || {};
    for (const q of item.questions) {
      if (!media[q.id]) continue;
      const v = document.createElement("video");
      v.controls = true;
      v.preload = "metadata";
      v.src = `${base}/media/${state.position}/${encodeURIComponent(q.id)}`;
      const fig = Poly.el("figure", "clip");
      fig.appendChild(v);
      fig.appendChild(Poly.el("figcaption", "muted", `video for ${q.id}`));
      box.appendChild(fig);
    }
  }

  function render() {
    const item = state.item;
    Poly.renderContext(item.payload, state.showAll);
    renderMedia(item);
    Poly.renderQuestions(item.questions, item.answers, state.active, choose);
    document.getElementById("position").textContent = `Item ${state.position + 1} of ${state.total}`;
    document.getElementById("prev").disabled = state.position === 0;
    document.getElementById("next").disabled = state.position >= state.total - 1;
  }

  async function load(position) {
    state.item = await Poly.api("GET", `${base}/items/${position}`);
    state.position = position;
    state.active = firstOpen(state.item);
    state.showAll = false;
    state.shownAt = performance.now();
    render();
  }

  async function choose(qid, label) {
    if (state.busy) return;
    state.busy = true;
    Poly.setStatus("Saving…", "pending");
    try {
      const seconds = (performance.now() - state.shownAt) / 1000;
      const res = await Poly.api("PUT", `${base}/items/${state.position}/answers/${encodeURIComponent(qid)}`,
        { label, seconds: Math.round(seconds * 10) / 10 });
      state.item.answers[qid] = res.label;
      renderProgress(res.progress);
      const open = state.item.questions.find((x) => !(x.id in state.item.answers));
      if (open) {
        state.active = open.id;
        render();
      } else if (state.position < state.total - 1) {
        await load(state.position + 1);
      } else {
        state.active = qid;
        render();
      }
      // Only now (next item shown) is the page ready for the next key press.
      Poly.setStatus("Saved ✓", "ok");
    } catch (err) {
      Poly.setStatus(`Not saved: ${err.message}`, "error");
    } finally {
      state.busy = false;
    }
  }

  document.getElementById("prev").addEventListener("click", () => state.position > 0 && load(state.position - 1));
  document.getElementById("next").addEventListener("click", () => state.position < state.total - 1 && load(state.position + 1));
  document.getElementById("show-earlier").addEventListener("click", () => { state.showAll = true; render(); });

  document.addEventListener("keydown", (ev) => {
    if (!state.item || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement) return;
    if (ev.key === "ArrowLeft" && state.position > 0) { ev.preventDefault(); load(state.position - 1); return; }
    if (ev.key === "ArrowRight" && state.position < state.total - 1) { ev.preventDefault(); load(state.position + 1); return; }
    const hit = Poly.optionForKey(state.item.questions, state.active, ev.key);
    if (hit) { ev.preventDefault(); choose(hit.qid, hit.label); }
  });

  (async () => {
    try {
      const s = await Poly.api("GET", `${base}/state`);
      document.getElementById("study").textContent = s.study;
      document.getElementById("annotator").textContent = s.annotator;
      document.getElementById("instructions").textContent = s.instructions || "";
      state.total = s.progress.total;
      renderProgress(s.progress);
      // Resume at the first item with an open question (or the last one when all are done).
      const start = s.progress.next_position === null ? s.progress.total - 1 : s.progress.next_position;
      await load(start);
      document.body.dataset.ready = "1";
    } catch (err) {
      Poly.setStatus(`Cannot load: ${err.message}`, "error");
    }
  })();
})();
