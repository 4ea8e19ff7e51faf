// Drives E2B's unmodified JS SDK against the local cluster: the router's E2B port serves both
// the REST API (E2B_API_URL) and envd (E2B_SANDBOX_URL). Run by TestE2BSDKAgainstTheCluster
// (e2b_test.go). Prints one JSON line per check, {"check", "ok", "detail"}, and timings as
// {"timing", "ms"}; exits 1 on a crash.
//
// E2B_SDK_DIR: where `npm install e2b@<pinned>` put node_modules.
// E2B_API_KEY: tenant A's key; TEMPLATE: A's template (a warm pool of it is ready).
// OTHER_KEY, OTHER_TEMPLATE: tenant B's key and template; NO_RIGHTS_KEY: a key of A's namespace
// whose ServiceAccount holds no rights; RUN: a value unique to this run, put in metadata.
'use strict'
const path = require('node:path')
const e2b = require(path.join(process.env.E2B_SDK_DIR, 'node_modules', 'e2b'))
const { Sandbox, CommandExitError, NotFoundError, AuthenticationError } = e2b

function check(name, ok, detail) {
  console.log(JSON.stringify({ check: name, ok: !!ok, detail: ok ? undefined : detail }))
}
function timing(name, ms) {
  console.log(JSON.stringify({ timing: name, ms }))
}
async function expectReject(name, promise, test) {
  try {
    const v = await promise
    check(name, false, `resolved with ${JSON.stringify(v)}`)
  } catch (err) {
    check(name, test(err), `${err && err.name}: ${err && err.message}`)
  }
}
async function until(cond, ms = 30000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await new Promise((r) => setTimeout(r, 200))
  }
  return false
}
const env = process.env

async function create() {
  const start = Date.now()
  const sbx = await Sandbox.create(env.TEMPLATE, { metadata: { run: env.RUN, flow: 'cluster' }, envs: { GREETING: 'hello' }, timeoutMs: 300_000 })
  timing('create', Date.now() - start)
  const first = await sbx.commands.run('echo "$GREETING"')
  timing('create to first command', Date.now() - start)
  check('create: a warm sandbox runs a command with the create envs', first.stdout === 'hello\n' && first.exitCode === 0, first)
  return sbx
}

async function commands(sbx) {
  const r = await sbx.commands.run('echo out; echo err >&2')
  check('run: stdout, stderr, exit code', r.stdout === 'out\n' && r.stderr === 'err\n' && r.exitCode === 0, r)
  await expectReject('run: a non-zero exit is a CommandExitError', sbx.commands.run('exit 3'),
    (e) => e instanceof CommandExitError && e.exitCode === 3)
  const chunks = []
  const s = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done', { onStdout: (d) => chunks.push(d) })
  check('run: onStdout streams', s.stdout === '1\n2\n3\n' && chunks.length >= 2, chunks)
  const bg = await sbx.commands.run('sleep 60', { background: true, timeoutMs: 0 })
  check('background: listed', (await sbx.commands.list()).some((p) => p.pid === bg.pid), 'not listed')
  check('background: kill', (await bg.kill()) === true, 'kill returned false')
  await expectReject('background: wait after kill', bg.wait(), (e) => e instanceof CommandExitError)
  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await cat.sendStdin('through stdin\n')
  await cat.closeStdin()
  const catOut = await cat.wait()
  check('stdin: send and close', catOut.stdout === 'through stdin\n', catOut)
}

async function files(sbx) {
  const info = await sbx.files.write('/dir/a.txt', 'hello')
  check('files: write', info.path === '/dir/a.txt', info)
  check('files: read', (await sbx.files.read('/dir/a.txt')) === 'hello', 'content differs')
  check('files: makeDir', (await sbx.files.makeDir('/dir/sub')) === true, 'makeDir returned false')
  const ls = (await sbx.files.list('/dir')).map((e) => `${e.name}:${e.type}`).sort()
  check('files: list', JSON.stringify(ls) === JSON.stringify(['a.txt:file', 'sub:dir']), ls)
  await sbx.files.remove('/dir/a.txt')
  check('files: remove', !(await sbx.files.exists('/dir/a.txt')), 'still there')
  const events = []
  const h = await sbx.files.watchDir('/dir', (e) => events.push(e))
  await sbx.files.write('/dir/w.txt', 'w')
  const seen = await until(async () => events.some((e) => e.name === 'w.txt'), 10000)
  await h.stop()
  check('files: watchDir sees a write', seen, events)
}

async function lifecycle(sbx) {
  await sbx.setTimeout(600_000)
  const info = await sbx.getInfo()
  check('setTimeout: endAt moves', info.endAt.getTime() > Date.now() + 500_000 && info.state === 'running', info)
  const listed = await Sandbox.list({ query: { metadata: { run: env.RUN } } }).nextItems()
  check('list: by metadata', listed.length === 1 && listed[0].sandboxId === sbx.sandboxId && listed[0].metadata.flow === 'cluster', listed)

  await sbx.files.write('/home/keep.txt', 'kept across pause')
  // E2B's pause keeps memory: a process started before the pause runs on after the resume.
  const held = await sbx.commands.run('while :; do sleep 1; done', { background: true, timeoutMs: 0 })
  await sbx.pause()
  const paused = await Sandbox.getInfo(sbx.sandboxId)
  check('pause: the sandbox is paused', paused.state === 'paused', paused)
  const resumed = await Sandbox.connect(sbx.sandboxId)
  check('resume: the file on the volume is kept', (await resumed.files.read('/home/keep.txt')) === 'kept across pause', 'content differs')
  const alive = await resumed.commands.run(`kill -0 ${held.pid} && echo alive`).catch((e) => e)
  check('resume: the process started before the pause runs on (memory kept)', alive.stdout === 'alive\n', alive)
  const procs = await resumed.commands.list()
  check('resume: sandboxd still knows the process', procs.some((p) => p.pid === held.pid), procs)

  // E2B's fork: two new sandboxes, each running the parent's process; another tenant cannot.
  const forks = await Sandbox.fork(resumed.sandboxId, { count: 2 })
  check('fork: two sandboxes', forks.length === 2 && forks.every((f) => f instanceof Sandbox), forks.map(String))
  for (const f of forks.filter((f) => f instanceof Sandbox)) {
    check('fork: an id of its own', f.sandboxId !== resumed.sandboxId, f.sandboxId)
    const a = await f.commands.run(`kill -0 ${held.pid} && echo alive`).catch((e) => e)
    check("fork: the parent's process runs in the fork", a.stdout === 'alive\n', a)
    await f.kill()
  }
  await expectReject("another tenant's key cannot fork the sandbox", Sandbox.fork(resumed.sandboxId, { apiKey: env.OTHER_KEY }),
    (e) => e instanceof NotFoundError)
  return resumed
}

async function isolation(sbx) {
  await expectReject('a wrong key is refused', Sandbox.list({ apiKey: 'e2b_not-a-key' }).nextItems(), (e) => e instanceof AuthenticationError)
  await expectReject('a key without rights cannot create', Sandbox.create(env.TEMPLATE, { apiKey: env.NO_RIGHTS_KEY }),
    (e) => /403|forbidden/i.test(String(e.message)))
  await expectReject("another tenant's key does not find the sandbox", Sandbox.getInfo(sbx.sandboxId, { apiKey: env.OTHER_KEY }),
    (e) => e instanceof NotFoundError)
  check("another tenant's key cannot kill it", (await Sandbox.kill(sbx.sandboxId, { apiKey: env.OTHER_KEY })) === false, 'kill returned true')
  check('it still runs', (await sbx.isRunning()) === true, 'not running')

  const other = await Sandbox.create(env.OTHER_TEMPLATE, { apiKey: env.OTHER_KEY })
  check("control: the other tenant runs its own sandbox", (await other.commands.run('echo mine')).stdout === 'mine\n', 'no output')
  const forged = new Sandbox({ sandboxId: sbx.sandboxId, envdVersion: other.envdVersion, envdAccessToken: other.envdAccessToken,
    sandboxUrl: env.E2B_SANDBOX_URL })
  await expectReject("another tenant's access token does not open the sandbox", forged.commands.run('id'), (e) => e && e.name !== 'CommandExitError')
  await other.kill()
}

async function main() {
  let sbx = await create()
  await commands(sbx)
  await files(sbx)
  sbx = await lifecycle(sbx)
  await isolation(sbx)
  check('kill', (await sbx.kill()) === true, 'kill returned false')
  check('kill: gone', await until(async () => {
    try {
      await Sandbox.getInfo(sbx.sandboxId)
      return false
    } catch (e) {
      return e instanceof NotFoundError
    }
  }), 'still found')
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
