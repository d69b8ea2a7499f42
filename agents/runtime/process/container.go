package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// CreateContainer records the container and creates its cgroup with its
// limits; nothing runs until StartContainer. The process runtime has no
// images: Command (and Args) must name a program on the host.
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if config.GetMetadata() == nil {
		return "", runtime.InvalidArgumentError("container config has no metadata")
	}
	if len(config.Command)+len(config.Args) == 0 {
		return "", runtime.InvalidArgumentError("container %q: the process runtime has no image entrypoint, a command is required", config.Metadata.Name)
	}
	sb := r.sandbox(podSandboxID)
	if sb == nil {
		return "", runtime.NotFoundError("sandbox", podSandboxID)
	}
	if !sb.Ready {
		return "", runtime.PreconditionError("sandbox %q is not ready", podSandboxID)
	}
	if err := r.checkPIDNamespace(podSandboxID, config); err != nil {
		return "", err
	}
	cfgJSON, err := marshalProto(config)
	if err != nil {
		return "", runtime.InvalidArgumentError("container config: %v", err)
	}
	id := newID()
	logPath := config.LogPath
	if logPath == "" {
		logPath = filepath.Join(config.Metadata.Name, strconv.Itoa(int(config.Metadata.Attempt))+".log")
	}
	rec := &containerRecord{
		ID: id, SandboxID: podSandboxID, Config: cfgJSON, CreatedAt: r.cfg.Now().UnixNano(),
		LogPath: filepath.Join(sb.LogDir, logPath), Cgroup: sb.Cgroup + "/" + id, config: config,
	}
	if err := r.setUpContainer(rec, sb); err != nil {
		_ = r.cg.remove(rec.Cgroup, time.Second)
		_ = os.RemoveAll(r.containerDir(id))
		return "", fmt.Errorf("create container %s: %w", config.Metadata.Name, err)
	}
	r.mu.Lock()
	r.containers[id] = rec
	r.mu.Unlock()
	return id, nil
}

// setUpContainer creates the cgroup and writes the records of rec.
func (r *Runtime) setUpContainer(rec *containerRecord, sb *sandboxRecord) error {
	spec, err := r.helperSpec(rec, sb)
	if err != nil {
		return err
	}
	if err := r.cg.create(rec.Cgroup, resourcesOf(rec.config.GetLinux().GetResources())); err != nil {
		return err
	}
	dir := r.containerDir(rec.ID)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	if err := shim.WriteJSON(filepath.Join(dir, shim.SpecFile), spec); err != nil {
		return err
	}
	return shim.WriteJSON(filepath.Join(dir, containerFile), rec)
}

// helperSpec derives what the shim and init run from the CRI config.
func (r *Runtime) helperSpec(rec *containerRecord, sb *sandboxRecord) (_ *shim.Spec, err error) {
	c := rec.config
	spec := &shim.Spec{
		Args:        append(append([]string{}, c.Command...), c.Args...),
		Cwd:         c.WorkingDir,
		NetNS:       sb.NetNS,
		IPCNS:       sb.IPCNS,
		CgroupProcs: r.cg.procsFiles(rec.Cgroup),
		CgroupNS:    r.cg.v2,
		LogPath:     rec.LogPath,
		LogMaxBytes: r.cfg.LogMaxBytes,
		LogMaxFiles: r.cfg.LogMaxFiles,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.Tty,
	}
	hasPath := false
	for _, kv := range c.Envs {
		spec.Env = append(spec.Env, kv.Key+"="+string(kv.Value))
		hasPath = hasPath || kv.Key == "PATH"
	}
	if !hasPath {
		spec.Env = append(spec.Env, "PATH="+defaultPath)
	}
	for _, d := range r.cg.dirs(rec.Cgroup) {
		spec.OOMFiles = append(spec.OOMFiles, filepath.Join(d, "memory.events"), filepath.Join(d, "memory.oom_control"))
	}
	ownResolvConf := false
	for _, m := range c.Mounts {
		if !filepath.IsAbs(m.ContainerPath) || !filepath.IsAbs(m.HostPath) {
			return nil, runtime.InvalidArgumentError("mount %q -> %q: paths must be absolute", m.HostPath, m.ContainerPath)
		}
		ownResolvConf = ownResolvConf || filepath.Clean(m.ContainerPath) == resolvConfPath
		spec.Mounts = append(spec.Mounts, shim.Mount{
			Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.Readonly, Propagation: propagation(m.Propagation),
		})
	}
	if sb.ResolvConf != "" && !ownResolvConf {
		// The sandbox's DNS configuration, as containerd mounts it (a container's own mount there wins).
		spec.Mounts = append(spec.Mounts, shim.Mount{Source: sb.ResolvConf, Target: resolvConfPath})
	}
	sc := c.GetLinux().GetSecurityContext()
	if spec.User, err = userOf(sc); err != nil {
		return nil, err
	}
	if spec.Security, err = securityOf(sc); err != nil {
		return nil, err
	}
	return spec, nil
}

func propagation(p runtimeapi.MountPropagation) string {
	switch p {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		return "rslave"
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		return "rshared"
	}
	return "private"
}

// StartContainer starts the container's shim, which starts the process;
// it returns once the process runs (or the start failed, which is then
// recorded: the container is EXITED with reason StartError).
func (r *Runtime) StartContainer(ctx context.Context, containerID string) error {
	rec, err := r.beginStart(containerID)
	if err != nil {
		return err
	}
	defer func() {
		r.mu.Lock()
		delete(r.starting, containerID)
		r.mu.Unlock()
	}()
	if err := r.startShim(ctx, r.containerDir(containerID)); err != nil {
		ex := shim.Exit{ExitCode: 128, FinishedAt: r.cfg.Now().UnixNano(), Reason: "StartError", Message: err.Error()}
		if werr := shim.WriteJSON(filepath.Join(r.containerDir(containerID), shim.ExitFile), ex); werr != nil {
			r.log.Error("record start failure", "container", containerID, "err", werr)
		}
		return fmt.Errorf("start container %s: %w", rec.config.Metadata.Name, err)
	}
	r.log.Info("container started", "container", containerID, "name", rec.config.Metadata.Name, "sandbox", rec.SandboxID)
	return nil
}

// beginStart checks that the container may start and marks it starting.
func (r *Runtime) beginStart(containerID string) (*containerRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.containers[containerID]
	if !ok {
		return nil, runtime.NotFoundError("container", containerID)
	}
	if r.starting[containerID] {
		return nil, runtime.PreconditionError("container %q is already starting", containerID)
	}
	if st := r.observe(rec); st.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, runtime.PreconditionError("container %q is %s, not created", containerID, st.state)
	}
	if sb := r.sandboxes[rec.SandboxID]; sb == nil || !sb.Ready {
		return nil, runtime.PreconditionError("sandbox %q of container %q is not ready", rec.SandboxID, containerID)
	}
	r.starting[containerID] = true
	return rec, nil
}

// StopContainer sends SIGTERM to the container's process group, SIGKILL to
// everything in its cgroup after timeout seconds (at once if 0), and returns
// once the exit is recorded.
func (r *Runtime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	r.mu.Lock()
	rec, ok := r.containers[containerID]
	var st observed
	if ok {
		st = r.observe(rec)
	}
	r.mu.Unlock()
	if !ok || st.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	p := st.shim.Process
	if timeout > 0 {
		if err := p.Signal(unix.SIGTERM); err != nil && !errors.Is(err, shim.ErrGone) {
			return fmt.Errorf("stop container %s: %w", containerID, err)
		}
		p.Wait(ctx, time.Duration(timeout)*time.Second)
	}
	if p.Alive() {
		_ = p.Signal(unix.SIGKILL)
	}
	r.cg.killAll(rec.Cgroup) // whatever the process left behind
	p.Wait(ctx, r.cfg.StopGrace)
	st.shim.Shim.Wait(ctx, r.cfg.StopGrace) // the shim exits right after recording
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stop container %s: %w", containerID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observe(rec) // records a lost exit if the shim did not
	return nil
}

// RemoveContainer kills the container if it runs and removes its cgroup,
// state and log files.
func (r *Runtime) RemoveContainer(ctx context.Context, containerID string) error {
	rec := r.container(containerID)
	if rec == nil {
		return nil
	}
	if err := r.StopContainer(ctx, containerID, 0); err != nil {
		return err
	}
	var errs []error
	errs = append(errs, r.cg.remove(rec.Cgroup, r.cfg.StopGrace))
	rotated, _ := filepath.Glob(rec.LogPath + ".*")
	for _, f := range append(rotated, rec.LogPath) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	r.mu.Lock()
	delete(r.containers, containerID)
	errs = append(errs, os.RemoveAll(r.containerDir(containerID)))
	r.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove container %s: %w", containerID, err)
	}
	return nil
}

// ListContainers implements runtime.ContainerManager.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	for _, rec := range r.containers {
		c := rec.config
		if filter != nil && ((filter.Id != "" && filter.Id != rec.ID) || (filter.PodSandboxId != "" && filter.PodSandboxId != rec.SandboxID) ||
			!runtime.MatchLabels(filter.LabelSelector, c.Labels)) {
			continue // not asked for: its state (files and /proc reads) is not read
		}
		ctr := &runtimeapi.Container{
			Id:           rec.ID,
			PodSandboxId: rec.SandboxID,
			Metadata:     c.Metadata,
			Image:        &runtimeapi.ImageSpec{Image: c.GetImage().GetImage()},
			ImageRef:     c.GetImage().GetImage(),
			State:        r.observe(rec).state,
			CreatedAt:    rec.CreatedAt,
			Labels:       c.Labels,
			Annotations:  c.Annotations,
		}
		if runtime.MatchContainer(filter, ctr) {
			out = append(out, clone(ctr))
		}
	}
	return out, nil
}

// ContainerStatus implements runtime.ContainerManager.
func (r *Runtime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.containers[containerID]
	if !ok {
		return nil, runtime.NotFoundError("container", containerID)
	}
	st := r.observe(rec)
	c := rec.config
	status := &runtimeapi.ContainerStatus{
		Id:          rec.ID,
		Metadata:    c.Metadata,
		State:       st.state,
		CreatedAt:   rec.CreatedAt,
		Image:       &runtimeapi.ImageSpec{Image: c.GetImage().GetImage()},
		ImageRef:    c.GetImage().GetImage(),
		Labels:      c.Labels,
		Annotations: c.Annotations,
		Mounts:      c.Mounts,
		LogPath:     rec.LogPath,
	}
	if res := c.GetLinux().GetResources(); res != nil {
		status.Resources = &runtimeapi.ContainerResources{Linux: res}
	}
	if st.shim != nil {
		status.StartedAt = st.shim.StartedAt
	}
	if st.exit != nil {
		status.FinishedAt, status.ExitCode = st.exit.FinishedAt, st.exit.ExitCode
		status.Reason, status.Message = st.exit.Reason, st.exit.Message
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: clone(status)}
	if verbose && st.shim != nil {
		resp.Info = map[string]string{
			"pid": strconv.Itoa(st.shim.Process.PID), "shimPid": strconv.Itoa(st.shim.Shim.PID), "cgroup": rec.Cgroup,
		}
	}
	return resp, nil
}

// observed is a container's process state as read from its files and /proc.
type observed struct {
	state runtimeapi.ContainerState
	shim  *shim.State // nil until started
	exit  *shim.Exit  // nil until exited
}

// observe reads the container's process state. A container whose shim and
// process are both gone without an exit record (shim killed, node rebooted)
// is recorded as exited with 255. r.mu must be held.
func (r *Runtime) observe(rec *containerRecord) observed {
	dir := r.containerDir(rec.ID)
	var ex shim.Exit
	if shim.ReadJSON(filepath.Join(dir, shim.ExitFile), &ex) == nil {
		st := observed{state: runtimeapi.ContainerState_CONTAINER_EXITED, exit: &ex}
		if sh := (shim.State{}); shim.ReadJSON(filepath.Join(dir, shim.ShimFile), &sh) == nil {
			st.shim = &sh
		}
		return st
	}
	var sh shim.State
	if shim.ReadJSON(filepath.Join(dir, shim.ShimFile), &sh) != nil {
		return observed{state: runtimeapi.ContainerState_CONTAINER_CREATED}
	}
	if sh.Process.Alive() || sh.Shim.Alive() {
		return observed{state: runtimeapi.ContainerState_CONTAINER_RUNNING, shim: &sh}
	}
	if shim.ReadJSON(filepath.Join(dir, shim.ExitFile), &ex) != nil { // the shim may have just written it
		ex = shim.Exit{ExitCode: 255, FinishedAt: r.cfg.Now().UnixNano(), Reason: "Error",
			Message: "container process lost: it and its shim exited without recording an exit status"}
		if err := shim.WriteJSON(filepath.Join(dir, shim.ExitFile), ex); err != nil {
			r.log.Error("record lost container", "container", rec.ID, "err", err)
		}
	}
	return observed{state: runtimeapi.ContainerState_CONTAINER_EXITED, shim: &sh, exit: &ex}
}

// container returns the record of id, nil if unknown.
func (r *Runtime) container(id string) *containerRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.containers[id]
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }
