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

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// State layout under Config.StateDir (every JSON file is replaced atomically):
//
//	sandboxes/<id>/sandbox.json    sandboxRecord, written by the runtime
//	sandboxes/<id>/resolv.conf     from the sandbox config's DNSConfig, mounted at /etc/resolv.conf in its containers
//	netns/<id>                     the sandbox's network namespace (bind mount)
//	netns/<id>.ipc                 the sandbox's IPC namespace (bind mount; netns/ is the one shared mount point
//	                               of every namespace the runtime keeps)
//	containers/<id>/container.json containerRecord, written by the runtime
//	containers/<id>/spec.json      shim.Spec: what the shim and init run
//	containers/<id>/shim.json      shim.State, written by the shim once the process runs
//	containers/<id>/exit.json      shim.Exit, written by the shim when it exits
//	containers/<id>/shim.log       the shim's own diagnostics
const (
	sandboxFile    = "sandbox.json"
	resolvConfFile = "resolv.conf"
	containerFile  = "container.json"
)

// resolvConfPath is where containers find their sandbox's resolv.conf.
const resolvConfPath = "/etc/resolv.conf"

// sandboxRecord is a sandbox as persisted.
type sandboxRecord struct {
	ID             string          `json:"id"`
	Config         json.RawMessage `json:"config"` // protojson of PodSandboxConfig
	RuntimeHandler string          `json:"runtimeHandler,omitempty"`
	CreatedAt      int64           `json:"createdAt"`
	Ready          bool            `json:"ready"`
	NetNS          string          `json:"netns,omitempty"` // "" for host network
	IPCNS          string          `json:"ipcns,omitempty"` // "" for host IPC
	IP             string          `json:"ip,omitempty"`
	LogDir         string          `json:"logDir"`
	OwnLogDir      bool            `json:"ownLogDir,omitempty"` // created by us, removed with the sandbox
	Cgroup         string          `json:"cgroup"`
	// ResolvConf is the sandbox's resolv.conf, written from its DNSConfig and bind-mounted at /etc/resolv.conf
	// in its containers; "" without a DNSConfig or with an empty one (the containers see the host's, as containerd copies it).
	ResolvConf string `json:"resolvConf,omitempty"`

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
		if err := shim.ReadJSON(filepath.Join(dir, e.Name(), sandboxFile), rec); errors.Is(err, fs.ErrNotExist) {
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
		if err := shim.ReadJSON(filepath.Join(dir, e.Name(), containerFile), rec); errors.Is(err, fs.ErrNotExist) {
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
