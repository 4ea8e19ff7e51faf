// E2B create -> first command -> kill, timed inside Node; run by
// BenchmarkE2BCreateToFirstCommandBesideOurSDK (e2b_bench_test.go), alternated with our Go SDK.
// The Go SDK's client lives across rounds, as an agent's does, so the Node process is warmed up
// the same way first: one untimed create -> command -> kill loads Node's HTTP client (undici, on
// the first fetch) and the SDK's Connect transport, and opens its connections. The second round
// is timed: {"timing": "create"} and {"timing": "create to first command"}, and one check.
'use strict'
const path = require('node:path')
const { Sandbox } = require(path.join(process.env.E2B_SDK_DIR, 'node_modules', 'e2b'))

async function once(timed) {
  const start = Date.now()
  const sbx = await Sandbox.create(process.env.TEMPLATE)
  const created = Date.now() - start
  const r = await sbx.commands.run('echo hello')
  const first = Date.now() - start
  await sbx.kill()
  if (timed) {
    console.log(JSON.stringify({ timing: 'create', ms: created }))
    console.log(JSON.stringify({ timing: 'create to first command', ms: first }))
  }
  return r
}

async function main() {
  await once(false)
  const r = await once(true)
  console.log(JSON.stringify({ check: 'first command output', ok: r.stdout === 'hello\n', detail: r }))
}
main().catch((err) => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
