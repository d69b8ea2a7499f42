package shim

import (
	"encoding/json"
	"fmt"
	"os"
)

// The files of a container's state directory that the shim and the runtime share (the layout is in the
// process package's state.go).
const (
	SpecFile    = "spec.json"
	ShimFile    = "shim.json"
	ExitFile    = "exit.json"
	ShimLogFile = "shim.log"
)

// State is written by the shim once the container process runs.
type State struct {
	Shim      Identity `json:"shim"`
	Process   Identity `json:"process"`
	StartedAt int64    `json:"startedAt"` // unix nanoseconds
}

// Exit is written by the shim when the process has exited (or by the
// runtime when the start failed or the shim was lost).
type Exit struct {
	ExitCode   int32  `json:"exitCode"`
	FinishedAt int64  `json:"finishedAt"` // unix nanoseconds
	Reason     string `json:"reason"`     // Completed, Error, OOMKilled, StartError
	Message    string `json:"message,omitempty"`
}

// Spec is what the shim and the init helper need to run a container.
type Spec struct {
	Args        []string `json:"args"`
	Env         []string `json:"env"`
	Cwd         string   `json:"cwd,omitempty"`
	User        *User    `json:"user,omitempty"`
	NetNS       string   `json:"netns,omitempty"`
	IPCNS       string   `json:"ipcns,omitempty"` // the sandbox's IPC namespace ("": the node's)
	Mounts      []Mount  `json:"mounts,omitempty"`
	CgroupProcs []string `json:"cgroupProcs,omitempty"`
	// CgroupNS gives the container its own view of cgroup v2 (ownCgroupView): set on v2 hosts.
	CgroupNS    bool     `json:"cgroupns,omitempty"`
	OOMFiles    []string `json:"oomFiles,omitempty"` // memory.events / memory.oom_control
	LogPath     string   `json:"logPath"`
	LogMaxBytes int64    `json:"logMaxBytes"`
	LogMaxFiles int      `json:"logMaxFiles"`
	Stdin       bool     `json:"stdin,omitempty"` // kept open for attach sessions
	StdinOnce   bool     `json:"stdinOnce,omitempty"`
	Tty         bool     `json:"tty,omitempty"`
	Security    Security `json:"security"`
}

// Security is how init and exec confine the command before executing it (see security.go).
type Security struct {
	// Capabilities are the capability numbers the process keeps in its bounding set (and, as root, its
	// permitted and effective sets); nil keeps every capability (a privileged container).
	Capabilities *[]int `json:"capabilities,omitempty"`
	// NoNewPrivs sets no_new_privs: setuid binaries and file capabilities grant nothing.
	NoNewPrivs bool `json:"noNewPrivs,omitempty"`
	// Seccomp are the system call numbers refused with EPERM; SeccompArch is the audit architecture the filter
	// admits (any other is refused). Nil: no filter.
	Seccomp     []uint32 `json:"seccomp,omitempty"`
	SeccompArch uint32   `json:"seccompArch,omitempty"`
	// MaskedPaths are hidden (an empty read-only tmpfs over a directory, /dev/null over a file);
	// ReadonlyPaths are made read-only with what is mounted below them.
	MaskedPaths   []string `json:"maskedPaths,omitempty"`
	ReadonlyPaths []string `json:"readonlyPaths,omitempty"`
	// ReadonlyRootfs makes every mount of the container's view of the node read-only but /proc, /dev, /sys
	// and the container's own Mounts.
	ReadonlyRootfs bool `json:"readonlyRootfs,omitempty"`
}

type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

type Mount struct {
	Source      string `json:"source"`
	Target      string `json:"target"`
	ReadOnly    bool   `json:"readOnly,omitempty"`
	Propagation string `json:"propagation,omitempty"` // private (default), rslave, rshared
}

// WriteJSON replaces path with v's JSON, atomically and durably.
func WriteJSON(path string, v any) error {
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

// ReadJSON reads path into v; a missing file is reported as fs.ErrNotExist.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}
