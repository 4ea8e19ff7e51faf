// Drives E2B's unmodified JS SDK against sandboxd's envd API; run by
// TestE2BSDKAgainstSandboxd (e2b_sdk_test.go). Prints one JSON line per
// check: {"check": name, "ok": bool, "detail": ...}; exits 1 on a crash.
//
// E2B_SDK_DIR: where `npm install e2b@<pinned>` put node_modules.
// E2B_SANDBOX_URL: sandboxd's envd address (the SDK sends every call there).
// FLOW_MODE: "debug" (Sandbox.create in debug mode: envd version 99.99.99,
// no token) or "token" (a Sandbox object as the control plane would make
// it: ENVD_VERSION and the access token ENVD_TOKEN).
'use strict'
const path = require('node:path')
const { Sandbox, CommandExitError, NotFoundError } = require(path.join(process.env.E2B_SDK_DIR, 'node_modules', 'e2b'))

const results = []
function check(name, ok, detail) {
  results.push(name)
  console.log(JSON.stringify({ check: name, ok: !!ok, detail: ok ? undefined : detail }))
}
async function expectReject(name, promise, test) {
  try {
    const v = await promise
    check(name, false, `resolved with ${JSON.stringify(v)}`)
  } catch (err) {
    check(name, test(err), `${err && err.name}: ${err && err.message}`)
  }
}
async function until(what, cond, ms = 10000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

async function open() {
  if (process.env.FLOW_MODE === 'debug') {
    return Sandbox.create({ debug: true })
  }
  return new Sandbox({
    sandboxId: 'sandbox-e2b-1',
    envdVersion: process.env.ENVD_VERSION,
    envdAccessToken: process.env.ENVD_TOKEN,
    sandboxUrl: process.env.E2B_SANDBOX_URL,
    debug: true,
  })
}

async function commands(sbx) {
  const r = await sbx.commands.run('echo out; echo err >&2')
  check('run: stdout, stderr, exit code', r.stdout === 'out\n' && r.stderr === 'err\n' && r.exitCode === 0, r)

  await expectReject('run: non-zero exit is a CommandExitError', sbx.commands.run('echo bad >&2; exit 3'),
    (e) => e instanceof CommandExitError && e.exitCode === 3 && e.stderr === 'bad\n')

  const chunks = []
  const s = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done', { onStdout: (d) => chunks.push(d) })
  check('run: onStdout streams', s.stdout === '1\n2\n3\n' && chunks.length >= 2 && chunks.join('') === '1\n2\n3\n', chunks)

  const envs = await sbx.commands.run('echo "$FOO"; pwd', { envs: { FOO: 'bar' }, cwd: '/' })
  check('run: envs and cwd', envs.stdout.startsWith('bar\n'), envs)

  const bg = await sbx.commands.run('sleep 30', { background: true, timeoutMs: 0 })
  const listed = await sbx.commands.list()
  check('background: listed', listed.some((p) => p.pid === bg.pid && p.cmd === '/bin/bash'), listed)
  check('background: kill', (await bg.kill()) === true, 'kill returned false')
  await expectReject('background: wait after kill', bg.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1)
  check('background: gone from the list', await until('gone', async () => !(await sbx.commands.list()).some((p) => p.pid === bg.pid)), 'still listed')
  check('kill of an ended process is false', (await sbx.commands.kill(bg.pid)) === false, 'kill returned true')

  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await cat.sendStdin('hello ')
  await sbx.commands.sendStdin(cat.pid, 'stdin\n')
  await cat.closeStdin()
  const catOut = await cat.wait()
  check('stdin: send and close', catOut.stdout === 'hello stdin\n', catOut)

  const later = await sbx.commands.run('sleep 1; echo later', { background: true })
  await later.disconnect()
  const again = await sbx.commands.connect(later.pid)
  const laterOut = await again.wait()
  check('connect: re-attach after disconnect', laterOut.stdout.includes('later') && laterOut.exitCode === 0, laterOut)
}

async function files(sbx) {
  const info = await sbx.files.write('/dir/a.txt', 'hello')
  check('files: write', info.path === '/dir/a.txt' && info.name === 'a.txt', info)
  check('files: read text', (await sbx.files.read('/dir/a.txt')) === 'hello', 'content differs')
  const bytes = await sbx.files.read('/dir/a.txt', { format: 'bytes' })
  check('files: read bytes', Buffer.from(bytes).toString() === 'hello', bytes)
  const many = await sbx.files.write([{ path: '/dir/b.txt', data: 'b' }, { path: '/dir/sub/c.txt', data: new Uint8Array([99]) }])
  check('files: write many', many.length === 2 && many[1].path === '/dir/sub/c.txt', many)
  const gz = await sbx.files.write('/dir/gz.txt', 'zipped', { gzip: true })
  check('files: write gzip (octet-stream)', gz.path === '/dir/gz.txt' && (await sbx.files.read('/dir/gz.txt', { gzip: true })) === 'zipped', gz)
  await sbx.files.remove('/dir/gz.txt')
  const ls = (await sbx.files.list('/dir')).map((e) => `${e.name}:${e.type}`).sort()
  check('files: list', JSON.stringify(ls) === JSON.stringify(['a.txt:file', 'b.txt:file', 'sub:dir']), ls)
  const deep = await sbx.files.list('/dir', { depth: 2 })
  check('files: list depth 2', deep.some((e) => e.path === '/dir/sub/c.txt'), deep)
  check('files: makeDir', (await sbx.files.makeDir('/newdir/x')) === true, 'makeDir returned false')
  check('files: makeDir existing', (await sbx.files.makeDir('/newdir/x')) === false, 'makeDir returned true')
  check('files: exists', (await sbx.files.exists('/dir/a.txt')) && !(await sbx.files.exists('/nope')), 'exists wrong')
  const gi = await sbx.files.getInfo('/dir/a.txt')
  check('files: getInfo', gi.type === 'file' && gi.size === 5 && gi.modifiedTime instanceof Date, gi)
  const mv = await sbx.files.rename('/dir/a.txt', '/moved/a.txt')
  check('files: rename', mv.path === '/moved/a.txt', mv)
  await sbx.files.remove('/moved')
  check('files: remove', !(await sbx.files.exists('/moved/a.txt')), 'still there')
  await expectReject('files: missing is NotFoundError', sbx.files.getInfo('/nope'), (e) => e instanceof NotFoundError)
  await expectReject('files: read outside the root refused', sbx.files.read('/../../etc/passwd'), (e) => e && !String(e.message).includes('root:'))
}

async function watch(sbx) {
  await sbx.files.makeDir('/w')
  const events = []
  const h = await sbx.files.watchDir('/w', (e) => events.push(e), { recursive: true })
  await sbx.files.write('/w/x.txt', 'x')
  const seen = await until('event', async () => events.some((e) => e.name === 'x.txt'))
  await h.stop()
  check('watchDir: events', seen && events.some((e) => e.name === 'x.txt' && (e.type === 'create' || e.type === 'write')), events)
}

async function pty(sbx) {
  let out = ''
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += Buffer.from(d).toString() } })
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; exit\n'))
  const r = await h.wait().catch((e) => e)
  check('pty: input, resize, output', out.includes('30 100') && r.exitCode === 0, { out, exitCode: r.exitCode })
}

async function urls(sbx) {
  if (process.env.FLOW_MODE !== 'token') return
  await sbx.files.write('/signed.txt', 'signed content')
  const res = await fetch(await sbx.downloadUrl('/signed.txt'))
  check('downloadUrl: signed GET', res.status === 200 && (await res.text()) === 'signed content', res.status)
  const form = new FormData()
  form.append('file', new Blob(['uploaded']), 'up.txt')
  const up = await fetch(await sbx.uploadUrl('/up.txt'), { method: 'POST', body: form })
  check('uploadUrl: signed POST', up.status === 200 && (await sbx.files.read('/up.txt')) === 'uploaded', up.status)
  const bare = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/signed.txt`)
  check('files: no token, no signature is 401', bare.status === 401, bare.status)
}

async function main() {
  const sbx = await open()
  check('isRunning (GET /health)', await sbx.isRunning(), 'not running')
  await commands(sbx)
  await files(sbx)
  await watch(sbx)
  await pty(sbx)
  await urls(sbx)
}

main().catch((err) => {
  console.log(JSON.stringify({ check: 'flow crashed after ' + (results.at(-1) || 'nothing'), ok: false, detail: String(err && err.stack) }))
  process.exit(1)
})
