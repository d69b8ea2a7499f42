package version

import (
	"runtime"
	"testing"
)

func TestMajorMinor(t *testing.T) {
	for _, tc := range []struct{ in, major, minor string }{
		{"v1.2.3", "1", "2"},
		{"v0.14.0-rc.1+abc", "0", "14"},
		{"1.30", "1", "30"},
		{"v0.0.0-dev", "0", "0"},
		{"v1.2-5-gabcdef-dirty", "1", "2"},
		{"abcdef0", "", ""},
		{"v1", "", ""},
		{"vX.2.3", "", ""},
		{"v1x.2.3", "", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			major, minor := majorMinor(tc.in)
			if major != tc.major || minor != tc.minor {
				t.Errorf("majorMinor(%q) = %q, %q; want %q, %q", tc.in, major, minor, tc.major, tc.minor)
			}
		})
	}
}

func TestGetDefaults(t *testing.T) {
	v := Get()
	if v.GitVersion == "" || v.GitCommit == "" {
		t.Errorf("Get() = %+v: GitVersion and GitCommit must never be empty", v)
	}
	if v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Compiler != runtime.Compiler {
		t.Errorf("Get() = %+v: wrong Go version, platform or compiler", v)
	}
}
