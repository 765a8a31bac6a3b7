// The runs report as a reader uses it (docs/tracking.md, "ipu report"), in
// headless Chromium (Debian's, driven by puppeteer-core) in a 1920x1080
// window. ipu_runs_report_fixture records 200 runs through the store's API (a
// grid of 4 learning rates x 2 replica counts over 25 seeds, loss_scale and
// skipped constant, tags, a note, a given name); `ipu report` writes the page.
// Asserts:
//   - no console error or warning, no uncaught exception, nothing fetched
//     from the network;
//   - 200 runs fit in 3 screens (the page's height, grouped as it opens and
//     with every run drawn);
//   - grouped by default by the grid point: 8 groups, each a mean curve with
//     a min-max band (the band's values below and above the mean), a legend
//     entry per group saying how many runs; grouped by lr.base: 4;
//   - constant metrics have no chart and are in the constant table;
//   - every run drawn: the legend names each by what differs (lr.base,
//     replicas, seed), or by its given name; a run's colour is the same in the
//     legend, each chart's curve, the table, the parallel coordinates and the
//     scatter;
//   - tags and notes in the table, the note's markup shown as text;
//   - smoothing changes the curves and the hover shows the raw value;
//   - hiding a group in the legend hides it in every chart;
//   - a live page (served by a local HTTP server here, as `ipu ui` does)
//     redraws when runs are added and keeps the grouping, the smoothing, the
//     hidden groups, the zoom and the plots' choices the reader made, and
//     each run's colour.
//
//   node report_page_test.js IPU FIXTURE CHROMIUM [SCREENSHOT.png]
"use strict";
const { execFileSync } = require("child_process");
const fs = require("fs");
const http = require("http");
const os = require("os");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [ipu, fixture, chromium, screenshot] = process.argv.slice(2);
const failures = [];
function check(ok, what, detail) {
  if (!ok) {
    failures.push(what);
    console.log("FAIL:", what, detail === undefined ? "" : String(typeof detail === "string" ? detail : JSON.stringify(detail)).slice(0, 2000));
  }
}
const SCREEN = 1080;

function embedded(html, id) {
  const m = html.match(new RegExp('<script type="application/json" id="' + id + '">([\\s\\S]*?)</script>'));
  return m ? m[1] : null;
}

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ipu-report-page-"));
  const store = path.join(tmp, "ipu.db");
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--user-data-dir=" + path.join(tmp, "profile")],
  });
  let server = null;
  try {
    execFileSync(fixture, [store, "200", "300"]);
    const report = (file, limit) => {
      execFileSync(ipu, ["report", "--store", store, "--limit", String(limit), "--title", "200 runs: lr x replicas x seeds", "-o", file],
                   { stdio: ["ignore", "ignore", "pipe"] });
      return fs.readFileSync(file, "utf8");
    };
    const file = path.join(tmp, "report.html");
    const html = report(file, 200);

    const page = await browser.newPage();
    await page.setViewport({ width: 1920, height: SCREEN });
    const messages = [], requests = [];
    page.on("console", m => { if (m.type() === "error" || m.type() === "warn" || m.type() === "warning") messages.push(m.type() + ": " + m.text()); });
    page.on("pageerror", e => messages.push("exception: " + e.message));
    await page.setRequestInterception(true);
    page.on("request", r => { if (!r.url().startsWith("file:") && !r.url().startsWith("http://127.0.0.1")) requests.push(r.url()); r.continue(); });
    await page.goto("file://" + file);
    await page.waitForSelector('body[data-rendered="yes"]', { timeout: 30000 });

    // Grouped by the grid point, as it opens.
    const opened = await page.evaluate(() => {
      const R = window.ipuReport;
      const loss = R.charts.find(c => c.key === "loss");
      const u = loss.plot;
      // Every band: its max series at or above the mean and its min at or below, wherever defined.
      let bandsOk = u.bands.length > 0;
      u.bands.forEach(b => {
        const [hi, lo] = b.series, mean = hi - 1;
        u.data[mean].forEach((m, i) => {
          if (m === null) return;
          if (!(u.data[hi][i] >= m - 1e-9 && u.data[lo][i] <= m + 1e-9)) bandsOk = false;
        });
      });
      const spread = u.bands.some(b => u.data[b.series[0]].some((v, i) => v !== null && v > u.data[b.series[1]][i] + 1e-6));
      return {
        height: document.documentElement.scrollHeight,
        group: document.getElementById("group-by").value,
        legend: Array.from(document.querySelectorAll("#legend .chip")).map(c => c.textContent),
        lossCurves: Number(document.querySelector('.chart[data-key="loss"]').dataset.curves),
        lossBands: u.bands.length, bandsOk: bandsOk, spread: spread,
        chartKeys: Array.from(document.querySelectorAll(".chart")).map(c => c.dataset.key),
        constants: Array.from(document.querySelectorAll("#constants tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent)),
        crowded: document.getElementById("crowded").textContent,
        errors: window.ipuErrors,
      };
    });
    check(opened.height <= 3 * SCREEN, "200 runs, grouped, fit in 3 screens of 1080 px", opened.height);
    console.log("page height, 200 runs grouped as the page opens: " + opened.height + " px");
    check(opened.group === "p:phases.short.lr.base|mapping.replicas", "grouped by default by the grid point (lr.base, replicas)", opened.group);
    check(opened.legend.length === 8, "one legend entry per group: 8", opened.legend);
    check(opened.legend.every(t => /^lr\.base=[0-9.]+, replicas=[12] \(25 runs\)$/.test(t)), "group entries name the group and its runs", opened.legend);
    check(opened.lossCurves === 8 && opened.lossBands === 8, "the loss chart draws 8 group means with 8 bands", opened);
    check(opened.bandsOk && opened.spread, "each band runs from the group's min to its max around the mean", opened);
    check(/grouped by lr\.base, replicas/.test(opened.crowded), "the page says why it grouped", opened.crowded);
    check(!opened.chartKeys.includes("loss_scale") && !opened.chartKeys.includes("skipped"), "no chart of a constant metric", opened.chartKeys);
    check(opened.chartKeys.includes("loss") && opened.chartKeys.includes("eval.loss"), "charts of the metrics that change", opened.chartKeys);
    const constants = Object.fromEntries(opened.constants.map(r => [r[0], r[1]]));
    check(constants.loss_scale === "1024" && constants.skipped === "0" && opened.constants.length === 2,
          "the constant table holds loss_scale 1024 and skipped 0", opened.constants);
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

    // By lr.base alone: 4 groups.
    await page.select("#group-by", "p:phases.short.lr.base");
    const byLr = await page.evaluate(() => ({
      legend: Array.from(document.querySelectorAll("#legend .chip")).map(c => c.textContent),
      curves: Number(document.querySelector('.chart[data-key="loss"]').dataset.curves),
      bands: Number(document.querySelector('.chart[data-key="loss"]').dataset.bands),
    }));
    check(byLr.legend.join("|") === "lr.base=0.005 (50 runs)|lr.base=0.01 (50 runs)|lr.base=0.02 (50 runs)|lr.base=0.04 (50 runs)",
          "grouped by lr.base: 4 groups of 50", byLr.legend);
    check(byLr.curves === 4 && byLr.bands === 4, "4 group curves with bands", byLr);

    // Every run drawn.
    await page.select("#group-by", "");
    const each = await page.evaluate(() => {
      const norm = c => { const e = document.createElement("span"); e.style.color = c; document.body.appendChild(e);
                          const v = getComputedStyle(e).color; e.remove(); return v; };
      const colours = {};  // run id -> {place: colour}
      const put = (id, place, c) => { (colours[id] = colours[id] || {})[place] = norm(c); };
      document.querySelectorAll("#legend .chip").forEach(c => put(c.dataset.run, "legend", c.querySelector(".swatch").style.background));
      document.querySelectorAll("#params tbody tr").forEach(r => put(r.dataset.run, "table", r.querySelector(".swatch").style.background));
      document.querySelectorAll("#parallel .pc-line").forEach(l => put(l.dataset.run, "parallel", l.getAttribute("stroke")));
      document.querySelectorAll("#scatter .sc-point").forEach(p => put(p.dataset.run, "scatter", p.getAttribute("fill")));
      const ids = Array.from(document.querySelectorAll("#legend .chip")).map(c => c.dataset.run);
      for (const c of window.ipuReport.charts)
        c.lines.forEach((si, k) => put(c.entities[k].slice(1), "chart " + c.key, c.plot.series[si].stroke(c.plot, si)));
      const tableRow = id => document.querySelector('#params tbody tr[data-run="' + id + '"]');
      return {
        height: document.documentElement.scrollHeight,
        labels: Array.from(document.querySelectorAll("#legend .chip")).map(c => c.textContent),
        ids: ids, colours: colours,
        lossCurves: Number(document.querySelector('.chart[data-key="loss"]').dataset.curves),
        distinct: new Set(ids.map(id => colours[id].legend)).size,
        crowded: document.getElementById("crowded").textContent,
        note: tableRow(1).querySelector(".note-cell").textContent,
        noteMarkup: tableRow(1).querySelector(".note-cell b") !== null,
        tags: Object.fromEntries(ids.map(id => [id, Array.from(tableRow(id).querySelectorAll(".tag")).map(t => t.textContent)])),
        lr: Object.fromEntries(ids.map(id => [id, tableRow(id).cells[Array.from(document.querySelectorAll("#params thead th")).findIndex(h => h.textContent === "lr.base")].textContent])),
      };
    });
    check(each.height <= 3 * SCREEN, "200 runs drawn one by one fit in 3 screens", each.height);
    console.log("page height, 200 runs drawn one by one: " + each.height + " px");
    check(each.lossCurves === 200, "200 loss curves", each.lossCurves);
    check(each.labels.length === 200, "200 legend entries", each.labels.length);
    const named = each.labels.filter(t => t === "#1 warm-start");
    const byParams = each.labels.filter(t => /^#\d+ lr\.base=[0-9.]+, replicas=[12], seed=\d+$/.test(t));
    check(named.length === 1 && byParams.length === 199, "labels: the given name, else lr.base, replicas and seed", each.labels.slice(0, 5));
    check(/more than colours can tell apart/.test(each.crowded) && /group them/.test(each.crowded), "the page says to group", each.crowded);
    let colourFaults = [];
    for (const id of each.ids) {
      const places = each.colours[id];
      const want = places.legend;
      const where = Object.keys(places);
      if (!where.includes("table") || !where.includes("parallel") || !where.includes("scatter") || !where.includes("chart loss"))
        colourFaults.push(id + " missing in " + JSON.stringify(places));
      for (const p of where) if (places[p] !== want) colourFaults.push(id + ": " + p + " " + places[p] + " vs legend " + want);
    }
    check(colourFaults.length === 0, "each run one colour in legend, charts, table, parallel coordinates, scatter", colourFaults.slice(0, 5));
    check(each.distinct >= 150, "200 runs in many distinct colours", each.distinct);
    check(each.note.includes("<b>with markup</b>") && !each.noteMarkup, "the note shown, its markup as text", each.note);
    const tagged = each.ids.filter(id => each.tags[id].includes("baseline"));
    check(tagged.length === 50 && tagged.every(id => each.lr[id] === "0.02"), "the 50 runs of lr 0.02 show their tag", tagged.length);

    // Smoothing, and the hover box.
    await page.select("#group-by", "p:phases.short.lr.base");
    const raw = await page.evaluate(() => window.ipuReport.charts.find(c => c.key === "loss").plot.data[1].slice());
    await page.$eval("#smoothing", e => { e.value = "0.9"; e.dispatchEvent(new Event("change")); });
    const smoothed = await page.evaluate(() => window.ipuReport.charts.find(c => c.key === "loss").plot.data[1].slice());
    const changed = raw.filter((v, i) => v !== null && Math.abs(v - smoothed[i]) > 1e-6).length;
    check(changed > raw.length / 2, "smoothing changes the curves", changed);
    const over = await page.$('.chart[data-key="loss"] .u-over');
    const box = await over.boundingBox();
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.5);
    const tip = await page.$eval('.chart[data-key="loss"] .tip', t => ({ hidden: t.hidden, text: t.textContent }));
    check(!tip.hidden && /step /.test(tip.text) && /\(raw [0-9.]+\)/.test(tip.text) && /runs\)/.test(tip.text),
          "hovering shows the step, each group's smoothed and raw values", tip);

    // Hiding a group hides it in every chart.
    await page.click('#legend .chip[data-key="glr.base=0.04"]');
    const hidden = await page.evaluate(() => ({
      curves: Array.from(document.querySelectorAll(".chart")).map(c => Number(c.dataset.curves)),
      off: document.querySelectorAll("#params tbody tr.off").length,
    }));
    check(hidden.curves.every(n => n === 3) && hidden.off === 50, "a hidden group leaves every chart and greys its table rows", hidden);
    check(messages.length === 0 && opened.errors.length === 0, "no console error or warning, no exception", messages);
    check(requests.length === 0, "nothing fetched from the network", requests);

    // A live page: served here as `ipu ui` serves it, its document polled.
    let data = embedded(html, "ipu-data");
    const live = html.replace(embedded(html, "ipu-page"), JSON.stringify({ live: "data.json", pollMs: 200 }));
    server = http.createServer((req, res) => {
      const body = req.url.startsWith("/data.json") ? data : live;
      res.writeHead(200, { "Content-Type": req.url.startsWith("/data.json") ? "application/json" : "text/html" });
      res.end(body);
    });
    await new Promise(ok => server.listen(0, "127.0.0.1", ok));
    const livePage = await browser.newPage();
    await livePage.setViewport({ width: 1920, height: SCREEN });
    livePage.on("console", m => { if (m.type() === "error" || m.type() === "warn") messages.push("live " + m.type() + ": " + m.text()); });
    livePage.on("pageerror", e => messages.push("live exception: " + e.message));
    await livePage.goto("http://127.0.0.1:" + server.address().port + "/report.html");
    await livePage.waitForSelector('body[data-rendered="yes"]');
    await livePage.select("#group-by", "");
    const colourOf = id => livePage.$eval('#legend .chip[data-run="' + id + '"] .swatch', s => s.style.background);
    const before17 = await colourOf(17);
    await livePage.select("#group-by", "p:phases.short.lr.base");
    await livePage.$eval("#smoothing", e => { e.value = "0.6"; e.dispatchEvent(new Event("change")); });
    await livePage.click('#legend .chip[data-key="glr.base=0.005"]');
    await livePage.select("#scatter-x", "seed");
    await livePage.select("#parallel-metric", "eval.loss");
    // Zoom the loss chart by dragging across it.
    const o = await (await livePage.$('.chart[data-key="loss"] .u-over')).boundingBox();
    await livePage.mouse.move(o.x + o.width * 0.2, o.y + o.height / 2);
    await livePage.mouse.down();
    await livePage.mouse.move(o.x + o.width * 0.6, o.y + o.height / 2, { steps: 5 });
    await livePage.mouse.up();
    const zoom = await livePage.evaluate(() => { const s = window.ipuReport.charts.find(c => c.key === "loss").plot.scales.x; return [s.min, s.max]; });
    check(zoom[0] > 30 && zoom[1] < 250, "dragging zooms the chart", zoom);

    // Eight more runs recorded: the server's document changes.
    execFileSync(fixture, [store, "8", "300"]);
    data = embedded(report(path.join(tmp, "report208.html"), 208), "ipu-data");
    await livePage.waitForSelector('body[data-updates="1"]', { timeout: 20000 });
    const after = await livePage.evaluate(() => {
      const s = window.ipuReport.charts.find(c => c.key === "loss").plot.scales.x;
      return {
        group: document.getElementById("group-by").value,
        smoothing: document.getElementById("smoothing").value,
        legend: Array.from(document.querySelectorAll("#legend .chip")).map(c => c.textContent + (c.classList.contains("off") ? " off" : "")),
        curves: Number(document.querySelector('.chart[data-key="loss"]').dataset.curves),
        runs: document.getElementById("run-count").textContent,
        zoom: [s.min, s.max],
        scatterX: document.getElementById("scatter-x").value,
        parallelMetric: document.getElementById("parallel-metric").value,
      };
    });
    check(after.runs === "208 runs", "the live page redrew with the new runs", after.runs);
    check(after.group === "p:phases.short.lr.base" && after.smoothing === "0.6", "the grouping and smoothing chosen stay", after);
    check(after.legend.join("|") === "lr.base=0.005 (52 runs) off|lr.base=0.01 (52 runs)|lr.base=0.02 (52 runs)|lr.base=0.04 (52 runs)",
          "the hidden group stays hidden, the groups count the new runs", after.legend);
    check(after.curves === 3, "three groups drawn", after.curves);
    check(after.scatterX === "seed" && after.parallelMetric === "eval.loss", "the scatter's and parallel coordinates' choices stay", after);
    check(Math.abs(after.zoom[0] - zoom[0]) < 1e-6 && Math.abs(after.zoom[1] - zoom[1]) < 1e-6, "the zoom stays", [zoom, after.zoom]);
    await livePage.select("#group-by", "");
    check((await colourOf(17)) === before17, "a run keeps its colour when runs are added", [before17, await colourOf(17)]);
    check(messages.length === 0, "no console error or warning on the live page", messages);
  } finally {
    if (server) server.close();
    await browser.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(() => {
  if (failures.length) process.exit(1);
  console.log("report page test passed");
}, e => { console.log("FAIL:", e.stack || e); process.exit(1); });
