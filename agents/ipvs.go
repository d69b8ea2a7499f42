package agents

import (
	"errors"
	"log/slog"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// errNoIPVSBackend: the IPVS backend (agents/proxy/ipvs) is being built; until it lands, auto mode takes nftables.
var errNoIPVSBackend = errors.New("the IPVS backend is not part of this build")

func ipvsAvailable() error { return errNoIPVSBackend }

func newIPVSBackend(proxyConfig, *slog.Logger) (proxy.Backend, error) { return nil, errNoIPVSBackend }

// ipvsSchedulers are the kernel's IPVS schedulers (ipvsadm's names).
var ipvsSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}
