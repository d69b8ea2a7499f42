package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/server/kubectltest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// e2eToken is the bootstrap admin token of the kubectl e2e server.
const e2eToken = "e2e-bootstrap-token-0123456789abcdef"

// kubectlPath is the pinned kubectl the e2e tests drive.
func kubectlPath(t *testing.T) string { return kubectltest.Binary(t) }

// kubectl runs the real kubectl against one server with a kubeconfig made by `wheelhouse kubeconfig`.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
	env        []string // extra environment of the next commands
}

func (k *kubectl) run(stdin string, args ...string) (string, error) {
	k.t.Helper()
	cmd := exec.Command(k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), k.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	k.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out.String())
	return out.String(), err
}

// newKubectl writes the admin kubeconfig of cluster default (`wheelhouse kubeconfig`) for a server started with
// e2eToken and returns a kubectl using it.
func newKubectl(t *testing.T, bin, kbin, url, dataDir string) *kubectl {
	t.Helper()
	cfg, err := exec.Command(bin, "kubeconfig", "--cluster", "default", "--server", url, "--token", e2eToken,
		"--data-dir", dataDir).Output()
	if err != nil {
		t.Fatalf("wheelhouse kubeconfig: %v", err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, bin: kbin, kubeconfig: kc}
}

// must runs kubectl and fails the test on error; it returns the output.
func (k *kubectl) must(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// contains fails the test unless out contains every want.
func contains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}

const appManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: shop
  labels: {app: web}
data:
  greeting: hello
---
apiVersion: v1
kind: Secret
metadata:
  name: web-secret
  namespace: shop
stringData:
  password: s3cret
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
`

func TestKubectl(t *testing.T) {
	bin := buildBinary(t)
	kbin := kubectltest.Binary(t)
	dataDir := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", dataDir)
	p.waitReady(t)
	k := newKubectl(t, bin, kbin, p.url, dataDir)

	t.Run("discovery", func(t *testing.T) {
		k.t = t
		contains(t, k.must("", "version"), "Server Version")
		contains(t, k.must("", "api-versions"), "apps/v1", "v1", "rbac.authorization.k8s.io/v1")
		contains(t, k.must("", "api-resources"), "pods", "po", "deployments", "deploy")
		contains(t, k.must("", "explain", "deployment.spec.replicas"), "replicas")
	})
	t.Run("apply and get", func(t *testing.T) {
		k.t = t
		k.must("", "create", "namespace", "shop")
		contains(t, k.must(appManifest, "apply", "-f", "-"), "configmap/web-config created",
			"secret/web-secret created", "service/web created", "deployment.apps/web created")
		contains(t, k.must("", "get", "svc", "web", "-n", "shop"), "ClusterIP", "10.", "80/TCP")
		contains(t, k.must("", "get", "deploy", "-n", "shop"), "NAME", "READY", "UP-TO-DATE", "web")
		contains(t, k.must("", "get", "deploy", "-n", "shop", "-o", "wide"), "CONTAINERS", "nginx:1.27")
		contains(t, k.must("", "get", "cm", "-n", "shop", "-l", "app=web", "--show-labels"), "web-config", "app=web")
		contains(t, k.must("", "get", "cm", "-A", "--field-selector", "metadata.name=web-config"), "shop")
		contains(t, k.must("", "get", "cm", "web-config", "-n", "shop", "-o", "jsonpath={.data.greeting}"), "hello")
		contains(t, k.must("", "get", "deploy", "web", "-n", "shop", "-o", "yaml"), "maxSurge: 25%", "revisionHistoryLimit: 10")
		contains(t, k.must("", "get", "all", "-n", "shop"), "deployment.apps/web")
	})
	t.Run("change", func(t *testing.T) {
		k.t = t
		k.must("", "label", "cm", "web-config", "-n", "shop", "tier=front")
		k.must("", "annotate", "cm", "web-config", "-n", "shop", "note=hi")
		k.must("", "scale", "deploy", "web", "-n", "shop", "--replicas=3")
		k.must("", "set", "image", "deploy/web", "-n", "shop", "web=nginx:1.28")
		k.must("", "patch", "cm", "web-config", "-n", "shop", "--type=merge", "-p", `{"data":{"m":"1"}}`)
		k.must("", "patch", "cm", "web-config", "-n", "shop", "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"2"}]`)
		k.must("", "patch", "deploy", "web", "-n", "shop", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"A","value":"b"}]}]}}}}`)
		out := k.must("", "get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].env[0].value}")
		contains(t, out, "3 nginx:1.28 b")
		changed := strings.Replace(appManifest, "greeting: hello", "greeting: bonjour", 1)
		if out, err := k.run(changed, "diff", "-f", "-"); err == nil || !strings.Contains(out, "bonjour") {
			t.Errorf("kubectl diff: %v, want a difference showing bonjour", err)
		}
		k.must(changed, "apply", "-f", "-")
		contains(t, k.must("", "get", "cm", "web-config", "-n", "shop", "-o", "jsonpath={.data.greeting}"), "bonjour")
		contains(t, k.must(changed, "apply", "--server-side", "--force-conflicts", "-f", "-"), "serverside-applied")

		// kubectl edit: the editor is a script that rewrites the object; kubectl sends the change as a patch.
		editor := filepath.Join(t.TempDir(), "editor.sh")
		if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/greeting: bonjour/greeting: hallo/' \"$1\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		k.env = []string{"KUBE_EDITOR=" + editor}
		k.must("", "edit", "cm", "web-config", "-n", "shop")
		k.env = nil
		contains(t, k.must("", "get", "cm", "web-config", "-n", "shop", "-o", "jsonpath={.data.greeting}"), "hallo")
	})
	t.Run("describe with events", func(t *testing.T) {
		k.t = t
		uid := k.must("", "get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.metadata.uid}")
		k.must(`apiVersion: v1
kind: Event
metadata: {name: web.1, namespace: shop}
involvedObject: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: shop, uid: `+strings.TrimSpace(uid)+`}
reason: ScalingReplicaSet
message: Scaled up replica set web-1 to 3
type: Normal
source: {component: deployment-controller}
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
count: 1
`, "create", "-f", "-")
		contains(t, k.must("", "describe", "deploy", "web", "-n", "shop"), "Name:", "web", "Replicas:", "Events:",
			"ScalingReplicaSet", "Scaled up replica set web-1 to 3")
		contains(t, k.must("", "get", "events", "-n", "shop", "--field-selector", "involvedObject.kind=Deployment"), "ScalingReplicaSet")
	})
	t.Run("watch", func(t *testing.T) {
		k.t = t
		cmd := exec.Command(k.bin, "--kubeconfig", k.kubeconfig, "get", "cm", "-n", "shop", "-w", "--output-watch-events")
		var out logLines
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		waitFor(t, func() bool { return strings.Contains(out.String(), "web-config") })
		k.must("", "create", "configmap", "late", "-n", "shop", "--from-literal=a=b")
		waitFor(t, func() bool { return strings.Contains(out.String(), "late") })
	})
	t.Run("bad input", func(t *testing.T) {
		k.t = t
		out, err := k.run("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n  namespace: shop\n", "apply", "-f", "-")
		if err == nil || !strings.Contains(out, "Invalid") {
			t.Errorf("invalid name accepted: %v", err)
		}
		out, err = k.run("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: shop\nbogus: 1\n", "create", "-f", "-")
		if err == nil || !strings.Contains(out, "bogus") {
			t.Errorf("unknown field accepted under strict validation: %v", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		k.t = t
		contains(t, k.must("", "delete", "cm", "late", "-n", "shop"), `configmap "late" deleted`)
		// Each cascade mode, finished by the garbage collector: a dependent (a ConfigMap owned by the object by
		// UID) is orphaned, deleted first, or collected after its owner.
		own := func(owner, kind, apiVersion, dependent string) {
			t.Helper()
			uid := strings.TrimSpace(k.must("", "get", strings.ToLower(kind), owner, "-n", "shop", "-o", "jsonpath={.metadata.uid}"))
			k.must(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+dependent+`","namespace":"shop","ownerReferences":[{"apiVersion":"`+
				apiVersion+`","kind":"`+kind+`","name":"`+owner+`","uid":"`+uid+`"}]}}`, "create", "-f", "-")
		}
		gone := func(kind, name string) func() bool {
			return func() bool {
				out, err := k.run("", "get", kind, name, "-n", "shop")
				return err != nil && strings.Contains(out, "NotFound")
			}
		}
		own("web", "Deployment", "apps/v1", "web-orphan")
		contains(t, k.must("", "delete", "deploy", "web", "-n", "shop", "--cascade=orphan"), "deleted")
		waitFor(t, gone("deploy", "web"))
		if refs := k.must("", "get", "cm", "web-orphan", "-n", "shop", "-o", "jsonpath={.metadata.ownerReferences}"); strings.TrimSpace(refs) != "" {
			t.Errorf("orphaned dependent still refers to its owner: %s", refs)
		}
		own("web-secret", "Secret", "v1", "web-secret-dep")
		contains(t, k.must("", "delete", "secret", "web-secret", "-n", "shop", "--cascade=foreground"), "deleted")
		waitFor(t, gone("secret", "web-secret"))
		waitFor(t, gone("cm", "web-secret-dep"))
		own("web-config", "ConfigMap", "v1", "web-config-dep")
		contains(t, k.must("", "delete", "cm", "web-config", "-n", "shop", "--cascade=background"), "deleted")
		if out, err := k.run("", "get", "cm", "web-config", "-n", "shop"); err == nil || !strings.Contains(out, "NotFound") {
			t.Errorf("background delete left the object: %v", err)
		}
		waitFor(t, gone("cm", "web-config-dep"))
	})
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		<-tick.C
	}
}
