package dns

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // a part of the error; "" for none
	}{
		{"minimal", Config{Listen: "10.244.0.1:53"}, ""},
		{"everything", Config{Domain: "corp.example.", Listen: "[fd00::1]:53", Upstreams: []string{"192.0.2.53", "[2001:db8::1]:5353"}, TTL: 30 * time.Second}, ""},
		{"no listen address", Config{}, "listen address is required"},
		{"listen on a name", Config{Listen: "localhost:53"}, "want ip:port"},
		{"bad domain", Config{Listen: "10.244.0.1:53", Domain: "a..b"}, "not a domain name"},
		{"upstream by name", Config{Listen: "10.244.0.1:53", Upstreams: []string{"dns.google"}}, "want ip or ip:port"},
		{"upstream port 0", Config{Listen: "10.244.0.1:53", Upstreams: []string{"192.0.2.53:0"}}, "want ip or ip:port"},
		{"negative ttl", Config{Listen: "10.244.0.1:53", TTL: -time.Second}, "ttl"},
		{"ttl under a second", Config{Listen: "10.244.0.1:53", TTL: time.Millisecond}, "ttl"},
		{"negative forward timeout", Config{Listen: "10.244.0.1:53", ForwardTimeout: -1}, "forward timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestUpstreamsFromResolvConf: without Upstreams, the host resolv.conf's nameservers are the upstreams.
func TestUpstreamsFromResolvConf(t *testing.T) {
	write := func(t *testing.T, text string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "resolv.conf")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name    string
		text    string
		want    []string
		wantErr error
	}{
		{"nameservers", "search example.com\nnameserver 192.0.2.53\nnameserver 2001:db8::53\noptions ndots:1\n",
			[]string{"192.0.2.53:53", "[2001:db8::53]:53"}, nil},
		{"none", "search example.com\n", nil, ErrNoUpstreams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Config{Listen: "127.0.0.1:53", ResolvConf: write(t, tt.text)}.withDefaults()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("withDefaults: %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				equal(t, "upstreams", cfg.Upstreams, tt.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := Config{Listen: "127.0.0.1:53", ResolvConf: filepath.Join(t.TempDir(), "nope")}.withDefaults()
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("withDefaults: %v, want a missing file", err)
		}
	})
}

// TestForwardingLoop: the listen address as an upstream is refused.
func TestForwardingLoop(t *testing.T) {
	_, err := New(t.Context(), Config{Listen: "127.0.0.1:5300", Upstreams: []string{"127.0.0.1:5300"}}, NewIndex())
	if err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("New: %v, want a loop error", err)
	}
}

// TestClose: a Server that never started releases its port on Close; Start after Close returns at once.
func TestClose(t *testing.T) {
	s, err := New(t.Context(), Config{Listen: "127.0.0.1:0", Upstreams: []string{"192.0.2.53"}}, NewIndex())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Errorf("Start after Close: %v", err)
	}
	for _, netw := range []string{"udp", "tcp"} {
		var err error
		if netw == "udp" {
			var pc net.PacketConn
			if pc, err = net.ListenPacket(netw, s.Addr().String()); err == nil {
				err = pc.Close()
			}
		} else {
			var ln net.Listener
			if ln, err = net.Listen(netw, s.Addr().String()); err == nil {
				err = ln.Close()
			}
		}
		if err != nil {
			t.Errorf("%s port after Close: %v", netw, err)
		}
	}
}
