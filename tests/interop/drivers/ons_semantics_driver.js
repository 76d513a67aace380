#!/usr/bin/env node
// Drive ali-ons@3.12.0 through the retry → dead-letter flow for the semantics interop tests.
// Run with NODE_PATH pointing at the installed node_modules. One JSON event per stdout line.
//
//   consume-fail --namesrv A --group G --topic T --expect N --marker M --max-reconsume K
//       [--timeout S]
//       A clustering consumer with maxReconsumeTimes K whose handler always throws. Prints
//       {"event": "recv", ...} per delivery. Once each of N marker bodies has been delivered
//       with reconsumeTimes == K (its last delivery: ali-ons then sends it back with
//       reconsumeTimes ≥ max, and the broker puts it in %DLQ%G), it waits for those sends
//       back to finish and stops.
//
// Only 127.0.0.1 addresses are ever passed in.
'use strict';

const { Consumer } = require('ali-ons');

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

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event, t: Date.now() }, fields)) + '\n');
}

const logger = process.env.ONS_VERBOSE ? console : {
  info() {}, debug() {}, warn(...a) { console.error('[ons-warn]', ...a); },
  error(...a) { console.error('[ons-error]', ...a); },
};

async function consumeFail() {
  const expect = Number(args.expect);
  const max = Number(args['max-reconsume']);
  const marker = args.marker || '';
  const consumer = new Consumer({
    consumerGroup: args.group,
    nameSrv: args.namesrv,
    httpclient: { request() { throw new Error('no HTTP name-server lookup in tests'); } },
    logger,
    instanceName: `onsfail${process.pid}`,
    maxReconsumeTimes: max,
  });
  // each failed delivery is reported as an error event: expected here, so not printed
  consumer.on('error', err => {
    if (!/on purpose/.test(err && err.message)) console.error('[consumer-error]', err && err.message);
  });
  const last = new Set();
  let finish;
  const done = new Promise(r => { finish = r; });
  await consumer.ready();
  consumer.subscribe(args.topic, '*', async msg => {
    const body = msg.body.toString('utf8');
    emit('recv', {
      topic: msg.topic, body, id: msg.msgId, reconsume_times: msg.reconsumeTimes,
      origin_id: msg.originMessageId || null, props: msg.properties,
    });
    if (body.startsWith(marker) && msg.reconsumeTimes >= max) {
      last.add(body);
      // let this delivery's send-back (to the DLQ) go out before stopping
      if (last.size >= expect) setTimeout(finish, 2000);
    }
    throw new Error('failing every delivery on purpose');
  });
  emit('started', {});
  const timer = setTimeout(finish, Number(args.timeout || 45) * 1000);
  await done;
  clearTimeout(timer);
  emit('done', { last_deliveries: last.size });
  await consumer.close();
  emit('stopped', {});
  return last.size >= expect ? 0 : 1;
}

if (args._[0] !== 'consume-fail') {
  console.error('usage: ons_semantics_driver.js consume-fail --namesrv A --group G --topic T ...');
  process.exit(2);
}
consumeFail().then(rc => process.exit(rc), err => {
  console.error(err && err.stack || err);
  process.exit(2);
});
