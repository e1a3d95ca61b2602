// Drives the web console in headless Chromium. Started by
// e2e/console_test.go (TestConsoleInBrowser), which starts the services
// with two bearer tokens (admin, in system:masters; bob, batch-user in
// team-a) and the world described there, on the manual clock, 10 minutes
// after 2026-01-01T00:00:00Z. Every expected value below is worked out by
// hand from that world. On failure it saves a screenshot in JQ_SHOTS.
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const base = process.env.JQ_BASE;
const shots = process.env.JQ_SHOTS;
const admin = process.env.JQ_ADMIN_TOKEN;
const bob = process.env.JQ_BOB_TOKEN;

const profile = mkdtempSync(join(tmpdir(), 'jq-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.JQ_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
    '--no-first-run', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 860 },
});
const page = context.pages()[0] || await context.newPage();
const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });

let n = 0;
async function step(name, fn) {
  n++;
  try {
    await fn();
    console.log(`ok ${n} ${name}`);
  } catch (err) {
    mkdirSync(shots, { recursive: true });
    const file = join(shots, `${String(n).padStart(2, '0')}-${name.replace(/\W+/g, '-')}.png`);
    await page.screenshot({ path: file, fullPage: true }).catch(() => {});
    console.log(`FAIL ${n} ${name}: ${err.stack || err}`);
    console.log(`screenshot: ${file}`);
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    process.exit(1);
  }
}

function expect(cond, what) { if (!cond) throw new Error(what); }
const text = (sel) => page.locator(sel).first().innerText();
const timeout = { timeout: 15000 };

async function useToken(t) {
  await page.fill('#token', t);
  await page.click('#token-form button');
}

async function go(hash, search = '') {
  await page.goto(base + '/ui/' + search + hash);
}

await step('without a token the console says so', async () => {
  await go('#/queues');
  await page.locator('#error').filter({ hasText: 'Not authenticated' }).waitFor(timeout);
});

await step('ClusterQueues and the cohort with usage bars', async () => {
  await useToken(admin);
  await page.locator('[data-testid=clusterqueue][data-name=gpu]').waitFor(timeout);
  // gpu: train holds 2 of 8 cpu and 4 of 4 GPUs; etl (cpu queue) borrows
  // 12-8 = 4 cpu, from gpu's unused 6.
  const gpu = await text('[data-testid=clusterqueue][data-name=gpu]');
  expect(gpu.includes('reserved 2 of nominal 8 · lent 4'), 'gpu cpu: ' + gpu);
  expect(gpu.includes('reserved 4 of nominal 4'), 'gpu GPUs: ' + gpu);
  const cpu = await text('[data-testid=clusterqueue][data-name=cpu]');
  expect(cpu.includes('reserved 12 of nominal 8 · borrowed 4'), 'cpu: ' + cpu);
  const cohort = await text('[data-testid=cohort][data-name=research]');
  expect(cohort.includes('reserved 14 of nominal 16'), 'cohort: ' + cohort);
  expect(await page.locator('.bar .borrowed').count() > 0, 'no borrowed bar');
  if (process.env.JQ_README_SHOT) await page.screenshot({ path: process.env.JQ_README_SHOT, fullPage: true });
});

await step('pending workloads with reason, position and ETA', async () => {
  await go('#/pending');
  await page.locator('[data-testid=pending-row]').first().waitFor(timeout);
  // report waits for etl (1h from 00:00), sweep for train (2h); now is
  // 00:10.
  const report = await text('[data-testid=pending-row][data-name="team-b/report"]');
  expect(report.includes('2026-01-01T01:00:00Z (in 50m)'), 'report: ' + report);
  expect(report.includes('team-b/etl (run time 1h0m0s'), 'report assumption: ' + report);
  const sweep = await text('[data-testid=pending-row][data-name="team-a/sweep"]');
  expect(sweep.includes('2026-01-01T02:00:00Z (in 1h 50m)'), 'sweep: ' + sweep);
  expect(sweep.includes('WaitingForQuota') || sweep.includes('Pending'), 'sweep reason: ' + sweep);
  if (process.env.JQ_README_SHOT) {
    await page.screenshot({ path: process.env.JQ_README_SHOT.replace(/\.png$/, '-pending.png'), fullPage: true });
  }
});

await step('a new workload appears live, from the server-push stream', async () => {
  await page.locator('#live.on').waitFor(timeout);
  const resp = await fetch(base + '/v1/workloads', {
    method: 'POST', headers: { Authorization: 'Bearer ' + admin, 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'kueue.x-k8s.io/v1beta1', kind: 'Workload',
      metadata: { name: 'late', namespace: 'team-b', annotations: { 'jetqueue.dev/expected-runtime': '5m' } },
      spec: { queueName: 'lq', podSets: [{ name: 'main', count: 1, template: { spec: { containers: [{ name: 'c', resources: { requests: { cpu: '4' } } }] } } }] } }),
  });
  expect(resp.status === 202, 'submit: ' + resp.status);
  // No reload: the view refreshes on the stream's events. late (4 cpu)
  // fits once etl ends at 01:00, after report, in cpu's order.
  const row = page.locator('[data-testid=pending-row][data-name="team-b/late"]');
  await row.waitFor(timeout);
  const t = await row.innerText();
  expect(t.startsWith('1'), 'late position: ' + t);
  expect(t.includes('2026-01-01T01:00:00Z'), 'late ETA: ' + t);
});

await step('point in time: before late was submitted', async () => {
  await go('#/pending', '?at=2026-01-01T00:05:00Z');
  await page.locator('[data-testid=pending-row]').first().waitFor(timeout);
  expect(await page.locator('[data-testid=pending-row][data-name="team-b/late"]').count() === 0, 'late shown at 00:05');
  expect((await text('[data-testid=pending-total]')).includes('of 2'), 'total at 00:05');
  await page.click('#at-now');
  await page.locator('[data-testid=pending-row][data-name="team-b/late"]').waitFor(timeout);
});

await step('a workload: timeline, explain and counterfactuals', async () => {
  await go('#/workload/team-a/sweep');
  await page.locator('[data-testid=counterfactuals] li').first().waitFor(timeout);
  const cf = await text('[data-testid=counterfactuals]');
  expect(cf.includes('admissible if team-a/train finished'), 'counterfactuals: ' + cf);
  expect((await text('[data-testid=explain-eta]')).includes('2026-01-01T02:00:00Z'), 'explain ETA');
  expect(await page.locator('[data-testid=timeline] circle').count() >= 1, 'no timeline mark');
});

await step('data is rendered as text, never as markup', async () => {
  await go('#/whatif');
  // The API's error names the kind it refused: markup in it must stay text.
  await page.fill('[data-testid=whatif-config]', 'apiVersion: v1\nkind: "<img id=injected src=x>"\nmetadata: {name: x}\n');
  await page.click('form.card button[type=submit]');
  await page.locator('#error').filter({ hasText: '<img id=injected' }).waitFor(timeout);
  expect(await page.locator('#injected').count() === 0, 'markup from the API was parsed');
});

await step('what-if as charts', async () => {
  await go('#/whatif');
  await page.fill('[data-testid=whatif-config]', `apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: gpu}
spec:
  cohort: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: nvidia.com/gpu, nominalQuota: 8}
`);
  await page.fill('input[name=since]', '1h');
  await page.click('form.card button[type=submit]');
  await page.locator('[data-testid=whatif-chart]').first().waitFor(timeout);
  expect(await page.locator('[data-testid=whatif-chart]').count() === 4, 'charts');
  // With 8 GPUs, sweep (2 GPUs) is admitted at once: gpu admits 2, not 1.
  const admitted = await page.locator('[data-testid=whatif-chart]').first().innerText();
  expect(admitted.includes('gpu'), 'admitted chart: ' + admitted);
});

await step('bob sees only team-a', async () => {
  await useToken(bob);
  await go('#/pending');
  await page.locator('[data-testid=pending-row]').first().waitFor(timeout);
  const names = await page.locator('[data-testid=pending-row]').evaluateAll((rows) => rows.map((r) => r.dataset.name));
  expect(JSON.stringify(names) === JSON.stringify(['team-a/sweep']), 'bob sees ' + names);
  await go('#/queues');
  await page.locator('#error').filter({ hasText: 'cannot list resource "clusterqueues"' }).waitFor(timeout);
});

await step('no script error', async () => {
  // A 4xx answer (401, 403, the refused what-if) is logged by the browser
  // as a failed resource.
  const real = problems.filter((p) => !/status of 4\d\d/.test(p));
  expect(real.length === 0, real.join('\n'));
});

await context.close();
rmSync(profile, { recursive: true, force: true });
console.log('all passed');
