package nft

import (
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// newSharded opens a sharded backend of n tables in the namespace at path, closed when the test ends.
func newSharded(t testing.TB, path string, n int) *Sharded {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	s, err := NewSharded(Config{PodCIDR: podCIDR, NetNS: ns, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}, n)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Skip("the kernel has no nf_tables netlink (CONFIG_NF_TABLES)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tables lists the namespace's ip tables.
func tables(t *testing.T, path string) []string {
	t.Helper()
	other, _ := otherConn(t, path)
	list, err := other.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tb := range list {
		out = append(out, tb.Name)
	}
	slices.Sort(out)
	return out
}

// TestSharded: the services spread over the tables and traffic flows through whichever holds them (masquerade
// and hairpin included); a change touches one table, and the others do not read themselves back for it; a table
// changed behind the backend's back is repaired; the single table of the other layout goes; Cleanup removes all.
func TestSharded(t *testing.T) {
	c := newCluster(t)
	// A leftover of the single-table layout, which would DNAT too.
	if err := c.b.Sync(t.Context(), state(web)); err != nil {
		t.Fatal(err)
	}
	s := newSharded(t, c.node, 4)
	desired := manyServices(400, 3)
	for _, vs := range []proxy.VirtualService{web, sticky, webNode, self} {
		desired[vs.Key] = vs
	}
	if err := s.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	if got, want := tables(t, c.node), []string{"wh-proxy-0", "wh-proxy-1", "wh-proxy-2", "wh-proxy-3"}; !slices.Equal(got, want) {
		t.Fatalf("tables %q, want %q (the single table removed)", got, want)
	}
	for i, b := range s.shards {
		if n := len(b.Programmed()); n < 50 {
			t.Errorf("table %d holds %d of %d virtual services: not spread", i, n, len(desired))
		}
		assertTable(t, b)
	}
	if got := s.Programmed(); len(got) != len(desired) {
		t.Fatalf("the tables hold %d virtual services, want %d", len(got), len(desired))
	}

	t.Run("traffic", func(t *testing.T) {
		for _, tc := range []struct {
			name, from string
			to         netip.AddrPort
			want       []string
		}{
			{"cluster IP", c.pods["d"], addrPort(web.Key), []string{"a", "b"}},
			{"node port from outside", c.outside, addrPort(webNode.Key), []string{"a", "b"}},
			{"hairpin", c.pods["a"], addrPort(self.Key), []string{"a"}},
		} {
			got := askN(tc.from, "tcp", tc.to, 30)
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tc.want) {
				t.Errorf("%s: answers %v, want from %v", tc.name, got, tc.want)
			}
		}
		for _, tc := range []struct {
			name, from string
			to         netip.AddrPort
			seenFrom   netip.Addr
		}{
			{"a node port masquerades", c.outside, addrPort(webNode.Key), gatewayA},
			{"a pod keeps its address", c.pods["d"], addrPort(web.Key), podIPs["d"]},
			{"hairpin is masqueraded", c.pods["a"], addrPort(self.Key), gatewayA},
		} {
			if got, err := ask(tc.from, "tcp", tc.to, nil); err != nil || got.SeenFrom != tc.seenFrom.String() {
				t.Errorf("%s: seen from %q (%v), want %v", tc.name, got.SeenFrom, err, tc.seenFrom)
			}
		}
	})

	t.Run("one change, one table", func(t *testing.T) {
		readBacks := func() int {
			n := 0
			for _, b := range s.shards {
				n += b.readBacks
			}
			return n
		}
		before := readBacks()
		for i, k := range slices.SortedFunc(maps.Keys(manyServices(400, 3)), proxy.Key.Compare)[200:220] { // not the named services (10.96.0.1x)
			vs := desired[k]
			vs.Destinations = append(slices.Clone(vs.Destinations[1:]), netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, 0, byte(i + 1)}), 8080))
			slices.SortFunc(vs.Destinations, netip.AddrPort.Compare)
			desired[k] = vs
			gens := make([]uint32, len(s.shards))
			for j, b := range s.shards {
				gens[j] = b.lastCommit()
			}
			if err := s.Sync(t.Context(), desired); err != nil {
				t.Fatal(err)
			}
			changed := 0
			for j, b := range s.shards {
				if b.lastCommit() != gens[j] {
					changed++
					if j != s.shard(k) {
						t.Errorf("change %d: table %d committed, the service is in table %d", i, j, s.shard(k))
					}
				}
			}
			if changed != 1 {
				t.Fatalf("change %d: %d tables committed, want 1", i, changed)
			}
		}
		if n := readBacks() - before; n != 0 {
			t.Errorf("%d tables read themselves back after their siblings' commits, want none", n)
		}
		for _, b := range s.shards {
			assertTable(t, b)
		}
	})

	t.Run("someone else's change is repaired", func(t *testing.T) {
		other, _ := otherConn(t, c.node)
		i := s.shard(web.Key)
		table := &nftables.Table{Name: shardTable(DefaultTable, i), Family: nftables.TableFamilyIPv4}
		other.FlushChain(&nftables.Chain{Name: serviceChain(s.shards[i].cfg, web).name, Table: table})
		if err := other.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(t.Context(), desired); err != nil {
			t.Fatal(err)
		}
		assertTable(t, s.shards[i])
		if got := askN(c.pods["d"], "tcp", addrPort(web.Key), 20); !slices.Equal(slices.Sorted(maps.Keys(got)), []string{"a", "b"}) {
			t.Errorf("after the repair: answers %v, want from a and b", got)
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		if err := s.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := tables(t, c.node); len(got) != 0 {
			t.Fatalf("tables left: %q", got)
		}
	})
}
