// What the dashboard's scripts share: element building (text only, never
// markup: every name, tag and note is a user's text), times, the API.
"use strict";
const ui = {
  el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children || []) if (c !== null && c !== undefined) e.append(c);
    return e;
  },
  time(seconds) {
    if (seconds === null || seconds === undefined) return "-";
    const d = new Date(seconds * 1000), p = n => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" +
           p(d.getMinutes()) + ":" + p(d.getSeconds());
  },
  duration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "-";
    if (seconds < 60) return seconds.toFixed(1) + "s";
    const s = Math.round(seconds), h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
    return (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + String(r).padStart(2, "0");
  },
  number(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v !== "number") return String(v);
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  },
  // GET a JSON document: {ok, status, text, json}.
  async get(url) {
    const r = await fetch(url, { cache: "no-store" });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (e) { json = { error: text }; }
    return { ok: r.ok, status: r.status, text, json };
  },
  // POST a change (only `ipu ui --writable` takes them); throws the server's message.
  async post(url, body) {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", "X-Ipu-Request": "1" },
                                 body: JSON.stringify(body) });
    const j = await r.json().catch(() => ({ error: "HTTP " + r.status }));
    if (!r.ok) throw new Error(j.error || ("HTTP " + r.status));
    return j;
  },
  // Calls `tick` now and every `ms`, one call at a time; a failed call is
  // tried again at the next tick.
  every(ms, tick) {
    let busy = false;
    const run = () => {
      if (busy) return;
      busy = true;
      Promise.resolve().then(tick).catch(e => console.warn("ipu ui: " + e)).finally(() => { busy = false; });
    };
    run();
    return setInterval(run, ms);
  },
  tags(list) {
    return ui.el("span", { class: "ui-tags" }, (list || []).map(t => ui.el("span", { class: "ui-tag", text: t })));
  },
};
