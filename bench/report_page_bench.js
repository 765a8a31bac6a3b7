// The runs report in Chromium at scale (docs/benchmarks.md, "The runs report
// in a browser"): for 200 and 1,000 runs of 300 steps (written by
// ipu_runs_report_fixture: 7 metrics that change, 2 constant), the time
// `ipu report` takes and the page's size, then in headless Chromium (Debian's,
// through puppeteer-core; a 1920x1080 window) the time from opening the file
// to the page drawn (best of 3), to draw every run one by one rather than
// grouped, and the page's height both ways.
//
//   bench/report_page_bench.sh BUILD   (installs tests/browser's packages, then runs this)
"use strict";
const { execFileSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [ipu, fixture, chromium] = process.argv.slice(2);

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ipu-report-bench-"));
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                           args: ["--no-sandbox", "--disable-gpu", "--user-data-dir=" + path.join(tmp, "profile")] });
  try {
    for (const runs of [200, 1000]) {
      const store = path.join(tmp, runs + ".db"), file = path.join(tmp, runs + ".html");
      execFileSync(fixture, [store, String(runs), "300"]);
      let t = process.hrtime.bigint();
      execFileSync(ipu, ["report", "--store", store, "--limit", String(runs), "-o", file], { stdio: "ignore" });
      const written = Number(process.hrtime.bigint() - t) / 1e9;
      let load = Infinity, every = Infinity, heights = [];
      for (let k = 0; k < 3; ++k) {
        const page = await browser.newPage();
        await page.setViewport({ width: 1920, height: 1080 });
        t = process.hrtime.bigint();
        await page.goto("file://" + file);
        await page.waitForSelector('body[data-rendered="yes"]', { timeout: 120000 });
        load = Math.min(load, Number(process.hrtime.bigint() - t) / 1e9);
        const grouped = await page.evaluate(() => document.documentElement.scrollHeight);
        t = process.hrtime.bigint();
        await page.select("#group-by", "");
        every = Math.min(every, Number(process.hrtime.bigint() - t) / 1e9);
        heights = [grouped, await page.evaluate(() => document.documentElement.scrollHeight)];
        await page.close();
      }
      console.log(`${runs} runs: ipu report ${written.toFixed(2)} s, ${(fs.statSync(file).size / 1e6).toFixed(1)} MB; ` +
                  `opened and drawn (grouped) ${load.toFixed(2)} s, every run drawn ${every.toFixed(2)} s; ` +
                  `height ${heights[0]} px grouped, ${heights[1]} px every run`);
    }
  } finally {
    await browser.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
main().catch(e => { console.error(e); process.exit(1); });
