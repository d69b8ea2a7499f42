package pgserver

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runAs is the identity the server runs under; nil means "as the caller".
type runAs struct {
	name     string
	uid, gid uint32
	home     string
}

// chooseUser picks the unprivileged account for a root caller: name if given, else postgres, else nobody.
func chooseUser(name string) (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	candidates := []string{name}
	if name == "" {
		candidates = []string{"postgres", "nobody"}
	}
	for _, n := range candidates {
		u, err := user.Lookup(n)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		if uid == 0 {
			continue
		}
		return &runAs{name: n, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}, nil
	}
	return nil, fmt.Errorf("pgserver: running as root, but no unprivileged user (%v) exists to run PostgreSQL as; "+
		"create one (useradd --system postgres) or run as a normal user", candidates)
}

func (r *runAs) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if r != nil {
		attr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid, NoSetGroups: true}
	}
	return attr
}

// own hands dir (recursively) to the run-as user.
func (r *runAs) own(dir string) error {
	if r == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(r.uid), int(r.gid))
	})
}

// checkReachable reports a clear error when the run-as user cannot traverse the ancestors of dir,
// for example a data directory under /root.
func (r *runAs) checkReachable(dir string) error {
	if r == nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !r.canEnter(st) {
			return fmt.Errorf("pgserver: PostgreSQL runs as user %q, which cannot enter %s (mode %v); "+
				"choose a data directory that user can reach, for example --data-dir /var/lib/wheelhouse",
				r.name, p, st.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

func (r *runAs) canEnter(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := st.Mode().Perm()
	switch {
	case sys.Uid == r.uid:
		return mode&0o100 != 0
	case sys.Gid == r.gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}
