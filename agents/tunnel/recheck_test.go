package tunnel

import (
	"errors"
	"testing"
	"time"
)

// A tunnel whose credential is revoked is closed at the next Recheck of its key, and only it; the agent's
// reconnection is refused. A check that cannot answer keeps the tunnel.
func TestRecheckClosesRevokedTunnels(t *testing.T) {
	s := newServer(t, testKeepalive, func(c *RegistryConfig) { c.RecheckEvery = -1 })
	startAgent(t, s, "c1", "n1", kubelet("n1"))
	startAgent(t, s, "c1", "n2", kubelet("n2"))
	waitConnected(t, s, "c1", "n1")
	waitConnected(t, s, "c1", "n2")

	unavailable := errors.New("database away")
	s.checkErr.Store(&unavailable)
	s.reg.Recheck(t.Context(), func(Key) bool { return true })
	if !s.reg.Connected("c1", "n1") || !s.reg.Connected("c1", "n2") {
		t.Fatal("a check that failed to answer closed a tunnel")
	}
	s.checkErr.Store(nil)

	s.revoked.Store("c1/n1", true)
	s.revoked.Store("c1/n2", true)
	// Only the keys asked for are checked.
	s.reg.Recheck(t.Context(), func(k Key) bool { return k.Node == "n1" })
	eventually(t, "n1's tunnel closed", func() bool { return !s.reg.Connected("c1", "n1") })
	if !s.reg.Connected("c1", "n2") {
		t.Error("n2's tunnel was closed by a recheck of n1")
	}
	accepts := s.accepts.Load()
	eventually(t, "n1's agent tried again", func() bool { return s.accepts.Load() > accepts })
	if _, err := get(t, s.client("c1", "n1"), "/name"); !errors.Is(err, ErrNotConnected) {
		t.Errorf("GET through a revoked tunnel: %v, want ErrNotConnected", err)
	}
}

// Without any Recheck call, every tunnel is checked each RecheckEvery.
func TestRecheckEvery(t *testing.T) {
	s := newServer(t, testKeepalive, func(c *RegistryConfig) { c.RecheckEvery = 20 * time.Millisecond })
	startAgent(t, s, "c1", "n1", kubelet("n1"))
	waitConnected(t, s, "c1", "n1")
	if got := mustGet(t, s.client("c1", "n1"), "/name"); got != "n1" {
		t.Fatalf("GET /name = %q", got)
	}
	s.revoked.Store("c1/n1", true)
	eventually(t, "the revoked tunnel closed by the periodic check", func() bool { return !s.reg.Connected("c1", "n1") })
}

// CloseCluster closes the tunnels of one cluster, and no other's.
func TestCloseCluster(t *testing.T) {
	s := newServer(t, testKeepalive, func(c *RegistryConfig) { c.RecheckEvery = -1 })
	startAgent(t, s, "c1", "n1", kubelet("c1-n1"))
	startAgent(t, s, "c2", "n1", kubelet("c2-n1"))
	waitConnected(t, s, "c1", "n1")
	waitConnected(t, s, "c2", "n1")
	s.revoked.Store("c1/n1", true) // the deleted cluster's credentials are gone with it
	s.reg.CloseCluster("c1")
	eventually(t, "c1's tunnel closed", func() bool { return !s.reg.Connected("c1", "n1") })
	if got := mustGet(t, s.client("c2", "n1"), "/name"); got != "c2-n1" {
		t.Errorf("c2's node answers %q", got)
	}
}
