// Test support for the Node client's tests and example: a real lapsed as a
// child process (like testing/lapsed_process.cc), temporary directories,
// patience for waits on events, TLS material (testing/test_certs.sh) and
// --auth_file grants.
//
//   const lapsed = await LapsedProcess.start(process.env.LAPSED, ['--data-dir=' + dir]);
//   const client = new Client(lapsed.address);
//   ...
//   assert.equal(await lapsed.stop(), 0);     // SIGTERM, then the exit code
//   await lapsed.kill();                       // or SIGKILL
//   const again = await LapsedProcess.start(process.env.LAPSED, flags, lapsed.port);
//
// lapsed listens on 127.0.0.1:`port` (0: the kernel picks) with errors-only
// logging and a short shutdown grace, then the test's flags (which win); its
// port is read from its start line ("lapsed listening on ... (port N) ...").
'use strict';

const {execFileSync, spawn} = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

// How long a test waits for something that should happen at once.
const patienceMs = 30000;

// Rejects with `what` if `promise` has not settled within patienceMs.
function withPatience(promise, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${patienceMs} ms`)), patienceMs);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

// A fresh directory under $TMPDIR, removed when the process exits.
function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lapse-node-test-'));
  process.on('exit', () => fs.rmSync(dir, {recursive: true, force: true}));
  return dir;
}

// A test CA, server and client certificates in a fresh directory, made by
// testing/test_certs.sh: {dir, ca, serverCert, serverKey, clientCert,
// clientKey} (paths).
function makeCerts() {
  const dir = tempDir();
  execFileSync('bash', [path.join(__dirname, '..', 'test_certs.sh'), dir], {stdio: 'inherit'});
  const file = (name) => path.join(dir, name);
  return {dir, ca: file('ca.crt'), serverCert: file('server.crt'), serverKey: file('server.key'),
    clientCert: file('client.crt'), clientKey: file('client.key')};
}

// An --auth_file granting each token of `grants` ({token: 'permissions
// prefixes'}) in a fresh directory; resolves to its path.
function writeAuthFile(grants) {
  const file = path.join(tempDir(), 'auth');
  const lines = Object.entries(grants).map(([token, grant]) =>
    `token:sha256:${crypto.createHash('sha256').update(token).digest('hex')} ${grant}\n`);
  fs.writeFileSync(file, lines.join(''), {mode: 0o600});
  return file;
}

class LapsedProcess {
  constructor(child, port, stderr) {
    this.child = child;
    this.port = port;
    this.address = `127.0.0.1:${port}`;
    this.stderr = stderr;
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  // Resolves once lapsed printed its start line; rejects if it exits first
  // (e.g. a refused flag) or prints none within patienceMs.
  static start(lapsedPath, flags = [], port = 0) {
    const args = [`--listen=127.0.0.1:${port}`, '--log_level=error', '--shutdown_grace=200ms',
      ...flags];
    const child = spawn(lapsedPath, args, {stdio: ['ignore', 'pipe', 'pipe']});
    const stderr = [];
    child.stderr.on('data', (chunk) => stderr.push(chunk));
    const started = new Promise((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(
          `lapsed ${args.join(' ')} exited (${code}) before its start line: ${stderr.join('')}`)));
      const lines = readline.createInterface({input: child.stdout});
      lines.on('line', (line) => {
        const found = /listening on \S+ \(port (\d+)\)/.exec(line);
        if (found) resolve(new LapsedProcess(child, Number(found[1]), stderr));
      });
    });
    return withPatience(started, `start line from ${lapsedPath}`).catch((err) => {
      child.kill('SIGKILL');
      throw err;
    });
  }

  // SIGKILL: no shutdown, no message to clients; resolves once lapsed is gone.
  async kill() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await withPatience(this.exited, 'exit after SIGKILL');
  }

  // SIGTERM; resolves to the exit code (null when lapsed had to be killed).
  async stop() {
    if (this.child.exitCode !== null) return this.child.exitCode;
    this.child.kill('SIGTERM');
    try {
      return await withPatience(this.exited, 'exit after SIGTERM');
    } catch (err) {
      this.child.kill('SIGKILL');
      return null;
    }
  }
}

module.exports = {LapsedProcess, makeCerts, patienceMs, tempDir, withPatience, writeAuthFile};
