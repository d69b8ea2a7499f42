package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// State layout under Config.StateDir (every JSON file is replaced atomically):
//
//	sandboxes/<id>/sandbox.json    sandboxRecord, written by the runtime
//	netns/<id>                     the sandbox's network namespace (bind mount)
//	containers/<id>/container.json containerRecord, written by the runtime
//	containers/<id>/spec.json      helperSpec: what the shim and init run
//	containers/<id>/shim.json      shimState, written by the shim once the process runs
//	containers/<id>/exit.json      exitState, written by the shim when it exits
//	containers/<id>/shim.log       the shim's own diagnostics
const (
	sandboxFile   = "sandbox.json"
	containerFile = "container.json"
	specFile      = "spec.json"
	shimFile      = "shim.json"
	exitFile      = "exit.json"
	shimLogFile   = "shim.log"
)

// sandboxRecord is a sandbox as persisted.
type sandboxRecord struct {
	ID             string          `json:"id"`
	Config         json.RawMessage `json:"config"` // protojson of PodSandboxConfig
	RuntimeHandler string          `json:"runtimeHandler,omitempty"`
	CreatedAt      int64           `json:"createdAt"`
	Ready          bool            `json:"ready"`
	NetNS          string          `json:"netns,omitempty"` // "" for host network
	IP             string          `json:"ip,omitempty"`
	LogDir         string          `json:"logDir"`
	OwnLogDir      bool            `json:"ownLogDir,omitempty"` // created by us, removed with the sandbox
	Cgroup         string          `json:"cgroup"`

	config *runtimeapi.PodSandboxConfig
}

// containerRecord is a container as persisted by the runtime; its process
// state is in shim.json and exit.json.
type containerRecord struct {
	ID        string          `json:"id"`
	SandboxID string          `json:"sandboxId"`
	Config    json.RawMessage `json:"config"` // protojson of ContainerConfig
	CreatedAt int64           `json:"createdAt"`
	LogPath   string          `json:"logPath"`
	Cgroup    string          `json:"cgroup"`

	config *runtimeapi.ContainerConfig
}

// shimState is written by the shim once the container process runs.
type shimState struct {
	Shim      procIdentity `json:"shim"`
	Process   procIdentity `json:"process"`
	StartedAt int64        `json:"startedAt"` // unix nanoseconds
}

// exitState is written by the shim when the process has exited (or by the
// runtime when the start failed or the shim was lost).
type exitState struct {
	ExitCode   int32  `json:"exitCode"`
	FinishedAt int64  `json:"finishedAt"` // unix nanoseconds
	Reason     string `json:"reason"`     // Completed, Error, OOMKilled, StartError
	Message    string `json:"message,omitempty"`
}

// helperSpec is what the shim and the init helper need to run a container.
type helperSpec struct {
	Args        []string    `json:"args"`
	Env         []string    `json:"env"`
	Cwd         string      `json:"cwd,omitempty"`
	User        *userSpec   `json:"user,omitempty"`
	NetNS       string      `json:"netns,omitempty"`
	Mounts      []mountSpec `json:"mounts,omitempty"`
	CgroupProcs []string    `json:"cgroupProcs,omitempty"`
	OOMFiles    []string    `json:"oomFiles,omitempty"` // memory.events / memory.oom_control
	LogPath     string      `json:"logPath"`
	LogMaxBytes int64       `json:"logMaxBytes"`
	LogMaxFiles int         `json:"logMaxFiles"`
	Stdin       bool        `json:"stdin,omitempty"` // kept open for attach sessions
	StdinOnce   bool        `json:"stdinOnce,omitempty"`
	Tty         bool        `json:"tty,omitempty"`
}

type userSpec struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

type mountSpec struct {
	Source      string `json:"source"`
	Target      string `json:"target"`
	ReadOnly    bool   `json:"readOnly,omitempty"`
	Propagation string `json:"propagation,omitempty"` // private (default), rslave, rshared
}

// writeJSON replaces path with v's JSON, atomically and durably.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// readJSON reads path into v; a missing file is reported as fs.ErrNotExist.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func marshalProto(m proto.Message) (json.RawMessage, error) {
	return protojson.Marshal(m)
}

func unmarshalProto(b json.RawMessage, m proto.Message) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m)
}

// loadSandboxes reads every sandbox record under dir. Directories without a
// record (a create cut short by a crash) are returned as orphans.
func loadSandboxes(dir string) (map[string]*sandboxRecord, []string, error) {
	out := map[string]*sandboxRecord{}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	var orphans []string
	for _, e := range entries {
		rec := &sandboxRecord{}
		if err := readJSON(filepath.Join(dir, e.Name(), sandboxFile), rec); errors.Is(err, fs.ErrNotExist) {
			orphans = append(orphans, e.Name())
			continue
		} else if err != nil {
			return nil, nil, err
		}
		rec.config = &runtimeapi.PodSandboxConfig{}
		if err := unmarshalProto(rec.Config, rec.config); err != nil {
			return nil, nil, fmt.Errorf("sandbox %s: %w", e.Name(), err)
		}
		out[rec.ID] = rec
	}
	return out, orphans, nil
}

// loadContainers reads every container record under dir; directories
// without a record are returned as orphans (nothing was started for them).
func loadContainers(dir string) (map[string]*containerRecord, []string, error) {
	out := map[string]*containerRecord{}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	var orphans []string
	for _, e := range entries {
		rec := &containerRecord{}
		if err := readJSON(filepath.Join(dir, e.Name(), containerFile), rec); errors.Is(err, fs.ErrNotExist) {
			orphans = append(orphans, e.Name())
			continue
		} else if err != nil {
			return nil, nil, err
		}
		rec.config = &runtimeapi.ContainerConfig{}
		if err := unmarshalProto(rec.Config, rec.config); err != nil {
			return nil, nil, fmt.Errorf("container %s: %w", e.Name(), err)
		}
		out[rec.ID] = rec
	}
	return out, orphans, nil
}
