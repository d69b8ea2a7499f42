package tenancy

import "testing"

// TestTunnelHolders: the latest replica to record a tunnel holds it; only the holder's disconnect forgets it.
func TestTunnelHolders(t *testing.T) {
	s := newTestDB(t).open(t, nil)
	ctx := t.Context()
	if _, ok, err := s.TunnelHolder(ctx, "c1", "n1"); ok || err != nil {
		t.Fatalf("before any tunnel: %v %v", ok, err)
	}
	if err := s.RecordTunnel(ctx, "c1", "n1", "replica-a", "https://a:8443"); err != nil {
		t.Fatal(err)
	}
	// The agent reconnects to B before A notices its old tunnel is dead.
	if err := s.RecordTunnel(ctx, "c1", "n1", "replica-b", "https://b:8443"); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgetTunnel(ctx, "c1", "n1", "replica-a"); err != nil {
		t.Fatal(err)
	}
	h, ok, err := s.TunnelHolder(ctx, "c1", "n1")
	if !ok || err != nil || h != (TunnelHolder{Replica: "replica-b", URL: "https://b:8443"}) {
		t.Fatalf("holder after A's late disconnect: %+v %v %v; want B", h, ok, err)
	}
	if _, ok, _ := s.TunnelHolder(ctx, "c2", "n1"); ok {
		t.Fatal("another cluster's node of the same name has a holder")
	}
	if err := s.ForgetTunnel(ctx, "c1", "n1", "replica-b"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.TunnelHolder(ctx, "c1", "n1"); ok || err != nil {
		t.Fatalf("after B's disconnect: %v %v", ok, err)
	}
}
