package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The masquerade table (family inet, Table) — IPVS rewrites destinations, this table decides sources:
//
//	table inet wh-ipvs {
//	  set cluster4 { type ipv4_addr . inet_proto . inet_service }   # cluster IP virtual services
//	  set external4 { type ipv4_addr . inet_proto . inet_service }  # node ports, external IPs (unless KeepSource)
//	  set hairpin4 { type ipv4_addr . ipv4_addr }                   # (a . a) for every endpoint address a
//	  set cluster6, external6, hairpin6 { the same for IPv6 }
//	  chain mark { ip saddr != <pod CIDR> ip daddr . meta l4proto . th dport @cluster4 meta mark set mark | 0x4000
//	               ip daddr . meta l4proto . th dport @external4 meta mark set mark | 0x4000; … ip6 … }
//	  chain prerouting { type nat hook prerouting priority dstnat; jump mark }
//	  chain output { type nat hook output priority dstnat; jump mark }
//	  chain postrouting { type nat hook postrouting priority srcnat;
//	    meta mark & 0x4000 != 0 meta mark set meta mark & ~0x4000 masquerade fully-random
//	    ip saddr . ip daddr @hairpin4 masquerade fully-random; ip6 saddr . ip6 daddr @hairpin6 masquerade fully-random }
//	}
//
// The marks are set before IPVS sees the packet (its hooks come after nat's dstnat priority) and read after it
// rewrote the destination (net.ipv4.vs.conntrack=1 keeps the connection in conntrack, so nat's postrouting sees it).

// setID numbers the sets (set references by ID within one transaction).
type setID uint32

const (
	setCluster4 setID = iota + 1
	setExternal4
	setHairpin4
	setCluster6
	setExternal6
	setHairpin6
)

var setNames = map[setID]string{setCluster4: "cluster4", setExternal4: "external4", setHairpin4: "hairpin4",
	setCluster6: "cluster6", setExternal6: "external6", setHairpin6: "hairpin6"}

var (
	services4Type = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	services6Type = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetProto, nftables.TypeInetService)
	hairpin4Type  = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeIPAddr)
	hairpin6Type  = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeIP6Addr)
)

func (id setID) keyType() nftables.SetDatatype {
	switch id {
	case setCluster4, setExternal4:
		return services4Type
	case setCluster6, setExternal6:
		return services6Type
	case setHairpin4:
		return hairpin4Type
	}
	return hairpin6Type
}

// reg0 is the first 32-bit register: rules load a set's key into it and the registers after it.
const reg0 = unix.NFT_REG32_00

// Header offsets: the IPv4 and IPv6 source and destination addresses, the transport header's destination port.
const (
	off4Saddr = 12
	off4Daddr = 16
	off6Saddr = 8
	off6Daddr = 24
	offDport  = 2
)

// elemsPerMessage bounds the elements of one netlink message (the socket's send buffer bounds a message).
const elemsPerMessage = 1024

// masqElem is one element of a set: its set and its key.
type masqElem struct {
	set setID
	key string // the key's bytes
}

// serviceElem is the element a virtual service puts in the service sets, if any.
func serviceElem(vs proxy.VirtualService) (masqElem, bool) {
	four := vs.Addr.Is4()
	var id setID
	switch {
	case vs.KeepSource:
		return masqElem{}, false
	case vs.Kind == proxy.ClusterIP && four:
		id = setCluster4
	case vs.Kind == proxy.ClusterIP:
		id = setCluster6
	case four:
		id = setExternal4
	default:
		id = setExternal6
	}
	proto, err := protocolNumber(vs.Protocol)
	if err != nil {
		return masqElem{}, false
	}
	key := append(vs.Addr.AsSlice(), byte(proto), 0, 0, 0, byte(vs.Port>>8), byte(vs.Port), 0, 0)
	return masqElem{set: id, key: string(key)}, true
}

func hairpinElem(a netip.Addr) masqElem {
	id := setHairpin4
	if !a.Is4() {
		id = setHairpin6
	}
	b := a.AsSlice()
	return masqElem{set: id, key: string(append(b, b...))}
}

// masqContent is what the sets hold for a desired state: the service elements by key, and per endpoint address
// the number of virtual services that have it (its hairpin element is in while that is positive).
type masqContent struct {
	services map[proxy.Key]masqElem
	hairpin  map[netip.Addr]int
}

func newMasqContent() masqContent {
	return masqContent{services: map[proxy.Key]masqElem{}, hairpin: map[netip.Addr]int{}}
}

// change replaces old (had: it was there) by vs (has) in c, and returns the elements that enter and leave.
func (c masqContent) change(old proxy.VirtualService, had bool, vs proxy.VirtualService, has bool) (add, del []masqElem) {
	k := vs.Key
	if !has {
		k = old.Key
	}
	before, inBefore := c.services[k]
	after, inAfter := masqElem{}, false
	if has {
		after, inAfter = serviceElem(vs)
	}
	if inBefore && (!inAfter || before != after) {
		del = append(del, before)
		delete(c.services, k)
	}
	if inAfter && (!inBefore || before != after) {
		add = append(add, after)
		c.services[k] = after
	}
	delta := map[netip.Addr]int{}
	if had {
		for _, d := range old.Destinations {
			delta[d.Addr()]--
		}
	}
	if has {
		for _, d := range vs.Destinations {
			delta[d.Addr()]++
		}
	}
	for a, d := range delta {
		n := c.hairpin[a]
		switch {
		case d == 0:
		case n == 0 && n+d > 0:
			add = append(add, hairpinElem(a))
		case n > 0 && n+d <= 0:
			del = append(del, hairpinElem(a))
		}
		if n+d > 0 {
			c.hairpin[a] = n + d
		} else {
			delete(c.hairpin, a)
		}
	}
	return add, del
}

// elements are every element of c, by set.
func (c masqContent) elements() map[setID][]string {
	out := map[setID][]string{}
	for _, e := range c.services {
		out[e.set] = append(out[e.set], e.key)
	}
	for a := range c.hairpin {
		e := hairpinElem(a)
		out[e.set] = append(out[e.set], e.key)
	}
	return out
}

// masq programs the table through conn.
type masq struct {
	conn  *nftables.Conn
	table *nftables.Table
	cfg   Config
}

func (m *masq) set(id setID) *nftables.Set {
	return &nftables.Set{Table: m.table, Name: setNames[id], ID: uint32(id), KeyType: id.keyType(),
		Concatenation: true, KeyByteOrder: binaryutil.BigEndian}
}

// exists reports whether the table is there.
func (m *masq) exists() (bool, error) {
	tables, err := m.conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("ipvs: list nftables tables: %w", err)
	}
	return slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == m.table.Name }), nil
}

// rewrite replaces the table with one holding c, in one transaction.
func (m *masq) rewrite(c masqContent) error {
	m.conn.AddTable(m.table) // so that deleting it cannot fail
	m.conn.DelTable(m.table)
	m.conn.AddTable(m.table)
	elems := c.elements()
	for id := setCluster4; id <= setHairpin6; id++ {
		if err := m.conn.AddSet(m.set(id), nil); err != nil {
			return fmt.Errorf("ipvs: nftables set %s: %w", setNames[id], err)
		}
		if err := m.elements(false, id, elems[id]); err != nil {
			return err
		}
	}
	mark := m.conn.AddChain(&nftables.Chain{Name: "mark", Table: m.table})
	for _, r := range m.markRules() {
		m.conn.AddRule(&nftables.Rule{Table: m.table, Chain: mark, Exprs: r})
	}
	jump := []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: mark.Name}}
	for _, c := range []*nftables.Chain{
		{Name: "prerouting", Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest},
		{Name: "output", Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest},
	} {
		c.Table, c.Type = m.table, nftables.ChainTypeNAT
		m.conn.AddRule(&nftables.Rule{Table: m.table, Chain: m.conn.AddChain(c), Exprs: jump})
	}
	post := m.conn.AddChain(&nftables.Chain{Name: "postrouting", Table: m.table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	for _, r := range m.postroutingRules() {
		m.conn.AddRule(&nftables.Rule{Table: m.table, Chain: post, Exprs: r})
	}
	if err := m.conn.Flush(); err != nil {
		return fmt.Errorf("ipvs: write nftables table %s: %w", m.table.Name, err)
	}
	return nil
}

// update adds and deletes elements, in one transaction.
func (m *masq) update(add, del []masqElem) error {
	if len(add)+len(del) == 0 {
		return nil
	}
	for _, batch := range []struct {
		del   bool
		elems []masqElem
	}{{true, del}, {false, add}} {
		bySet := map[setID][]string{}
		for _, e := range batch.elems {
			bySet[e.set] = append(bySet[e.set], e.key)
		}
		for _, id := range slices.Sorted(maps.Keys(bySet)) {
			if err := m.elements(batch.del, id, bySet[id]); err != nil {
				return err
			}
		}
	}
	if err := m.conn.Flush(); err != nil {
		return fmt.Errorf("ipvs: update nftables sets of %s: %w", m.table.Name, err)
	}
	return nil
}

// elements queues adding (or deleting) keys to set id, a message per elemsPerMessage.
func (m *masq) elements(del bool, id setID, keys []string) error {
	s := m.set(id)
	for chunk := range slices.Chunk(keys, elemsPerMessage) {
		es := make([]nftables.SetElement, len(chunk))
		for i, k := range chunk {
			es[i] = nftables.SetElement{Key: []byte(k)}
		}
		var err error
		if del {
			err = m.conn.SetDeleteElements(s, es)
		} else {
			err = m.conn.SetAddElements(s, es)
		}
		if err != nil {
			return fmt.Errorf("ipvs: nftables set %s: %w", setNames[id], err)
		}
	}
	return nil
}

// differs reads the sets back and reports the first difference from c ("" when none), or a rule count that is not
// the table's.
func (m *masq) differs(c masqContent) (string, error) {
	want := c.elements()
	for id := setCluster4; id <= setHairpin6; id++ {
		got, err := m.conn.GetSetElements(m.set(id))
		if err != nil {
			return "", fmt.Errorf("ipvs: read nftables set %s: %w", setNames[id], err)
		}
		have := make(map[string]bool, len(got))
		for _, e := range got {
			have[string(e.Key)] = true
		}
		if len(have) != len(want[id]) {
			return fmt.Sprintf("set %s has %d elements, want %d", setNames[id], len(have), len(want[id])), nil
		}
		for _, k := range want[id] {
			if !have[k] {
				return fmt.Sprintf("set %s lacks %x", setNames[id], k), nil
			}
		}
	}
	for chain, n := range map[string]int{"mark": len(m.markRules()), "prerouting": 1, "output": 1,
		"postrouting": len(m.postroutingRules())} {
		rules, err := m.conn.GetRules(m.table, &nftables.Chain{Name: chain, Table: m.table})
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return "chain " + chain + " is missing", nil
			}
			return "", fmt.Errorf("ipvs: read nftables chain %s: %w", chain, err)
		}
		if len(rules) != n {
			return fmt.Sprintf("chain %s has %d rules, want %d", chain, len(rules), n), nil
		}
	}
	return "", nil
}

// delete removes the table (none is not an error).
func (m *masq) delete() error {
	m.conn.AddTable(m.table)
	m.conn.DelTable(m.table)
	if err := m.conn.Flush(); err != nil {
		return fmt.Errorf("ipvs: delete nftables table %s: %w", m.table.Name, err)
	}
	return nil
}

// markRules mark for masquerade: connections to cluster IPs from outside the pod CIDR, to node ports and external
// IPs (the sets hold those that do not keep the source).
func (m *masq) markRules() [][]expr.Any {
	var rules [][]expr.Any
	for _, v4 := range []bool{true, false} {
		cluster, external, daddr, alen := setCluster4, setExternal4, uint32(off4Daddr), uint32(4)
		if !v4 {
			cluster, external, daddr, alen = setCluster6, setExternal6, off6Daddr, 16
		}
		lookup := func(id setID) []expr.Any {
			return []expr.Any{
				&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: alen},
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg0 + alen/4},
				&expr.Payload{DestRegister: reg0 + alen/4 + 1, Base: expr.PayloadBaseTransportHeader, Offset: offDport, Len: 2},
				&expr.Lookup{SourceRegister: reg0, SetName: setNames[id], SetID: uint32(id)},
			}
		}
		if p := m.cfg.PodCIDR.Masked(); p.IsValid() && p.Addr().Is4() == v4 {
			r := nfproto(v4)
			r = append(r, notInPrefix(p)...)
			rules = append(rules, append(append(r, lookup(cluster)...), markExprs(m.cfg.MasqueradeMark)...))
		}
		rules = append(rules, append(append(nfproto(v4), lookup(external)...), markExprs(m.cfg.MasqueradeMark)...))
	}
	return rules
}

// postroutingRules masquerade marked connections (clearing the mark) and hairpin ones.
func (m *masq) postroutingRules() [][]expr.Any {
	bit := m.cfg.MasqueradeMark
	rules := [][]expr.Any{{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg0},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(bit), Xor: native(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: native(0)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg0},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(^bit), Xor: native(0)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg0},
		&expr.Masq{FullyRandom: true},
	}}
	for _, v4 := range []bool{true, false} {
		id, saddr, alen := setHairpin4, uint32(off4Saddr), uint32(8)
		if !v4 {
			id, saddr, alen = setHairpin6, off6Saddr, 32
		}
		rules = append(rules, append(nfproto(v4),
			&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: alen},
			&expr.Lookup{SourceRegister: reg0, SetName: setNames[id], SetID: uint32(id)},
			&expr.Masq{FullyRandom: true}))
	}
	return rules
}

// nfproto matches the packet's family (an inet table sees both).
func nfproto(v4 bool) []expr.Any {
	p := byte(unix.NFPROTO_IPV6)
	if v4 {
		p = unix.NFPROTO_IPV4
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg0},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg0, Data: []byte{p}},
	}
}

// notInPrefix matches a source address outside p.
func notInPrefix(p netip.Prefix) []expr.Any {
	off, alen := uint32(off4Saddr), uint32(4)
	if !p.Addr().Is4() {
		off, alen = off6Saddr, 16
	}
	mask := make([]byte, alen)
	for i := range p.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: alen},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: alen, Mask: mask, Xor: make([]byte, alen)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: p.Addr().AsSlice()},
	}
}

// markExprs: meta mark set meta mark | bit.
func markExprs(bit uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg0},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(^bit), Xor: native(bit)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg0},
	}
}

func native(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
