#!/usr/bin/env node
// Launches the native server shipped beside this file, as packages that wrap a native
// binary do: stdio passed through, its exit status returned.
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const server = path.join(__dirname, 'mcpwarden-fixture');
const r = spawnSync(server, process.argv.slice(2), { stdio: 'inherit' });
if (r.error) {
  process.stderr.write(`mcpwarden-hostile-fixture: cannot start ${server}: ${r.error.message}\n`);
  process.exit(127);
}
process.exit(r.status === null ? 128 + (require('node:os').constants.signals[r.signal] || 0) : r.status);
