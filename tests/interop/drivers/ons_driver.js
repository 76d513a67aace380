#!/usr/bin/env node
// Drive the real pure-JavaScript RocketMQ client (npm ali-ons@3.12.0) for the interop tests.
// Run with NODE_PATH pointing at the node_modules the test fixture installed. Every event is
// one JSON line on stdout; the test reads them and judges. Commands:
//
//   produce --namesrv A --group G --plan PLAN.json
//       PLAN is a list of {"topic", "body", "tags"?, "keys"?, "props"?: {k: v}}.
//       Prints {"event": "sent", i, status, msg_id, queue_id, offset} per message.
//   consume --namesrv A --group G --topic T --expect N --marker M [--expression E]
//       [--broadcast] [--from-first] [--fail-first] [--timeout S]
//       Prints {"event": "recv", ...} per delivered message (all its properties included) and
//       stops once N distinct bodies starting with M have arrived, or at the timeout.
//   stream --namesrv A --group G --topic T --marker M --stop-file F
//       Sends bodies M000000, M000001, ... one after another until the file F exists; a failed
//       send is reported and the next body goes out (a failover test's producer). Prints
//       {"event": "sent", i, body, ...} or {"event": "send_error", i, body, error}.
//   consume ... --stop-file F: run until F exists (instead of until N bodies arrived).
//   All take [--poll-namesrv-ms MS]: the route refresh period (ali-ons' pollNameServerInteval).
//   All take [--access-key AK --secret-key SK]: ACL credentials (accessKeyId/accessKeySecret).
//
// Only 127.0.0.1 addresses are ever passed in.
'use strict';

const fs = require('fs');
const { Producer, Consumer, Message } = require('ali-ons');

function parseArgs(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) { out._.push(a); continue; }
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) { out[a.slice(2)] = true; } else { out[a.slice(2)] = next; i++; }
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
const command = args._[0];

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event, t: Date.now() }, fields)) + '\n');
}

// ali-ons logs through the logger it is given; keep errors (to stderr, where the test shows
// them on failure) and drop the chatter unless ONS_VERBOSE is set.
const logger = process.env.ONS_VERBOSE ? console : {
  info() {}, debug() {}, warn(...a) { console.error('[ons-warn]', ...a); },
  error(...a) { console.error('[ons-error]', ...a); },
};

function clientOptions() {
  return Object.assign({
    nameSrv: args.namesrv,
    // ali-ons insists on an http client even with a fixed name server; it would only be used
    // to look name servers up over HTTP, which these tests never do.
    httpclient: { request() { throw new Error('no HTTP name-server lookup in tests'); } },
    logger,
    // distinct client ids per process, so two consumers of one group are two members
    instanceName: `ons${process.pid}`,
  }, args['poll-namesrv-ms'] ? {
    // how often the client re-reads its topics' routes (ali-ons' own default 30 s)
    pollNameServerInteval: Number(args['poll-namesrv-ms']),
  } : {}, args['access-key'] ? {
    // ACL: ali-ons signs every request (lib/channel.js beforeRequest) when it has both.
    accessKeyId: args['access-key'],
    accessKeySecret: args['secret-key'],
  } : {});
}

async function produce() {
  const plan = JSON.parse(fs.readFileSync(args.plan, 'utf8'));
  const producer = new Producer(Object.assign({ producerGroup: args.group }, clientOptions()));
  await producer.ready();
  let failures = 0;
  for (let i = 0; i < plan.length; i++) {
    const item = plan[i];
    const msg = new Message(item.topic, item.tags || null, Buffer.from(item.body, 'utf8'));
    if (!item.tags) delete msg.properties.TAGS;
    if (item.keys) msg.keys = item.keys.split(' ');
    for (const [ k, v ] of Object.entries(item.props || {})) msg.properties[k] = v;
    try {
      const r = await producer.send(msg);
      emit('sent', { i, status: r.sendStatus, msg_id: r.msgId, queue_id: Number(r.messageQueue.queueId),
        offset: Number(r.queueOffset) });
    } catch (err) {
      failures++;
      emit('send_error', { i, error: String(err && err.stack || err) });
    }
  }
  await producer.close();
  emit('done', { failures });
  return failures ? 1 : 0;
}

async function stream() {
  const producer = new Producer(Object.assign({ producerGroup: args.group }, clientOptions()));
  await producer.ready();
  let failures = 0;
  let i = 0;
  while (!fs.existsSync(args['stop-file'])) {
    const body = args.marker + String(i).padStart(6, '0');
    const msg = new Message(args.topic, null, Buffer.from(body, 'utf8'));
    delete msg.properties.TAGS;
    try {
      const r = await producer.send(msg);
      emit('sent', { i, body, status: r.sendStatus, msg_id: r.msgId, queue_id: Number(r.messageQueue.queueId),
        offset: Number(r.queueOffset) });
    } catch (err) {
      failures++;
      emit('send_error', { i, body, error: String(err && err.message || err) });
      // a send can fail at once while the route names no live broker: a paced loop
      await new Promise(r => setTimeout(r, 50));
    }
    i++;
  }
  await producer.close();
  emit('done', { failures, sends: i });
  return 0;
}

async function consume() {
  const expect = Number(args.expect);
  const marker = args.marker || '';
  const options = Object.assign({ consumerGroup: args.group, isBroadcast: !!args.broadcast }, clientOptions());
  if (args['from-first']) options.consumeFromWhere = 'CONSUME_FROM_FIRST_OFFSET';
  const consumer = new Consumer(options);
  consumer.on('error', err => console.error('[consumer-error]', err && err.message));
  const seen = new Set();
  const failedOnce = new Set();
  let finish;
  const done = new Promise(r => { finish = r; });
  const started = Date.now();
  await consumer.ready();
  consumer.subscribe(args.topic, args.expression || '*', async msg => {
    const body = msg.body.toString('utf8');
    emit('recv', {
      topic: msg.topic, tags: msg.tags === undefined ? null : msg.tags, keys: msg.keys === undefined ? null : msg.keys,
      body, id: msg.msgId, queue_id: msg.queueId, queue_offset: Number(msg.queueOffset),
      reconsume_times: msg.reconsumeTimes, commit_log_offset: Number(msg.commitLogOffset),
      born_timestamp: Number(msg.bornTimestamp), store_timestamp: Number(msg.storeTimestamp),
      sys_flag: msg.sysFlag, props: msg.properties, origin_id: msg.originMessageId || null,
    });
    if (body.startsWith(marker)) {
      if (args['fail-first'] && !failedOnce.has(body)) {
        // first delivery fails: ali-ons sends it back (CONSUMER_SEND_MSG_BACK) for a retry
        failedOnce.add(body);
        throw new Error('failing the first delivery on purpose');
      }
      seen.add(body);
      if (!args['stop-file'] && seen.size >= expect) finish();
    }
  });
  emit('started', {});
  // a failover test's consumer runs until the test has seen every acknowledged body
  const poll = args['stop-file'] ? setInterval(() => { if (fs.existsSync(args['stop-file'])) finish(); }, 200) : null;
  const timer = setTimeout(finish, Number(args.timeout || 45) * 1000);
  await done;
  clearTimeout(timer);
  if (poll) clearInterval(poll);
  emit('done', { received: seen.size, seconds: (Date.now() - started) / 1000 });
  await consumer.close();
  emit('stopped', {});
  return seen.size >= (args['stop-file'] ? 1 : expect) ? 0 : 1;
}

const commands = { produce, consume, stream };
if (!commands[command]) {
  console.error(`usage: ons_driver.js produce|consume|stream --namesrv A --group G ...`);
  process.exit(2);
}
// process.exit() drops whatever stdout still buffers for a pipe (writes to pipes are
// asynchronous in Node), so leave only once every event line has been handed over.
function exitAfterFlush(rc) {
  if (process.stdout.writableLength === 0) process.exit(rc);
  process.stdout.once('drain', () => process.exit(rc));
}

commands[command]().then(exitAfterFlush, err => {
  console.error(err && err.stack || err);
  exitAfterFlush(2);
});
