// scopeguard review page for a calibration folder: label the questions a calibration chose.
// All untrusted text is set with textContent, never innerHTML.
"use strict";
(function () {
  let items = [];   // {id, question, documents: [{id, text}]}, in the order to label them
  let labels = {};  // question id -> in_scope | out_of_scope | unsure
  let token = "";   // this session's write token, from /api/items (other origins cannot read it)
  let index = 0;
  let queue = Promise.resolve();  // keys and clicks run in order, each after the last one's save
  const $ = (id) => document.getElementById(id);
  const KEYS = { i: "in_scope", o: "out_of_scope", u: "unsure" };

  function setStatus(text, isError) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  function showLine(id, text, isError) {
    const el = $(id);
    el.textContent = text || "";
    el.hidden = !text;
    el.className = isError ? "error" : "";
  }

  // The next question without a label after position `from`, wrapping around; -1 when none.
  function nextOpen(from) {
    for (let step = 1; step <= items.length; step++) {
      const j = (from + step) % items.length;
      if (!labels[items[j].id]) return j;
    }
    return -1;
  }

  function render() {
    if (!items.length) { $("question").textContent = "This folder has no questions to label."; return; }
    const item = items[index];
    $("position").textContent = "Question " + (index + 1) + " of " + items.length;
    $("question").textContent = item.question;
    const box = $("chunks");
    box.replaceChildren();
    for (const chunk of item.documents) {
      const block = document.createElement("article");
      block.className = "chunk";
      const heading = document.createElement("h3");
      heading.textContent = chunk.id;
      const text = document.createElement("div");
      text.className = "chunk-text";
      text.textContent = chunk.text;
      block.append(heading, text);
      box.append(block);
    }
    box.scrollTop = 0;
    document.querySelectorAll("button[data-label]").forEach((b) => {
      b.setAttribute("aria-pressed", String(labels[item.id] === b.dataset.label));
    });
    $("back").disabled = index === 0;
    const done = items.filter((it) => labels[it.id]).length;
    $("progress").textContent = done + " of " + items.length + " labelled";
  }

  // What the server says after a load or a label: every label, the estimate, the completion.
  function apply(data) {
    labels = data.labels || {};
    showLine("estimate", data.estimate, false);
    showLine("done", data.done ? data.done.text : "", data.done && !data.done.ok);
  }

  async function save(label) {
    const item = items[index];
    setStatus("saving...", false);
    try {
      apply(await scopeguardApi.label(token, { id: item.id, label: label }));
      setStatus("saved " + item.id + ": " + label.replace(/_/g, " "), false);
      const next = nextOpen(index);
      if (next !== -1) index = next;
      render();
    } catch (err) {
      setStatus("not saved: " + err.message, true);
    }
  }

  function back() {
    index = Math.max(0, index - 1);
    render();
  }

  function enqueue(action) {
    if (!items.length) return;
    queue = queue.then(action).catch((err) => setStatus(String(err), true));
  }

  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const k = e.key.toLowerCase();
    if (KEYS[k]) {
      e.preventDefault();
      if (!e.repeat) enqueue(() => save(KEYS[k]));
    } else if (k === "b" || e.key === "Backspace") {
      e.preventDefault();
      enqueue(back);
    }
  });

  document.addEventListener("DOMContentLoaded", async () => {
    document.querySelectorAll("button[data-label]").forEach((b) => {
      b.addEventListener("click", () => enqueue(() => save(b.dataset.label)));
    });
    $("back").addEventListener("click", () => enqueue(back));
    let data;
    try { data = await scopeguardApi.load(); }
    catch (err) { setStatus("cannot load the questions: " + err.message, true); return; }
    items = data.items;
    token = data.token;
    apply(data);
    const firstOpen = nextOpen(-1);
    index = firstOpen === -1 ? 0 : firstOpen;  // resume at the first question without a label
    render();
  });
})();
