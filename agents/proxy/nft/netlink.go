package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/vishvananda/netns"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/nsexec"
	"golang.org/x/sys/unix"
)

// The backend speaks nf_tables netlink itself (google/nftables only marshals its expressions): that library's
// Conn.Flush asks for an acknowledgement of every message and an echo of every rule, which at 100,000 rules is
// most of a sync's time and overflows the socket. Here a batch asks for one acknowledgement, of its last message;
// errors are reported for every failed message anyway, and all replies are queued before sendmsg returns (the
// kernel runs a batch in the sender's context).

// sock is a NETLINK_NETFILTER socket opened in the node's namespace. It is not safe for concurrent use (the
// Backend's mutex guards it). Replies are matched by sequence number; stale ones (of a request abandoned half-way)
// are skipped.
type sock struct {
	fd  int
	seq uint32
	buf []byte
}

// recvBuf is the receive buffer: a dump part is at most 32 KiB (netlink_dump), an error with its extended ack a
// few hundred bytes.
const recvBuf = 1 << 17

// replyTimeoutSeconds bounds a reply that never comes (to a dump or a get; batch replies are read without waiting).
const replyTimeoutSeconds = 30

func openSock(ns netns.NsHandle) (*sock, error) {
	var fd int
	open := func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	}
	if err := nsexec.Do(ns, open); err != nil {
		return nil, fmt.Errorf("nft: netlink socket: %w", err)
	}
	s := &sock{fd: fd, buf: make([]byte, recvBuf)}
	tv := unix.Timeval{Sec: replyTimeoutSeconds}
	for _, err := range []error{
		unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}),
		// Errors carry the failed message's header only, and the kernel's explanation.
		unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1),
		unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
	} {
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("nft: netlink socket: %w", err)
		}
	}
	return s, nil
}

func (s *sock) close() error { return unix.Close(s.fd) }

// nftType is an nf_tables message type.
func nftType(msg int) uint16 { return uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | msg) }

// appendMsg appends a netlink message of nfnetlink: header, nfgenmsg (family, version, resource ID), attributes.
func appendMsg(b []byte, typ, flags uint16, seq uint32, family uint8, resID uint16, attrs []byte) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(unix.NLMSG_HDRLEN+4+len(attrs)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // port ID: the kernel's to fill
	b = append(b, family, unix.NFNETLINK_V0)
	b = binary.BigEndian.AppendUint16(b, resID)
	return append(b, attrs...)
}

// growSendBuffer makes the socket's send buffer hold size bytes (a batch is one datagram).
func (s *sock) growSendBuffer(size int) error {
	size += 1 << 16
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size); err == nil {
		return nil
	}
	return unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, size) // without CAP_NET_ADMIN: up to wmem_max
}

// commit sends b as one transaction and returns the ruleset generation it made. The transaction is all or
// nothing: on an error none of it is applied.
func (s *sock) commit(b *batch) (uint32, error) {
	n := len(b.offs)
	if n == 0 {
		return 0, errors.New("nft: empty batch")
	}
	first := s.seq + 1
	last := first + uint32(n)
	s.seq = last + 1
	begin := appendMsg(nil, unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, first, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	end := appendMsg(nil, unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, s.seq, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	for i, off := range b.offs {
		binary.NativeEndian.PutUint32(b.buf[off+8:], first+1+uint32(i))
	}
	lastFlags := b.buf[b.offs[n-1]+6:]
	binary.NativeEndian.PutUint16(lastFlags, binary.NativeEndian.Uint16(lastFlags)|unix.NLM_F_ACK)
	if err := s.growSendBuffer(len(begin) + len(b.buf) + len(end)); err != nil {
		return 0, fmt.Errorf("nft: socket buffer for a %d-byte batch: %w", len(b.buf), err)
	}
	if _, err := unix.SendmsgBuffers(s.fd, [][]byte{begin, b.buf, end}, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0); err != nil {
		return 0, fmt.Errorf("nft: send a batch of %d messages: %w", n, err)
	}
	return s.batchReplies(b, first, last)
}

// batchReplies reads a batch's replies, all queued already: the generation, errors, the last message's ack.
func (s *sock) batchReplies(b *batch, first, last uint32) (uint32, error) {
	var gen uint32
	var errs []error
	acked := false
	for !acked {
		msgs, err := s.recv(unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) {
			if len(errs) > 0 {
				break // the batch failed without a word on its last message (ENOMEM)
			}
			return 0, errors.New("nft: the kernel did not acknowledge the batch")
		}
		if err != nil {
			return 0, fmt.Errorf("nft: batch replies: %w", err)
		}
		for _, m := range msgs {
			seq := m.Header.Seq
			if seq < first || seq > last {
				continue
			}
			switch m.Header.Type {
			case nftType(unix.NFT_MSG_NEWGEN):
				gen = genID(m.Data)
			case unix.NLMSG_ERROR:
				if err := replyError(m); err != nil {
					what := "commit"
					if seq > first {
						what = b.what[seq-first-1].String()
					}
					errs = append(errs, fmt.Errorf("%s: %w", what, err))
				}
				acked = acked || seq == last
			}
		}
	}
	if len(errs) > 0 {
		if len(errs) > 3 {
			errs = append(errs[:3], fmt.Errorf("and %d more errors", len(errs)-3))
		}
		return 0, fmt.Errorf("nft: transaction refused: %w", errors.Join(errs...))
	}
	if gen == 0 { // a kernel that does not echo the generation: ask (someone may have committed since)
		return s.generation()
	}
	return gen, nil
}

// replyError is the error an NLMSG_ERROR reports (nil for an ack), with the kernel's extended-ack message.
func replyError(m syscall.NetlinkMessage) error {
	if len(m.Data) < 4 {
		return errors.New("short netlink error")
	}
	errno := -int32(binary.NativeEndian.Uint32(m.Data))
	if errno == 0 {
		return nil
	}
	err := error(unix.Errno(errno))
	if m.Header.Flags&unix.NLM_F_ACK_TLVS != 0 && len(m.Data) >= 4+unix.NLMSG_HDRLEN {
		_ = parseAttrs(m.Data[4+unix.NLMSG_HDRLEN:], func(typ uint16, data []byte) {
			if typ == unix.NLMSGERR_ATTR_MSG {
				err = fmt.Errorf("%w (%s)", err, cstring(data))
			}
		})
	}
	return err
}

// recv reads one datagram of replies.
func (s *sock) recv(flags int) ([]syscall.NetlinkMessage, error) {
	for {
		n, _, err := unix.Recvfrom(s.fd, s.buf, flags|unix.MSG_TRUNC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n > len(s.buf) {
			return nil, fmt.Errorf("a %d-byte netlink reply does not fit in %d", n, len(s.buf))
		}
		return syscall.ParseNetlinkMessage(s.buf[:n])
	}
}

// request sends one request and returns its seq.
func (s *sock) request(typ, flags uint16, family uint8, attrs []byte) (uint32, error) {
	s.seq++
	msg := appendMsg(nil, typ, flags|unix.NLM_F_REQUEST, s.seq, family, 0, attrs)
	if err := unix.Sendto(s.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	return s.seq, nil
}

// dump runs a dump request (NLM_F_DUMP) and calls fn with the attributes of each object it returns.
func (s *sock) dump(msgType int, family uint8, attrs []byte, fn func(attrs []byte) error) error {
	seq, err := s.request(nftType(msgType), unix.NLM_F_DUMP, family, attrs)
	if err != nil {
		return err
	}
	for {
		msgs, err := s.recv(0)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			switch {
			case m.Header.Seq != seq:
			case m.Header.Type == unix.NLMSG_DONE:
				if len(m.Data) >= 4 && int32(binary.NativeEndian.Uint32(m.Data)) < 0 {
					return unix.Errno(-int32(binary.NativeEndian.Uint32(m.Data)))
				}
				return nil
			case m.Header.Type == unix.NLMSG_ERROR:
				if err := replyError(m); err != nil {
					return err
				}
			case len(m.Data) >= 4:
				if err := fn(m.Data[4:]); err != nil {
					return err
				}
			}
		}
	}
}

// get runs a request for one object and returns its attributes.
func (s *sock) get(msgType int, family uint8, attrs []byte) ([]byte, error) {
	seq, err := s.request(nftType(msgType), unix.NLM_F_ACK, family, attrs)
	if err != nil {
		return nil, err
	}
	var reply []byte
	for {
		msgs, err := s.recv(0)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch {
			case m.Header.Seq != seq:
			case m.Header.Type == unix.NLMSG_ERROR:
				return reply, replyError(m)
			case len(m.Data) >= 4:
				reply = slices.Clone(m.Data[4:]) // m is in s.buf, which the next recv overwrites
			}
		}
	}
}

// generation is the ruleset's generation: it moves with every transaction in the namespace, anyone's.
func (s *sock) generation() (uint32, error) {
	attrs, err := s.get(unix.NFT_MSG_GETGEN, unix.AF_UNSPEC, nil)
	if err != nil {
		return 0, fmt.Errorf("nft: ruleset generation: %w", err)
	}
	return genID(append(make([]byte, 4), attrs...)), nil
}

// genID reads NFTA_GEN_ID from a NEWGEN message's payload (nfgenmsg first).
func genID(data []byte) uint32 {
	var id uint32
	if len(data) >= 4 {
		_ = parseAttrs(data[4:], func(typ uint16, v []byte) {
			if typ == unix.NFTA_GEN_ID && len(v) == 4 {
				id = binary.BigEndian.Uint32(v)
			}
		})
	}
	return id
}

// attrs builds netlink attributes (headers in host order, as netlink has them; nf_tables values big-endian).
type attrs []byte

func (a attrs) bytes(typ uint16, v []byte) attrs {
	a = a.header(typ, len(v))
	return pad(append(a, v...))
}

func (a attrs) str(typ uint16, v string) attrs {
	a = a.header(typ, len(v)+1)
	return pad(append(append(a, v...), 0))
}

func (a attrs) u32(typ uint16, v uint32) attrs {
	return binary.BigEndian.AppendUint32(a.header(typ, 4), v)
}

func (a attrs) header(typ uint16, n int) attrs {
	a = binary.NativeEndian.AppendUint16(a, uint16(unix.NLA_HDRLEN+n))
	return binary.NativeEndian.AppendUint16(a, typ)
}

func pad(a attrs) attrs {
	for len(a)%unix.NLA_ALIGNTO != 0 {
		a = append(a, 0)
	}
	return a
}

// parseAttrs calls fn for each attribute of b (type without the nested and byte-order flags).
func parseAttrs(b []byte, fn func(typ uint16, data []byte)) error {
	for len(b) >= unix.NLA_HDRLEN {
		l := int(binary.NativeEndian.Uint16(b))
		if l < unix.NLA_HDRLEN || l > len(b) {
			return errors.New("nft: malformed netlink attribute")
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[unix.NLA_HDRLEN:l])
		l = (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return nil
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
