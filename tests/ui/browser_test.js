// `ipu ui` in a real browser: Debian's headless Chromium driven by
// puppeteer-core (tests/browser/package.json; docs/tracking.md, "Live dashboard").
//
// On a temp store of real runs (two learning rates of tiny_bert, an estimate
// of the same plan) and the report fixture's sweep (its name holds
// <script>), with `ipu ui --port 0 --writable`, it: lists the runs and filters
// them (and a bad filter shows its caret); tags a run and writes a note (text
// with markup, shown as text) from the page; opens a run WHILE `ipu run`
// trains it and sees its curve grow (body[data-updates] rises and the points
// the page was served grow), and the table change its status when it ends;
// compares two runs (curves, the parameter that
// differs, predicted against measured); opens the sweeps and a sweep, which
// reloads itself when the sweep changes (`ipu sweep pause`). No page may
// log an error, throw, or open a dialog (an injected alert). Screenshots go
// to OUT_DIR.
//
//   node browser_test.js IPU SWEEP_FIXTURE ROOT NODE_MODULES OUT_DIR
"use strict";
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const [ipu, fixture, root, nodeModules, outDir] = process.argv.slice(2);
const puppeteer = require(path.resolve(nodeModules, "puppeteer-core"));
const failures = [];
function check(ok, what, detail) {
  if (!ok) {
    failures.push(what);
    console.log("FAIL:", what, detail === undefined ? "" : String(JSON.stringify(detail)).slice(0, 1500));
  }
  return ok;
}
const sleep = ms => new Promise(r => setTimeout(r, ms));

function chromiumPath() {
  for (const p of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) if (fs.existsSync(p)) return p;
  return null;
}

async function main() {
  const chromium = chromiumPath();
  if (!chromium) {
    console.log("FAIL: no chromium (Debian package `chromium`; ./dev installs it)");
    process.exit(1);
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ipu-ui-browser-"));
  fs.mkdirSync(outDir, { recursive: true });
  const store = path.join(tmp, "ipu.db");
  const env = { ...process.env, IPU_STORE: store };
  const children = [];
  let browser = null;
  try {
    const tiny = path.join(root, "examples", "tiny_bert.ipu");
    const slow = path.join(tmp, "tiny_slow.ipu");
    fs.writeFileSync(slow, fs.readFileSync(tiny, "utf8").replace("lr: 0.02 warmup", "lr: 0.005 warmup"));
    const ipuOk = (...args) => {
      const r = spawnSync(ipu, args, { env, encoding: "utf8", timeout: 300000 });
      check(r.status === 0, "ipu " + args.join(" "), r.stderr);
      return r;
    };
    const runsDir = path.join(tmp, "runs");
    ipuOk("run", tiny, "--steps", "10", "--threads", "1", "--runs-dir", runsDir);
    ipuOk("run", slow, "--steps", "10", "--threads", "1", "--runs-dir", runsDir);
    ipuOk("estimate", tiny);
    const sweepName = "lr <script>alert(1)</script>";
    const fx = spawnSync(fixture, [store, sweepName], { encoding: "utf8" });
    check(fx.status === 0, "the sweep fixture", fx.stderr);

    const server = spawn(ipu, ["ui", "--store", store, "--port", "0", "--writable", "--poll-ms", "500"],
                         { stdio: ["ignore", "pipe", "inherit"] });
    children.push(server);
    const url = await new Promise((resolve, reject) => {
      let out = "";
      server.stdout.on("data", d => {
        out += d;
        const m = out.match(/^(http:\/\/127\.0\.0\.1:\d+\/)\n/);
        if (m) resolve(m[1]);
      });
      server.on("exit", code => reject(new Error("ipu ui ended with " + code)));
    });
    const api = async p => (await fetch(url.replace(/\/$/, "") + p)).json();

    browser = await puppeteer.launch({
      executablePath: chromium, headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const errors = [];
    // The bad filter below is answered 400 while it is shown, which Chromium
    // logs as a failed resource: that one (by its URL) is expected.
    const badFilter = "loss > AND kind = run";
    page.on("console", m => {
      if (m.type() !== "error") return;
      const at = (m.location() && m.location().url) || "";
      if (/status of 400/.test(m.text()) && at.includes("/api/runs?") &&
          new URL(at).searchParams.get("where") === badFilter) return;
      errors.push(m.text() + (at ? " (" + at + ")" : ""));
    });
    page.on("pageerror", e => errors.push("uncaught: " + e.message));
    page.on("dialog", async d => { errors.push("a dialog opened: " + d.message()); await d.dismiss(); });
    page.on("requestfailed", r => errors.push("request failed: " + r.url()));
    // Every request stays on the server: the pages need no network.
    page.on("request", r => { if (!r.url().startsWith(url) && !r.url().startsWith("data:")) errors.push("off-server request: " + r.url()); });
    const pageErrors = async what => {
      const inPage = await page.evaluate(() => window.ipuErrors || []);
      check(inPage.length === 0, what + ": no error counted in the page", inPage);
    };

    // ---- the runs table, filtered
    const total = (await api("/api/runs")).total;  // tiny_bert's and the fixture's trials'
    await page.goto(url, { waitUntil: "load" });
    await page.waitForSelector(`body[data-rows="${total}"]`, { timeout: 20000 });
    check(await page.$eval("#count", e => e.textContent) === total + " runs", "the table counts the runs");
    const filter = "training = tiny_pretrain AND kind = run";
    await page.type("#where", filter);
    await page.click("#query button[type=submit]");
    await page.waitForSelector('body[data-rows="2"]', { timeout: 20000 });
    check(await page.$eval("#count", e => e.textContent) === `2 of ${total} runs match`, "the filter narrows the table");
    check(new URL(page.url()).searchParams.get("where") === filter, "the filter is in the page's URL", page.url());
    // Sorting by a header.
    await page.click('th[data-sort="id"]');
    await page.waitForFunction(() => {
      const ids = [...document.querySelectorAll("#runs tbody tr")].map(r => Number(r.dataset.id));
      return ids.length === 2 && ids[0] < ids[1];
    }, { timeout: 20000 });
    const [a, b] = await page.$$eval("#runs tbody tr", rows => rows.map(r => Number(r.dataset.id)));
    // A bad filter: its message and caret, inline.
    await page.$eval("#where", e => { e.value = ""; });
    await page.type("#where", badFilter);
    await page.click("#query button[type=submit]");
    await page.waitForSelector("#filter-error:not([hidden])", { timeout: 20000 });
    const shownError = await page.$eval("#filter-error", e => e.textContent);
    check(/\^/.test(shownError) && /where:/.test(shownError), "a bad filter shows its message and caret", shownError);
    await page.$eval("#where", (e, f) => { e.value = f; }, filter);
    await page.click("#query button[type=submit]");
    await page.waitForSelector("#filter-error[hidden]", { timeout: 20000 });

    // ---- tags and a note from the page (--writable)
    await page.click(`tr[data-id="${a}"] input[type=checkbox]`);
    await page.type("#tag-text", "baseline");
    await page.click("#tag-add");
    await page.waitForFunction(id => /baseline/.test(document.querySelector(`tr[data-id="${id}"]`).textContent), { timeout: 20000 }, a);
    const note = "too slow? <img src=x onerror=alert(1)>";
    await page.click(`tr[data-id="${a}"] button.ui-edit`);
    await page.keyboard.type(note);
    await page.keyboard.press("Enter");
    await page.waitForFunction((id, n) => document.querySelector(`tr[data-id="${id}"] td.note`).textContent.includes(n),
                               { timeout: 20000 }, a, note);
    check(await page.$$eval("#runs img", imgs => imgs.length) === 0, "a note with markup is shown as text");
    const stored = await api("/api/runs/" + a);
    check(stored.note === note && stored.tags.includes("baseline"), "the tag and the note are in the store", stored);
    await page.click(`tr[data-id="${b}"] input[type=checkbox]`);  // two selected: what a comparison starts from
    const bottom = await page.$eval("#runs", e => e.getBoundingClientRect().bottom);
    await page.screenshot({ path: path.join(outDir, "ui-runs.png"), clip: { x: 0, y: 0, width: 1280, height: Math.ceil(bottom) + 20 } });
    await page.click(`tr[data-id="${b}"] input[type=checkbox]`);
    await page.click(`tr[data-id="${a}"] input[type=checkbox]`);
    await pageErrors("runs page");

    // ---- a run while it trains: its curve grows
    const live = spawn(ipu, ["run", tiny, "--steps", "400", "--threads", "1", "--runs-dir", runsDir],
                       { env, stdio: ["ignore", "ignore", "pipe"] });
    children.push(live);
    let liveId = null;
    for (let i = 0; i < 200 && liveId === null; ++i) {
      const running = await api("/api/runs?where=" + encodeURIComponent("status = running"));
      if (running.runs && running.runs.length && running.runs[0].metrics.loss) liveId = running.runs[0].id;
      else await sleep(100);
    }
    check(liveId !== null, "the training run is listed as running with a loss");
    const served = [];  // points of each /api/report-data answer the page got
    page.on("response", async r => {
      if (!r.url().includes("/api/report-data")) return;
      try {
        const d = await r.json();
        let n = 0;
        for (const c of d.charts) for (const s of c.series) n += s.values.filter(v => v !== null).length;
        served.push(n);
      } catch (e) { /* a navigation away: not this test's concern */ }
    });
    await page.goto(url + "runs/" + liveId, { waitUntil: "load" });
    await page.waitForSelector('body[data-rendered="yes"]', { timeout: 20000 });
    check(await page.$eval(".ui-nav", e => /runs/.test(e.textContent)), "the run's page has the dashboard's navigation");
    await page.waitForFunction(() => Number(document.body.dataset.updates || 0) >= 3, { timeout: 60000 });
    const updates = await page.evaluate(() => Number(document.body.dataset.updates));
    check(updates >= 3, "the run's page redrew as the run trained", updates);
    check(served.length >= 2 && served[served.length - 1] > served[0], "the curve has more points than at first", served);
    const stillRunning = (await api("/api/runs/" + liveId)).status === "running";
    check(stillRunning, "the run was still training while the page grew (the test saw it live)");
    await page.waitForSelector('#ui-details[data-rendered="yes"]', { timeout: 20000 });
    await page.screenshot({ path: path.join(outDir, "ui-run-live.png") });
    await pageErrors("a live run's page");
    // The table is live too: the run's status changes in place when it ends.
    await page.goto(url + "?where=" + encodeURIComponent("id = " + liveId), { waitUntil: "load" });
    await page.waitForSelector(`tr[data-id="${liveId}"] td.status-running`, { timeout: 20000 });
    const updatesBefore = await page.evaluate(() => Number(document.body.dataset.updates));
    const ended = new Promise(r => live.on("exit", r));
    live.kill("SIGINT");
    await ended;
    await page.waitForFunction(id => !document.querySelector(`tr[data-id="${id}"] td.status-running`), { timeout: 20000 }, liveId);
    const after = await page.$eval(`tr[data-id="${liveId}"]`, r => r.children[3].textContent);
    check(after !== "running" && await page.evaluate(() => Number(document.body.dataset.updates)) > updatesBefore,
          "the table shows the run's new status without a reload", after);
    await pageErrors("the live table");
    // The run's page, now that it ended, stops asking for updates.
    await page.goto(url + "runs/" + liveId, { waitUntil: "load" });
    await page.waitForSelector('body[data-rendered="yes"]', { timeout: 20000 });
    await page.waitForSelector('#ui-details[data-rendered="yes"]', { timeout: 20000 });
    const asked = [];
    const onRequest = r => { if (/\/api\/(report-data|compare)/.test(r.url())) asked.push(r.url()); };
    page.on("request", onRequest);
    await new Promise(r => setTimeout(r, 5000));
    page.off("request", onRequest);
    check(await page.evaluate(() => document.body.dataset.live) === "ended" && asked.length === 0,
          "an ended run's page does not poll", asked.length);

    // ---- two runs compared
    await page.goto(url + "?where=" + encodeURIComponent(filter + " AND status = finished"), { waitUntil: "load" });
    await page.waitForSelector('body[data-rows="2"]', { timeout: 20000 });
    await page.click(`tr[data-id="${a}"] input[type=checkbox]`);
    await page.click(`tr[data-id="${b}"] input[type=checkbox]`);
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#compare")]);
    check(new URL(page.url()).pathname === "/compare", "compare opens the comparison", page.url());
    await page.waitForSelector('#ui-details[data-rendered="yes"]', { timeout: 20000 });
    const details = await page.$eval("#ui-details", e => e.textContent);
    check(/Parameters that differ/.test(details) && /phases\.short\.lr\.peak/.test(details), "the comparison shows the parameter that differs", details);
    check(/Predicted against measured/.test(details) && /against estimate/.test(details), "the comparison shows predicted against measured",
          details);
    const curves = await page.evaluate(() => Number(document.body.dataset.curves || 0));
    check(curves >= 2, "the comparison draws curves of both runs", curves);
    await page.screenshot({ path: path.join(outDir, "ui-compare.png") });
    await (await page.$("#ui-details")).screenshot({ path: path.join(outDir, "ui-compare-details.png") });
    await pageErrors("the comparison");

    // ---- sweeps
    await page.goto(url + "sweeps", { waitUntil: "load" });
    await page.waitForSelector('body[data-rows="2"]', { timeout: 20000 });  // the fixture's two sweeps
    const listed = await page.$$eval("#sweeps tbody a", links => links.map(l => l.textContent));
    check(listed.includes(sweepName) && listed.includes("empty_sweep"), "the sweeps are listed, names as text", listed);
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }),
                       page.evaluate(n => [...document.querySelectorAll("#sweeps tbody a")].find(l => l.textContent === n).click(), sweepName)]);
    await page.waitForSelector('body[data-rendered="yes"]', { timeout: 20000 });
    check(await page.evaluate(() => Number(document.body.dataset.trials)) === 24, "the sweep's page shows its 24 trials");
    await page.screenshot({ path: path.join(outDir, "ui-sweep.png"), fullPage: false });
    const paused = spawnSync(ipu, ["sweep", "pause", sweepName, "--store", store], { encoding: "utf8" });
    check(paused.status === 0, "ipu sweep pause", paused.stderr);
    await page.waitForFunction(() => document.body.dataset.reloads === "1" && document.body.dataset.rendered === "yes",
                               { timeout: 20000 });
    check(/paused/.test(await page.$eval("body", e => e.textContent)), "the sweep's page shows it paused after reloading");
    await pageErrors("the sweep's page");

    check(errors.length === 0, "no console error, uncaught exception, dialog or off-server request", errors);
  } finally {
    if (browser) await browser.close();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  if (failures.length) {
    console.log(failures.length + " failure(s)");
    process.exit(1);
  }
  console.log("ok; screenshots in " + outDir);
}

main().catch(e => {
  console.log("FAIL:", e && e.stack || e);
  process.exit(1);
});
