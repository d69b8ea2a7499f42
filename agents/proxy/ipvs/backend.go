package ipvs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	mdnetlink "github.com/mdlayher/netlink"
	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// Backend keeps a node's IPVS virtual services, the addresses of its dummy interface and its masquerade table
// equal to a proxy.State. Its methods are safe for concurrent use (they run one at a time).
type Backend struct {
	cfg Config
	log *slog.Logger

	// mu serialises the methods and guards everything below, the handles included.
	mu   sync.Mutex
	ipvs *ipvs.Handle // the changes and the destinations' read back
	dump *dumpSock    // the list of virtual services
	nl   *netlink.Handle
	masq *masq
	// ready: the sysctls are set (false before the first Sync and after Cleanup); link is the dummy interface, looked
	// up (made if missing) at every Sync.
	ready bool
	link  netlink.Link
	// desired is the last desired state (the backend's copy), nil before the first Sync; Resync converges to it.
	desired proxy.State
	// wantAddrs counts, per address, the virtual services of desired that need it on the dummy interface.
	wantAddrs map[netip.Addr]int
	// nodeAddrs are the addresses of every node port the backend was asked for: its virtual services there are its
	// own even when no longer desired (the node's addresses are not on the dummy interface).
	nodeAddrs map[netip.Addr]bool
	// record is what the kernel holds as of the last Sync: the backend's virtual services read back (or, for those
	// the read back found as recorded and desired, as recorded) with the applied changes.
	record proxy.Programmed
	// addrs are the addresses on the dummy interface (listed at every Sync).
	addrs map[netip.Addr]bool
	// content is what the masquerade table's sets hold for desired; masqReady: the table is known to hold it.
	content   masqContent
	masqReady bool
	// skipped is the number of destinations of the other family the last Sync left out (logged when it changes).
	skipped int
	// last describes the last Sync (tests and benchmarks check that a change stays small).
	last syncStats
}

// syncStats describes one Sync.
type syncStats struct {
	// services is the number of the backend's virtual services the kernel held; destReads the number whose
	// destinations were read back.
	services, destReads int
	// changes are the changes applied to IPVS.
	changes []proxy.Change
}

// New opens a backend for cfg's namespace: it fails (wrapping ErrNoIPVS) when the kernel has no IPVS. It does not
// change anything: the first Sync creates the dummy interface and the table.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.NetNS == netns.None() {
		cfg.NetNS = 0
	}
	if cfg.NetNS != 0 { // the backend's own handle (sysctls are written from a thread in the namespace at each setup)
		fd, err := unix.FcntlInt(uintptr(cfg.NetNS), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("ipvs: the namespace handle: %w", err)
		}
		cfg.NetNS = netns.NsHandle(fd)
	}
	// Before moby/ipvs looks the family up (once per process): had it found none, every command would "succeed".
	family, err := ipvsFamily(cfg.NetNS)
	if err != nil {
		closeNS(cfg.NetNS)
		return nil, err
	}
	path := ""
	if cfg.NetNS != 0 {
		path = fmt.Sprintf("/proc/self/fd/%d", int(cfg.NetNS))
	}
	h, err := ipvs.New(path)
	b := &Backend{cfg: cfg, log: cfg.Logger.With("backend", "ipvs"), ipvs: h}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("ipvs: open IPVS netlink in %q: %w", path, err)
	}
	// A virtual service on port 0 of the unspecified address is never made: one "present" means the commands go
	// nowhere (moby/ipvs looked the family up before ip_vs was loaded).
	probe := &ipvs.Service{Address: net.IPv4zero, Protocol: unix.IPPROTO_TCP, AddressFamily: unix.AF_INET, SchedName: DefaultScheduler}
	if h.IsServicePresent(probe) {
		b.Close()
		return nil, fmt.Errorf("%w: moby/ipvs has no IPVS netlink family (it looked before ip_vs was loaded)", ErrNoIPVS)
	}
	if b.dump, err = openDumpSock(cfg.NetNS, family); err != nil {
		b.Close()
		return nil, err
	}
	if b.nl, err = netlink.NewHandleAt(handle(cfg.NetNS), unix.NETLINK_ROUTE); err != nil {
		b.Close()
		return nil, fmt.Errorf("ipvs: rtnetlink socket: %w", err)
	}
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(bigSendBuffer)}
	if cfg.NetNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(int(cfg.NetNS)))
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("ipvs: nftables socket: %w", err)
	}
	b.masq = &masq{conn: conn, table: &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}, cfg: cfg}
	b.reset()
	return b, nil
}

// bigSendBuffer lets one transaction (google/nftables sends a batch in one sendmsg) write the table whole with
// 100,000 elements: the default send buffer (net.core.wmem_default) refuses a message over about 200 KB. Forcing
// it needs CAP_NET_ADMIN, which the backend has anyway.
func bigSendBuffer(c *mdnetlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var sockErr error
	if err := rc.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 32<<20)
	}); err != nil {
		return err
	}
	return sockErr
}

// closeNS closes the backend's namespace handle (0: none).
func closeNS(ns netns.NsHandle) {
	if ns != 0 {
		ns.Close()
	}
}

// reset forgets everything programmed.
func (b *Backend) reset() {
	b.ready, b.link, b.masqReady = false, nil, false
	b.desired, b.record, b.addrs = nil, proxy.Programmed{}, map[netip.Addr]bool{}
	b.wantAddrs, b.nodeAddrs = map[netip.Addr]int{}, map[netip.Addr]bool{}
	b.content = newMasqContent()
}

// Close releases the backend's sockets; what it programmed stays (Cleanup removes it).
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	if b.ipvs != nil {
		b.ipvs.Close()
	}
	if b.nl != nil {
		b.nl.Close()
	}
	if b.dump != nil {
		b.dump.close()
	}
	if b.masq != nil {
		err = b.masq.conn.CloseLasting()
	}
	closeNS(b.cfg.NetNS)
	b.ipvs, b.dump, b.nl, b.masq, b.cfg.NetNS = nil, nil, nil, nil, 0
	return err
}

// Sync makes the kernel hold desired: a virtual service per key with its destinations (masqueraded, weight 1), its
// cluster and external IPs on the dummy interface, the masquerade table's sets. It reads back the list of virtual
// services (one dump, no destinations) and the dummy's addresses at every call, so that a virtual service or an
// address removed or added by someone else is repaired; it reads back the destinations of the virtual services
// whose record differs from desired or from the kernel's attributes (all of them in Resync), and applies
// proxy.Diff's changes to those: a destination no longer wanted is drained (weight 0) and deleted by the next
// Sync. A change the kernel refuses does not stop the others: the error joins one error per refusal, naming the
// virtual service, and the next Sync retries (the read back finds what is missing).
func (b *Backend) Sync(ctx context.Context, desired proxy.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ipvs == nil {
		return errors.New("ipvs: the backend is closed")
	}
	add, del := b.remember(b.supported(desired))
	return b.converge(ctx, false, add, del)
}

// Resync reads back everything the backend owns — every virtual service's destinations, the dummy interface, the
// table's sets and chains — and repairs what differs from the last Sync's desired state. Meant to run
// periodically; a no-op before the first Sync.
func (b *Backend) Resync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ipvs == nil {
		return errors.New("ipvs: the backend is closed")
	}
	if b.desired == nil {
		return nil
	}
	return b.converge(ctx, true, nil, nil)
}

// Programmed is what the kernel holds as of the last Sync (a copy): each of the backend's virtual services with its
// active destinations and the drained ones.
func (b *Backend) Programmed() proxy.Programmed {
	b.mu.Lock()
	defer b.mu.Unlock()
	return proxy.Apply(b.record, nil)
}

// Cleanup removes what the backend owns: its virtual services, the dummy interface with its addresses, the table
// (none of them there is not an error); the sysctls stay. It forgets what was programmed.
func (b *Backend) Cleanup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ipvs == nil {
		return errors.New("ipvs: the backend is closed")
	}
	var errs []error
	l, err := b.nl.LinkByName(b.cfg.Interface)
	if _, dummy := l.(*netlink.Dummy); err == nil && dummy {
		if b.addrs, err = linkAddrs(b.nl, l); err != nil {
			errs = append(errs, err)
		}
	}
	svcs, err := b.dump.services()
	if err != nil {
		errs = append(errs, err)
	}
	for _, ks := range svcs {
		if !b.owns(ks.key) {
			continue
		}
		s, err := toService(proxy.VirtualService{Key: ks.key}, ks.scheduler)
		if err == nil {
			err = b.ipvs.DelService(s)
		}
		if err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("ipvs: delete virtual service %v: %w", ks.key, err))
		}
	}
	if _, dummy := l.(*netlink.Dummy); dummy {
		if err := b.nl.LinkDel(l); err != nil && !errors.As(err, new(netlink.LinkNotFoundError)) {
			errs = append(errs, fmt.Errorf("ipvs: delete interface %s: %w", b.cfg.Interface, err))
		}
	}
	if err := b.masq.delete(); err != nil {
		errs = append(errs, err)
	}
	b.reset()
	return errors.Join(errs...)
}

// converge makes the kernel hold b.desired; add and del are the sets' elements that changed with it.
func (b *Backend) converge(ctx context.Context, full bool, add, del []masqElem) error {
	b.last = syncStats{}
	l, err := ensureDummy(b.nl, b.cfg.Interface)
	if err != nil {
		return err
	}
	b.link = l
	if !b.ready || full {
		if err := setSysctls(b.cfg.NetNS); err != nil {
			return err
		}
		b.ready = true
	}
	var errs []error
	if err := b.syncMasq(full, add, del); err != nil {
		errs = append(errs, err)
	}
	addrs, err := linkAddrs(b.nl, b.link)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	b.addrs = addrs
	errs = append(errs, b.addAddrs()...)
	errs = append(errs, b.syncServices(ctx, full)...)
	errs = append(errs, b.delAddrs()...)
	return errors.Join(errs...)
}

// supported is desired as IPVS takes it: affinity in whole seconds, destinations sorted and of the virtual
// service's family (the model gives only those; the others are left out and logged).
func (b *Backend) supported(desired proxy.State) proxy.State {
	out, cloned, skipped := desired, false, 0
	for k, v := range desired {
		otherFamily := func(d netip.AddrPort) bool { return d.Addr().Is4() != k.Addr.Is4() }
		n := slices.IndexFunc(v.Destinations, otherFamily)
		sorted := slices.IsSortedFunc(v.Destinations, netip.AddrPort.Compare)
		if n < 0 && sorted && v.Affinity%time.Second == 0 {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(desired), true
		}
		v.Destinations = slices.Clone(v.Destinations)
		if n >= 0 {
			before := len(v.Destinations)
			v.Destinations = slices.DeleteFunc(v.Destinations, otherFamily)
			skipped += before - len(v.Destinations)
		}
		slices.SortFunc(v.Destinations, netip.AddrPort.Compare)
		v.Affinity = (v.Affinity + time.Second - 1).Truncate(time.Second)
		out[k] = v
	}
	if skipped != b.skipped {
		b.skipped = skipped
		b.log.Warn("destinations of another family than their virtual service's are left out", "count", skipped)
	}
	return out
}

// remember makes desired the backend's desired state (a copy of what changed) and returns the table's elements
// that enter and leave with it.
func (b *Backend) remember(desired proxy.State) (add, del []masqElem) {
	if b.desired == nil {
		b.desired = make(proxy.State, len(desired))
	}
	change := func(old proxy.VirtualService, had bool, v proxy.VirtualService, has bool) {
		a, d := b.content.change(old, had, v, has)
		add, del = append(add, a...), append(del, d...)
		if had && onDummy(old) {
			if b.wantAddrs[old.Addr]--; b.wantAddrs[old.Addr] <= 0 {
				delete(b.wantAddrs, old.Addr)
			}
		}
		if has && onDummy(v) {
			b.wantAddrs[v.Addr]++
		}
		if has && v.Kind == proxy.NodePort {
			b.nodeAddrs[v.Addr] = true
		}
	}
	for k, v := range desired {
		old, had := b.desired[k]
		if had && old.Equal(v) {
			continue
		}
		v.Destinations = slices.Clone(v.Destinations)
		change(old, had, v, true)
		b.desired[k] = v
	}
	for k, old := range b.desired {
		if _, ok := desired[k]; !ok {
			change(old, true, proxy.VirtualService{}, false)
			delete(b.desired, k)
		}
	}
	return add, del
}

// onDummy reports whether a virtual service's address belongs on the dummy interface: cluster and external IPs
// (node ports are on the node's own addresses).
func onDummy(vs proxy.VirtualService) bool { return vs.Kind != proxy.NodePort }

// owns reports whether a virtual service of the kernel is the backend's: desired, recorded, on an address of the
// dummy interface or on a node address it was asked for node ports on. Others are left alone.
func (b *Backend) owns(k proxy.Key) bool {
	if _, ok := b.desired[k]; ok {
		return true
	}
	if _, ok := b.record[k]; ok {
		return true
	}
	return b.addrs[k.Addr] || b.nodeAddrs[k.Addr]
}

// syncMasq brings the table up to date: the element changes in one transaction when it is there as the backend
// left it, else (first Sync, a refusal, the table gone or — in Resync — different) a rewrite.
func (b *Backend) syncMasq(full bool, add, del []masqElem) error {
	if b.masqReady {
		ok, err := b.masq.exists()
		switch {
		case err != nil:
			return err
		case !ok:
			b.log.Warn("the nftables table is gone; writing it again", "table", Table)
		case full:
			diff, err := b.masq.differs(b.content)
			if err != nil || diff == "" {
				return err
			}
			b.log.Warn("the nftables table is not what was programmed; rewriting it", "table", Table, "difference", diff)
		default:
			err := b.masq.update(add, del)
			if err == nil {
				return nil
			}
			b.log.Warn("nftables refused a change of the sets; rewriting the table", "table", Table, "error", err)
		}
	}
	b.masqReady = false
	if err := b.masq.rewrite(b.content); err != nil {
		return err
	}
	b.masqReady = true
	return nil
}

// addAddrs puts the addresses desired needs on the dummy interface.
func (b *Backend) addAddrs() []error {
	var errs []error
	for a := range b.wantAddrs {
		if b.addrs[a] {
			continue
		}
		if err := b.nl.AddrAdd(b.link, hostAddr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("ipvs: add address %v to %s: %w", a, b.cfg.Interface, err))
			continue
		}
		b.addrs[a] = true
	}
	return errs
}

// delAddrs removes the addresses desired does not need from the dummy interface.
func (b *Backend) delAddrs() []error {
	var errs []error
	for a := range b.addrs {
		if b.wantAddrs[a] > 0 {
			continue
		}
		if err := b.nl.AddrDel(b.link, hostAddr(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("ipvs: remove address %v from %s: %w", a, b.cfg.Interface, err))
			continue
		}
		delete(b.addrs, a)
	}
	return errs
}
