package nft

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// The fixed chains of the table (doc.go draws the whole layout).
const (
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainPostrouting = "postrouting"
	chainServices    = "services"
)

// affinitySize bounds the affinity set: (virtual service, client, endpoint) entries alive at once.
const affinitySize = 1 << 20

var (
	servicesKeyType = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	hairpinKeyType  = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeIPAddr)
	// The service ID and the slot are typed "mark", not "integer": nft cannot print the elements of a concatenation
	// with an integer (no fixed length).
	affinityKeyType  = nftables.MustConcatSetType(nftables.TypeMark, nftables.TypeIPAddr, nftables.TypeIPAddr, nftables.TypeInetService)
	endpointsKeyType = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService,
		nftables.TypeMark)
	targetType    = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)
	bigEndianKeys = userdata.AppendUint32(nil, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, 2)
	bigEndianMap  = userdata.AppendUint32(bigEndianKeys, userdata.NFTNL_UDATA_SET_DATABYTEORDER, 2)

	// setServices maps (destination address, protocol, port) to the virtual service's chain.
	setServices = setDef{name: "virtual-services", id: 1, flags: unix.NFT_SET_MAP, keyType: servicesKeyType.GetNFTMagic(),
		keyLen: servicesKeyType.Bytes, verdicts: true, userdata: bigEndianKeys}
	// setHairpin holds (a, a) for every endpoint address a: a connection DNATed back to its source is masqueraded.
	setHairpin = setDef{name: "hairpin", id: 2, keyType: hairpinKeyType.GetNFTMagic(), keyLen: hairpinKeyType.Bytes,
		userdata: bigEndianKeys}
	// setAffinity remembers (virtual service, client, endpoint) for ClientIP session affinity; the packet path adds
	// and refreshes entries with the virtual service's timeout.
	setAffinity = setDef{name: "affinity", id: 3, flags: unix.NFT_SET_TIMEOUT | unix.NFT_SET_EVAL,
		keyType: affinityKeyType.GetNFTMagic(), keyLen: affinityKeyType.Bytes, size: affinitySize, userdata: bigEndianKeys}
	// setEndpoints maps (virtual service address, protocol, port, slot) to the slot's endpoint (address, port): the
	// shared endpoints-n chains pick slot `numgen random mod n` of the packet's virtual service.
	setEndpoints = setDef{name: "endpoints", id: 4, flags: unix.NFT_SET_MAP, keyType: endpointsKeyType.GetNFTMagic(),
		keyLen: endpointsKeyType.Bytes, dataType: targetType.GetNFTMagic(), dataLen: targetType.Bytes, userdata: bigEndianMap}
)

// sets are the table's named sets, in the order they are created.
var sets = []setDef{setServices, setHairpin, setAffinity, setEndpoints}

// The 32-bit registers rules use.
const (
	reg0 = unix.NFT_REG32_00 + iota
	reg1
	reg2
	reg3
	reg4
)

// The IPv4 header offsets of the source and destination addresses; the transport header's of the port.
const (
	offSaddr = 12
	offDaddr = 16
	offDport = 2
)

// ipsDstNAT is conntrack's IPS_DST_NAT status bit.
const ipsDstNAT = 1 << 5

// rule is a rule of the table: its expressions and its comment. The comment names everything the rule depends on
// besides its chain and the Config, so that two rules of a chain with the same comment are the same rule.
type rule struct {
	exprs   []expr.Any
	comment string
}

func newRule(comment string, exprs ...expr.Any) rule {
	if len(comment) > maxComment {
		comment = comment[:maxComment]
	}
	return rule{exprs: exprs, comment: comment}
}

// chainDef is a fixed chain: its hook (nil for a regular chain) and rules.
type chainDef struct {
	name  string
	hook  *hook
	rules []rule
}

// skeleton is the table's fixed chains, in the order they are created.
func skeleton(cfg Config) []chainDef {
	natDst, natSrc := int32(*nftables.ChainPriorityNATDest), int32(*nftables.ChainPriorityNATSource)
	jump := &expr.Verdict{Kind: expr.VerdictJump, Chain: chainServices}
	return []chainDef{
		{name: chainServices, rules: []rule{newRule("virtual services by destination address, protocol and port",
			&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: offDaddr, Len: 4},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Payload{DestRegister: reg2, Base: expr.PayloadBaseTransportHeader, Offset: offDport, Len: 2},
			&expr.Lookup{SourceRegister: reg0, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true,
				SetName: setServices.name, SetID: setServices.id},
		)}},
		{name: chainPrerouting, hook: &hook{num: unix.NF_INET_PRE_ROUTING, priority: natDst},
			rules: []rule{newRule("connections through the node", jump)}},
		{name: chainOutput, hook: &hook{num: unix.NF_INET_LOCAL_OUT, priority: natDst},
			rules: []rule{newRule("connections from the node", jump)}},
		{name: chainPostrouting, hook: &hook{num: unix.NF_INET_POST_ROUTING, priority: natSrc}, rules: []rule{
			newRule("masquerade connections marked by their virtual service",
				&expr.Meta{Key: expr.MetaKeyMARK, Register: reg0},
				&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(cfg.MasqueradeMark), Xor: native(0)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: native(0)},
				&expr.Meta{Key: expr.MetaKeyMARK, Register: reg0},
				&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(^cfg.MasqueradeMark), Xor: native(0)},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg0},
				&expr.Masq{FullyRandom: true}),
			newRule("masquerade hairpin connections (an endpoint reaching itself through its service)",
				&expr.Ct{Key: expr.CtKeySTATUS, Register: reg0},
				&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(ipsDstNAT), Xor: native(0)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: native(0)},
				&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: offSaddr, Len: 8},
				&expr.Lookup{SourceRegister: reg0, SetName: setHairpin.name, SetID: setHairpin.id},
				&expr.Masq{FullyRandom: true}),
		}},
	}
}

// chainName is the own chain of a virtual service with ClientIP affinity.
func chainName(k proxy.Key) string { return "svc-" + k.String() }

// serviceChain is the chain a virtual service's element of the virtual-services map goes to, with its rules, for
// its active destinations:
//
//   - no destinations: a chain shared by every such service of the protocol, rejecting (TCP reset, else ICMP port
//     unreachable);
//   - ClientIP affinity: the service's own chain (affinityRules);
//   - otherwise a chain shared by every service with as many destinations and the same masquerade: it marks the
//     connection for masquerade when the service needs it, then picks slot `numgen random mod n` of the service
//     in the endpoints map and DNATs to that endpoint (uniform). The service's endpoints are elements of that map,
//     so an endpoint change changes elements, not rules, and a full sync is a few rules and one element per
//     endpoint (doc.go, "Why this layout").
func serviceChain(cfg Config, vs proxy.VirtualService) chainDef {
	n := len(vs.Destinations)
	switch {
	case n == 0 && vs.Protocol == corev1.ProtocolTCP:
		return chainDef{name: "no-endpoints-reset", rules: []rule{
			newRule("no endpoints: reset", &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})}}
	case n == 0:
		return chainDef{name: "no-endpoints-unreachable", rules: []rule{
			newRule("no endpoints: port unreachable", &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3})}}
	case vs.Affinity > 0:
		return chainDef{name: chainName(vs.Key), rules: affinityRules(cfg, vs)}
	}
	name := fmt.Sprintf("endpoints-%d", n)
	var rules []rule
	switch m := masquerade(cfg, vs); m {
	case masqueradeOutside:
		name += "-masquerade-outside"
		rules = append(rules, outsideRule(cfg, fmt.Sprintf("masquerade clients outside %v", cfg.PodCIDR.Masked())))
	case masqueradeAll:
		name += "-masquerade"
		rules = append(rules, newRule("masquerade", markExprs(cfg.MasqueradeMark)...))
	}
	return chainDef{name: name, rules: append(rules, newRule(fmt.Sprintf("1 of %d endpoints at random, from the endpoints map", n),
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: offDaddr, Len: 4},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		&expr.Payload{DestRegister: reg2, Base: expr.PayloadBaseTransportHeader, Offset: offDport, Len: 2},
		&expr.Numgen{Register: reg3, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: reg0, DestRegister: reg4, IsDestRegSet: true, SetName: setEndpoints.name, SetID: setEndpoints.id},
		dnat(reg4),
	))}
}

// endpointElems are a virtual service's elements of the endpoints map: slot i → its i-th active destination (none
// for a service with its own chain or without destinations).
func endpointElems(vs proxy.VirtualService) []elem {
	if vs.Affinity > 0 {
		return nil
	}
	out := make([]elem, len(vs.Destinations))
	for i, d := range vs.Destinations {
		out[i] = elem{key: endpointsKey(vs.Key, i), data: target(d)}
	}
	return out
}

// affinityRules are the own chain of a virtual service with ClientIP affinity and destinations:
//
//   - mark for masquerade: cluster IPs from outside the pod CIDR; node ports and external IPs unless KeepSource;
//   - a client with an entry (service, client, endpoint) in the affinity set goes to that endpoint;
//   - otherwise one endpoint at random: rule i of n matches with probability 1/(n-i), the last always (uniform),
//     and adds the entry.
func affinityRules(cfg Config, vs proxy.VirtualService) []rule {
	var rules []rule
	switch masquerade(cfg, vs) {
	case masqueradeOutside:
		rules = append(rules, outsideRule(cfg, fmt.Sprintf("%s: masquerade clients outside %v", vs.Service, cfg.PodCIDR.Masked())))
	case masqueradeAll:
		rules = append(rules, newRule(fmt.Sprintf("%s: masquerade (%s)", vs.Service, vs.Kind), markExprs(cfg.MasqueradeMark)...))
	}
	id := serviceID(vs.Key)
	for _, d := range vs.Destinations {
		rules = append(rules, newRule(fmt.Sprintf("%s: affinity %v to %v", vs.Service, vs.Affinity, d),
			append(affinityKey(id, d),
				&expr.Lookup{SourceRegister: reg0, SetName: setAffinity.name, SetID: setAffinity.id},
				affinityUpdate(vs),
				dnat(reg2))...))
	}
	n := len(vs.Destinations)
	for i, d := range vs.Destinations {
		var exprs []expr.Any
		if i < n-1 {
			exprs = []expr.Any{
				&expr.Numgen{Register: reg0, Modulus: uint32(n - i), Type: unix.NFT_NG_RANDOM},
				&expr.Cmp{Op: expr.CmpOpEq, Register: reg0, Data: native(0)},
			}
		}
		exprs = append(append(exprs, affinityKey(id, d)...), affinityUpdate(vs), dnat(reg2))
		rules = append(rules, newRule(fmt.Sprintf("%s: 1 in %d to %v, affinity %v", vs.Service, n-i, d, vs.Affinity), exprs...))
	}
	return rules
}

// masqueradeKind is which connections of a virtual service are masqueraded.
type masqueradeKind int

const (
	masqueradeNone    masqueradeKind = iota
	masqueradeOutside                // clients outside Config.PodCIDR (cluster IPs)
	masqueradeAll                    // node ports and external IPs
)

func masquerade(cfg Config, vs proxy.VirtualService) masqueradeKind {
	switch {
	case vs.KeepSource:
		return masqueradeNone
	case vs.Kind == proxy.ClusterIP && cfg.PodCIDR.IsValid():
		return masqueradeOutside
	case vs.Kind == proxy.ClusterIP:
		return masqueradeNone
	default:
		return masqueradeAll
	}
}

// outsideRule marks connections from clients outside the pod CIDR for masquerade.
func outsideRule(cfg Config, comment string) rule {
	p := cfg.PodCIDR.Masked()
	return newRule(comment, append([]expr.Any{
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: offSaddr, Len: 4},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: prefixMask(p.Bits()), Xor: native(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg0, Data: p.Addr().AsSlice()},
	}, markExprs(cfg.MasqueradeMark)...)...)
}

// markExprs: meta mark set meta mark | bit.
func markExprs(bit uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg0},
		&expr.Bitwise{SourceRegister: reg0, DestRegister: reg0, Len: 4, Mask: native(^bit), Xor: native(bit)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg0},
	}
}

// affinityKey loads the affinity set's key into reg0..reg3: service ID, client address, endpoint address and port
// (the last two are DNAT's operands too).
func affinityKey(id uint32, d netip.AddrPort) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: reg0, Data: binary.BigEndian.AppendUint32(nil, id)},
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offSaddr, Len: 4},
		// Address and port one register each: nft cannot print a concatenation loaded by one immediate.
		&expr.Immediate{Register: reg2, Data: target(d)[:4]},
		&expr.Immediate{Register: reg3, Data: target(d)[4:6]},
	}
}

// affinityUpdate adds the key in reg0.. to the affinity set, or refreshes its timeout.
func affinityUpdate(vs proxy.VirtualService) expr.Any {
	return &expr.Dynset{SrcRegKey: reg0, SetName: setAffinity.name, SetID: setAffinity.id,
		Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: vs.Affinity}
}

// dnat to the address in reg and the port in the register after it.
func dnat(reg uint32) expr.Any {
	return &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg, RegProtoMin: reg + 1, Specified: true}
}

// target is an endpoint as two registers: address, port (big-endian, padded).
func target(d netip.AddrPort) []byte {
	a := d.Addr().As4()
	return append(a[:], byte(d.Port()>>8), byte(d.Port()), 0, 0)
}

// serviceID tells virtual services apart in the affinity set (a collision only shares entries between two services
// that also share the client and the endpoint).
func serviceID(k proxy.Key) uint32 {
	h := fnv.New32a()
	h.Write([]byte(k.String()))
	return h.Sum32()
}

// servicesKey is a virtual service's key in the virtual-services map: address . protocol . port, each padded to
// a register.
func servicesKey(k proxy.Key) []byte {
	a := k.Addr.As4()
	return append(a[:], protoNumber(k.Protocol), 0, 0, 0, byte(k.Port>>8), byte(k.Port), 0, 0)
}

// endpointsKey is slot i of a virtual service in the endpoints map: its servicesKey and i (host byte order, as
// numgen makes it).
func endpointsKey(k proxy.Key, i int) []byte {
	return binary.NativeEndian.AppendUint32(servicesKey(k), uint32(i))
}

func hairpinKey(a netip.Addr) []byte {
	b := a.As4()
	return append(b[:], b[:]...)
}

func protoNumber(p corev1.Protocol) byte {
	switch p {
	case corev1.ProtocolUDP:
		return unix.IPPROTO_UDP
	case corev1.ProtocolSCTP:
		return unix.IPPROTO_SCTP
	default:
		return unix.IPPROTO_TCP
	}
}

func native(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func prefixMask(bits int) []byte {
	m := make([]byte, 4)
	for i := range bits {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}
