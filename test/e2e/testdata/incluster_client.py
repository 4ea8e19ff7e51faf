# An integrator's client inside a pod, as the upstream SDKs behave there: the Kubernetes API with
# the pod's ServiceAccount token, the router with no token at all. Written for the e2e tests from
# the integrators' documented flows in docs/integrations.md (not upstream's code). Usage:
#   python3 - <flow> <namespace> <name> <router URL> [<source IP>]
# flow: agent-session  create a claim, wait on it, patch the Sandbox's TTL, execute, delete the claim
#       task-worker    create a cold claim, wait on its Sandbox (no claim reads), execute, delete
#       execute  only POST /execute to the Sandbox <name> (optionally from <source IP>)
# The last line printed is JSON: {"code": <router's status>, "body": <router's body>}.
import http.client, json, os, ssl, sys, time, urllib.error, urllib.parse, urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount/"
flow, ns, name, router = sys.argv[1:5]
source = sys.argv[5] if len(sys.argv) > 5 else None


def kube(method, path, body=None, ctype="application/json"):
    api = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
    token = open(SA + "token").read().strip()
    req = urllib.request.Request(api + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": ctype,
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=SA + "ca.crt"), timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode()}


def must(what, got, *codes):
    if got[0] not in codes:
        sys.exit("%s: %s %s" % (what, got[0], got[1]))
    return got[1]


def ready(obj):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def wait(what, get, done):
    for _ in range(600):
        obj = get()
        if done(obj):
            return obj
        time.sleep(0.2)
    sys.exit("timed out waiting for " + what)


def execute(sandbox, command):
    u = urllib.parse.urlsplit(router)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=20,
                                      source_address=(source, 0) if source else None)
    conn.request("POST", "/execute", json.dumps({"command": command}),
                 {"Content-Type": "application/json", "X-Sandbox-ID": sandbox,
                  "X-Sandbox-Namespace": ns, "X-Sandbox-Port": "8888"})
    r = conn.getresponse()
    return {"code": r.status, "body": r.read().decode()}


claims = "/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/%s/sandboxclaims" % ns
sandboxes = "/apis/agents.x-k8s.io/v1alpha1/namespaces/%s/sandboxes" % ns
claim = {"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxClaim",
         "metadata": {"name": name, "labels": {"app": "in-cluster-client"}},
         "spec": {"sandboxTemplateRef": {"name": "cognition-sandbox"}}}
if flow == "agent-session":
    must("create claim", kube("POST", claims, claim), 201)
    got = wait("claim ready", lambda: must("get claim", kube("GET", claims + "/" + name), 200),
               lambda c: ready(c) and c.get("status", {}).get("sandbox", {}).get("name"))
    sandbox = got["status"]["sandbox"]["name"]
    ttl = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
    must("TTL patch", kube("PATCH", sandboxes + "/" + sandbox, {"spec": {"shutdownTime": ttl}},
                           "application/merge-patch+json"), 200)
elif flow == "task-worker":
    claim["spec"]["warmpool"] = "none"
    must("create claim", kube("POST", claims, claim), 201)
    sandbox = name
    wait("sandbox ready", lambda: kube("GET", sandboxes + "/" + name)[1], ready)
else:
    sandbox = name
result = execute(sandbox, "echo hello from $(hostname)")
if flow != "execute":
    must("delete claim", kube("DELETE", claims + "/" + name), 200, 202)
print(json.dumps(result))
