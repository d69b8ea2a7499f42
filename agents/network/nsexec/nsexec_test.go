package nsexec_test

import (
	"os"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/nsexec"
)

// nsInode is the namespace of the calling thread, as /proc names it.
func nsInode() (string, error) { return os.Readlink("/proc/thread-self/ns/net") }

// TestDo: fn runs in the namespace given, the caller stays in its own; 0 and None run fn in the caller's.
func TestDo(t *testing.T) {
	path := netnstest.New(t, t.TempDir(), "other")
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	own, err := nsInode()
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	if err := nsexec.Do(ns, func() (err error) { inside, err = nsInode(); return err }); err != nil {
		t.Fatal(err)
	}
	if inside == own {
		t.Errorf("fn ran in the caller's namespace %s", own)
	}
	for _, h := range []netns.NsHandle{0, netns.None()} {
		var got string
		if err := nsexec.Do(h, func() (err error) { got, err = nsInode(); return err }); err != nil {
			t.Fatal(err)
		}
		if got != own {
			t.Errorf("Do(%d) ran fn in %s, want the caller's %s", h, got, own)
		}
	}
	if now, _ := nsInode(); now != own {
		t.Errorf("the caller's thread moved to %s", now)
	}
}
