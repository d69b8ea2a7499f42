package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// RunPodSandbox creates the sandbox's network and IPC namespaces (unless it
// uses the node's), sets up its network, writes its sysctls (sysctl.go) and
// creates its pod cgroup.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if config.GetMetadata() == nil {
		return "", runtime.InvalidArgumentError("sandbox config has no metadata")
	}
	cfgJSON, err := marshalProto(config)
	if err != nil {
		return "", runtime.InvalidArgumentError("sandbox config: %v", err)
	}
	sysctls, err := sandboxSysctls(config)
	if err != nil {
		return "", err
	}
	id := newID()
	rec := &sandboxRecord{
		ID: id, Config: cfgJSON, RuntimeHandler: runtimeHandler,
		CreatedAt: r.cfg.Now().UnixNano(), LogDir: config.LogDirectory,
		Cgroup: "pod-" + id, config: config,
	}
	if rec.LogDir == "" {
		rec.LogDir, rec.OwnLogDir = filepath.Join(r.cfg.LogDir, id), true
	}
	if err := r.setUpSandbox(ctx, rec, sysctls); err != nil {
		_ = r.tearDownSandbox(ctx, rec)
		_ = r.cg.remove(rec.Cgroup, time.Second)
		_ = os.RemoveAll(r.sandboxDir(id))
		return "", fmt.Errorf("run sandbox %s: %w", config.Metadata.Name, err)
	}
	r.mu.Lock()
	r.sandboxes[id] = rec
	r.mu.Unlock()
	r.log.Info("sandbox ready", "sandbox", id, "pod", config.Metadata.Namespace+"/"+config.Metadata.Name, "ip", rec.IP)
	return id, nil
}

// setUpSandbox creates what rec describes, with its sysctls, and records it.
func (r *Runtime) setUpSandbox(ctx context.Context, rec *sandboxRecord, sysctls []sandboxSysctl) error {
	if err := os.MkdirAll(r.sandboxDir(rec.ID), 0o711); err != nil {
		return err
	}
	if err := os.MkdirAll(rec.LogDir, 0o755); err != nil {
		return err
	}
	if !hostNetwork(rec.config) {
		rec.NetNS = r.path("netns", rec.ID)
		if err := createNetns(rec.NetNS); err != nil {
			return err
		}
		if r.cfg.Network != nil {
			ip, err := r.cfg.Network.SetUp(ctx, rec.ID, rec.NetNS)
			if err != nil {
				return fmt.Errorf("network setup: %w", err)
			}
			rec.IP = ip
		}
	}
	if !hostIPC(rec.config) {
		rec.IPCNS = r.path("netns", rec.ID+".ipc")
		if err := createIPCns(rec.IPCNS); err != nil {
			return err
		}
	}
	if err := writeSysctls(rec, sysctls); err != nil {
		return err
	}
	if dc := rec.config.GetDnsConfig(); len(dc.GetServers())+len(dc.GetSearches())+len(dc.GetOptions()) > 0 {
		rec.ResolvConf = filepath.Join(r.sandboxDir(rec.ID), resolvConfFile)
		if err := os.WriteFile(rec.ResolvConf, resolvConf(dc), 0o644); err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
	}
	res := resourcesOf(rec.config.GetLinux().GetResources())
	res.PidsLimit = r.cfg.PodPidsLimit
	if err := r.cg.create(rec.Cgroup, res); err != nil {
		return err
	}
	rec.Ready = true
	return shim.WriteJSON(filepath.Join(r.sandboxDir(rec.ID), sandboxFile), rec)
}

// resolvConf is the text of a resolv.conf holding dc, as containerd writes it.
func resolvConf(dc *runtimeapi.DNSConfig) []byte {
	var b strings.Builder
	if len(dc.Searches) > 0 {
		b.WriteString("search " + strings.Join(dc.Searches, " ") + "\n")
	}
	for _, s := range dc.Servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(dc.Options) > 0 {
		b.WriteString("options " + strings.Join(dc.Options, " ") + "\n")
	}
	return []byte(b.String())
}

// tearDownSandbox undoes the network and IPC parts of setUpSandbox; idempotent.
func (r *Runtime) tearDownSandbox(ctx context.Context, rec *sandboxRecord) error {
	var errs []error
	if rec.IPCNS != "" {
		errs = append(errs, removeNetns(rec.IPCNS))
	}
	if rec.NetNS == "" {
		return errors.Join(errs...)
	}
	if r.cfg.Network != nil && fileExists(rec.NetNS) {
		if err := r.cfg.Network.TearDown(ctx, rec.ID, rec.NetNS); err != nil {
			errs = append(errs, fmt.Errorf("network teardown: %w", err))
		}
	}
	errs = append(errs, removeNetns(rec.NetNS))
	return errors.Join(errs...)
}

func hostNetwork(config *runtimeapi.PodSandboxConfig) bool {
	return config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

func hostIPC(config *runtimeapi.PodSandboxConfig) bool {
	return config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetIpc() == runtimeapi.NamespaceMode_NODE
}

// StopPodSandbox kills the sandbox's containers, tears its network down and
// removes its network namespace; the sandbox is NOTREADY after.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	rec := r.sandbox(podSandboxID)
	if rec == nil {
		return nil
	}
	for _, c := range r.containersOf(podSandboxID) {
		if err := r.StopContainer(ctx, c, 0); err != nil {
			return err
		}
	}
	if err := r.tearDownSandbox(ctx, rec); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", podSandboxID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !rec.Ready {
		return nil
	}
	rec.Ready = false
	return shim.WriteJSON(filepath.Join(r.sandboxDir(rec.ID), sandboxFile), rec)
}

// RemovePodSandbox stops the sandbox and removes its containers, cgroups,
// state and log directory.
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	rec := r.sandbox(podSandboxID)
	if rec == nil {
		return nil
	}
	if err := r.StopPodSandbox(ctx, podSandboxID); err != nil {
		return err
	}
	for _, c := range r.containersOf(podSandboxID) {
		if err := r.RemoveContainer(ctx, c); err != nil {
			return err
		}
	}
	var errs []error
	errs = append(errs, r.cg.remove(rec.Cgroup, r.cfg.StopGrace))
	errs = append(errs, os.RemoveAll(rec.LogDir))
	r.mu.Lock()
	delete(r.sandboxes, podSandboxID)
	errs = append(errs, os.RemoveAll(r.sandboxDir(podSandboxID)))
	r.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", podSandboxID, err)
	}
	r.log.Info("sandbox removed", "sandbox", podSandboxID)
	return nil
}

// PodSandboxStatus implements runtime.SandboxManager.
func (r *Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.sandboxes[podSandboxID]
	if !ok {
		return nil, runtime.NotFoundError("sandbox", podSandboxID)
	}
	netMode, ipcMode := runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD
	if hostNetwork(rec.config) {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	if rec.IPCNS == "" {
		ipcMode = runtimeapi.NamespaceMode_NODE
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:        rec.ID,
		Metadata:  rec.config.Metadata,
		State:     sandboxState(rec),
		CreatedAt: rec.CreatedAt,
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: rec.IP},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: &runtimeapi.NamespaceOption{Network: netMode, Pid: runtimeapi.NamespaceMode_NODE, Ipc: ipcMode},
		}},
		Labels:         rec.config.Labels,
		Annotations:    rec.config.Annotations,
		RuntimeHandler: rec.RuntimeHandler,
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: clone(st)}
	if verbose {
		resp.Info = map[string]string{"netns": rec.NetNS, "ipcns": rec.IPCNS, "cgroup": rec.Cgroup, "logDir": rec.LogDir}
	}
	return resp, nil
}

// ListPodSandbox implements runtime.SandboxManager.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, rec := range r.sandboxes {
		s := &runtimeapi.PodSandbox{
			Id:             rec.ID,
			Metadata:       rec.config.Metadata,
			State:          sandboxState(rec),
			CreatedAt:      rec.CreatedAt,
			Labels:         rec.config.Labels,
			Annotations:    rec.config.Annotations,
			RuntimeHandler: rec.RuntimeHandler,
		}
		if runtime.MatchSandbox(filter, s) {
			out = append(out, clone(s))
		}
	}
	return out, nil
}

func sandboxState(rec *sandboxRecord) runtimeapi.PodSandboxState {
	if rec.Ready {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// sandbox returns the record of id, nil if unknown.
func (r *Runtime) sandbox(id string) *sandboxRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sandboxes[id]
}

// containersOf returns the IDs of the sandbox's containers.
func (r *Runtime) containersOf(sandboxID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, c := range r.containers {
		if c.SandboxID == sandboxID {
			out = append(out, id)
		}
	}
	return out
}

// resourcesOf converts CRI's Linux resources to cgroup limits.
func resourcesOf(res *runtimeapi.LinuxContainerResources) cgroupResources {
	if res == nil {
		return cgroupResources{}
	}
	return cgroupResources{
		MemoryLimit: res.MemoryLimitInBytes,
		SwapLimit:   res.MemorySwapLimitInBytes,
		CPUQuota:    res.CpuQuota,
		CPUPeriod:   res.CpuPeriod,
		CPUShares:   res.CpuShares,
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
