// An OTLP/HTTP receiver for mcpwarden's export tests, decoding what it receives as an
// OpenTelemetry Collector would: protobuf with the OpenTelemetry project's generated OTLP
// types (@opentelemetry/otlp-transformer's protobufjs root, the one its SDK encodes with),
// JSON as OTLP/JSON, gzip'd or not. Every log record, span and metric it accepts is appended
// to --out as one JSON line, normalised (ids as hex, attributes as an object), together with
// what it found wrong with it by the MCP semantic conventions ("violations").
//
//   node receiver.js --out FILE --port-file FILE [--port N] [--fail N --fail-status 429
//        --retry-after S] [--stall] [--tls-cert PEM --tls-key PEM]
//
// --fail N answers the first N requests with --fail-status (and Retry-After); --stall
// accepts requests and never answers them (a receiver that hangs). Binds 127.0.0.1 only.
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const zlib = require('zlib');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');

const args = {};
for (let i = 2; i < process.argv.length; i += 1) {
  const a = process.argv[i];
  if (a === '--stall') args.stall = true;
  else args[a.replace(/^--/, '')] = process.argv[++i];
}
let failLeft = Number(args.fail || 0);

const proto = root.opentelemetry.proto.collector;
const types = {
  '/v1/traces': proto.trace.v1.ExportTraceServiceRequest,
  '/v1/logs': proto.logs.v1.ExportLogsServiceRequest,
  '/v1/metrics': proto.metrics.v1.ExportMetricsServiceRequest,
};

const hex = (b) => (b == null ? '' : Buffer.from(b).toString('hex'));
const num = (v) => (v == null ? 0 : typeof v === 'object' && 'toString' in v ? String(v) : String(v));

// AnyValue, protobuf-decoded or OTLP/JSON, as a plain value.
function anyValue(v) {
  if (v == null) return null;
  if (v.stringValue != null) return v.stringValue;
  if (v.boolValue != null) return v.boolValue;
  if (v.intValue != null) return Number(num(v.intValue));
  if (v.doubleValue != null) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values || []).map(anyValue);
  if (v.kvlistValue) return attrs(v.kvlistValue.values);
  if (v.bytesValue != null) return hex(v.bytesValue);
  return null;
}
function attrs(list) {
  const out = {};
  for (const kv of list || []) out[kv.key] = anyValue(kv.value);
  return out;
}
// JSON ids are hex already; protobuf ids are bytes.
const id = (v, json) => (json ? (v || '') : hex(v));

// What the conventions ask of a request's span (OpenTelemetry semantic conventions for MCP).
function spanViolations(s) {
  const v = [];
  const a = s.attributes;
  if (s.attributes['mcp.session.id'] == null) v.push('no mcp.session.id');
  if (!s.name.startsWith('mcpwarden.session')) {
    if (!a['mcp.method.name']) v.push('no mcp.method.name');
    const target = a['gen_ai.tool.name'];
    const want = target ? `${a['mcp.method.name']} ${target}` : a['mcp.method.name'];
    if (s.name !== want) v.push(`span name '${s.name}' is not '${want}'`);
    if (a['mcp.method.name'] === 'tools/call' && !target) v.push('tools/call without gen_ai.tool.name');
    if (a['jsonrpc.request.id'] == null) v.push('no jsonrpc.request.id');
    if (s.status.code === 2 && !a['error.type']) v.push('error without error.type');
  }
  if (s.traceId.length !== 32 || s.spanId.length !== 16) v.push('bad ids');
  if (BigInt(s.end) < BigInt(s.start)) v.push('ends before it starts');
  return v;
}

function normalise(path, req, json) {
  const items = [];
  const resourceKey = { '/v1/traces': 'resourceSpans', '/v1/logs': 'resourceLogs', '/v1/metrics': 'resourceMetrics' }[path];
  for (const rs of req[resourceKey] || []) {
    const resource = attrs((rs.resource || {}).attributes);
    for (const ss of rs.scopeSpans || rs.scopeLogs || rs.scopeMetrics || []) {
      const scope = (ss.scope || {}).name;
      for (const s of ss.spans || []) {
        const span = {
          signal: 'span', scope, resource, traceId: id(s.traceId, json), spanId: id(s.spanId, json),
          parentSpanId: id(s.parentSpanId, json), name: s.name, kind: s.kind,
          start: num(s.startTimeUnixNano), end: num(s.endTimeUnixNano), attributes: attrs(s.attributes),
          events: (s.events || []).map((e) => ({ name: e.name, time: num(e.timeUnixNano), attributes: attrs(e.attributes) })),
          status: { code: (s.status || {}).code || 0, message: (s.status || {}).message || '' },
        };
        span.violations = spanViolations(span);
        items.push(span);
      }
      for (const l of ss.logRecords || []) {
        const a = attrs(l.attributes);
        const log = {
          signal: 'log', scope, resource, time: num(l.timeUnixNano), severityNumber: l.severityNumber,
          // The generated types of this decoder predate LogRecord.event_name (field 12), which
          // they skip as unknown; the event.name attribute carries the same name.
          eventName: l.eventName || a['event.name'], body: anyValue(l.body), attributes: a, violations: [],
        };
        if (!a['log.record.uid']) log.violations.push('no log.record.uid');
        items.push(log);
      }
      for (const m of ss.metrics || []) {
        const data = m.histogram || m.sum || m.gauge || {};
        items.push({
          signal: 'metric', scope, resource, name: m.name, unit: m.unit,
          type: m.histogram ? 'histogram' : m.sum ? 'sum' : 'other',
          temporality: data.aggregationTemporality,
          points: (data.dataPoints || []).map((p) => ({
            attributes: attrs(p.attributes), count: num(p.count), sum: p.sum, value: p.asDouble,
            bucketCounts: (p.bucketCounts || []).map(num),
            start: num(p.startTimeUnixNano), time: num(p.timeUnixNano),
          })),
          violations: [],
        });
      }
    }
  }
  return items;
}

function handle(req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (args.stall) return; // never answered
    if (failLeft > 0) {
      failLeft -= 1;
      const headers = args['retry-after'] ? { 'Retry-After': args['retry-after'] } : {};
      fs.appendFileSync(args.out, JSON.stringify({ signal: 'refused', status: Number(args['fail-status'] || 503), at: Date.now() }) + '\n');
      res.writeHead(Number(args['fail-status'] || 503), headers);
      return res.end();
    }
    const type = types[req.url];
    if (!type) { res.writeHead(404); return res.end(); }
    let body = Buffer.concat(chunks);
    try {
      if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      const json = (req.headers['content-type'] || '').startsWith('application/json');
      const decoded = json ? JSON.parse(body.toString('utf8')) : type.toObject(type.decode(body), { longs: String, defaults: false });
      const lines = normalise(req.url, decoded, json).map((i) => JSON.stringify({ encoding: json ? 'json' : 'protobuf', ...i }));
      if (lines.length) fs.appendFileSync(args.out, lines.join('\n') + '\n');
      const answer = json ? Buffer.from('{}') : Buffer.alloc(0);
      res.writeHead(200, { 'Content-Type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(answer);
    } catch (e) {
      fs.appendFileSync(args.out, JSON.stringify({ signal: 'undecodable', path: req.url, error: String(e) }) + '\n');
      res.writeHead(400);
      res.end();
    }
  });
}

const server = args['tls-cert']
  ? https.createServer({ cert: fs.readFileSync(args['tls-cert']), key: fs.readFileSync(args['tls-key']) }, handle)
  : http.createServer(handle);
server.listen(Number(args.port || 0), '127.0.0.1', () => {
  const tmp = `${args['port-file']}.tmp`;
  fs.writeFileSync(tmp, String(server.address().port));
  fs.renameSync(tmp, args['port-file']);
});
process.on('SIGTERM', () => process.exit(0));
