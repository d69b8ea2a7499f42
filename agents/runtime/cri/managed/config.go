package managed

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Layout is where a containerd keeps its things and what its CRI plugin is set to: what WriteConfig writes.
type Layout struct {
	// Root (images, snapshots, metadata) and State (tasks, sockets, netns mounts, runc's state) directories.
	Root, State string
	// Socket is the gRPC socket (the CRI services are served there); TTRPCSocket the ttrpc one.
	Socket, TTRPCSocket string
	// CNIConfDir and CNIBinDir are the CRI plugin's CNI directories.
	CNIConfDir, CNIBinDir string
	// PauseImage is the CRI plugin's sandbox_image; "" leaves containerd's default.
	PauseImage string
	// RestrictOOMScoreAdj keeps the oom_score_adj CRI gives containers at or above containerd's own; it is
	// needed where the process lacks CAP_SYS_RESOURCE (NeedsRestrictOOMScoreAdj).
	RestrictOOMScoreAdj bool
	// RegistryConfigPath is the CRI plugin's registry config_path: the hosts directories (hosts.toml per registry
	// host: mirrors, CAs, client certificates) that the agent writes from a registries.yaml; "" leaves it unset.
	RegistryConfigPath string
	// RegistryAuths are credentials per registry host (host[:port]) in the CRI plugin's registry.configs, which
	// containerd uses for pulls that come without credentials of their own: the sandbox (pause) image's.
	RegistryAuths map[string]RegistryAuth
}

// RegistryAuth is a registry host's credentials in containerd's CRI configuration: a user name and password, a
// base64 "user:password", or an identity token.
type RegistryAuth struct {
	Username, Password, Auth, IdentityToken string
}

// Snapshotter is the CRI plugin's snapshotter. overlayfs works on this project's machines (ext4 root, kernel
// overlay module).
const Snapshotter = "overlayfs"

// WriteConfig writes the containerd configuration of l (version 2, as containerd 1.6 reads it) to path, mode 0600.
//
//   - No debug or metrics listener; the gRPC and ttrpc sockets are l's.
//   - Snapshotters that cannot work here (btrfs, zfs, devmapper, aufs: no such filesystem or pool) are disabled
//     so that the log stays free of their start-up errors. (The legacy io.containerd.runtime.v1.linux, unused,
//     cannot be disabled: containerd 1.6's tasks service, and with it CRI, fails to load without it.)
//   - CRI: restrict_oom_score_adj when l asks for it (without CAP_SYS_RESOURCE, CRI would set the pause
//     container's oom_score_adj to -998, below containerd's own, which the kernel refuses: runc then fails every
//     sandbox with "can't get final child's PID from pipe: EOF"); netns_mounts_under_state_dir, so pod network
//     namespaces are bind-mounted under State rather than the host's /var/run/netns; a streaming server on
//     127.0.0.1 with a kernel-chosen port, so instances never collide; runc via io.containerd.runc.v2 with
//     cgroupfs (SystemdCgroup = false) and runc's state under State rather than the host-wide
//     /run/containerd/runc.
//   - The registry section has l's config_path and the credentials per host, if any (containerd 1.6 reads both
//     together: config_path for hosts, registry.configs."host".auth for credentials).
func WriteConfig(path string, l Layout) error {
	if err := os.WriteFile(path, []byte(l.toml()), 0o600); err != nil {
		return fmt.Errorf("managed: write containerd's config: %w", err)
	}
	return nil
}

// toml is WriteConfig's text.
func (l Layout) toml() string {
	q := strconv.Quote
	var pause string
	if l.PauseImage != "" {
		pause = "\n  sandbox_image = " + q(l.PauseImage)
	}
	return `version = 2
root = ` + q(l.Root) + `
state = ` + q(l.State) + `
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = ` + q(l.Socket) + `

[ttrpc]
  address = ` + q(l.TTRPCSocket) + `

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]` + pause + `
  restrict_oom_score_adj = ` + strconv.FormatBool(l.RestrictOOMScoreAdj) + `
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = ` + q(Snapshotter) + `
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = ` + q(filepath.Join(l.State, "runc")) + `

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ` + q(l.CNIBinDir) + `
    conf_dir = ` + q(l.CNIConfDir) + `
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
` + l.registryTOML()
}

// registryTOML is the inside of the CRI plugin's registry section.
func (l Layout) registryTOML() string {
	q := tomlString
	var b strings.Builder
	if l.RegistryConfigPath != "" {
		b.WriteString("    config_path = " + q(l.RegistryConfigPath) + "\n")
	}
	for _, host := range slices.Sorted(maps.Keys(l.RegistryAuths)) {
		a := l.RegistryAuths[host]
		b.WriteString("\n    [plugins.\"io.containerd.grpc.v1.cri\".registry.configs." + q(host) + ".auth]\n")
		for _, kv := range [][2]string{{"username", a.Username}, {"password", a.Password}, {"auth", a.Auth}, {"identitytoken", a.IdentityToken}} {
			if kv[1] != "" {
				b.WriteString("      " + kv[0] + " = " + q(kv[1]) + "\n")
			}
		}
	}
	return b.String()
}

// tomlString is s as a TOML basic string: quotes and backslashes escaped, control characters as \uXXXX (Go's
// strconv.Quote would write \x.. escapes, which TOML does not have). Credentials may hold any character.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/self/status's capability masks.
const capSysResource = 24

// NeedsRestrictOOMScoreAdj says whether this process lacks CAP_SYS_RESOURCE in its effective capabilities (a
// container's root, an unprivileged user namespace), so that containerd, its child, may not lower a process's
// oom_score_adj below its own and the CRI plugin needs restrict_oom_score_adj. When the capabilities cannot be
// read it says true: restricting is harmless where it is not needed.
func NeedsRestrictOOMScoreAdj() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return true
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err != nil || caps&(1<<capSysResource) == 0
		}
	}
	return true
}

// Config configures a Containerd. Dir is required; the rest has defaults (Validate fills them in).
type Config struct {
	// Dir is the instance's directory: config.toml, containerd.pid, root/, state/, net.d/ and, by default, the
	// sockets. The agent's is <data-dir>/containerd.
	Dir string
	// Socket is containerd's gRPC socket (default Dir/containerd.sock, or, when Dir's path is too long for a
	// unix socket's 107 bytes, /run/wheelhouse-containerd-<hash of Dir>/containerd.sock). The ttrpc socket is
	// beside it.
	Socket string
	// Binary is the containerd program (default: containerd in PATH). runc and containerd-shim-runc-v2 must be
	// in PATH too.
	Binary string
	// CNIConfDir is the CRI plugin's CNI conf_dir (default Dir/net.d), CNIBinDir its bin_dir (default
	// /usr/lib/cni, Debian's containernetworking-plugins).
	CNIConfDir, CNIBinDir string
	// PauseImage is the CRI plugin's sandbox_image ("" is containerd's default).
	PauseImage string
	// RegistryConfigPath and RegistryAuths are Layout's: the registry hosts directory and credentials per host.
	RegistryConfigPath string
	RegistryAuths      map[string]RegistryAuth
	// RestrictOOMScoreAdj is the CRI plugin's restrict_oom_score_adj (default NeedsRestrictOOMScoreAdj()).
	RestrictOOMScoreAdj *bool
	// ReadyTimeout bounds the wait for each start to answer CRI Version and report RuntimeReady (default 30 s).
	ReadyTimeout time.Duration
	// StopGrace is how long Start waits for containerd to exit after SIGTERM before it sends SIGKILL (default
	// 10 s).
	StopGrace time.Duration
	// RestartBackoff is the first wait before restarting a containerd that exited (default 1 s); it doubles
	// with each exit that follows an unready start, up to MaxRestartBackoff (default 1 min), and is back to the
	// first once containerd has been ready.
	RestartBackoff, MaxRestartBackoff time.Duration
	// Logger receives containerd's output (debug), its starts (info) and exits (warn); default slog.Default().
	Logger *slog.Logger
}

// maxSocketPath is the longest unix socket path (sun_path holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// ErrNoBinary is Validate's error when containerd is not installed.
var ErrNoBinary = errors.New("managed: containerd not found (install Debian's containerd, runc and containernetworking-plugins packages)")

// Validate fills in the defaults and reports a configuration that cannot work: no Dir, a socket path too long,
// containerd, runc or the runc v2 shim missing (ErrNoBinary).
func (c *Config) Validate() error {
	if c.Dir == "" {
		return errors.New("managed: Dir is required")
	}
	if !filepath.IsAbs(c.Dir) {
		abs, err := filepath.Abs(c.Dir)
		if err != nil {
			return fmt.Errorf("managed: %w", err)
		}
		c.Dir = abs
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Socket, filepath.Join(c.Dir, "containerd.sock"))
	if len(c.ttrpcSocket()) > maxSocketPath && c.Socket == filepath.Join(c.Dir, "containerd.sock") {
		sum := sha256.Sum256([]byte(c.Dir))
		c.Socket = filepath.Join("/run", "wheelhouse-containerd-"+hex.EncodeToString(sum[:6]), "containerd.sock")
	}
	def(&c.CNIConfDir, filepath.Join(c.Dir, "net.d"))
	def(&c.CNIBinDir, "/usr/lib/cni")
	if c.RestrictOOMScoreAdj == nil {
		r := NeedsRestrictOOMScoreAdj()
		c.RestrictOOMScoreAdj = &r
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&c.ReadyTimeout, 30 * time.Second}, {&c.StopGrace, 10 * time.Second}, {&c.RestartBackoff, time.Second}, {&c.MaxRestartBackoff, time.Minute}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Socket) > maxSocketPath || len(c.ttrpcSocket()) > maxSocketPath {
		return fmt.Errorf("managed: socket path %s is longer than %d bytes", c.ttrpcSocket(), maxSocketPath)
	}
	if c.Binary == "" {
		p, err := exec.LookPath("containerd")
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoBinary, err)
		}
		c.Binary = p
	}
	for _, n := range []string{"runc", "containerd-shim-runc-v2"} {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("%w: %v", ErrNoBinary, err)
		}
	}
	return nil
}

// ttrpcSocket is the ttrpc socket's path, beside the gRPC one.
func (c *Config) ttrpcSocket() string {
	return strings.TrimSuffix(c.Socket, ".sock") + "-ttrpc.sock"
}

// layout is the configuration WriteConfig writes for c (after Validate).
func (c *Config) layout() Layout {
	return Layout{Root: filepath.Join(c.Dir, "root"), State: filepath.Join(c.Dir, "state"), Socket: c.Socket,
		TTRPCSocket: c.ttrpcSocket(), CNIConfDir: c.CNIConfDir, CNIBinDir: c.CNIBinDir, PauseImage: c.PauseImage,
		RestrictOOMScoreAdj: *c.RestrictOOMScoreAdj, RegistryConfigPath: c.RegistryConfigPath, RegistryAuths: c.RegistryAuths}
}
