// Times the console's first render of each view in headless Chromium,
// for BenchmarkConsole100k (e2e/console_bench_test.go): from navigation
// to the view's content in place (main[data-ready]), with the API
// requests the page made and the bytes of their answers. Prints one JSON
// line per view.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const base = process.env.JQ_BASE;
const views = JSON.parse(process.env.JQ_VIEWS);
const profile = mkdtempSync(join(tmpdir(), 'jq-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.JQ_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
    '--no-first-run', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 860 },
});
const page = context.pages()[0] || await context.newPage();
let calls = [];
page.on('requestfinished', async (req) => {
  const url = new URL(req.url());
  if (!url.pathname.startsWith('/v1/') || url.pathname.startsWith('/v1/watch/')) return;
  const sizes = await req.sizes().catch(() => ({ responseBodySize: -1 }));
  calls.push({ path: url.pathname + url.search, bytes: sizes.responseBodySize });
});
try {
  for (const hash of views) {
    // A fresh document for each view: its own first render.
    await page.goto('about:blank');
    calls = [];
    const t0 = Date.now();
    await page.goto(base + '/ui/' + hash);
    await page.waitForSelector('main[data-ready]', { timeout: 600000 });
    const ms = Date.now() - t0;
    await page.waitForTimeout(200); // the last requestfinished handlers
    const rows = await page.locator('tbody tr').count();
    const error = await page.locator('#error').innerText().catch(() => '');
    console.log(JSON.stringify({ view: hash, ms, rows, error, calls }));
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
