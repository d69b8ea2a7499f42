package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wheelhouse-dev/wheelhouse/agents"
	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
)

// agentFlags are `wheelhouse agent`'s flags before they become an agents.Config.
type agentFlags struct {
	server, token, nodeName, dataDir, runtime, nodeIP, logLevel, debugListen string
	proxyMode, ipvsScheduler, clusterDomain, containerdEndpoint, cniConfDir  string
	tokenFile, registries, pauseImage                                        string
	labels, taints                                                           []string
	insecureHTTP                                                             bool
	hollow, leaseSeconds, maxParallelStarts, maxParallelPulls                int
	serializePulls                                                           bool
	proxyMinSync, proxySync                                                  time.Duration
}

func newAgentCommand(getenv func(string) string, stderr io.Writer, runAgent func(context.Context, agents.Config) error) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run this machine as a node of a cluster",
		Long: "Run this machine as a node of one cluster: join it with a join token (first start only; the node's " +
			"credential is kept in the data dir), register the Node, run the pods bound to it and keep the tunnel " +
			"the server reaches the node through. Every flag has an environment variable (WHEELHOUSE_*), which the " +
			"install script's environment file sets.",
		Args: cobra.NoArgs,
	}
	fl := cmd.Flags()
	strs := []struct {
		p             *string
		name, env, dv string
		usage         string
	}{
		{&f.server, "server", "WHEELHOUSE_SERVER", "", "the server's URL (https://host:port)"},
		{&f.token, "token", "WHEELHOUSE_TOKEN", "", "a join token (K10...::id.secret); needed on the first start only"},
		{&f.tokenFile, "token-file", "WHEELHOUSE_TOKEN_FILE", "", "a file holding the join token (when --token is not given); deleted once the node's credential is kept"},
		{&f.nodeName, "node-name", "WHEELHOUSE_NODE_NAME", "", "the node's name (default: the host name)"},
		{&f.dataDir, "data-dir", "WHEELHOUSE_AGENT_DATA_DIR", "/var/lib/wheelhouse-agent", "the agent's state: identity, runtime, volumes, logs"},
		{&f.runtime, "runtime", "WHEELHOUSE_RUNTIME", agents.RuntimeProcess, "container runtime: process (the container's command as a host process in the pod's namespaces) or containerd (container images, through containerd's CRI plugin)"},
		{&f.containerdEndpoint, "containerd-endpoint", "WHEELHOUSE_CONTAINERD_ENDPOINT", "", "containerd's socket (--runtime containerd; default: the system's at " +
			strings.TrimPrefix(cri.DefaultEndpoint, "unix://") + " when one answers there, else one the agent runs itself under <data-dir>/containerd)"},
		{&f.cniConfDir, "cni-conf-dir", "WHEELHOUSE_CNI_CONF_DIR", agents.DefaultCNIConfDir, "where the agent writes the pod network's CNI configuration for containerd (--runtime containerd; containerd's cni conf_dir; " +
			"a containerd the agent runs itself reads <data-dir>/containerd/net.d instead)"},
		{&f.nodeIP, "node-ip", "WHEELHOUSE_NODE_IP", "", "the address other nodes reach this one on (default: the default route's source address)"},
		{&f.logLevel, "log-level", "WHEELHOUSE_LOG_LEVEL", "info", "log level: debug, info, warn or error"},
		{&f.debugListen, "debug-listen", "WHEELHOUSE_DEBUG_LISTEN", "", "serve Go's profiler (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6061 (unauthenticated: loopback only)"},
		{&f.proxyMode, "proxy-mode", "WHEELHOUSE_PROXY_MODE", agents.ProxyAuto, "Service proxy: auto (IPVS when the kernel has it, else nftables), ipvs, nftables or none"},
		{&f.ipvsScheduler, "ipvs-scheduler", "WHEELHOUSE_IPVS_SCHEDULER", "rr", "IPVS mode's scheduler: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq or mh"},
		{&f.clusterDomain, "cluster-domain", "WHEELHOUSE_CLUSTER_DOMAIN", "cluster.local", "the cluster's DNS domain, served by the agent's DNS server to its pods"},
		{&f.registries, "registries", "WHEELHOUSE_REGISTRIES", "", "a registries.yaml in k3s's format: mirrors, CAs, client certificates and " +
			"credentials per registry host, for containerd (written into its hosts directory; credentials used by the agent's pulls)"},
		{&f.pauseImage, "pause-image", "WHEELHOUSE_PAUSE_IMAGE", kubelet.DefaultSandboxImage, "the sandbox (pause) image of the containerd the " +
			"agent runs itself, never removed by image garbage collection (a system containerd's is its sandbox_image)"},
	}
	for _, s := range strs {
		fl.StringVar(s.p, s.name, s.dv, s.usage+" (env "+s.env+")")
	}
	fl.StringArrayVar(&f.labels, "label", nil, "a label k=v for the node at registration (repeatable; env WHEELHOUSE_NODE_LABELS, comma-separated)")
	fl.StringArrayVar(&f.taints, "taint", nil, "a taint k=v:Effect for the node at registration (repeatable; env WHEELHOUSE_NODE_TAINTS, comma-separated)")
	fl.BoolVar(&f.insecureHTTP, "insecure-http", false, "allow an http:// server URL (local development only)")
	fl.IntVar(&f.leaseSeconds, "node-lease-duration-seconds", 40, "the node Lease's duration; it renews every quarter of it "+
		"(keep the server's --node-monitor-grace-period well above a renewal)")
	fl.DurationVar(&f.proxyMinSync, "proxy-min-sync-period", time.Second, "the least time between two syncs of the Service proxy: changes within it are applied together")
	fl.DurationVar(&f.proxySync, "proxy-sync-period", time.Minute, "how often the Service proxy reads back the kernel's rules and repairs them")
	fl.IntVar(&f.maxParallelStarts, "max-parallel-pod-starts", 0, "how many pods start at once at most, from their sandbox until their "+
		"containers have started; the others wait their turn in the order they came (0: twice the CPUs; negative: no limit; env "+
		"WHEELHOUSE_MAX_PARALLEL_POD_STARTS)")
	fl.BoolVar(&f.serializePulls, "serialize-image-pulls", true, "pull one image at a time, as kubelet's serializeImagePulls "+
		"(env WHEELHOUSE_SERIALIZE_IMAGE_PULLS)")
	fl.IntVar(&f.maxParallelPulls, "max-parallel-image-pulls", 0, "with --serialize-image-pulls=false, how many images are pulled "+
		"at once at most, as kubelet's maxParallelImagePulls (0: no limit; env WHEELHOUSE_MAX_PARALLEL_IMAGE_PULLS)")
	fl.IntVar(&f.hollow, "hollow", 0, "run this many simulated nodes <node-name>-0, -1, ... on an in-memory runtime instead of this "+
		"machine's node, for scale tests (the join token must allow as many uses; env WHEELHOUSE_HOLLOW)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		for _, s := range strs {
			if v := getenv(s.env); v != "" && !cmd.Flags().Changed(s.name) {
				*s.p = v
			}
		}
		if v := getenv("WHEELHOUSE_NODE_LABELS"); v != "" && !cmd.Flags().Changed("label") {
			f.labels = strings.Split(v, ",")
		}
		if v := getenv("WHEELHOUSE_NODE_TAINTS"); v != "" && !cmd.Flags().Changed("taint") {
			f.taints = strings.Split(v, ",")
		}
		if v := getenv("WHEELHOUSE_MAX_PARALLEL_POD_STARTS"); v != "" && !cmd.Flags().Changed("max-parallel-pod-starts") {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("WHEELHOUSE_MAX_PARALLEL_POD_STARTS %q: want a number of pods", v)
			}
			f.maxParallelStarts = n
		}
		if v := getenv("WHEELHOUSE_SERIALIZE_IMAGE_PULLS"); v != "" && !cmd.Flags().Changed("serialize-image-pulls") {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("WHEELHOUSE_SERIALIZE_IMAGE_PULLS %q: want true or false", v)
			}
			f.serializePulls = b
		}
		if v := getenv("WHEELHOUSE_MAX_PARALLEL_IMAGE_PULLS"); v != "" && !cmd.Flags().Changed("max-parallel-image-pulls") {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("WHEELHOUSE_MAX_PARALLEL_IMAGE_PULLS %q: want a number of pulls", v)
			}
			f.maxParallelPulls = n
		}
		if v := getenv("WHEELHOUSE_HOLLOW"); v != "" && !cmd.Flags().Changed("hollow") {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("WHEELHOUSE_HOLLOW %q: want a number of nodes", v)
			}
			f.hollow = n
		}
		cfg, err := f.config(stderr)
		if err != nil {
			return err
		}
		if f.debugListen != "" {
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			go serveDebug(ctx, f.debugListen, cfg.Logger)
			return runAgent(ctx, cfg)
		}
		return runAgent(cmd.Context(), cfg)
	}
	cmd.AddCommand(newAgentCleanupCommand(getenv, stderr))
	return cmd
}

// newAgentCleanupCommand is `wheelhouse agent cleanup`.
func newAgentCleanupCommand(getenv func(string) string, stderr io.Writer) *cobra.Command {
	var endpoint, dataDir string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what agents made on this node (for uninstalling)",
		Long: "Remove what the node agent made on this machine: the pods it ran through containerd (other sandboxes " +
			"there are left), the Service proxy's rules (nftables and IPVS) and the pod network (the wh0 bridge, the " +
			"pods' veths, the host-gw routes, the masquerade table). Without --containerd-endpoint it looks at the " +
			"system's containerd and at the one the agent runs itself under <data-dir>/containerd (started to remove " +
			"the pods, then stopped, as is one left running). Run it once the agent has stopped: the uninstall " +
			"script does. What is already gone is not an error; the data dir is left in place.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if v := getenv("WHEELHOUSE_CONTAINERD_ENDPOINT"); v != "" && !cmd.Flags().Changed("containerd-endpoint") {
				endpoint = v
			}
			if v := getenv("WHEELHOUSE_AGENT_DATA_DIR"); v != "" && !cmd.Flags().Changed("data-dir") {
				dataDir = v
			}
			log := slog.New(slog.NewTextHandler(stderr, nil))
			if err := agents.Cleanup(cmd.Context(), endpoint, dataDir, log); err != nil {
				return fmt.Errorf("agent cleanup: %w", err)
			}
			log.Info("the node's pods, Service proxy rules and pod network are removed")
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "containerd-endpoint", "",
		"containerd's socket; when it exists, the agent's pods there are removed (default: the system's at "+
			strings.TrimPrefix(cri.DefaultEndpoint, "unix://")+" and the agent's own under <data-dir>/containerd; env WHEELHOUSE_CONTAINERD_ENDPOINT)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "/var/lib/wheelhouse-agent",
		"the agent's data dir, where a containerd the agent runs itself keeps its pods (env WHEELHOUSE_AGENT_DATA_DIR)")
	return cmd
}

// config checks the flags and builds the agent's configuration.
func (f agentFlags) config(stderr io.Writer) (agents.Config, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return agents.Config{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	cfg := agents.Config{Server: f.server, Token: f.token, TokenFile: f.tokenFile, NodeName: f.nodeName, DataDir: f.dataDir, Runtime: f.runtime,
		ContainerdEndpoint: f.containerdEndpoint, CNIConfDir: f.cniConfDir,
		NodeIP: f.nodeIP, InsecureHTTP: f.insecureHTTP, Hollow: f.hollow, LeaseDuration: time.Duration(f.leaseSeconds) * time.Second, Labels: map[string]string{},
		ProxyMode: f.proxyMode, IPVSScheduler: f.ipvsScheduler, ClusterDomain: f.clusterDomain, ProxyMinSync: f.proxyMinSync, ProxySync: f.proxySync,
		MaxParallelPodStarts: f.maxParallelStarts, Registries: f.registries, PauseImage: f.pauseImage,
		ImagePulls: kubelet.ImagePullLimits{Parallel: !f.serializePulls, MaxParallel: f.maxParallelPulls}, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	if err := checkDebugListen(f.debugListen); err != nil {
		return cfg, err
	}
	if errs := validation.IsDNS1123Subdomain(f.nodeName); f.nodeName != "" && len(errs) > 0 {
		return cfg, fmt.Errorf("--node-name %q: %s", f.nodeName, strings.Join(errs, "; "))
	}
	for _, l := range f.labels {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok {
			return cfg, fmt.Errorf("--label %q: want key=value", l)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return cfg, fmt.Errorf("--label %q: %s", l, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return cfg, fmt.Errorf("--label %q: %s", l, strings.Join(errs, "; "))
		}
		cfg.Labels[k] = v
	}
	for _, t := range f.taints {
		taint, err := parseTaint(strings.TrimSpace(t))
		if err != nil {
			return cfg, fmt.Errorf("--taint %q: %w", t, err)
		}
		cfg.Taints = append(cfg.Taints, taint)
	}
	return cfg, cfg.Validate()
}

// parseTaint reads key[=value]:Effect, as kubectl taint and kubelet's --register-with-taints.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("want key=value:Effect")
	}
	k, v, _ := strings.Cut(kv, "=")
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("key %q: %s", k, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("value %q: %s", v, strings.Join(errs, "; "))
	}
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}
