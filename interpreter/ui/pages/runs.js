// The runs table (GET /): /api/runs asked again every poll, the table
// redrawn when the answer changed. The query (where, sort, columns, limit)
// lives in the page's URL, so a view can be bookmarked or shared.
"use strict";
(function() {
const params = new URLSearchParams(location.search);
const state = {
  where: params.get("where") || "",
  sort: params.get("sort") || "",
  columns: params.get("columns") || "",
  limit: params.has("limit") ? params.get("limit") : "1000",
};
const selected = new Set();
let config = { writable: false, poll_ms: 2000 };
let shown = null;  // the text of the answer drawn
let data = null;
const $ = id => document.getElementById(id);

$("where").value = state.where;
$("columns").value = state.columns;
$("limit").value = state.limit;

function query() {
  const q = new URLSearchParams();
  for (const k of ["where", "sort", "columns", "limit"]) if (state[k]) q.set(k, state[k]);
  return q.toString();
}

function showError(box, message) {
  box.textContent = message;
  box.hidden = !message;
}

// The filter's message with the caret under the mistake, as `ipu runs` prints it.
function filterError(j) {
  return j.shown !== undefined ? j.error + "\n" + j.shown + (j.help ? "\nhelp: " + j.help : "") : j.error;
}

async function load() {
  const r = await ui.get("/api/runs?" + query());
  if (!r.ok) {
    showError($("filter-error"), filterError(r.json));
    document.body.dataset.state = "error";
    return;
  }
  showError($("filter-error"), "");
  document.body.dataset.state = "ok";
  if (r.text === shown) return;
  // Not while a note is being written in the table: the redraw would drop it.
  if (document.activeElement && document.activeElement.matches("#runs input:not([type=checkbox])")) return;
  shown = r.text;
  data = r.json;
  render();
  document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
}

function apply() {
  state.where = $("where").value.trim();
  state.columns = $("columns").value.trim();
  state.limit = $("limit").value;
  history.replaceState(null, "", "/" + (query() ? "?" + query() : ""));
  shown = null;
  return load();
}

function sortBy(name) {
  state.sort = state.sort === name ? "-" + name : name;
  history.replaceState(null, "", "/?" + query());
  shown = null;
  load();
}

function updateButtons() {
  $("compare").disabled = selected.size < 1;
  $("compare").textContent = selected.size ? "compare selected (" + selected.size + ")" : "compare selected";
  $("tag-add").disabled = $("tag-remove").disabled = selected.size < 1;
}

function header(label, sortName) {
  const current = state.sort === sortName ? " \u25B2" : state.sort === "-" + sortName ? " \u25BC" : "";
  if (!sortName) return ui.el("th", { text: label });
  return ui.el("th", { class: "sortable", title: "sort by " + sortName, text: label + current,
                       "data-sort": sortName, onclick: () => sortBy(sortName) });
}

function noteCell(run) {
  const td = ui.el("td", { class: "note", title: run.note || "" }, [run.note || ""]);
  if (!config.writable) return td;
  td.append(ui.el("button", { class: "ui-edit", type: "button", title: "write the note", text: "\u270E", onclick: () => {
    const input = ui.el("input", { value: run.note || "", size: 30, "aria-label": "note of run " + run.id });
    td.replaceChildren(input);
    input.focus();
    input.addEventListener("keydown", async e => {
      if (e.key === "Escape") { input.blur(); shown = null; load(); }
      if (e.key !== "Enter") return;
      try {
        await ui.post("/api/runs/" + run.id + "/note", { note: input.value });
        showError($("action-error"), "");
      } catch (err) {
        showError($("action-error"), String(err.message));
      }
      input.blur();
      shown = null;
      load();
    });
  }}));
  return td;
}

function render() {
  $("store").textContent = data.store;
  const names = $("names");
  names.replaceChildren(...data.names.map(n => ui.el("option", { value: n })));
  const head = ui.el("tr", {}, [
    ui.el("th", {}, [ui.el("input", { type: "checkbox", title: "select every run shown", "aria-label": "select all", onchange: e => {
      for (const r of data.runs) e.target.checked ? selected.add(r.id) : selected.delete(r.id);
      render();
    }})]),
    header("id", "id"), header("name", "name"), header("status", "status"), header("started", "started"),
    header("duration", "duration"), header("tags"), header("note", "note"),
    ...data.columns.map(c => header(c, c)),
  ]);
  $("runs").tHead.replaceChildren(head);
  const now = Date.now() / 1000;
  const rows = data.runs.map(run => {
    const end = run.ended_at !== null ? run.ended_at : run.status === "running" ? now : null;
    const box = ui.el("input", { type: "checkbox", "aria-label": "select run " + run.id, checked: selected.has(run.id),
                                 onchange: e => { e.target.checked ? selected.add(run.id) : selected.delete(run.id);
                                                  tr.classList.toggle("selected", e.target.checked); updateButtons(); } });
    const tr = ui.el("tr", { "data-id": run.id, class: selected.has(run.id) ? "selected" : "" }, [
      ui.el("td", {}, [box]),
      ui.el("td", { class: "num" }, [ui.el("a", { href: "/runs/" + run.id, text: String(run.id) })]),
      ui.el("td", {}, [ui.el("a", { href: "/runs/" + run.id, text: run.name })]),
      ui.el("td", { class: "status-" + run.status, text: run.status + (run.kind === "estimate" ? " (estimate)" : "") }),
      ui.el("td", { text: ui.time(run.started_at) }),
      ui.el("td", { class: "num", text: end === null ? "-" : ui.duration(end - run.started_at) }),
      ui.el("td", {}, [ui.tags(run.tags)]),
      noteCell(run),
      ...run.cells.map(c => ui.el("td", { class: c !== "" && !isNaN(Number(c)) ? "num" : "", text: c === "" ? "-" : c })),
    ]);
    return tr;
  });
  $("runs").tBodies[0].replaceChildren(...rows);
  $("count").textContent = (data.matched === data.total ? data.total + " runs" : data.matched + " of " + data.total + " runs match") +
                           (data.runs.length < data.matched ? ", " + data.runs.length + " shown" : "");
  document.body.dataset.rows = String(rows.length);
  updateButtons();
}

async function changeTags(remove) {
  const tag = $("tag-text").value.trim();
  if (!tag) return showError($("action-error"), "write the tag first");
  try {
    for (const id of selected) await ui.post("/api/runs/" + id + "/tags", remove ? { remove: [tag] } : { add: [tag] });
    showError($("action-error"), "");
  } catch (err) {
    showError($("action-error"), String(err.message));
  }
  shown = null;
  load();
}

$("query").addEventListener("submit", e => { e.preventDefault(); apply(); });
$("compare").addEventListener("click", () => { location.href = "/compare?ids=" + [...selected].join(","); });
$("tag-add").addEventListener("click", () => changeTags(false));
$("tag-remove").addEventListener("click", () => changeTags(true));

ui.get("/api/config").then(r => {
  if (r.ok) config = r.json;
  $("editing").hidden = !config.writable;
  ui.every(config.poll_ms, load);
});
})();
