package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents"
	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
)

// parseAgent runs `wheelhouse agent args...` with env and returns the configuration it would run with.
func parseAgent(env map[string]string, args ...string) (agents.Config, error) {
	var got agents.Config
	root := newRootCommand(func(k string) string { return env[k] }, &bytes.Buffer{}, nil)
	for _, c := range root.Commands() {
		if c.Name() == "agent" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newAgentCommand(func(k string) string { return env[k] }, &bytes.Buffer{},
		func(_ context.Context, cfg agents.Config) error { got = cfg; return nil }))
	root.SetArgs(append([]string{"agent"}, args...))
	err := root.ExecuteContext(context.Background())
	got.Logger = nil
	return got, err
}

func TestAgentFlags(t *testing.T) {
	got, err := parseAgent(map[string]string{"WHEELHOUSE_TOKEN": "K10::abc123.secret", "WHEELHOUSE_NODE_LABELS": "ignored=yes"},
		"--server", "https://wh.example:8443", "--node-name", "rack1-a", "--label", "pool=blue", "--label", "zone=a",
		"--taint", "dedicated=gpu:NoSchedule", "--taint", "spot:PreferNoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	want := agents.Config{Server: "https://wh.example:8443", Token: "K10::abc123.secret", NodeName: "rack1-a",
		DataDir: "/var/lib/wheelhouse-agent", Runtime: "process", ContainerdEndpoint: "",
		CNIConfDir: "/etc/cni/net.d", LeaseDuration: 40 * time.Second, Labels: map[string]string{"pool": "blue", "zone": "a"},
		ProxyMode: "auto", IPVSScheduler: "rr", ClusterDomain: "cluster.local", ProxyMinSync: time.Second, ProxySync: time.Minute,
		PauseImage: "registry.k8s.io/pause:3.10", Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("config (-want +got):\n%s", diff)
	}
	fromEnv, err := parseAgent(map[string]string{"WHEELHOUSE_SERVER": "https://s:1", "WHEELHOUSE_NODE_LABELS": "a=1,b=2",
		"WHEELHOUSE_NODE_TAINTS": "x=y:NoExecute"})
	if err != nil || fromEnv.Labels["b"] != "2" || len(fromEnv.Taints) != 1 || fromEnv.Taints[0].Effect != corev1.TaintEffectNoExecute {
		t.Fatalf("from the environment: %+v %v", fromEnv, err)
	}
	hollow, err := parseAgent(map[string]string{"WHEELHOUSE_HOLLOW": "7"}, "--server", "https://s:1", "--runtime", "ignored", "--node-name", "h")
	if err != nil || hollow.Hollow != 7 || hollow.NodeName != "h" {
		t.Fatalf("hollow from the environment: %+v %v", hollow, err)
	}
	if short, err := parseAgent(nil, "--server", "https://s", "--node-lease-duration-seconds", "8"); err != nil || short.LeaseDuration != 8*time.Second {
		t.Fatalf("--node-lease-duration-seconds 8: %v %v", short.LeaseDuration, err)
	}
	// Image pulls: one at a time unless asked, as kubelet's; the bound needs parallel pulls; both from the environment.
	pulls, err := parseAgent(map[string]string{"WHEELHOUSE_SERIALIZE_IMAGE_PULLS": "false", "WHEELHOUSE_MAX_PARALLEL_IMAGE_PULLS": "3",
		"WHEELHOUSE_PAUSE_IMAGE": "mirror.example/pause:3.10"}, "--server", "https://s")
	if err != nil || pulls.ImagePulls != (kubelet.ImagePullLimits{Parallel: true, MaxParallel: 3}) || pulls.PauseImage != "mirror.example/pause:3.10" {
		t.Fatalf("image pull settings from the environment: %+v %+v %v", pulls.ImagePulls, pulls.PauseImage, err)
	}
	if _, err := parseAgent(nil, "--server", "https://s", "--max-parallel-image-pulls", "2"); err == nil || !strings.Contains(err.Error(), "needs parallel image pulls") {
		t.Fatalf("--max-parallel-image-pulls 2 with serialized pulls: %v", err)
	}
	if _, err := parseAgent(map[string]string{"WHEELHOUSE_SERIALIZE_IMAGE_PULLS": "maybe"}, "--server", "https://s"); err == nil {
		t.Fatal("WHEELHOUSE_SERIALIZE_IMAGE_PULLS=maybe accepted")
	}
	if _, err := parseAgent(nil, "--server", "https://s", "--registries", "/nonexistent/registries.yaml"); err == nil || !strings.Contains(err.Error(), "--registries") {
		t.Fatalf("a missing registries file: %v", err)
	}
	if starts, err := parseAgent(map[string]string{"WHEELHOUSE_MAX_PARALLEL_POD_STARTS": "-1"}, "--server", "https://s"); err != nil || starts.MaxParallelPodStarts != -1 {
		t.Fatalf("WHEELHOUSE_MAX_PARALLEL_POD_STARTS=-1: %v %v", starts.MaxParallelPodStarts, err)
	}
	if starts, err := parseAgent(map[string]string{"WHEELHOUSE_MAX_PARALLEL_POD_STARTS": "-1"}, "--server", "https://s", "--max-parallel-pod-starts", "3"); err != nil || starts.MaxParallelPodStarts != 3 {
		t.Fatalf("--max-parallel-pod-starts 3 over the environment: %v %v", starts.MaxParallelPodStarts, err)
	}
	if _, err := parseAgent(map[string]string{"WHEELHOUSE_MAX_PARALLEL_POD_STARTS": "many"}, "--server", "https://s"); err == nil || !strings.Contains(err.Error(), "want a number of pods") {
		t.Fatalf("WHEELHOUSE_MAX_PARALLEL_POD_STARTS=many: %v", err)
	}
	proxy, err := parseAgent(map[string]string{"WHEELHOUSE_PROXY_MODE": "nftables", "WHEELHOUSE_CLUSTER_DOMAIN": "k8s.example"},
		"--server", "https://s", "--ipvs-scheduler", "sh", "--proxy-min-sync-period", "250ms", "--proxy-sync-period", "30s")
	if err != nil || proxy.ProxyMode != "nftables" || proxy.IPVSScheduler != "sh" || proxy.ClusterDomain != "k8s.example" ||
		proxy.ProxyMinSync != 250*time.Millisecond || proxy.ProxySync != 30*time.Second {
		t.Fatalf("proxy and DNS flags: %+v %v", proxy, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--server is required"},
		{[]string{"--server", "https://s", "--proxy-mode", "iptables"}, `--proxy-mode "iptables"`},
		{[]string{"--server", "https://s", "--ipvs-scheduler", "fifo"}, `--ipvs-scheduler "fifo"`},
		{[]string{"--server", "https://s", "--cluster-domain", "Not_A_Domain"}, `--cluster-domain "Not_A_Domain"`},
		{[]string{"--server", "https://s", "--proxy-min-sync-period", "2m"}, "--proxy-min-sync-period 2m0s"},
		{[]string{"--server", "https://s", "--taint", "k=v:Sometimes"}, `effect "Sometimes"`},
		{[]string{"--server", "https://s", "--taint", "novalue"}, "want key=value:Effect"},
		{[]string{"--server", "https://s", "--label", "bad label=x"}, `--label "bad label=x"`},
		{[]string{"--server", "https://s", "--label", "nolabel"}, "want key=value"},
		{[]string{"--server", "https://s", "--node-name", "Bad_Name"}, `--node-name "Bad_Name"`},
		{[]string{"--server", "https://s", "--runtime", "docker"}, `--runtime "docker"`},
		{[]string{"--server", "https://s", "--log-level", "loud"}, "--log-level"},
		{[]string{"--server", "https://s", "--node-lease-duration-seconds", "2"}, "--node-lease-duration-seconds 2"},
		{[]string{"--server", "https://s", "--hollow", "-1"}, "--hollow -1"},
		{[]string{"--server", "https://s", "--debug-listen", "0.0.0.0:6061"}, "--debug-listen"},
	} {
		if _, err := parseAgent(nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("agent %v: %v, want an error mentioning %s", tc.args, err, tc.want)
		}
	}
}
