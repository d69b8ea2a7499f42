package nft

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// family is the table's: IPv4 (see doc.go for IPv6).
const family = unix.NFPROTO_IPV4

// nfAccept is NF_ACCEPT, a base chain's policy; nftGoto is NFT_GOTO's verdict code as netlink carries it.
const (
	nfAccept = 1
	nftGoto  = 1<<32 + unix.NFT_GOTO
)

// batch is one nf_tables transaction being built: its messages, written in place, and what each does (for
// errors). Sequence numbers and the acknowledgement flag are set by sock.commit.
type batch struct {
	table string
	buf   []byte
	offs  []int
	what  []what
}

// what a message does, formatted only for an error.
type what struct{ op, name, detail string }

func (w what) String() string {
	if w.detail == "" {
		return w.op + " " + w.name
	}
	return fmt.Sprintf("%s %s (%s)", w.op, w.name, w.detail)
}

// newBatch starts a transaction of about size bytes with "add table", echoed: the kernel sends the generation
// it commits to whoever asked for an echo in the transaction's first message. When the table exists, adding it
// changes nothing.
func newBatch(table string, size int) *batch {
	b := &batch{table: table, buf: make([]byte, 0, size)}
	b.begin(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE|unix.NLM_F_ECHO, what{"add table", table, ""})
	b.str(unix.NFTA_TABLE_NAME, table)
	b.end()
	return b
}

// len is the number of messages; 1 is an empty transaction.
func (b *batch) len() int { return len(b.offs) }

// begin starts a message; its attributes follow, end sets its length.
func (b *batch) begin(msgType int, flags uint16, w what) {
	b.offs = append(b.offs, len(b.buf))
	b.what = append(b.what, w)
	b.buf = appendMsg(b.buf, nftType(msgType), unix.NLM_F_REQUEST|flags, 0, family, 0, nil)
}

func (b *batch) end() {
	off := b.offs[len(b.offs)-1]
	binary.NativeEndian.PutUint32(b.buf[off:], uint32(len(b.buf)-off))
}

// open starts a nested attribute; close sets its length.
func (b *batch) open(typ uint16) int {
	off := len(b.buf)
	b.buf = attrs(b.buf).bytes(typ|unix.NLA_F_NESTED, nil)
	return off
}

func (b *batch) close(off int) { binary.NativeEndian.PutUint16(b.buf[off:], uint16(len(b.buf)-off)) }

func (b *batch) str(typ uint16, v string)   { b.buf = attrs(b.buf).str(typ, v) }
func (b *batch) u32(typ uint16, v uint32)   { b.buf = attrs(b.buf).u32(typ, v) }
func (b *batch) bytes(typ uint16, v []byte) { b.buf = attrs(b.buf).bytes(typ, v) }

// named is a message that only names an object: table, and chain or set.
func (b *batch) named(msgType int, flags, tableAttr, nameAttr uint16, name string, w what) {
	b.begin(msgType, flags, w)
	b.str(tableAttr, b.table)
	if nameAttr != 0 {
		b.str(nameAttr, name)
	}
	b.end()
}

func (b *batch) addTable() {
	b.named(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, unix.NFTA_TABLE_NAME, 0, "", what{"add table", b.table, ""})
}

func (b *batch) delTable() {
	b.named(unix.NFT_MSG_DELTABLE, 0, unix.NFTA_TABLE_NAME, 0, "", what{"delete table", b.table, ""})
}

// hook makes a chain a base chain of type nat with policy accept.
type hook struct {
	num      uint32
	priority int32
}

func (b *batch) addChain(name string, h *hook) {
	b.begin(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, what{"add chain", name, ""})
	b.str(unix.NFTA_CHAIN_TABLE, b.table)
	b.str(unix.NFTA_CHAIN_NAME, name)
	if h != nil {
		off := b.open(unix.NFTA_CHAIN_HOOK)
		b.u32(unix.NFTA_HOOK_HOOKNUM, h.num)
		b.u32(unix.NFTA_HOOK_PRIORITY, uint32(h.priority))
		b.close(off)
		b.u32(unix.NFTA_CHAIN_POLICY, nfAccept)
		b.str(unix.NFTA_CHAIN_TYPE, "nat")
	}
	b.end()
}

// flushChain deletes the chain's rules.
func (b *batch) flushChain(name string) {
	b.named(unix.NFT_MSG_DELRULE, 0, unix.NFTA_RULE_TABLE, unix.NFTA_RULE_CHAIN, name, what{"flush chain", name, ""})
}

// delChain deletes a chain; nothing may refer to it any more.
func (b *batch) delChain(name string) {
	b.named(unix.NFT_MSG_DELCHAIN, 0, unix.NFTA_CHAIN_TABLE, unix.NFTA_CHAIN_NAME, name, what{"delete chain", name, ""})
}

func (b *batch) addRule(chain string, r rule) error {
	b.begin(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, what{"add rule to", chain, r.comment})
	b.str(unix.NFTA_RULE_TABLE, b.table)
	b.str(unix.NFTA_RULE_CHAIN, chain)
	list := b.open(unix.NFTA_RULE_EXPRESSIONS)
	for _, e := range r.exprs {
		data, err := expr.Marshal(family, e)
		if err != nil {
			return fmt.Errorf("nft: rule %q of %s: %w", r.comment, chain, err)
		}
		b.bytes(unix.NFTA_LIST_ELEM|unix.NLA_F_NESTED, data)
	}
	b.close(list)
	b.bytes(unix.NFTA_RULE_USERDATA, commentData(r.comment))
	b.end()
	return nil
}

// addChainRules adds a chain and its rules.
func (b *batch) addChainRules(c chainDef) error {
	b.addChain(c.name, c.hook)
	for _, r := range c.rules {
		if err := b.addRule(c.name, r); err != nil {
			return err
		}
	}
	return nil
}

// setDef is a named set or map of the table.
type setDef struct {
	name     string
	id       uint32
	flags    uint32
	keyType  uint32 // nft's datatype magic, for `nft list`
	keyLen   uint32
	verdicts bool   // a map to verdicts
	dataType uint32 // a map to values: their datatype magic
	dataLen  uint32 // and length
	size     uint32 // the most elements (dynamic sets)
	userdata []byte // nft's key byte order, for `nft list`
}

func (b *batch) addSet(s setDef) {
	b.begin(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, what{"add set", s.name, ""})
	b.str(unix.NFTA_SET_TABLE, b.table)
	b.str(unix.NFTA_SET_NAME, s.name)
	b.u32(unix.NFTA_SET_FLAGS, s.flags)
	b.u32(unix.NFTA_SET_KEY_TYPE, s.keyType)
	b.u32(unix.NFTA_SET_KEY_LEN, s.keyLen)
	b.u32(unix.NFTA_SET_ID, s.id)
	if s.verdicts {
		b.u32(unix.NFTA_SET_DATA_TYPE, unix.NFT_DATA_VERDICT)
		b.u32(unix.NFTA_SET_DATA_LEN, 0)
	} else if s.dataLen > 0 {
		b.u32(unix.NFTA_SET_DATA_TYPE, s.dataType)
		b.u32(unix.NFTA_SET_DATA_LEN, s.dataLen)
	}
	if s.size > 0 {
		off := b.open(unix.NFTA_SET_DESC)
		b.u32(unix.NFTA_SET_DESC_SIZE, s.size)
		b.close(off)
	}
	if len(s.userdata) > 0 {
		b.bytes(unix.NFTA_SET_USERDATA, s.userdata)
	}
	b.end()
}

// elem is an element of a set: a key, and for a map the chain it goes to or its value.
type elem struct {
	key       []byte
	gotoChain string
	data      []byte
}

// maxElemList keeps an element list under the 64 KiB an attribute can hold.
const maxElemList = 48 << 10

// elems adds (or deletes) elements of a set, in as many messages as their size needs.
func (b *batch) elems(del bool, set setDef, es []elem) {
	msgType, flags, op := unix.NFT_MSG_NEWSETELEM, uint16(unix.NLM_F_CREATE), "add elements to"
	if del {
		msgType, flags, op = unix.NFT_MSG_DELSETELEM, 0, "delete elements of"
	}
	for len(es) > 0 {
		b.begin(msgType, flags, what{op, set.name, ""})
		b.str(unix.NFTA_SET_ELEM_LIST_TABLE, b.table)
		b.str(unix.NFTA_SET_ELEM_LIST_SET, set.name)
		b.u32(unix.NFTA_SET_ELEM_LIST_SET_ID, set.id)
		list := b.open(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		for len(es) > 0 && len(b.buf)-list < maxElemList {
			e := es[0]
			es = es[1:]
			item := b.open(unix.NFTA_LIST_ELEM)
			key := b.open(unix.NFTA_SET_ELEM_KEY)
			b.bytes(unix.NFTA_DATA_VALUE, e.key)
			b.close(key)
			if e.gotoChain != "" && !del {
				data := b.open(unix.NFTA_SET_ELEM_DATA)
				verdict := b.open(unix.NFTA_DATA_VERDICT)
				b.u32(unix.NFTA_VERDICT_CODE, nftGoto)
				b.str(unix.NFTA_VERDICT_CHAIN, e.gotoChain)
				b.close(verdict)
				b.close(data)
			} else if e.data != nil && !del {
				data := b.open(unix.NFTA_SET_ELEM_DATA)
				b.bytes(unix.NFTA_DATA_VALUE, e.data)
				b.close(data)
			}
			b.close(item)
		}
		b.close(list)
		b.end()
	}
}

// commentData is a rule's comment as nft stores it (userdata TLV: type 0, length, NUL-terminated text).
func commentData(comment string) []byte {
	if len(comment) > maxComment {
		comment = comment[:maxComment]
	}
	return append(append([]byte{0, byte(len(comment) + 1)}, comment...), 0)
}

// maxComment fits a comment in a userdata TLV (length byte) and the kernel's 256-byte userdata.
const maxComment = 250

// commentOf reads a rule's comment back ("" when it has none or its userdata is malformed).
func commentOf(udata []byte) string {
	for len(udata) >= 2 {
		typ, l := udata[0], int(udata[1])
		if 2+l > len(udata) {
			return ""
		}
		if typ == 0 {
			return strings.TrimSuffix(string(udata[2:2+l]), "\x00")
		}
		udata = udata[2+l:]
	}
	return ""
}
