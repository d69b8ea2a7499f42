package network

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNoAddress is SetUp's error when every address of the pod CIDR is taken.
var ErrNoAddress = errors.New("network: no free pod address")

// allocator hands out the pod addresses of one CIDR: one file per address in dir, named for the address and
// holding the sandbox ID, and lastFile naming the address handed out last. Every operation holds an exclusive
// flock on lockFile (so it is safe across goroutines and processes); the files are the only state.
type allocator struct {
	dir  string
	cidr netip.Prefix
}

const (
	lockFile = "lock"
	lastFile = "last"
)

// newAllocator keeps its files in stateDir/ipam/<cidr> ("10.244.1.0_24"): a node given another pod CIDR
// starts afresh.
func newAllocator(stateDir string, cidr netip.Prefix) (*allocator, error) {
	dir := filepath.Join(stateDir, "ipam", strings.ReplaceAll(cidr.String(), "/", "_"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("network: state dir: %w", err)
	}
	return &allocator{dir: dir, cidr: cidr}, nil
}

// locked runs fn holding the allocator's file lock.
func (a *allocator) locked(fn func() error) error {
	f, err := os.OpenFile(filepath.Join(a.dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("network: ipam lock: %w", err)
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("network: ipam lock: %w", err)
	}
	return fn() // closing f releases the lock
}

// allocate returns the address of sandbox id: the one it holds, or the next free one after the address handed
// out last (wrapping around). ErrNoAddress when none is free.
func (a *allocator) allocate(id string) (addr netip.Addr, err error) {
	err = a.locked(func() error {
		held, err := a.list()
		if err != nil {
			return err
		}
		for ip, owner := range held {
			if owner == id {
				addr = ip
				return nil
			}
		}
		first, last := a.hosts()
		start := first
		if b, err := os.ReadFile(filepath.Join(a.dir, lastFile)); err == nil {
			if prev, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil && prev.Compare(first) >= 0 && prev.Compare(last) < 0 {
				start = prev.Next()
			}
		}
		for ip, n := start, 0; n <= hostCount(first, last); n++ {
			if _, taken := held[ip]; !taken {
				if err := a.claim(ip, id); err != nil {
					return err
				}
				addr = ip
				return writeFileAtomic(filepath.Join(a.dir, lastFile), []byte(ip.String()))
			}
			if ip = ip.Next(); ip.Compare(last) > 0 {
				ip = first
			}
		}
		return fmt.Errorf("%w in %v", ErrNoAddress, a.cidr)
	})
	return addr, err
}

// release frees the address of sandbox id; none held is not an error.
func (a *allocator) release(id string) error {
	return a.locked(func() error {
		held, err := a.list()
		if err != nil {
			return err
		}
		for ip, owner := range held {
			if owner == id {
				if err := os.Remove(filepath.Join(a.dir, ip.String())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("network: release %v: %w", ip, err)
				}
			}
		}
		return nil
	})
}

// allocations are the held addresses and their sandboxes.
func (a *allocator) allocations() (held map[netip.Addr]string, err error) {
	err = a.locked(func() error {
		held, err = a.list()
		return err
	})
	return held, err
}

// list reads the held addresses; call it holding the lock.
func (a *allocator) list() (map[netip.Addr]string, error) {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, fmt.Errorf("network: ipam state: %w", err)
	}
	held := map[netip.Addr]string{}
	for _, e := range entries {
		ip, err := netip.ParseAddr(e.Name())
		if err != nil || !a.cidr.Contains(ip) {
			continue // the lock, the last-address file, a temporary file
		}
		b, err := os.ReadFile(filepath.Join(a.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("network: ipam state: %w", err)
		}
		held[ip] = string(b)
	}
	return held, nil
}

// claim records ip as held by id; call it holding the lock. The file appears whole or not at all (a crash
// cannot leave an address held by no one in particular).
func (a *allocator) claim(ip netip.Addr, id string) error {
	if err := writeFileAtomic(filepath.Join(a.dir, ip.String()), []byte(id)); err != nil {
		return fmt.Errorf("network: claim %v: %w", ip, err)
	}
	return nil
}

// hosts are the first and last pod addresses: past the network address and the gateway, before broadcast.
func (a *allocator) hosts() (first, last netip.Addr) {
	first = a.cidr.Masked().Addr().Next().Next()
	last = broadcast(a.cidr).Prev()
	return first, last
}

func hostCount(first, last netip.Addr) int {
	f, l := first.As4(), last.As4()
	return int(be32(l) - be32(f))
}

func be32(b [4]byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// broadcast is the last address of an IPv4 prefix.
func broadcast(p netip.Prefix) netip.Addr {
	v := be32(p.Masked().Addr().As4()) | (1<<(32-p.Bits()) - 1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// gateway is the bridge's address: the first of the prefix.
func gateway(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }

// writeFileAtomic writes path by renaming a complete temporary file onto it.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
