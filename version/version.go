// Package version holds the build's version, set at link time:
//
//	go build -ldflags "-X github.com/wheelhouse-dev/wheelhouse/version.Version=v0.1.0 \
//	    -X github.com/wheelhouse-dev/wheelhouse/version.Commit=$(git rev-parse HEAD)" ./cmd/wheelhouse
//
// Get reports it in the shape of Kubernetes' version.Info, which `/version` serves.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set with -ldflags "-X". Empty values fall back to the VCS stamp Go records in the binary, if any.
var (
	// Version is a semantic version ("v0.1.0") or a `git describe` string.
	Version = ""
	// Commit is the full git commit hash.
	Commit = ""
	// BuildDate is an RFC 3339 UTC time; left empty by default for reproducible builds.
	BuildDate = ""
)

// Info describes the running binary. Its JSON form matches Kubernetes' k8s.io/apimachinery/pkg/version.Info.
type Info struct {
	Major        string `json:"major"`
	Minor        string `json:"minor"`
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// String is the version, as `wheelhouse --version` prints it.
func (i Info) String() string { return i.GitVersion }

// Get returns the version of the running binary. GitVersion is "v0.0.0-dev" and GitCommit "unknown" when
// neither the linker nor Go's VCS stamp provided them.
func Get() Info {
	info := Info{
		GitVersion: Version,
		GitCommit:  Commit,
		BuildDate:  BuildDate,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	fromBuildInfo(&info)
	if info.GitVersion == "" {
		info.GitVersion = "v0.0.0-dev"
	}
	if info.GitCommit == "" {
		info.GitCommit = "unknown"
	}
	info.Major, info.Minor = majorMinor(info.GitVersion)
	return info
}

// fromBuildInfo fills what the linker left empty from the VCS settings `go build` stamps into the binary.
func fromBuildInfo(info *Info) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if info.GitVersion == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.GitVersion = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.GitCommit == "" {
				info.GitCommit = s.Value
			}
		case "vcs.modified":
			info.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
		}
	}
}

// majorMinor extracts "1" and "2" from "v1.2.3-rc.1"; both are empty when the version is not semantic.
func majorMinor(v string) (string, string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", ""
	}
	major, minor := leadingDigits(parts[0]), leadingDigits(parts[1])
	if major == "" || minor == "" || len(major) != len(parts[0]) {
		return "", ""
	}
	return major, minor
}

func leadingDigits(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		return s
	}
	return s[:i]
}
