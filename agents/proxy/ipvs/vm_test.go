package ipvs

import (
	"os"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/ipvs/vmtest"
)

// guestModules are the kernel modules the guest loads before its tests: IPVS with every scheduler Config accepts,
// what the masquerade table needs, and the test network's devices.
var guestModules = []string{
	"crc32c_generic", // libcrc32c's soft dependency, which the kernel cannot load by itself without modprobe
	"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_lblc", "ip_vs_lblcr", "ip_vs_dh", "ip_vs_sh",
	"ip_vs_sed", "ip_vs_nq", "ip_vs_mh",
	"nf_tables", "nft_chain_nat", "nft_masq",
	"dummy", "veth",
	"xfrm_user", // vishvananda/netlink's handles open an XFRM socket too (agents/network/netnstest's)
}

// TestVM runs the TestKernel tests in Debian's kernel booted under qemu (this machine's kernel may have no IPVS).
// It fails, never skips, when the VM is not set up: scripts/ensure-vm.sh does that (make test runs it).
func TestVM(t *testing.T) {
	runVM(t, []string{"-test.run", "^TestKernel", "-test.count", "1", "-test.timeout", "150s"}, 3*time.Minute,
		func(line string) { t.Log(line) })
}

// runVM runs the package's test binary in the VM with args, giving each line of its console to log.
func runVM(t testing.TB, args []string, timeout time.Duration, log func(string)) {
	t.Helper()
	err := vmtest.Run(t.Context(), vmtest.Options{
		Package: ".", Args: args, Modules: guestModules, Timeout: timeout,
		Log:   log,
		Accel: os.Getenv("WHEELHOUSE_VM_ACCEL"), // "kvm" where nested virtualisation works
	})
	if err != nil {
		t.Fatal(err)
	}
}
