package nft

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// manyServices is n cluster IPs 10.96.x.y:80 with dests endpoints each, drawn from 5,000 pod addresses.
func manyServices(n, dests int) proxy.State {
	st := proxy.State{}
	for i := range n {
		k := proxy.Key{Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Protocol: corev1.ProtocolTCP, Port: 80}
		vs := proxy.VirtualService{Key: k, Kind: proxy.ClusterIP, Service: fmt.Sprintf("default/svc-%d:http", i)}
		for j := range dests {
			p := (i*dests + j) % 5000
			vs.Destinations = append(vs.Destinations, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(p / 250), byte(p%250 + 1)}), 8080))
		}
		slices.SortFunc(vs.Destinations, netip.AddrPort.Compare)
		st[k] = vs
	}
	return st
}

func cloneState(st proxy.State) proxy.State {
	out := proxy.State{}
	for k, v := range st {
		v.Destinations = slices.Clone(v.Destinations)
		out[k] = v
	}
	return out
}

// ruleHandles is every chain's rule handles: a chain whose rules were rewritten has new ones.
func ruleHandles(t *testing.T, b *Backend) map[string][]uint64 {
	t.Helper()
	rules, err := b.sock.readRules(b.cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]uint64{}
	for _, r := range rules {
		out[r.chain] = append(out[r.chain], r.handle)
	}
	return out
}

// TestIncremental: a change touches only the chains and elements of the virtual services it changes, in a few
// messages, with 100 other services programmed.
func TestIncremental(t *testing.T) {
	b := newBackend(t, newNS(t, t.TempDir(), "node"), Config{PodCIDR: podCIDR})
	base := manyServices(100, 3)
	k := proxy.Key{Addr: netip.MustParseAddr("10.96.0.42"), Protocol: corev1.ProtocolTCP, Port: 80}
	newKey := key("10.96.1.200", corev1.ProtocolTCP, 443)
	fresh := netip.MustParseAddrPort("10.245.0.1:8080")
	for _, tc := range []struct {
		name    string
		edit    func(proxy.State)
		touched []string // chains rewritten, added or deleted
		maxMsgs int      // messages of the transaction
	}{
		{"one endpoint replaced", func(st proxy.State) {
			vs := st[k]
			vs.Destinations[2] = fresh
			st[k] = vs
		}, nil, 5}, // table (no-op), endpoints element deleted and added, hairpin element deleted and added
		{"an endpoint added", func(st proxy.State) {
			vs := st[k]
			vs.Destinations = append(vs.Destinations, fresh)
			st[k] = vs
		}, []string{"endpoints-4-masquerade-outside"}, 8}, // table, chain, 2 rules, map element deleted and added, endpoints element, hairpin
		{"a service added", func(st proxy.State) {
			st[newKey] = proxy.VirtualService{Key: newKey, Kind: proxy.ClusterIP, Service: "default/new:https",
				Destinations: []netip.AddrPort{fresh}}
		}, []string{"endpoints-1-masquerade-outside"}, 7}, // table, chain, 2 rules, map, endpoints and hairpin elements
		{"a service deleted", func(st proxy.State) { delete(st, k) }, nil, 4}, // table, map, endpoints and hairpin elements
		{"affinity turned on", func(st proxy.State) {
			vs := st[k]
			vs.Affinity = time.Minute
			st[k] = vs
		}, []string{chainName(k)}, 12}, // table, chain, masquerade, 3 affinity and 3 endpoint rules, map element deleted and added, endpoints elements
		{"the last service of a chain deleted", func(st proxy.State) {
			for k := range st {
				delete(st, k)
			}
		}, []string{"endpoints-3-masquerade-outside"}, 7}, // table, map, endpoints and hairpin elements, flush and delete chain
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // back to base; the second forgets drained destinations
				if err := b.Sync(t.Context(), base); err != nil {
					t.Fatal(err)
				}
			}
			before := ruleHandles(t, b)
			desired := cloneState(base)
			tc.edit(desired)
			readBacks := b.readBacks
			if err := b.Sync(t.Context(), desired); err != nil {
				t.Fatal(err)
			}
			if b.readBacks != readBacks {
				t.Error("the sync read the table back, with no one else changing it")
			}
			after := ruleHandles(t, b)
			for _, chain := range slices.Sorted(maps.Keys(mergeKeys(before, after))) {
				if changed := !slices.Equal(before[chain], after[chain]); changed != slices.Contains(tc.touched, chain) {
					t.Errorf("chain %s: rules changed %v, want %v", chain, changed, !changed)
				}
			}
			if b.lastBatch > tc.maxMsgs {
				t.Errorf("the transaction had %d messages, want at most %d", b.lastBatch, tc.maxMsgs)
			}
			assertTable(t, b)
		})
	}
}

func mergeKeys(a, b map[string][]uint64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// sabotage is something done to the table behind the backend's back, with another library.
type sabotage struct {
	name string
	do   func() error
}

func sabotages(other *nftables.Conn, table *nftables.Table, chain *nftables.Chain) []sabotage {
	flush := func(queue func()) func() error { return func() error { queue(); return other.Flush() } }
	return []sabotage{
		{"a rule deleted", func() error {
			rules, err := other.GetRules(table, chain)
			if err != nil || len(rules) == 0 {
				return fmt.Errorf("rules of %s: %d, %v", chain.Name, len(rules), err)
			}
			if err := other.DelRule(rules[len(rules)-1]); err != nil {
				return err
			}
			return other.Flush()
		}},
		{"a rule added", flush(func() {
			other.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
		})},
		{"a chain flushed", flush(func() { other.FlushChain(chain) })},
		{"a map element deleted", func() error {
			set := &nftables.Set{Table: table, Name: setServices.name}
			if err := other.SetDeleteElements(set, []nftables.SetElement{{Key: servicesKey(web.Key)}}); err != nil {
				return err
			}
			return other.Flush()
		}},
		{"an endpoint changed", func() error {
			set := &nftables.Set{Table: table, Name: setEndpoints.name, IsMap: true}
			if err := other.SetDeleteElements(set, []nftables.SetElement{{Key: endpointsKey(web.Key, 0)}}); err != nil {
				return err
			}
			elem := nftables.SetElement{Key: endpointsKey(web.Key, 0), Val: target(netip.MustParseAddrPort("10.244.9.9:80"))}
			if err := other.SetAddElements(set, []nftables.SetElement{elem}); err != nil {
				return err
			}
			return other.Flush()
		}},
		{"the table deleted", flush(func() { other.DelTable(table) })},
	}
}

// otherConn is an nftables connection of someone else's in the namespace at path.
func otherConn(t *testing.T, path string) (*nftables.Conn, *nftables.Table) {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	other, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	return other, &nftables.Table{Name: DefaultTable, Family: nftables.TableFamilyIPv4}
}

// TestDrift: whatever is done to the table behind the backend's back, Resync, or the next Sync, puts it back.
func TestDrift(t *testing.T) {
	c := newCluster(t)
	desired := state(web, sticky, webNode)
	if err := c.b.Sync(t.Context(), desired); err != nil {
		t.Fatal(err)
	}
	other, table := otherConn(t, c.node)

	t.Run("nothing changed: Resync makes no transaction", func(t *testing.T) {
		gen := c.b.gen
		if err := c.b.Resync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if c.b.gen != gen {
			t.Fatalf("generation %d → %d", gen, c.b.gen)
		}
	})

	fixes := []struct {
		name string
		fix  func(t *testing.T) error
	}{
		{"Resync", func(t *testing.T) error { return c.b.Resync(t.Context()) }},
		{"Sync", func(t *testing.T) error { return c.b.Sync(t.Context(), desired) }},
	}
	for _, s := range sabotages(other, table, &nftables.Chain{Name: serviceChain(c.b.cfg, web).name, Table: table}) {
		for _, f := range fixes {
			t.Run(s.name+", then "+f.name, func(t *testing.T) {
				if err := s.do(); err != nil {
					t.Fatal(err)
				}
				if got, err := c.b.sock.readImage(c.b.cfg.Table); err != nil || got.difference(expectedImage(c.b.cfg, c.b.Programmed())) == "" {
					t.Fatalf("the sabotage did not show: %v", err)
				}
				readBacks := c.b.readBacks
				if err := f.fix(t); err != nil {
					t.Fatal(err)
				}
				if c.b.readBacks != readBacks+1 {
					t.Errorf("%s read the table back %d times, want once", f.name, c.b.readBacks-readBacks)
				}
				assertTable(t, c.b)
				if names := slices.Sorted(maps.Keys(askN(c.pods["d"], "tcp", addrPort(web.Key), 20))); !slices.Equal(names, []string{"a", "b"}) {
					t.Fatalf("web answered by %v", names)
				}
			})
		}
	}
}

// TestRefusedSync: an incremental sync the kernel refuses (the table changed unnoticed) falls back to a rewrite.
func TestRefusedSync(t *testing.T) {
	c := newCluster(t)
	if err := c.b.Sync(t.Context(), state(web, sticky, webNode)); err != nil {
		t.Fatal(err)
	}
	other, table := otherConn(t, c.node)
	// web's map element goes behind the backend's back, unnoticed: the backend's generation is moved on.
	set := &nftables.Set{Table: table, Name: setServices.name}
	if err := other.SetDeleteElements(set, []nftables.SetElement{{Key: servicesKey(web.Key)}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	gen, err := c.b.sock.generation()
	if err != nil {
		t.Fatal(err)
	}
	c.b.gen = gen

	onlyA := web
	onlyA.Destinations = []netip.AddrPort{ep("a")}
	if err := c.b.Sync(t.Context(), state(onlyA, sticky, webNode)); err != nil {
		t.Fatal(err)
	}
	assertTable(t, c.b)
	if got := askN(c.pods["d"], "tcp", addrPort(web.Key), 20); got["a"] != 20 {
		t.Fatalf("web answered %v, want a only", got)
	}
}
