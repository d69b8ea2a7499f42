package main

import (
	"errors"
	"strings"
	"testing"
)

// make run's node runs container images whenever containerd can run (issue 22); the process runtime is the
// named fallback, and either can be asked for.
func TestLocalAgentRuntime(t *testing.T) {
	installed := func(bins ...string) func(string) (string, error) {
		return func(name string) (string, error) {
			for _, b := range bins {
				if b == name {
					return "/usr/bin/" + name, nil
				}
			}
			return "", errors.New("not found")
		}
	}
	for _, c := range []struct {
		mode   string
		look   func(string) (string, error)
		want   string
		whyHas string
	}{
		{"auto", installed("containerd", "runc"), "containerd", "installed"},
		{"auto", installed("runc"), "process", "containerd is not installed"},
		{"auto", installed("containerd"), "process", "runc is not installed"},
		{"containerd", installed(), "containerd", "--local-agent-runtime containerd"},
		{"process", installed("containerd", "runc"), "process", "--local-agent-runtime process"},
	} {
		got, why := localAgentRuntime(c.mode, c.look)
		if got != c.want || !strings.Contains(why, c.whyHas) {
			t.Errorf("localAgentRuntime(%s) = %s (%s), want %s (%s)", c.mode, got, why, c.want, c.whyHas)
		}
	}
}
