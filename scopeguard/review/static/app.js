// scopeguard review page. All untrusted text is set with textContent, never innerHTML.
"use strict";
(function () {
  let items = [];
  let labels = {};
  let token = "";  // this session's write token, from /api/items (other origins cannot read it)
  let index = 0;
  const $ = (id) => document.getElementById(id);

  function setStatus(text, isError) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  function labelled(item) {
    const l = labels[item.id];
    if (!l || !l.scope) return false;
    return !item.response || !!l.defused;
  }

  function render() {
    if (!items.length) { $("question").textContent = "This dataset has no questions."; return; }
    const item = items[index];
    const l = labels[item.id] || {};
    $("position").textContent = "Question " + (index + 1) + " of " + items.length + " (" + item.id + ")";
    $("doc-title").textContent = item.title || item.doc_id;
    $("document").textContent = item.document;
    $("question").textContent = item.question;
    $("generator-label").textContent = item.generator_label;
    $("response-block").hidden = !item.response;
    $("response").textContent = item.response || "";
    const prov = $("provenance");
    prov.replaceChildren();
    for (const [key, value] of Object.entries(item.provenance || {})) {
      const dt = document.createElement("dt");
      dt.textContent = key;
      const dd = document.createElement("dd");
      dd.textContent = typeof value === "string" ? value : JSON.stringify(value, null, 1);
      prov.append(dt, dd);
    }
    document.querySelectorAll("button[data-field]").forEach((b) => {
      b.setAttribute("aria-pressed", String(l[b.dataset.field] === b.dataset.value));
    });
    const done = items.filter(labelled).length;
    $("progress").textContent = done + " / " + items.length + " labelled";
  }

  async function save(field, value) {
    const item = items[index];
    setStatus("saving...", false);
    try {
      labels[item.id] = await scopeguardApi.label(token, { question_id: item.id, field: field, value: value });
      setStatus("saved " + field + " = " + value + " for " + item.id, false);
      render();
      if (labelled(item) && index < items.length - 1) { index += 1; render(); }
    } catch (err) {
      setStatus("not saved: " + err.message, true);
    }
  }

  function move(delta) {
    index = Math.min(items.length - 1, Math.max(0, index + delta));
    render();
  }

  const keys = { i: ["scope", "in_scope"], o: ["scope", "out_of_scope"], u: ["scope", "unsure"],
                 y: ["defused", "yes"], n: ["defused", "no"] };
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const k = e.key.toLowerCase();
    if (keys[k]) {
      if (keys[k][0] === "defused" && !items[index].response) return;
      e.preventDefault(); save(keys[k][0], keys[k][1]);
    } else if (k === "j" || e.key === "ArrowRight") { e.preventDefault(); move(1); }
    else if (k === "k" || e.key === "ArrowLeft") { e.preventDefault(); move(-1); }
  });

  document.addEventListener("DOMContentLoaded", async () => {
    document.querySelectorAll("button[data-field]").forEach((b) => {
      b.addEventListener("click", () => save(b.dataset.field, b.dataset.value));
    });
    $("prev").addEventListener("click", () => move(-1));
    $("next").addEventListener("click", () => move(1));
    let data;
    try { data = await scopeguardApi.load(); }
    catch (err) { setStatus("cannot load the questions: " + err.message, true); return; }
    items = data.items;
    labels = data.labels;
    token = data.token;
    $("annotator").textContent = "annotator: " + data.annotator;
    const firstOpen = items.findIndex((it) => !labelled(it));
    index = firstOpen === -1 ? 0 : firstOpen;  // resume where the annotator stopped
    render();
  });
})();
