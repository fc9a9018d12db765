// The review pages' requests to their server, shared by app.js (dataset) and calibrate.js.
"use strict";
window.scopeguardApi = {
  // The folder's items, labels and this session's write token (GET /api/items).
  async load() {
    const resp = await fetch("/api/items");
    const data = await resp.json();
    if (!resp.ok) throw new Error(data.error || resp.statusText);
    return data;
  },
  // Save a label with the write token; resolves to the server's answer, rejects with its error.
  async label(token, payload) {
    const resp = await fetch("/api/label", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Scopeguard-Token": token },
      body: JSON.stringify(payload),
    });
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || resp.statusText);
    return body;
  },
};
