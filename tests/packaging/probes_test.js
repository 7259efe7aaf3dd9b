// The chart's probes against the real server: for each option scenario of
// the embedded store (chart.js), the rendered StatefulSet's lapsed arguments
// start the real lapsed (--listen moved to 127.0.0.1:0, --data_dir to a temporary
// directory, --auth_file to an empty one that grants nobody anything, so the
// probes must pass without credentials; every other flag as rendered, so a flag lapsed does not know
// fails here), and every health service name the rendered probes ask for must
// answer SERVING, through lapsectl, on the port lapsed printed in its start
// line. The probes' port must be the port the chart passes to --listen, or
// with TLS to --health_listen (the TLS files: a certificate openssl makes).
// With metrics on (--metrics_listen moved to 127.0.0.1:0), lapsed's /metrics
// must carry every metric the chart's Grafana dashboard queries.
//
//   LAPSE_HELM=build/tools/bin/helm NODE_PATH=build/tools/node_modules \
//     node tests/packaging/probes_test.js LAPSED LAPSECTL
'use strict';

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const readline = require('node:readline');
const chart = require('./chart');

const [lapsedPath, lapsectlPath] = process.argv.slice(2);
const patienceMs = 30000;

// Starts lapsed with `args`; resolves to {child, port, metricsPort,
// healthPort} once its start line says which ports it bound (metricsPort,
// healthPort: 0 without metrics, without --health_listen).
function startLapsed(args) {
  const child = childProcess.spawn(lapsedPath, args, {stdio: ['ignore', 'pipe', 'pipe']});
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no start line within ${patienceMs} ms: ${stderr}`));
    }, patienceMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`lapsed exited with ${code} before serving: ${stderr}`));
    });
    readline.createInterface({input: child.stdout}).on('line', (line) => {
      const match = /listening on .* \(port (\d+)\)/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      const metrics = /\(metrics port (\d+)\)/.exec(line);
      const health = /\(health port (\d+)\)/.exec(line);
      resolve({child, port: Number(match[1]), metricsPort: metrics ? Number(metrics[1]) : 0,
               healthPort: health ? Number(health[1]) : 0});
    });
  });
}

// GETs http://127.0.0.1:`port`/metrics; resolves to the sample names in it
// (lapse_members, lapse_rpc_duration_seconds_count, ...).
function scrapeNames(port) {
  return new Promise((resolve, reject) => {
    http.get({host: '127.0.0.1', port, path: '/metrics', timeout: patienceMs}, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () => {
        if (response.statusCode !== 200) reject(new Error(`/metrics: HTTP ${response.statusCode}`));
        const names = body.split('\n').filter((line) => line && !line.startsWith('#'))
            .map((line) => line.split(/[{ ]/)[0]);
        resolve(new Set(names));
      });
    }).on('error', reject);
  });
}

// SIGTERM; resolves to lapsed's exit code.
function stopLapsed(child) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), patienceMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

// The chart mounts a Secret's tls.crt, tls.key and ca.crt: here one
// self-signed certificate, made by openssl in `dir`, is all three.
function selfSignedCertificate(dir) {
  const crt = path.join(dir, 'tls.crt');
  const key = path.join(dir, 'tls.key');
  const made = childProcess.spawnSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-keyout', key, '-out', crt], {encoding: 'utf8'});
  assert.equal(made.status, 0, made.stderr);
  return {tls_cert: crt, tls_key: key, tls_client_ca: crt};
}

// lapsectl health for `service` (over TLS with `tlsArgs`): its exit status
// and JSON answer.
function health(port, service, tlsArgs = []) {
  const result = childProcess.spawnSync(
      lapsectlPath,
      [`--addr=127.0.0.1:${port}`, ...tlsArgs, '--json', 'health', `--service=${service}`],
      {encoding: 'utf8', timeout: patienceMs});
  return {status: result.status, answer: result.stdout.trim() + result.stderr.trim()};
}

async function main() {
  for (const {name, values} of chart.scenarios) {
    // lapsed in redis-cluster mode needs a Redis Cluster to start: those
    // scenarios are checked by chart_test.js only.
    if (chart.isRedisCluster(values)) continue;
    const container = chart.lapsedContainer(chart.render(values));
    const probes = ['startupProbe', 'livenessProbe', 'readinessProbe'].map((p) => container[p]);
    const flags = chart.flags(container.args);

    // With TLS the probes ask the plaintext health port.
    const probed = flags.has('health_listen') ? 'health_listen' : 'listen';
    await chart.check(`${name}: the probes' port is the --${probed} port`, () => {
      const probedPort = Number(flags.get(probed).split(':').pop());
      for (const probe of probes) assert.equal(probe.grpc.port, probedPort);
    });

    const dataDir = fs.mkdtempSync(path.join(chart.scratch, 'data-'));
    const tlsFiles = flags.has('tls_cert') ? selfSignedCertificate(dataDir) : {};
    const args = container.args.map((arg) => {
      const flag = chart.flagName(arg);
      if (flag === 'listen') return '--listen=127.0.0.1:0';
      if (flag === 'metrics_listen') return '--metrics_listen=127.0.0.1:0';
      if (flag === 'health_listen') return '--health_listen=127.0.0.1:0';
      if (tlsFiles[flag]) return `--${flag}=${tlsFiles[flag]}`;
      if (flag === 'data_dir' && flags.get('data_dir') !== '') return `--data_dir=${dataDir}`;
      if (flag === 'auth_file') {
        const authFile = path.join(chart.scratch, `${name}.auth`);
        fs.writeFileSync(authFile, '# no grants\n', {mode: 0o600});
        return `--auth_file=${authFile}`;
      }
      return arg;
    });
    let lapsed = null;
    await chart.check(`${name}: lapsed starts with the chart's flags`, async () => {
      lapsed = await startLapsed(args);
    });
    if (!lapsed) continue;

    const services = [...new Set(probes.map((probe) => probe.grpc.service ?? ''))];
    for (const service of services) {
      await chart.check(`${name}: health service "${service}" answers SERVING`, () => {
        const {status, answer} = health(lapsed.healthPort || lapsed.port, service);
        assert.equal(status, 0, answer);
        assert.equal(JSON.parse(answer).status, 'SERVING');
      });
    }
    if (flags.has('tls_cert')) {
      await chart.check(`${name}: the gRPC port answers health over TLS too`, () => {
        const tlsArgs = [`--tls-ca=${tlsFiles.tls_cert}`, '--tls-server-name=localhost'];
        if (flags.has('tls_client_ca')) {
          tlsArgs.push(`--tls-cert=${tlsFiles.tls_cert}`, `--tls-key=${tlsFiles.tls_key}`);
        }
        const {status, answer} = health(lapsed.port, '', tlsArgs);
        assert.equal(status, 0, answer);
        assert.notEqual(health(lapsed.port, '').status, 0, 'plaintext on the TLS port');
      });
    }
    await chart.check(`${name}: an unknown health service is not SERVING`, () => {
      assert.notEqual(health(lapsed.healthPort || lapsed.port, 'not.a.Service').status, 0);
    });
    if (flags.has('metrics_listen')) {
      // After the health checks above, so the RPC histogram has series. A
      // snapshot's gauges appear only once one is taken; the durable store's
      // families only with a data directory.
      await chart.check(`${name}: /metrics has every metric the dashboard queries`, async () => {
        const scraped = await scrapeNames(lapsed.metricsPort);
        const durable = flags.get('data_dir') !== '';
        for (const metric of chart.dashboardMetricNames()) {
          if (metric.startsWith('lapse_snapshot_last_')) continue;
          if (!durable && /^lapse_(wal|recovery)_/.test(metric)) continue;
          assert.ok(scraped.has(metric), `${metric} is not in lapsed's /metrics`);
        }
      });
    }
    await chart.check(`${name}: lapsed stops with exit status 0 on SIGTERM`, async () => {
      assert.equal(await stopLapsed(lapsed.child), 0);
    });
  }
  chart.finish();
}

main();
