// Figures of `ipu ui` (docs/benchmarks.md, "The dashboard"), in Debian's
// headless Chromium driven by puppeteer-core (tests/browser/package.json):
//
//   1. page load of the runs table with 1,000 runs: a store of 1,000 runs
//      (ipu_ui_bench_writer fill), the page opened fresh 5 times; the time
//      from navigation to the 1,000 rows drawn (body[data-rows="1000"]);
//      also /api/runs alone, as the browser fetches it;
//   2. live update latency: a run that gets one point every 250 ms
//      (ipu_ui_bench_writer live), its page open; for each point, the time
//      from its commit to the first redraw of the page (body[data-updates]
//      rising) whose data hold it, with the default poll (2 s) and 500 ms.
//
//   node ui_bench.js IPU WRITER NODE_MODULES
"use strict";
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const readline = require("readline");

const [ipu, writer, nodeModules] = process.argv.slice(2);
const puppeteer = require(path.resolve(nodeModules, "puppeteer-core"));
const sleep = ms => new Promise(r => setTimeout(r, ms));
const median = xs => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

function startUi(store, pollMs) {
  const server = spawn(ipu, ["ui", "--store", store, "--port", "0", "--poll-ms", String(pollMs)], { stdio: ["ignore", "pipe", "ignore"] });
  return new Promise((resolve, reject) => {
    let out = "";
    server.stdout.on("data", d => {
      out += d;
      const m = out.match(/^(http:\/\/127\.0\.0\.1:\d+\/)\n/);
      if (m) resolve({ server, url: m[1] });
    });
    server.on("exit", code => reject(new Error("ipu ui ended with " + code)));
  });
}

async function pageLoad(browser, tmp) {
  const store = path.join(tmp, "thousand.db");
  let t = Date.now();
  const fill = spawnSync(writer, ["fill", store, "1000", "50"], { encoding: "utf8" });
  if (fill.status !== 0) throw new Error(fill.stderr);
  console.log(`store of 1,000 runs x 50 points written in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  const { server, url } = await startUi(store, 2000);
  try {
    const api = [];
    for (let i = 0; i < 5; ++i) {
      t = performance.now();
      const r = await fetch(url + "api/runs?limit=1000");
      const text = await r.text();
      api.push(performance.now() - t);
      if (i === 0) console.log(`/api/runs?limit=1000: ${(text.length / 1e6).toFixed(2)} MB`);
    }
    const loads = [];
    for (let i = 0; i < 5; ++i) {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 900 });
      t = performance.now();
      await page.goto(url, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('body[data-rows="1000"]', { timeout: 60000 });
      loads.push(performance.now() - t);
      await page.close();
    }
    console.log(`/api/runs of 1,000 runs (fetch, best of 5 / median): ${Math.min(...api).toFixed(0)} / ${median(api).toFixed(0)} ms`);
    console.log(`runs table of 1,000 runs, navigation to rows drawn (best of 5 / median): ${Math.min(...loads).toFixed(0)} / ${median(loads).toFixed(0)} ms`);
  } finally {
    server.kill("SIGINT");
  }
}

async function liveLatency(browser, tmp, pollMs) {
  const store = path.join(tmp, "live-" + pollMs + ".db");
  spawnSync(writer, ["fill", store, "1", "1"]);  // the store exists before the server starts
  const { server, url } = await startUi(store, pollMs);
  const live = spawn(writer, ["live", store, "250", String(Math.ceil(40000 / 250))], { stdio: ["ignore", "pipe", "inherit"] });
  const committed = new Map();  // step -> commit time (ms since the epoch)
  let runId = null;
  const lines = readline.createInterface({ input: live.stdout });
  lines.on("line", l => {
    const w = l.split(" ");
    if (w[0] === "run") runId = Number(w[1]);
    if (w[0] === "step") committed.set(Number(w[1]), Number(w[2]) * 1000);
  });
  while (runId === null || committed.size < 2) await sleep(20);
  const page = await browser.newPage();
  const redraws = [];  // [time, highest step drawn]
  await page.exposeFunction("ipuRedrawn", (at, step) => redraws.push([at, step]));
  await page.evaluateOnNewDocument(() => {
    // The highest loss step of the newest /api/report-data answer, read
    // before the page's own script gets the answer (and redraws from it).
    const fetch0 = window.fetch;
    window.ipuStep = 0;
    window.fetch = async (...args) => {
      const r = await fetch0(...args);
      if (String(args[0]).includes("/api/report-data")) {
        const d = await r.clone().json();
        for (const c of d.charts) if (c.key === "loss") window.ipuStep = Math.max(window.ipuStep, ...c.steps);
      }
      return r;
    };
    new MutationObserver(() => window.ipuRedrawn(Date.now(), window.ipuStep))
      .observe(document, { subtree: true, attributes: true, attributeFilter: ["data-updates"] });
  });
  await page.goto(url + "runs/" + runId, { waitUntil: "load" });
  const firstStep = Math.max(...committed.keys());
  await sleep(30000);
  await page.close();
  live.kill("SIGINT");
  server.kill("SIGINT");
  const latencies = [];
  for (const [step, at] of committed) {
    if (step <= firstStep) continue;  // drawn with the page, not by a redraw
    const redraw = redraws.find(([t, s]) => s >= step && t >= at);
    if (redraw) latencies.push(redraw[0] - at);
  }
  console.log(`live update latency, poll ${pollMs} ms (${latencies.length} points, ${redraws.length} redraws): ` +
              `median ${median(latencies).toFixed(0)} ms, p95 ${pct(latencies, 0.95).toFixed(0)} ms, ` +
              `max ${Math.max(...latencies).toFixed(0)} ms`);
}

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ipu-ui-bench-"));
  const browser = await puppeteer.launch({ executablePath: fs.existsSync("/usr/bin/chromium") ? "/usr/bin/chromium" : "/usr/bin/chromium-browser",
                                           headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    console.log(`host: ${os.cpus().length} x ${os.cpus()[0].model}, load average ${os.loadavg().map(x => x.toFixed(2)).join(" ")}`);
    await pageLoad(browser, tmp);
    await liveLatency(browser, tmp, 2000);
    await liveLatency(browser, tmp, 500);
    console.log(`load average after: ${os.loadavg().map(x => x.toFixed(2)).join(" ")}`);
  } finally {
    await browser.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch(e => { console.error(e); process.exit(1); });
