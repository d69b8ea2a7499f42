package network

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// tableName is the node's nftables table (family ip).
const tableName = "wheelhouse"

// The header offsets of the IPv4 source and destination addresses.
const (
	ipv4SrcOffset = 12
	ipv4DstOffset = 16
)

func (n *Network) nft() (*nftables.Conn, error) {
	if n.ns.IsOpen() {
		return nftables.New(nftables.WithNetNSFd(int(n.ns)))
	}
	return nftables.New()
}

// applyTable replaces the table in one transaction (add, delete, add: the delete needs it to exist):
//
//	table ip wheelhouse {
//	  chain forward { type filter hook forward priority filter; iifname "wh0" accept; oifname "wh0" accept }
//	  chain postrouting { type nat hook postrouting priority srcnat;
//	    ip saddr <PodCIDR> ip daddr != <ClusterCIDR> masquerade }
//	}
func (n *Network) applyTable() error {
	c, err := n.nft()
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	for _, key := range []expr.MetaKey{expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME} {
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: []expr.Any{
			&expr.Meta{Key: key, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n.cfg.Bridge)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
	}
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	exprs := append(matchPrefix(ipv4SrcOffset, n.cfg.PodCIDR.Masked().Addr().AsSlice(), n.cfg.PodCIDR.Bits(), expr.CmpOpEq),
		matchPrefix(ipv4DstOffset, n.cfg.ClusterCIDR.Masked().Addr().AsSlice(), n.cfg.ClusterCIDR.Bits(), expr.CmpOpNeq)...)
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: append(exprs, &expr.Masq{})})
	return c.Flush()
}

// matchPrefix compares the IPv4 address at offset of the network header, masked to bits, with network.
func matchPrefix(offset uint32, network []byte, bits int, op expr.CmpOp) []expr.Any {
	mask := make([]byte, 4)
	for i := range bits {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: network},
	}
}

// ifname is an interface name as nftables compares it: NUL-padded to IFNAMSIZ.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// deleteTable removes the table; none is not an error.
func (n *Network) deleteTable() error {
	c, err := n.nft()
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyIPv4}
	if _, err := c.ListTableOfFamily(tableName, nftables.TableFamilyIPv4); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("network: list nftables tables: %w", err)
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("network: delete nftables table %s: %w", tableName, err)
	}
	return nil
}
