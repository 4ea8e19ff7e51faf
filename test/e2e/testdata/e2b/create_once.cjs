// One E2B create -> first command -> kill, timed inside Node (its start is not counted); run by
// BenchmarkE2BCreateToFirstCommandBesideOurSDK (e2b_bench_test.go), alternated with our SDK.
// Prints {"timing": "create to first command", "ms"} and one check.
'use strict'
const path = require('node:path')
const { Sandbox } = require(path.join(process.env.E2B_SDK_DIR, 'node_modules', 'e2b'))

async function main() {
  const start = Date.now()
  const sbx = await Sandbox.create(process.env.TEMPLATE)
  const r = await sbx.commands.run('echo hello')
  const ms = Date.now() - start
  console.log(JSON.stringify({ timing: 'create to first command', ms }))
  console.log(JSON.stringify({ check: 'first command output', ok: r.stdout === 'hello\n', detail: r }))
  await sbx.kill()
}
main().catch((err) => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
